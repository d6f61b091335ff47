"""make_realistic: shapes, determinism, power-law labels, no label-private signatures, one
distribution for both splits, and one InputError for bad arguments."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from holoxmc.data import make_realistic, make_synthetic
from holoxmc.errors import InputError


@pytest.fixture(scope="module")
def pair():
    return make_realistic(6_000, 1_500, 3_000, n_test=3_000, seed=3)


def label_counts(Y: sp.spmatrix) -> np.ndarray:
    return np.asarray(Y.sum(axis=0)).ravel()


def best_feature_precision(X: sp.csr_matrix, Y: sp.csr_matrix, min_points: int = 20, min_df: int = 5) -> np.ndarray:
    """Per label with ``min_points`` points: the best precision P(label | feature present) of a
    single feature that occurs in at least ``min_df`` rows."""
    present = (X != 0).astype(np.float64).tocsc()
    df = np.asarray(present.sum(axis=0)).ravel()
    labels = np.flatnonzero(label_counts(Y) >= min_points)
    together = (present.T @ Y[:, labels].astype(np.float64)).toarray()  # D x labels
    precision = np.where(df[:, None] >= min_df, together / np.maximum(df, 1)[:, None], 0.0)
    return precision.max(axis=0)


def test_shapes_types_and_unit_rows(pair):
    train, test = pair
    assert (len(train), len(test)) == (6_000, 3_000)
    assert (train.n_features, train.n_labels) == (test.n_features, test.n_labels) == (3_000, 1_500)
    for split in pair:
        assert split.X.dtype == np.float32 and split.Y.dtype == np.float32
        assert np.allclose(sp.linalg.norm(split.X, axis=1), 1.0, atol=1e-5)
        assert (split.X.data > 0).all()
        assert np.diff(split.Y.indptr).min() >= 1  # every point has a label


def test_sublinear_tf_idf_values():
    train, _ = make_realistic(400, 30, 200, n_test=10, seed=2, doc_length=200)
    # with long documents some words repeat: values within a row are not all equal (tf-idf, not binary)
    row = train.X[0].data
    assert len(np.unique(np.round(row, 6))) > 1


def test_deterministic_in_the_seed():
    a, b = make_realistic(500, 80, 300, seed=7), make_realistic(500, 80, 300, seed=7)
    c = make_realistic(500, 80, 300, seed=8)
    for x, y in zip(a, b):
        assert (x.X != y.X).nnz == 0 and (x.Y != y.Y).nnz == 0
    assert (a[0].Y != c[0].Y).nnz > 0


def test_power_law_labels_many_rare_some_unseen(pair):
    train, test = pair
    counts = label_counts(train.Y)
    assert ((counts >= 1) & (counts <= 5)).mean() >= 0.2
    assert (counts == 0).sum() > 0
    assert counts.max() >= 50 * np.median(counts[counts > 0])  # a heavy head
    unseen = np.flatnonzero(counts == 0)
    assert label_counts(test.Y)[unseen].sum() > 0  # some test labels never occur in training


def test_no_label_private_signature(pair):
    train, _ = pair
    realistic = best_feature_precision(train.X, train.Y)
    assert len(realistic) >= 20 and realistic.mean() < 0.4
    # the measure does find the private signatures of make_synthetic (at noise as high as it allows)
    old, _ = make_synthetic(6_000, 150, 3_000, seed=3)
    assert best_feature_precision(old.X, old.Y).mean() > 0.6


def test_labels_share_topic_words(pair):
    train, _ = pair
    # labels co-occur in topics: a label's co-occurring partners are concentrated
    Y = train.Y.tocsc().astype(np.float64)
    co = (Y.T @ Y).toarray()
    np.fill_diagonal(co, 0)
    frequent = np.flatnonzero(label_counts(train.Y) >= 50)
    top_share = np.sort(co[frequent], axis=1)[:, -20:].sum(axis=1) / np.maximum(co[frequent].sum(axis=1), 1)
    assert top_share.mean() > 0.5  # 20 partner labels out of 1,500 hold most co-occurrences


def test_train_and_test_from_one_distribution(pair):
    train, test = pair
    assert abs(train.stats().labels_per_point - test.stats().labels_per_point) < 0.15
    nnz_train, nnz_test = train.X.getnnz(axis=1).mean(), test.X.getnnz(axis=1).mean()
    assert abs(nnz_train - nnz_test) < 0.05 * nnz_train
    share_train = label_counts(train.Y) / train.Y.sum()
    share_test = label_counts(test.Y) / test.Y.sum()
    assert np.corrcoef(share_train, share_test)[0, 1] > 0.95
    words_train = np.asarray((train.X != 0).mean(axis=0)).ravel()
    words_test = np.asarray((test.X != 0).mean(axis=0)).ravel()
    assert np.corrcoef(words_train, words_test)[0, 1] > 0.95


def test_knobs_change_the_data():
    quiet = make_realistic(400, 40, 300, seed=1, noise=0.0, n_topics=4)
    loud = make_realistic(400, 40, 300, seed=1, noise=1.0, n_topics=4)
    # without noise every word is a label or topic word: far fewer distinct words
    assert quiet[0].X.getnnz(axis=0).astype(bool).sum() < loud[0].X.getnnz(axis=0).astype(bool).sum()


def test_no_test_split_and_empty_knob_edge_cases():
    train, test = make_realistic(50, 5, 20, n_test=0, seed=0, label_words=0, evidence_share=0.0)
    assert len(train) == 50 and len(test) == 0 and test.X.shape == (0, 20)


@pytest.mark.parametrize("args, kwargs", [
    ((0, 10, 10), {}),
    ((10, 0, 10), {}),
    ((10, 10, -1), {}),
    ((10.5, 10, 10), {}),
    ((True, 10, 10), {}),
    ((10, 10, 10), {"seed": -1}),
    ((10, 10, 10), {"n_test": -2}),
    ((10, 10, 10), {"noise": 1.5}),
    ((10, 10, 10), {"noise": float("nan")}),
    ((10, 10, 10), {"evidence_share": -0.1}),
    ((10, 10, 10), {"topic_cohesion": "high"}),
    ((10, 10, 10), {"labels_per_point": 11.0}),
    ((10, 10, 10), {"n_topics": 0}),
    ((10, 10, 10), {"n_topics": 11}),
    ((10, 10, 10), {"topic_words": 0}),
    ((10, 10, 10), {"label_words": 0}),
    ((10, 10, 10), {"doc_length": 0.5}),
    ((10, 10, 10), {"zipf_exponent": -1.0}),
    ((10, 10, 10), {"colour": 3}),
    ((2**31 - 1, 10, 10), {}),  # far more than this machine's memory: refused before allocating
    ((2**40, 10, 10), {}),
])
def test_bad_arguments_are_one_input_error(args, kwargs):
    with pytest.raises(InputError):
        make_realistic(*args, **kwargs)


def test_registry_names_load_the_presets():
    """``load("realistic-...")`` is make_realistic at the preset's shape, options overriding it."""
    from holoxmc.data import load
    from holoxmc.data.realistic import REALISTIC_PRESETS

    assert {"realistic-670k", "realistic-3m"} <= set(REALISTIC_PRESETS)
    assert REALISTIC_PRESETS["realistic-670k"]["n_labels"] == 670_091
    assert REALISTIC_PRESETS["realistic-3m"]["n_labels"] == 3_000_000
    small = {"n_points": 200, "n_test": 40, "n_labels": 30, "n_features": 100, "seed": 3}
    train, test = (load("Realistic-670K", split, **small) for split in ("train", "test"))
    expected = make_realistic(**small, labels_per_point=5.45, zipf_exponent=0.7, noise=0.6)
    assert (train.n_labels, train.n_features, len(train), len(test)) == (30, 100, 200, 40)
    for got, want in zip((train, test), expected):
        assert (got.X != want.X).nnz == 0 and (got.Y != want.Y).nnz == 0


def test_registry_preset_refuses_unknown_options_and_tokens():
    from holoxmc.data import load

    with pytest.raises(InputError, match="unknown make_realistic argument"):
        load("realistic-10k", n_points=50, n_labels=10, n_features=20, bogus=1)
    with pytest.raises(InputError, match="raw text"):
        load("realistic-10k", features="tokens")


@pytest.mark.parametrize("name, shrink", [("realistic-10k", 10), ("realistic-100k", 100), ("realistic-670k", 335)])
def test_presets_at_a_small_scale_keep_the_label_tail(name, shrink):
    """A preset shrunk at its own points-per-label ratio: the shares of labels never in training
    and of labels with 1-5 training points are the Poisson expectation of its Zipf popularity
    (Amazon-670K's kind of tail: about 1 in 8 unseen, about 7 in 10 with 1-5 points)."""
    from scipy.stats import poisson

    from holoxmc.data.realistic import REALISTIC_PRESETS, _zipf_cdf

    preset = dict(REALISTIC_PRESETS[name])
    for key in ("n_points", "n_test", "n_labels", "n_features"):
        preset[key] = round(preset[key] / shrink)
    train, test = make_realistic(**preset, seed=0)
    counts = label_counts(train.Y)
    rate = train.Y.sum() * np.diff(_zipf_cdf(preset["n_labels"], preset["zipf_exponent"]), prepend=0.0)
    unseen, rare = (counts == 0).mean(), ((counts >= 1) & (counts <= 5)).mean()
    assert abs(unseen - np.exp(-rate).mean()) < 0.05 and 0.05 < unseen < 0.25
    assert abs(rare - (poisson.cdf(5, rate) - poisson.cdf(0, rate)).mean()) < 0.05 and rare > 0.6
    assert 5.0 < train.stats().labels_per_point < 5.45  # distinct draws of popular labels collapse a little
    assert label_counts(test.Y)[counts == 0].sum() > 0

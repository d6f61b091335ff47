"""The clustered retriever of the re-rank model (``RerankConfig(retriever="clusters")``):
balanced clusters, shortlist scores equal full scoring, the shortlist is the retriever's best
beam candidates, save/load, resume, the pairwise margins, bad settings and tampered tensors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from safetensors.torch import load_file, save_file

from holoxmc.data import make_realistic
from holoxmc.errors import InputError
from holoxmc.models.rerank import model as rerank_model
from holoxmc.models.rerank.model import RerankModel
from holoxmc.sparse import l2_rows
from holoxmc.models.rerank import fit as rerank_fit
from holoxmc.models.rerank.clusters import balanced_clusters, default_clusters
from holoxmc.models.rerank.fit import RerankConfig, fit_rerank

CONFIG = RerankConfig(shortlist=10, alpha=0.5, retriever="clusters", clusters=8, beam=2)


@pytest.fixture(scope="module")
def data():
    return make_realistic(600, 40, 300, n_test=200, seed=3)


@pytest.fixture(scope="module")
def model(data):
    train, _ = data
    return fit_rerank(train.X, train.Y, CONFIG)


def test_balanced_clusters_have_equal_sizes_and_group_similar_labels():
    rng = np.random.default_rng(0)
    base = rng.random((2, 30))
    rows = np.vstack([base[i % 2] + 0.05 * rng.random(30) for i in range(16)])
    P = l2_rows(sp.csr_matrix(rows))
    two = balanced_clusters(P, 2, seed=1)
    assert set(two[0::2]) != set(two[1::2]) and len(set(two[0::2])) == 1  # the two groups, apart
    sizes = np.bincount(balanced_clusters(l2_rows(sp.random(101, 20, density=0.3, random_state=0)), 16), minlength=16)
    assert sizes.sum() == 101 and sizes.max() - sizes.min() <= 1
    with pytest.raises(InputError):
        balanced_clusters(P, 17)
    assert default_clusters(3) >= 1


def test_shortlist_scores_equal_full_scores_on_shortlisted_labels(model, data):
    _, test = data
    labels, mixed = model.shortlist_scores(test.X)
    full = model.full_scores(test.X)
    assert labels.shape == (test.X.shape[0], 10)
    np.testing.assert_allclose(mixed, np.take_along_axis(full, labels, axis=1), rtol=1e-5, atol=1e-6)


def test_the_shortlist_is_the_best_retriever_scores_of_the_beam_clusters(model, data):
    """By hand, densely: the cluster scores, each row's beam (best ``beam`` among the ``2 x beam``
    nearest cluster centroids), then the best labels of those clusters by retriever score."""
    _, test = data
    X = l2_rows(test.X)
    matcher = model.matcher
    similar = X.toarray() @ matcher.centroids_t.toarray()
    scores = similar + 1 / (1 + np.exp(-(X.toarray() @ matcher.weights.toarray() + matcher.bias)))
    retriever = X.toarray() @ model.centroids_t.toarray() + matcher.cluster_weight * scores[:, matcher.assignment]
    labels, _ = model.shortlists(X)
    for i in range(X.shape[0]):
        near = np.argsort(-similar[i], kind="stable")[:2 * matcher.beam]
        beam = near[np.argsort(-scores[i, near], kind="stable")[:matcher.beam]]
        candidates = np.flatnonzero(np.isin(matcher.assignment, beam))
        assert set(labels[i]) <= set(candidates) and len(set(labels[i])) == 10
        kth = np.sort(retriever[i, candidates])[-10]
        assert np.all(retriever[i, labels[i]] >= kth - 1e-5)


def test_a_beam_too_small_for_the_shortlist_is_widened(data):
    train, test = data
    fitted = fit_rerank(train.X, train.Y, RerankConfig(shortlist=12, alpha=0.5, retriever="clusters", clusters=8,
                                                       beam=1))
    assert fitted.matcher.beam == 3  # 8 clusters of 5 labels: 3 clusters hold 12 or more
    labels, scores = fitted.shortlists(l2_rows(test.X))
    assert np.isfinite(scores).all() and all(len(set(row)) == 12 for row in labels)


def test_save_load_round_trip_predicts_identically(model, data, tmp_path):
    _, test = data
    save_file(model.save_to(tmp_path), str(tmp_path / "model.safetensors"))
    stored = {name.removeprefix("rerank."): t for name, t in load_file(str(tmp_path / "model.safetensors")).items()}
    loaded = RerankModel.from_tensors(stored, model.n_features, model.n_labels)
    assert loaded.matcher is not None and loaded.matcher.beam == model.matcher.beam
    for a, b in zip(model.predict_topk(test.X, 5), loaded.predict_topk(test.X, 5)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("tamper", [
    lambda t: t.__setitem__("matcher.assignment", t["matcher.assignment"] + 100),
    lambda t: t.__setitem__("matcher.assignment", torch.zeros(40, dtype=torch.int64)),  # empty clusters
    lambda t: t.__setitem__("matcher.assignment", torch.cat([  # one huge cluster: candidates ~ L x beam per row
        torch.zeros(40 - int(t["matcher.settings"][0]) + 1, dtype=torch.int64),
        torch.arange(1, int(t["matcher.settings"][0]), dtype=torch.int64)])),
    lambda t: t.pop("matcher.centroids.data"),
    lambda t: t.__setitem__("matcher.settings", torch.tensor([1e9, 2.0, 1.0], dtype=torch.float64)),
    lambda t: t.__setitem__("matcher.settings", torch.tensor([8.0, 0.0, 1.0], dtype=torch.float64)),
    lambda t: t.__setitem__("matcher.bias", torch.full_like(t["matcher.bias"], float("nan"))),
])
def test_hostile_matcher_tensors_are_refused(model, tamper):
    tensors = {name: t.clone() for name, t in model.tensors().items()}
    tamper(tensors)
    with pytest.raises(InputError):
        RerankModel.from_tensors(tensors, model.n_features, model.n_labels)


def test_resume_with_clusters_gives_the_same_model(data, tmp_path, monkeypatch):
    train, _ = data
    config = RerankConfig(shortlist=8, alpha=0.5, label_block=16, retriever="clusters", clusters=4, beam=2)
    first = fit_rerank(train.X, train.Y, config, run_dir=tmp_path)
    files = sorted(tmp_path.glob("rerank_block_*.safetensors"))
    assert len(files) == 3
    files[0].unlink()
    resumed = fit_rerank(train.X, train.Y, config, run_dir=tmp_path, resume=True)
    assert (first.weights != resumed.weights).nnz == 0
    np.testing.assert_array_equal(first.matcher.assignment, resumed.matcher.assignment)
    assert (first.matcher.weights != resumed.matcher.weights).nnz == 0
    # other retriever settings: the kept blocks do not fit them, every block trains again
    trained = []
    fit_labels = rerank_fit.fit_labels_dcd
    monkeypatch.setattr(rerank_fit, "fit_labels_dcd", lambda *a: trained.extend(a[8]) or fit_labels(*a))
    fit_rerank(train.X, train.Y, RerankConfig(**{**vars(config), "beam": 3}), run_dir=tmp_path, resume=True)
    assert len(trained) > 20


@pytest.mark.parametrize(("dense_up_to", "entries"), [(10**6, 1 << 24), (0, 1 << 24), (0, 50)])
def test_shortlist_margins_equal_the_dense_product(model, data, monkeypatch, dense_up_to, entries):
    """The margins of a shortlist: dense at small L, else row-by-row sparse dot products in
    chunks of bounded size; the same values either way."""
    _, test = data
    monkeypatch.setattr(rerank_model, "DENSE_UP_TO", dense_up_to)
    monkeypatch.setattr(rerank_model, "BLOCK_ENTRIES", entries)
    X = l2_rows(test.X)
    labels = np.random.default_rng(0).integers(0, model.n_labels, size=(X.shape[0], 7))
    dense = (X @ model.weights).toarray() + model.bias
    np.testing.assert_allclose(model.margins(X, labels), np.take_along_axis(dense, labels, axis=1),
                               rtol=1e-5, atol=1e-6)


def test_clusters_retrieve_more_true_labels_than_a_random_shortlist(model, data):
    _, test = data
    labels, _ = model.shortlists(l2_rows(test.X))
    rng = np.random.default_rng(0)
    chance = np.stack([rng.permutation(model.n_labels)[:10] for _ in range(labels.shape[0])])
    Y = sp.csr_matrix(test.Y)

    def found(shortlists: np.ndarray) -> int:
        return sum(np.isin(Y.indices[Y.indptr[i]:Y.indptr[i + 1]], shortlists[i]).sum() for i in range(Y.shape[0]))

    assert found(labels) > found(chance)


@pytest.mark.parametrize("setting", [{"retriever": "hnsw"}, {"retriever": "clusters", "knn": 5}, {"beam": 0},
                                     {"clusters": -1}, {"cluster_weight": float("nan")}])
def test_bad_retriever_settings_are_one_error(setting):
    with pytest.raises(InputError):
        RerankConfig(**setting)


def test_more_clusters_than_labels_is_cut_to_the_label_count(data):
    train, _ = data
    fitted = fit_rerank(train.X, train.Y, RerankConfig(shortlist=5, alpha=0.5, retriever="clusters", clusters=500))
    assert fitted.matcher.n_clusters == train.Y.shape[1]


def test_estimator_fits_saves_and_loads_the_clustered_retriever(data, tmp_path):
    from holoxmc.estimator import XMCClassifier

    train, test = data
    clf = XMCClassifier(head="rerank", head_options={"shortlist": 10, "alpha": 0.5, "retriever": "clusters",
                                                     "clusters": 8, "beam": 2}).fit(train.X, train.Y)
    assert clf.rerank_.matcher is not None
    clf.save(tmp_path / "m")
    loaded = XMCClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(clf.predict_topk(test.X, 5)[0], loaded.predict_topk(test.X, 5)[0])

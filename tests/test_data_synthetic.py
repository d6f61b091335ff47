"""Synthetic generator: deterministic, Zipf-like, learnable, memory-safe at L = 3M."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier

from holoxmc.data import SYNTHETIC_PRESETS, make_synthetic
from holoxmc.errors import InputError
from holoxmc.metrics import evaluate, top_k


def test_deterministic_and_seed_dependent():
    a_train, a_test = make_synthetic(500, 40, 200, seed=7)
    b_train, b_test = make_synthetic(500, 40, 200, seed=7)
    c_train, _ = make_synthetic(500, 40, 200, seed=8)
    assert (a_train.X != b_train.X).nnz == 0 and (a_train.Y != b_train.Y).nnz == 0
    assert (a_test.Y != b_test.Y).nnz == 0
    assert (a_train.Y != c_train.Y).nnz > 0
    assert (a_train.Y[: len(a_test)] != a_test.Y).nnz > 0  # test split is not a copy of train


def test_label_statistics():
    train, _ = make_synthetic(20_000, 1_000, 2_000, labels_per_point=5.0, seed=1)
    per_point = np.diff(train.Y.indptr)
    assert per_point.min() >= 1
    assert per_point.mean() == pytest.approx(5.0, rel=0.05)
    frequency = np.sort(np.asarray(train.Y.sum(axis=0)).ravel())[::-1]
    assert frequency[0] > 20 * np.median(frequency)  # Zipf-like head
    assert train.Y.has_sorted_indices and np.all(np.isfinite(train.X.data))
    norms = np.sqrt(np.asarray(train.X.multiply(train.X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-5)


def test_one_vs_rest_clearly_beats_most_frequent_labels():
    train, test = make_synthetic(1_000, 20, 300, n_test=300, labels_per_point=2.0, seed=3)
    model = OneVsRestClassifier(LogisticRegression(solver="liblinear", C=10.0)).fit(train.X, train.Y.toarray())
    learned = evaluate(top_k(model.decision_function(test.X), 3), test.Y, ks=(1, 3))
    most_frequent = np.argsort(-np.asarray(train.Y.sum(axis=0)).ravel())[:3]
    baseline = evaluate(np.tile(most_frequent, (len(test), 1)), test.Y, ks=(1, 3))
    assert learned["P@1"] > baseline["P@1"] + 30
    assert learned["P@3"] > baseline["P@3"] + 15


def test_three_million_labels_without_dense_matrices():
    tracemalloc.start()
    try:
        train, test = make_synthetic(2_000, 3_000_000, 100_000, n_test=200, seed=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert train.Y.shape == (2_000, 3_000_000) and test.Y.shape == (200, 3_000_000)
    assert peak < 250e6  # a dense Y alone would be 24 GB


def test_presets_and_validation():
    preset = SYNTHETIC_PRESETS["amazon-670k-like"]
    assert (preset["n_labels"], preset["n_features"], preset["labels_per_point"]) == (670_091, 135_909, 5.45)
    assert preset["n_points"] * preset["labels_per_point"] / preset["n_labels"] == pytest.approx(3.99, abs=0.01)
    with pytest.raises(InputError):
        make_synthetic(10, 5, 5, labels_per_point=6)
    with pytest.raises(InputError):
        make_synthetic(0, 5, 5)


@pytest.mark.parametrize("option", [
    {"n_points": 2.5}, {"n_points": True}, {"seed": 1.5}, {"n_test": 3.0}, {"noise_features": "3"},
    {"labels_per_point": "x"}, {"labels_per_point": False}, {"zipf_exponent": float("nan")},
    {"signature_keep": float("inf")}, {"zipf_exponent": None},
])
def test_option_types_are_checked_at_the_boundary(option):
    """Regression: such values raised TypeError from inside the generator, or (NaN) were used."""
    (name, value), = option.items()
    kind = "a finite number" if name in ("labels_per_point", "zipf_exponent", "signature_keep") else "an integer"
    with pytest.raises(InputError, match=f"{name} must be {kind}, got"):
        make_synthetic(**{"n_points": 20, "n_labels": 5, "n_features": 8, **option})


def test_numpy_numbers_are_accepted():
    train, test = make_synthetic(np.int64(20), 5, 8, seed=np.int64(1), labels_per_point=np.float64(2.0))
    assert (len(train), len(test)) == (20, 4)


def test_preset_n_test_follows_n_points_unless_given():
    """Regression: ``load("synthetic", preset=..., n_points=N)`` kept the preset's n_test."""
    from holoxmc.data import load

    assert len(load("synthetic", "test", preset="amazon-670k-like", n_points=60, n_labels=50, n_features=30)) == 12
    assert len(load("synthetic", "test", n_points=100, n_labels=50, n_features=30)) == 20
    assert len(load("synthetic", "test", n_points=100, n_test=7, n_labels=50, n_features=30)) == 7
    assert len(load("synthetic", "test", n_labels=50, n_features=30)) == SYNTHETIC_PRESETS["demo"]["n_test"]
    with pytest.raises(InputError, match="unknown synthetic preset"):
        load("synthetic", preset=["demo"])


def test_the_splits_carry_the_name_given():
    """The size checks' loop variable once shadowed ``name``: every set was 'noise_features'."""
    train, test = make_synthetic(50, 5, 20, seed=0)
    assert train.name == test.name == "synthetic"
    assert make_synthetic(50, 5, 20, seed=0, name="mine")[0].name == "mine"

"""The hand-written dual coordinate descent SVM (holoxmc.models.linear.dcd): liblinear's optimum,
its own seeded order, and a re-rank fit that is the same model at any thread count."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.svm import LinearSVC

from holoxmc.data import make_realistic
from holoxmc.models.linear.dcd import fit_label_dcd, fit_labels_dcd, label_seed
from holoxmc.models.rerank import fit as rerank_fit
from holoxmc.models.rerank import model as rerank_model
from holoxmc.models.rerank.fit import RerankConfig, fit_rerank


def primal(X: sp.csr_matrix, y: np.ndarray, w: np.ndarray, b: float, C: float) -> float:
    """liblinear's solver-1 objective with the bias feature 1 (its weight regularised too)."""
    loss = np.maximum(0.0, 1.0 - np.where(y > 0, 1.0, -1.0) * (X @ w + b))
    return float(0.5 * (w @ w + b * b) + C * np.sum(loss**2))


def problem(seed: int, n: int = 150, d: int = 40) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.15, format="csr", random_state=seed, dtype=np.float64)
    return X, (rng.random(n) < 0.3).astype(np.float64)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("C", [0.05, 1.0, 20.0])
def test_it_reaches_liblinears_objective(seed, C):
    X, y = problem(seed)
    w, b, converged = fit_label_dcd(X, y, C, tol=1e-9, max_iter=100_000, seed=label_seed(seed, 0))
    svm = LinearSVC(C=C, tol=1e-9, max_iter=100_000, random_state=0).fit(X, y)
    ours, theirs = primal(X, y, w, b, C), primal(X, y, svm.coef_.ravel(), float(svm.intercept_[0]), C)
    assert converged
    assert abs(ours - theirs) <= 1e-9 * theirs
    np.testing.assert_allclose(np.append(w, b), np.append(svm.coef_.ravel(), svm.intercept_), atol=1e-5)


def test_at_the_rerank_tolerance_it_stops_as_near_the_optimum_as_liblinear():
    X, y = problem(7, n=400, d=60)
    best = primal(X, y, *fit_label_dcd(X, y, 0.5, tol=1e-10, max_iter=100_000, seed=1)[:2], 0.5)
    ours = primal(X, y, *fit_label_dcd(X, y, 0.5, tol=0.1, max_iter=1000, seed=1)[:2], 0.5)
    svm = LinearSVC(C=0.5, tol=0.1, random_state=0).fit(X, y)
    theirs = primal(X, y, svm.coef_.ravel(), float(svm.intercept_[0]), 0.5)
    assert ours - best <= max(2 * (theirs - best), 1e-3 * best)


def test_the_same_seed_gives_the_same_bits_and_another_seed_the_same_optimum():
    X, y = problem(3, n=300)
    first, again = (fit_label_dcd(X, y, 1.0, tol=0.1, max_iter=1000, seed=label_seed(0, 5)) for _ in range(2))
    np.testing.assert_array_equal(first[0], again[0])
    assert first[1] == again[1]
    other = fit_label_dcd(X, y, 1.0, tol=0.1, max_iter=1000, seed=label_seed(1, 5))
    assert not np.array_equal(first[0], other[0])  # another coordinate order
    tight = [fit_label_dcd(X, y, 1.0, tol=1e-10, max_iter=100_000, seed=s) for s in (1, 2)]
    np.testing.assert_allclose(tight[0][0], tight[1][0], atol=1e-7)


def test_max_iter_reached_is_reported():
    X, y = problem(1)
    assert not fit_label_dcd(X, y, 1e4, tol=1e-12, max_iter=1, seed=0)[2]


def test_a_block_of_labels_trains_each_as_one_label_on_its_rows():
    """fit_labels_dcd on a label's rows (a CSC column of memberships) with pruning off is
    fit_label_dcd on those rows (to rounding: the two are compiled apart, one over float32
    values and all features, the other over float64 copies and the rows' features); one-class
    labels are flagged, not trained."""
    X = sp.random(200, 30, density=0.2, format="csr", random_state=0, dtype=np.float32)
    rng = np.random.default_rng(0)
    rows = sp.csc_matrix(rng.random((200, 4)) < 0.5)
    present = (rng.random((200, 4)) < 0.3) & rows.toarray()
    present[:, 3] = False
    Y = sp.csc_matrix(present)
    rows.sort_indices()
    seeds = np.array([label_seed(0, label) for label in range(4)], np.uint64)
    classes, counts, features, weights, biases, _ = fit_labels_dcd(
        X.data, X.indices, X.indptr, X.shape[1], rows.indptr, rows.indices, Y.indptr, Y.indices,
        np.arange(4), seeds, 0.5, 1.0, 0.1, 1000, 0.0, 0)
    assert classes.tolist() == [0, 0, 0, -1] and counts[3] == 0
    starts = np.concatenate([[0], np.cumsum(counts)])
    for label in range(3):
        mine = rows.indices[rows.indptr[label]:rows.indptr[label + 1]]
        y = Y[:, label].toarray().ravel()[mine]
        w, b, _ = fit_label_dcd(X[mine], y, 0.5, tol=0.1, max_iter=1000, seed=int(seeds[label]))
        kept = features[starts[label]:starts[label + 1]]
        np.testing.assert_array_equal(kept, np.flatnonzero(w))
        np.testing.assert_allclose(weights[starts[label]:starts[label + 1]], w[kept], rtol=1e-7, atol=1e-9)
        assert biases[label] == pytest.approx(b, rel=1e-7)


@pytest.fixture(scope="module")
def data():
    return make_realistic(600, 40, 300, seed=0)


@pytest.mark.parametrize("retriever", [{}, {"retriever": "clusters", "clusters": 4, "beam": 2}, "sparse"])
def test_a_rerank_fit_is_the_same_model_at_one_two_and_three_threads(data, monkeypatch, retriever):
    """Also on the path past DENSE_UP_TO labels ("sparse": the compiled shortlists and margins)."""
    train, test = data
    if retriever == "sparse":
        monkeypatch.setattr(rerank_model, "DENSE_UP_TO", 0)
        retriever = {"frequent_labels": 0}
    config = RerankConfig(shortlist=8, alpha=0.5, label_block=16, **retriever)
    models, scores = [], []
    for threads in (1, 2, 3):
        monkeypatch.setattr(rerank_fit, "default_threads", lambda t=threads: t)
        monkeypatch.setattr(rerank_model, "default_threads", lambda t=threads: t)
        models.append(fit_rerank(train.X, train.Y, config))
        scores.append(models[-1].shortlist_scores(test.X))
    assert all(model._sparse_retrieval == (rerank_model.DENSE_UP_TO == 0) for model in models)
    for model, (labels, mixed) in zip(models[1:], scores[1:]):
        assert (models[0].weights != model.weights).nnz == 0
        np.testing.assert_array_equal(models[0].bias, model.bias)
        np.testing.assert_array_equal(scores[0][0], labels)
        np.testing.assert_array_equal(scores[0][1], mixed)
        if model.matcher is not None:
            assert (models[0].matcher.weights != model.matcher.weights).nnz == 0


def test_rerank_labels_are_seeded_by_their_index(data):
    """A label's scorer depends on the seed: another seed, other weights (on some label)."""
    train, _ = data
    one = fit_rerank(train.X, train.Y, RerankConfig(shortlist=8, alpha=0.5, prune=0.0))
    two = fit_rerank(train.X, train.Y, RerankConfig(shortlist=8, alpha=0.5, prune=0.0, seed=1))
    assert (one.weights != two.weights).nnz > 0

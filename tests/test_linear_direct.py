"""The linear model's direct liblinear call: the same SVM as ``LinearSVC``, per label, whatever
the split of labels into blocks, and ``LinearSVC`` itself when the private binding changes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.svm import LinearSVC

from holoxmc.data import make_synthetic
from holoxmc.models.linear import fit as linear
from holoxmc.models.linear.fit import LinearConfig, fit_linear


@pytest.fixture(scope="module")
def data():
    return make_synthetic(500, 24, 60, n_test=10, labels_per_point=2.0, seed=11)


def _random_problem(seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = sp.random(120, 30, density=0.3, format="csr", random_state=seed, dtype=np.float64)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X, (rng.random(120) < 0.3).astype(np.float64)


@pytest.mark.parametrize(("seed", "C", "tol"), [(0, 1.0, 1e-4), (1, 0.05, 1e-3), (2, 20.0, 1e-4)])
def test_the_direct_fit_is_linear_svcs_coef_and_intercept(seed, C, tol):
    X, y = _random_problem(seed)
    config = LinearConfig(C=C, tol=tol, seed=seed)
    w, b, converged = linear.fit_label(X, y, C, config)
    svm = LinearSVC(C=C, dual=True, tol=tol, random_state=seed).fit(X, np.where(y > 0, 1, -1))
    np.testing.assert_allclose(w, svm.coef_.ravel(), rtol=1e-9, atol=1e-12)
    assert b == pytest.approx(float(svm.intercept_[0]), rel=1e-9, abs=1e-12)
    assert converged == (int(svm.n_iter_) < config.max_iter) and linear.direct_liblinear_works()


def test_the_direct_fit_reports_max_iter():
    X, y = _random_problem(3)
    assert not linear.fit_label(X, y, 1e4, LinearConfig(C=1e4, max_iter=1, tol=1e-12))[2]


def _same_model(first, second):
    np.testing.assert_array_equal(first.weights.toarray(), second.weights.toarray())
    np.testing.assert_array_equal(first.bias, second.bias)


def test_the_model_does_not_depend_on_how_labels_are_split_into_blocks(data):
    train, _ = data
    whole, _ = fit_linear(train.X, train.Y, LinearConfig(C=0.5, label_block=256))
    one_by_one, _ = fit_linear(train.X, train.Y, LinearConfig(C=0.5, label_block=1))
    _same_model(whole, one_by_one)


def test_the_direct_path_trains_the_linear_svc_path_model(data, monkeypatch):
    train, _ = data
    config = LinearConfig(C=0.5, prune=0.0)
    direct, direct_history = fit_linear(train.X, train.Y, config)
    monkeypatch.setattr(linear, "direct_liblinear_works", lambda: False)
    through_svc, svc_history = fit_linear(train.X, train.Y, config)
    np.testing.assert_allclose(direct.weights.toarray(), through_svc.weights.toarray(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(direct.bias, through_svc.bias, rtol=1e-6, atol=1e-7)
    assert direct_history[0]["unconverged_labels"] == svc_history[0]["unconverged_labels"]


class _ChangedBinding:
    """A scikit-learn release whose private binding takes other arguments."""

    @staticmethod
    def set_verbosity_wrap(verbosity):
        pass

    @staticmethod
    def train_wrap(*args):
        raise TypeError("train_wrap() takes exactly 13 positional arguments")


@pytest.mark.parametrize("binding", [None, _ChangedBinding])
def test_a_missing_or_changed_binding_falls_back_to_linear_svc(data, monkeypatch, binding):
    train, _ = data
    config = LinearConfig(C=0.5)
    expected, _ = fit_linear(train.X, train.Y, config)
    monkeypatch.setattr(linear, "_liblinear", binding)
    linear.direct_liblinear_works.cache_clear()
    try:
        assert not linear.direct_liblinear_works()
        fallback, _ = fit_linear(train.X, train.Y, config)
    finally:
        linear.direct_liblinear_works.cache_clear()
    np.testing.assert_allclose(fallback.weights.toarray(), expected.weights.toarray(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(fallback.bias, expected.bias, rtol=1e-6, atol=1e-7)

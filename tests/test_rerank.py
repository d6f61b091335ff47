"""The shortlist-and-re-rank model: shortlist scores agree with full scoring, save/load,
re-ranking helps the retriever, and tampered tensors are refused."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from safetensors.torch import load_file, save_file

from holoxmc.data import make_realistic
from holoxmc.errors import InputError
from holoxmc.models.rerank import RerankModel
from holoxmc.train.rerank import RerankConfig, fit_rerank


@pytest.fixture(scope="module")
def data():
    return make_realistic(600, 40, 300, n_test=200, seed=3)


@pytest.fixture(scope="module")
def model(data):
    train, _ = data
    return fit_rerank(train.X, train.Y, RerankConfig(shortlist=10, alpha=0.5))


def precision_at_1(top: np.ndarray, Y: sp.csr_matrix) -> float:
    return float(np.mean([Y[i, t] > 0 for i, t in enumerate(top[:, 0])]))


def test_shortlist_scores_equal_full_scores_on_shortlisted_labels(model, data):
    _, test = data
    labels, mixed = model.shortlist_scores(test.X)
    full = model.full_scores(test.X)
    assert labels.shape == (test.X.shape[0], 10)
    np.testing.assert_allclose(mixed, np.take_along_axis(full, labels, axis=1), rtol=1e-5, atol=1e-6)
    retriever = np.asarray((test.X @ model.centroids_t).toarray())
    kth = np.sort(retriever, axis=1)[:, -10]
    assert np.all(np.take_along_axis(retriever, labels, axis=1) >= kth[:, None] - 1e-6)


def test_save_load_round_trip_predicts_identically(model, data, tmp_path):
    _, test = data
    save_file(model.save_to(tmp_path), str(tmp_path / "model.safetensors"))
    stored = {name.removeprefix("rerank."): t for name, t in load_file(str(tmp_path / "model.safetensors")).items()}
    loaded = RerankModel.from_tensors(stored, model.n_features, model.n_labels)
    for a, b in zip(model.predict_topk(test.X, 5), loaded.predict_topk(test.X, 5)):
        np.testing.assert_array_equal(a, b)


def test_rerank_beats_retriever_alone(data):
    train, test = data
    fitted = fit_rerank(train.X, train.Y, RerankConfig(shortlist=10, alpha=1.0))
    retriever_only = RerankModel(sp.csr_matrix(fitted.centroids_t.T), fitted.weights, fitted.bias, 10, 0.0)
    assert precision_at_1(fitted.predict_topk(test.X, 1)[0], test.Y) > \
        precision_at_1(retriever_only.predict_topk(test.X, 1)[0], test.Y)


def test_alpha_is_chosen_on_the_validation_split(data):
    train, test = data
    fitted = fit_rerank(train.X[:400], train.Y[:400], RerankConfig(shortlist=10), train.X[400:], train.Y[400:])
    assert fitted.alpha in (0.0, 0.25, 0.5, 0.75, 1.0)


@pytest.mark.parametrize("tamper", [
    lambda t: t.__setitem__("weights.indptr", torch.tensor([0, 2**40], dtype=torch.int64)),
    lambda t: t.__setitem__("centroids.indices", t["centroids.indices"] + 10**6),
    lambda t: t.__setitem__("bias", torch.zeros(3)),
    lambda t: t.__setitem__("settings", torch.tensor([1e12, 0.5], dtype=torch.float64)),
    lambda t: t.__setitem__("weights.data", torch.full_like(t["weights.data"], float("nan"))),
    lambda t: t.pop("centroids.data"),
])
def test_hostile_tensors_are_refused(model, tamper):
    tensors = {name: t.clone() for name, t in model.tensors().items()}
    tamper(tensors)
    with pytest.raises(InputError):
        RerankModel.from_tensors(tensors, model.n_features, model.n_labels)


def test_bad_fit_input_is_one_error(data):
    train, _ = data
    with pytest.raises(InputError, match="600 rows but Y has 10"):
        fit_rerank(train.X, train.Y[:10])


def test_estimator_fits_saves_and_loads_head_rerank(data, tmp_path):
    from holoxmc.estimator import XMCClassifier

    train, test = data
    clf = XMCClassifier(head="rerank", head_options={"shortlist": 10, "alpha": 0.5}).fit(train.X, train.Y)
    assert isinstance(clf.rerank_, RerankModel)
    clf.save(tmp_path / "m")
    loaded = XMCClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(clf.predict(test.X, 5)[0], loaded.predict(test.X, 5)[0])

"""Incremental fits (issue 51): ``warm_start`` and ``partial_fit`` for the networks, and
``add_labels`` for the linear and re-rank models, each against the full fit it stands for."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc.data import make_realistic
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier


@pytest.fixture(scope="module")
def data():
    train, test = make_realistic(1500, 40, 400, seed=0)
    return train.X, sp.csr_matrix(train.Y), test.X, sp.csr_matrix(test.Y)


def _weights(clf: XMCClassifier) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in clf.network_.state_dict().items()}


# ---------------------------------------------------------------------------- add_labels
def test_linear_labels_added_later_equal_a_fit_of_every_label(data, tmp_path):
    X, Y, Xt, Yt = data
    full = XMCClassifier(head="linear", head_options={"C": 0.3}, progress=False).fit(X, Y)
    grown = XMCClassifier(head="linear", head_options={"C": 0.3}, progress=False).fit(X, Y[:, :30])
    before = grown.decision_function(Xt)
    grown.add_labels(X, Y[:, 30:])
    assert grown.n_labels_ == 40 and grown.classes_.tolist() == list(range(40))
    np.testing.assert_array_equal(grown.decision_function(Xt), full.decision_function(Xt))
    np.testing.assert_array_equal(grown.decision_function(Xt)[:, :30], before)  # the others untouched
    np.testing.assert_allclose(grown.inv_prop_, full.inv_prop_)
    loaded = XMCClassifier.load(grown.save(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.predict_topk(Xt, 5)[0], full.predict_topk(Xt, 5)[0])


def test_linear_labels_added_by_name(data):
    X, Y, _, _ = data
    names = [[f"t{j:02d}" for j in row.indices] for row in Y[:, :30]]
    clf = XMCClassifier(head="linear", progress=False).fit(X, names)
    new = [["zz" if 30 in row.indices else "yy"] if row.nnz else [] for row in Y]
    clf.add_labels(X, new)
    assert clf.classes_.tolist()[-2:] == ["yy", "zz"] and clf.n_labels_ == 32
    assert clf.predict_topk(X[:3], 32, names=True)[0].shape == (3, 32)
    with pytest.raises(InputError, match="labels of the model already"):
        clf.add_labels(X, names)


def test_rerank_labels_added_later_score_as_a_fit_of_every_label(data):
    """The old labels' scorers stay; the new ones train against the grown index's shortlists.
    Measured here (1,500 rows, 40 labels, 10 added): the same P@1 and P@5 as the full fit;
    the bound allows one point."""
    X, Y, Xt, Yt = data
    full = XMCClassifier(head="rerank", progress=False).fit(X, Y)
    grown = XMCClassifier(head="rerank", progress=False).fit(X, Y[:, :30])
    old = grown.rerank_.weights.toarray()
    grown.add_labels(X, Y[:, 30:])
    np.testing.assert_array_equal(grown.rerank_.weights.toarray()[:, :30], old)
    a, b = full.evaluate(Xt, Yt), grown.evaluate(Xt, Yt)
    assert abs(a["P@1"] - b["P@1"]) <= 1.0 and abs(a["P@5"] - b["P@5"]) <= 1.0, (a, b)


def test_add_labels_is_only_where_a_family_appends_labels(data):
    X, Y, _, _ = data
    assert not hasattr(XMCClassifier(head="hrr"), "add_labels")
    assert not hasattr(XMCClassifier(), "add_labels")  # auto, unfitted: the winner decides
    clf = XMCClassifier(head="linear", progress=False).fit(X, Y)
    with pytest.raises(InputError, match="fitted on label ids"):
        clf.add_labels(X, [["new"]] * X.shape[0])
    with pytest.raises(InputError, match="features"):
        clf.add_labels(X[:, :10], Y[:, :2])


# ---------------------------------------------------------------------------- warm_start and partial_fit
def test_a_warm_start_continues_from_the_fitted_weights(data):
    X, Y, _, _ = data
    settings = dict(head="dense", hidden=(32,), epochs=2, progress=False)
    clf = XMCClassifier(**settings).fit(X, Y)
    fitted = _weights(clf)
    clf.set_params(warm_start=True, lr=1e-12, epochs=1)  # all but no step: the weights stay
    after = _weights(clf.fit(X, Y))
    assert all(torch.allclose(after[name], fitted[name], atol=1e-6) for name in fitted)
    cold = _weights(XMCClassifier(**settings | {"lr": 1e-12, "epochs": 1}).fit(X, Y))
    assert not all(torch.allclose(cold[name], fitted[name], atol=1e-3) for name in fitted)


def test_a_warm_start_of_other_sizes_or_settings_is_one_error(data):
    X, Y, _, _ = data
    clf = XMCClassifier(head="dense", hidden=(32,), epochs=1, progress=False).fit(X, Y)
    clf.set_params(warm_start=True)
    with pytest.raises(InputError, match="warm_start continues the fitted 'dense' model of 400 features and 40"):
        clf.fit(X, Y[:, :20])
    with pytest.raises(InputError, match="weights do not fit this configuration"):
        clf.set_params(hidden=(16,)).fit(X, Y)
    with pytest.raises(InputError, match="warm_start"):
        XMCClassifier(head="linear", warm_start=True).fit(X, Y)


def test_partial_fit_epochs_score_as_one_fit_of_those_epochs(data):
    """The first call is exactly a one-epoch fit (constant rate, no held-out share); three
    calls against a three-epoch fit: measured the same P@1 here, the bound allows 3 points
    (each call starts the optimiser afresh)."""
    X, Y, Xt, Yt = data
    settings = dict(head="dense", hidden=(32,), progress=False)
    once = XMCClassifier(**settings, epochs=1, val_fraction=0.0, schedule="none").fit(X, Y)
    clf = XMCClassifier(**settings).partial_fit(X, Y)
    np.testing.assert_array_equal(clf.decision_function(Xt), once.decision_function(Xt))
    assert clf.get_params()["epochs"] is None and not clf.warm_start  # its settings are the caller's again
    clf.partial_fit(X, Y).partial_fit(X, Y)
    three = XMCClassifier(**settings, epochs=3, val_fraction=0.0, schedule="none").fit(X, Y)
    assert abs(clf.score(Xt, Yt) - three.score(Xt, Yt)) <= 3.0
    assert not hasattr(XMCClassifier(head="linear"), "partial_fit")
    assert not hasattr(XMCClassifier(), "partial_fit")


def test_partial_fit_passes_scikit_learn_s_own_check():
    from sklearn.utils.estimator_checks import check_estimators_partial_fit_n_features

    check_estimators_partial_fit_n_features("XMCClassifier", XMCClassifier(head="dense", hidden=(8,), progress=False))


def test_labels_are_added_to_the_re_rank_winner_of_the_default(data):
    X, Y, Xt, Yt = data
    clf = XMCClassifier(progress=False, time_budget=0.0).fit(X, Y[:, :30])  # the first candidate alone: re-rank
    assert clf.head_ == "rerank"
    clf.add_labels(X, Y[:, 30:])
    assert clf.n_labels_ == 40 and clf.predict_topk(Xt, 5)[0].max() < 40

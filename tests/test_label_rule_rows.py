"""predict's rule is chosen on rows the served model did not train on wherever the fit holds
some out, and says so when it could not (the re-rank model and a refit train on every row)."""

from __future__ import annotations

import numpy as np
import pytest

from holoxmc.data.synthetic import make_synthetic
from holoxmc.estimator import XMCClassifier


@pytest.fixture(scope="module")
def data():
    train, _ = make_synthetic(600, 40, 60, n_test=10, labels_per_point=2.0, seed=3)
    return train.X, train.Y


def test_auto_keeps_the_rule_its_selection_chose_on_held_out_rows(data) -> None:
    X, Y = data
    clf = XMCClassifier(time_budget=0.0, progress=False).fit(X, Y)  # the re-rank candidate alone, then its refit
    assert clf.label_rule_.source == "val_fraction"  # auto's own split, given to its candidates as X_val
    assert clf.predict(X[:5]).shape == (5, Y.shape[1])


@pytest.mark.parametrize("params", [
    {"head": "rerank"}, {"head": "linear", "refit": True},
    {"head": "linear", "head_options": {"C": 0.3}},  # a fixed C trains on every row
    {"head": "dense", "n_models": 2, "hidden": (8,), "epochs": 1},  # each member holds out its own share
])
def test_a_fit_that_trained_on_every_row_says_its_rule_came_from_training_rows(data, params) -> None:
    X, Y = data
    clf = XMCClassifier(progress=False, **params).fit(X, Y)
    assert clf.label_rule_.source == "training rows"


def test_a_fit_that_held_rows_out_chooses_its_rule_there(data) -> None:
    X, Y = data
    clf = XMCClassifier(head="linear", progress=False).fit(X, Y)
    assert clf.label_rule_.source == "val_fraction"
    assert np.isfinite(clf.predict_proba(X[:3])).all()


@pytest.mark.parametrize("params", [{"head": "rerank"}, {"head": "dense", "hidden": (16,), "epochs": 2},
                                    {"head": "linear", "head_options": {"C": 0.3}}])
@pytest.mark.parametrize("a", [2.5, 0.0, None])
def test_the_cuts_read_the_calibration_pass_as_a_second_pass_would(data, params, a) -> None:
    """The cuts' candidates come from the calibration pass: each row's highest confidences
    mapped by the rule (a rising map, a flat one, none), the same probabilities as ranking the
    rows' probabilities again, and the same labels where no probability ties (at a flat map
    every label ties: the probabilities alone are compared)."""
    import scipy.sparse as sp
    import torch

    from holoxmc.models.thresholds import RULE_MAX_SET, LabelRule, _calibration_pairs, _ranked_candidates
    from holoxmc.models.thresholds import probability_blocks

    X, Y = data
    L = Y.shape[1]
    clf = XMCClassifier(progress=False, **params).fit(X[:500], Y[:500])
    X_val, Y_val = clf._check_X(X[500:]), sp.csr_matrix(Y[500:] != 0, dtype=np.int64)
    rule = LabelRule() if a is None else LabelRule(a=a, b=-1.0, calibrated=True)
    _, tops = _calibration_pairs(clf.model_, X_val, Y_val, L, 0, 32)
    rows, cols, p, ranks, best = _ranked_candidates(tops, rule)
    again = [torch.topk(block, min(RULE_MAX_SET, L), dim=1) for _, block in probability_blocks(clf.model_, X_val,
                                                                                                rule, L, 32)]
    width = min(RULE_MAX_SET, L)
    np.testing.assert_array_equal(rows, np.repeat(np.arange(X_val.shape[0]), width))
    np.testing.assert_array_equal(ranks, np.tile(np.arange(width), X_val.shape[0]))
    want_p = np.concatenate([top.values.reshape(-1).numpy() for top in again])
    want_c = np.concatenate([top.indices.reshape(-1).numpy() for top in again])
    np.testing.assert_allclose(p, want_p, rtol=1e-6)
    np.testing.assert_allclose(best, want_p[::width], rtol=1e-6)
    unique = np.array([np.sum(p[rows == row] == value) == 1 for row, value in zip(rows, p)])
    np.testing.assert_array_equal(cols[unique], want_c[unique])


def test_platt_scaling_rises_with_the_confidence_on_many_weighted_negatives() -> None:
    """A million pairs of confidences within a few tenths, positives higher, negatives sampled
    and weighted 20 (what fit_label_rule hands it at L = 10,000): the map rises, and its
    probabilities average the weighted positive share (a logistic fit's mean condition, to the
    solver's tolerance)."""
    from holoxmc.calibration import platt_scaling

    rng = np.random.default_rng(0)
    positives, negatives = np.clip(rng.normal(0.19, 0.08, 7_000), 0, 1), np.clip(rng.normal(0.063, 0.04, 993_000), 0, 1)
    x = np.concatenate([positives, negatives])
    y = np.repeat([1, 0], [positives.size, negatives.size])
    w = np.where(y == 1, 1.0, 20.0)
    platt = platt_scaling(x, y, w)
    assert platt is not None and platt[0] > 0
    p = 1.0 / (1.0 + np.exp(-(platt[0] * x + platt[1])))
    assert np.average(p, weights=w) == pytest.approx(np.average(y, weights=w), rel=1e-3)  # the falling fit: 28 % off


def test_platt_scaling_never_falls() -> None:
    """Scores that fall with the label give the flat map of the (weighted) positive share, not
    a falling one: a calibration keeps the model's ranking."""
    from holoxmc.calibration import platt_scaling

    x = np.linspace(0.0, 1.0, 40)
    y = (x < 0.3).astype(np.int64)
    w = np.where(y == 1, 1.0, 3.0)
    a, b = platt_scaling(x, y, w)
    share = np.average(y, weights=w)
    assert a == 0.0 and b == pytest.approx(np.log(share / (1 - share)))


def test_platt_scaling_leaves_out_pairs_without_weight_or_value() -> None:
    """Pairs of zero weight or a NaN score do not count: one class left gives ``None``."""
    from holoxmc.calibration import platt_scaling

    x, y = np.array([0.1, 0.2, 0.8, np.nan]), np.array([0, 0, 1, 1])
    assert platt_scaling(x, y, np.array([1.0, 1.0, 0.0, 1.0])) is None
    assert platt_scaling(x, y, np.zeros(4)) is None
    a, _ = platt_scaling(x, y, np.ones(4))
    assert a > 0


def test_a_flat_platt_map_leaves_the_rule_to_a_top_k(data, monkeypatch) -> None:
    """Where the Platt map is flat every label has one probability, so a cut keeps all or none:
    the rule is then one of the top-k sets."""
    from holoxmc.models import thresholds

    X, Y = data
    monkeypatch.setattr(thresholds, "_platt", lambda pairs: (0.0, -1.0))
    clf = XMCClassifier(head="rerank", progress=False).fit(X[:500], Y[:500], X[500:], Y[500:])
    assert clf.label_rule_.calibrated and clf.label_rule_.a == 0.0
    assert clf.label_rule_.threshold is None and clf.label_rule_.top_k is not None

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

"""scikit-learn's multilabel conventions on XMCClassifier: ``predict`` is a CSR 0/1 indicator
from the rule chosen on validation rows, ``predict_topk`` the ranking, ``predict_proba``
calibrated probabilities, ``decision_function`` finite, ``classes_`` and ``is_classifier``;
the goal snippet of issue 51 runs end to end."""

from __future__ import annotations

import copy
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import is_classifier
from sklearn.metrics import f1_score
from sklearn.model_selection import GridSearchCV, cross_val_score

from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.models import thresholds

LINEAR = dict(head="linear", progress=False)
TINY_NET = dict(head="hrr", hidden=(16,), dim=16, epochs=2, batch_size=32, lr=1e-2, dropout=0.0, progress=False)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(300, 30, 80, n_test=100, labels_per_point=2.0, seed=3)


@pytest.fixture(scope="module")
def linear(data):
    train, _ = data
    return XMCClassifier(**LINEAR).fit(train.X, train.Y)


def test_predict_is_a_csr_indicator_of_label_sets(data, linear):
    _, test = data
    predicted = linear.predict(test.X)
    assert sp.issparse(predicted) and predicted.format == "csr"
    assert predicted.shape == (test.X.shape[0], linear.n_labels_)
    assert set(np.unique(predicted.data)) <= {1}
    # the rule cuts the calibrated probabilities: exactly the labels at p >= threshold (or a top-1 fallback)
    rule = linear.label_rule_
    proba = linear.predict_proba(test.X)
    np.testing.assert_array_equal(predicted.toarray(), _sets(proba, rule))


def test_the_rule_is_chosen_on_validation_rows_to_maximise_samples_f1(data, linear):
    rule = linear.label_rule_
    assert rule.source == "val_fraction" and rule.rows == 30  # 10 % of 300 training rows
    assert rule.top_k in thresholds.RULE_TOP_K if rule.threshold is None else \
        rule.threshold in (thresholds.RULE_FRACTIONS if rule.relative else thresholds.RULE_THRESHOLDS)
    assert rule.calibrated
    train, _ = data
    X_val, Y_val = train.X[:60], train.Y[:60]
    clf = XMCClassifier(**LINEAR).fit(train.X[60:], train.Y[60:], X_val, Y_val)
    assert clf.label_rule_.source == "X_val" and clf.label_rule_.rows == 60
    # no other cut of the grid scores a higher samples-F1 on those rows
    proba = clf.predict_proba(X_val)
    forms = [dict(threshold=t, top1_fallback=fallback) for t in thresholds.RULE_THRESHOLDS for fallback in (False, True)]
    forms += [dict(threshold=t, relative=True, top1_fallback=False) for t in thresholds.RULE_FRACTIONS]
    forms += [dict(threshold=None, top_k=k) for k in thresholds.RULE_TOP_K if k <= clf.n_labels_]
    best = max(f1_score(Y_val, _sets(proba, thresholds.LabelRule(**form)), average="samples", zero_division=0)
               for form in forms)
    chosen = f1_score(Y_val, clf.predict(X_val), average="samples", zero_division=0)
    assert chosen == pytest.approx(best) and clf.label_rule_.f1 == pytest.approx(100 * best)


def _sets(proba: np.ndarray, rule: thresholds.LabelRule) -> np.ndarray:
    """The label sets of a rule, written out on the dense probabilities."""
    if rule.threshold is None:
        sets = np.zeros(proba.shape, dtype=bool)
        np.put_along_axis(sets, np.argsort(-proba, axis=1, kind="stable")[:, :rule.top_k or 1], True, axis=1)
        return sets.astype(int)
    sets = proba >= (rule.threshold * proba.max(1, keepdims=True) if rule.relative else rule.threshold)
    if rule.top1_fallback:
        empty = ~sets.any(1)
        sets[np.flatnonzero(empty), proba[empty].argmax(1)] = True
    return sets.astype(int)


def test_samples_f1_is_scikit_learns(data, linear):
    _, test = data
    predicted = linear.predict(test.X)
    assert thresholds.samples_f1(predicted, test.Y.astype(np.int64)) == pytest.approx(
        100 * f1_score(test.Y, predicted, average="samples", zero_division=0))


def test_predict_topk_is_the_old_tuple_and_predict_k_warns(data, linear):
    _, test = data
    indices, scores = linear.predict_topk(test.X, 3)
    assert indices.shape == scores.shape == (test.X.shape[0], 3) and indices.dtype == np.int64
    with pytest.warns(DeprecationWarning, match="predict_topk"):
        old = linear.predict(test.X, k=3)
    np.testing.assert_array_equal(old[0], indices)
    np.testing.assert_array_equal(old[1], scores)


def test_predict_proba_is_calibrated_and_bounded(data, linear):
    _, test = data
    proba = linear.predict_proba(test.X)
    assert proba.shape == (test.X.shape[0], linear.n_labels_) and proba.dtype == np.float32
    assert np.all((proba >= 0) & (proba <= 1))
    # calibrated on validation rows: the mean probability tracks the share of present labels
    share = test.Y.nnz / np.prod(test.Y.shape)
    assert abs(float(proba.mean()) - share) < 0.5 * share
    # ranking by probability is the ranking by score
    indices, _ = linear.predict_topk(test.X, 1)
    np.testing.assert_array_equal(proba.argmax(1), indices[:, 0])


def test_predict_proba_refuses_past_its_bound_naming_predict_topk(data, linear, monkeypatch):
    _, test = data
    import holoxmc.estimator as estimator

    monkeypatch.setattr(estimator, "MAX_DENSE_SCORES", test.X.shape[0] * linear.n_labels_ - 1)
    with pytest.raises(InputError, match="predict_topk"):
        linear.predict_proba(test.X)


def test_decision_function_is_finite_for_a_label_no_training_row_has(data):
    train, test = data
    Y = train.Y.tolil()
    Y[:, 5] = 0  # label 5: never seen, its SVM bias is -inf
    clf = XMCClassifier(**LINEAR).fit(train.X, Y.tocsr())
    assert np.isneginf(clf.linear_.bias[5])
    scores = clf.decision_function(test.X)
    assert np.all(np.isfinite(scores)) and np.all(scores[:, 5] == thresholds.SCORE_FLOOR)
    assert np.all(np.isfinite(clf.predict_topk(test.X, 5)[1]))
    assert np.all(np.isfinite(clf.predict_proba(test.X)))


def test_classes_and_is_classifier(data, linear):
    assert is_classifier(XMCClassifier()) and is_classifier(linear)
    np.testing.assert_array_equal(linear.classes_, np.arange(linear.n_labels_))
    assert XMCClassifier().__sklearn_tags__().classifier_tags.multi_label


def test_a_network_head_predicts_label_sets_too(data):
    train, test = data
    clf = XMCClassifier(**TINY_NET).fit(train.X, train.Y)
    predicted = clf.predict(test.X)
    assert predicted.shape == test.Y.shape and predicted.nnz >= test.X.shape[0] * clf.label_rule_.top1_fallback
    assert np.all((clf.predict_proba(test.X) >= 0) & (clf.predict_proba(test.X) <= 1))


def test_the_goal_snippet(data):
    """Issue 51's goal: f1_score on predict, cross_val_score with f1_samples (no nan),
    GridSearchCV over C, is_classifier, predict_proba, fit/predict on label-name lists."""
    train, test = data
    X, Y = train.X, train.Y
    clf = XMCClassifier(**LINEAR).fit(X, Y)
    f1 = f1_score(test.Y, clf.predict(test.X), average="samples")
    assert 0 < f1 <= 1
    Y_dense = Y.toarray().astype(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a failed fold is a warning and a nan: neither here
        scores = cross_val_score(XMCClassifier(**LINEAR), X, Y_dense, scoring="f1_samples", cv=3)
    assert scores.shape == (3,) and np.all(np.isfinite(scores)) and np.all(scores > 0)
    search = GridSearchCV(XMCClassifier(**LINEAR), {"head_options": [{"C": 0.1}, {"C": 1.0}]}, cv=2,
                          scoring="f1_samples").fit(X, Y_dense)
    assert search.best_params_["head_options"]["C"] in (0.1, 1.0) and np.isfinite(search.best_score_)
    assert is_classifier(clf)
    assert clf.predict_proba(test.X).shape == test.Y.shape
    names = [[f"tag{j}" for j in Y[i].indices] for i in range(Y.shape[0])]
    by_name = XMCClassifier(**LINEAR).fit(X, names)
    assert all(isinstance(name, str) for name in by_name.classes_)
    predicted = by_name.predict_labels(test.X)
    assert len(predicted) == test.X.shape[0] and all(set(row) <= set(by_name.classes_) for row in predicted)


def test_every_form_of_rule_cuts_as_written(data, linear):
    _, test = data
    proba = linear.predict_proba(test.X)
    for threshold, relative, fallback, k in ((0.5, True, False, None), (0.3, False, True, None),
                                             (0.9, False, False, None), (None, False, False, 3)):
        clf = copy.copy(linear)
        clf.label_rule_ = replace(linear.label_rule_, threshold=threshold, relative=relative, top1_fallback=fallback,
                                  top_k=k)
        np.testing.assert_array_equal(clf.predict(test.X).toarray(), _sets(proba, clf.label_rule_))


def test_a_model_saved_before_the_rule_predicts_each_rows_top_1():
    clf = XMCClassifier.load(Path(__file__).parent / "fixtures" / "saved-before-refactor" / "linear")
    assert clf.label_rule_.threshold is None and not clf.label_rule_.calibrated
    X = sp.random(7, clf.n_features_, density=0.3, format="csr", dtype=np.float32, random_state=0)
    predicted = clf.predict(X)
    top = clf.predict_topk(X, 1)[0][:, 0]
    assert predicted.nnz == 7 and predicted.indices.tolist() == top.tolist()
    assert np.all((clf.predict_proba(X) >= 0) & (clf.predict_proba(X) <= 1))


def test_solar_and_rerank_predict_label_sets_and_probabilities(data):
    train, test = data
    for clf in (XMCClassifier(head="solar", hidden=(16,), epochs=2, batch_size=32, progress=False,
                              head_options={"n_chunks": 2, "n_buckets": 16}),
                XMCClassifier(head="rerank", progress=False)):
        clf.fit(train.X, train.Y)
        predicted, proba = clf.predict(test.X), clf.predict_proba(test.X)
        assert predicted.shape == proba.shape == test.Y.shape and predicted.nnz > 0
        assert np.all((proba >= 0) & (proba <= 1)) and np.all(np.isfinite(clf.predict_topk(test.X, 5)[1]))

"""XMCClassifier as a scikit-learn estimator: ``score`` is one float, model selection
(``cross_val_score``, ``GridSearchCV``) runs on it, ``NotFittedError``, ``n_features_in_``,
the label forms scikit-learn passes, and ``n_jobs`` / ``random_state``."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.exceptions
from sklearn.datasets import dump_svmlight_file, load_svmlight_file
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.utils.validation import check_is_fitted

from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import NotFittedError, XMCClassifier

TINY = dict(hidden=(16,), dim=16, epochs=2, batch_size=32, lr=1e-2, dropout=0.0, progress=False)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(160, 12, 40, n_test=40, labels_per_point=1.5, seed=7)


@pytest.fixture(scope="module")
def fitted(data):
    train, _ = data
    return XMCClassifier(head="hrr", **TINY).fit(train.X, train.Y)


def test_score_is_one_float_and_evaluate_has_every_metric(data, fitted):
    _, test = data
    metrics = fitted.evaluate(test.X, test.Y)
    assert isinstance(fitted.score(test.X, test.Y), float)
    assert fitted.score(test.X, test.Y) == metrics["P@1"]
    assert fitted.score(test.X, test.Y, metric="nDCG@3") == metrics["nDCG@3"]
    assert fitted.score(test.X, test.Y, metric="PSP@5") == metrics["PSP@5"]
    for bad in ("P@0", "recall@1", "P1", 1):
        with pytest.raises(InputError, match="metric must be"):
            fitted.score(test.X, test.Y, metric=bad)


def test_cross_val_score_and_grid_search_run_on_a_dense_indicator_matrix(data):
    train, _ = data
    Y = train.Y.toarray().astype(np.int64)  # what scikit-learn's multilabel tools pass
    scores = cross_val_score(XMCClassifier(head="hrr", **TINY), train.X, Y, cv=2)
    assert scores.shape == (2,) and np.all((0 <= scores) & (scores <= 100))
    search = GridSearchCV(XMCClassifier(head="hrr", **TINY), {"lr": [1e-2, 3e-3]}, cv=2).fit(train.X, Y)
    assert search.best_params_["lr"] in (1e-2, 3e-3)
    assert search.best_estimator_.n_labels_ == Y.shape[1]
    assert search.score(train.X, Y) == search.best_estimator_.score(train.X, Y)


def test_not_fitted_is_scikit_learns_error_and_an_input_error(data, fitted):
    train, _ = data
    clf = XMCClassifier(head="hrr", **TINY)
    with pytest.raises(NotFittedError, match="not fitted"):
        clf.predict(train.X)
    assert issubclass(NotFittedError, sklearn.exceptions.NotFittedError) and issubclass(NotFittedError, InputError)
    with pytest.raises(sklearn.exceptions.NotFittedError):
        check_is_fitted(clf)
    check_is_fitted(fitted)
    assert fitted.n_features_in_ == train.X.shape[1]


def test_svmlight_multilabel_float_tuples_are_label_ids(tmp_path, data):
    train, _ = data
    rows = [tuple(int(i) for i in train.Y[r].indices) for r in range(train.Y.shape[0])]
    dump_svmlight_file(train.X, train.Y.astype(np.int64), str(tmp_path / "train.svm"), multilabel=True)
    X, Y = load_svmlight_file(str(tmp_path / "train.svm"), multilabel=True, n_features=train.X.shape[1])
    assert any(isinstance(label, float) for row in Y for label in row)  # (2.0, 5.0): floats
    from_floats = XMCClassifier(head="hrr", **TINY).fit(X, Y)
    from_ints = XMCClassifier(head="hrr", **TINY).fit(X, [list(row) for row in rows])
    assert from_floats.n_labels_ == from_ints.n_labels_
    np.testing.assert_array_equal(from_floats.predict_topk(X, k=3)[0], from_ints.predict_topk(X, k=3)[0])
    with pytest.raises(InputError, match="row 1: label ids must be integers"):
        XMCClassifier(head="hrr", **TINY).fit(X[:3], [(1.0,), (2.5,), ()])


def test_random_state_is_the_seed_and_n_jobs_the_workers(data):
    train, test = data
    by_state = XMCClassifier(head="hrr", **TINY, random_state=5).fit(train.X, train.Y)
    by_seed = XMCClassifier(head="hrr", **TINY, seed=5).fit(train.X, train.Y)
    np.testing.assert_array_equal(by_state.decision_function(test.X), by_seed.decision_function(test.X))
    assert XMCClassifier(head="hrr", n_jobs=3).n_workers == 3 and XMCClassifier(head="hrr", workers=2).n_workers == 2
    assert XMCClassifier(head="hrr", n_jobs=-1).n_workers >= 1
    single = XMCClassifier(head="hrr", **TINY, n_jobs=2).fit(train.X, train.Y)  # one network: trains here
    np.testing.assert_array_equal(single.predict_topk(test.X)[0], XMCClassifier(head="hrr", **TINY).fit(train.X, train.Y).predict_topk(test.X)[0])
    for params, match in (({"n_jobs": 2, "workers": 3}, "n_jobs is scikit-learn's name for workers"),
                          ({"random_state": 1, "seed": 2}, "random_state is scikit-learn's name for seed"),
                          ({"n_jobs": 0}, "n_jobs must be"), ({"random_state": -1}, "random_state must be")):
        with pytest.raises(InputError, match=match):
            XMCClassifier(head="hrr", **TINY | params).fit(train.X, train.Y)

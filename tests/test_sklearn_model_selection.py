"""Model selection on XMC-sized data: holoxmc.metrics' scorers with make_scorer, and
holoxmc.model_selection.cross_validate on a CSR Y, with groups."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold, ShuffleSplit

from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.metrics import evaluate, inverse_propensity, ndcg_at_k, precision_at_k, psp_at_k, scorer, top_k
from holoxmc.model_selection import cross_validate, fold_splitter

LINEAR = dict(head="linear", progress=False)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(240, 20, 60, n_test=60, labels_per_point=2.0, seed=11)


def test_score_functions_match_evaluate_on_every_input_form():
    rng = np.random.default_rng(0)
    Y = sp.csr_matrix((rng.random((30, 12)) < 0.2).astype(np.float32))
    scores = rng.random((30, 12))
    inv_prop = inverse_propensity(Y)
    expected = evaluate(top_k(scores, 5), Y, inv_prop=inv_prop, ks=(1, 3, 5))
    topk = (top_k(scores, 5), np.sort(scores, 1)[:, ::-1][:, :5])
    for y_score in (scores, sp.csr_matrix(scores), topk):
        assert precision_at_k(Y, y_score, k=3) == expected["P@3"]
        assert ndcg_at_k(Y.toarray(), y_score, k=5) == expected["nDCG@5"]
        assert psp_at_k(Y, y_score, k=1, inv_prop=inv_prop) == expected["PSP@1"]
    assert psp_at_k(Y, scores, k=3) == expected["PSP@3"]  # no inv_prop: y_true's own, as here
    with pytest.raises(InputError, match="call predict_topk"):
        precision_at_k(Y, topk, k=6)
    with pytest.raises(InputError, match="inv_prop must hold one weight per label"):
        psp_at_k(Y, scores, inv_prop=np.ones(3))


def test_make_scorer_on_decision_function_and_on_predict_topk(data):
    train, test = data
    clf = XMCClassifier(**LINEAR).fit(train.X, train.Y)
    dense = make_scorer(precision_at_k, response_method="decision_function", k=3)
    ranked = make_scorer(ndcg_at_k, response_method=["predict_topk"], k=5)
    assert dense(clf, test.X, test.Y) == clf.score(test.X, test.Y, metric="P@3")
    assert ranked(clf, test.X, test.Y) == clf.score(test.X, test.Y, metric="nDCG@5")
    assert scorer("PSP@5")(clf, test.X, test.Y) == clf.evaluate(test.X, test.Y)["PSP@5"]
    with pytest.raises(InputError, match="metric must be"):
        scorer("F1@2")


def test_cross_validate_on_a_csr_y_uses_kfold_splits(data):
    train, _ = data
    result = cross_validate(XMCClassifier(**LINEAR), train.X, train.Y, cv=3, scoring=("P@1", "nDCG@3", "f1_samples"),
                            return_estimator=True)
    assert set(result) == {"fit_time", "score_time", "test_P@1", "test_nDCG@3", "test_f1_samples", "estimator"}
    assert all(result[key].shape == (3,) and np.all(np.isfinite(result[key])) for key in result if key != "estimator")
    for (fit_rows, test_rows), model, p1 in zip(KFold(3).split(train.X), result["estimator"], result["test_P@1"]):
        assert model.n_labels_ == train.Y.shape[1]
        assert p1 == XMCClassifier(**LINEAR).fit(train.X[fit_rows], train.Y[fit_rows]).score(
            train.X[test_rows], train.Y[test_rows])


def test_groups_never_straddle_a_split(data):
    train, _ = data
    groups = np.arange(train.X.shape[0]) // 8
    result = cross_validate(XMCClassifier(**LINEAR), train.X, train.Y, cv=4, groups=groups, scoring="P@1",
                            return_estimator=True)
    assert result["test_score"].shape == (4,)
    assert isinstance(fold_splitter(4, groups), GroupKFold)
    for fit_rows, test_rows in fold_splitter(4, groups).split(train.X, groups=groups):
        assert not set(groups[fit_rows]) & set(groups[test_rows])
    shuffled = cross_validate(XMCClassifier(**LINEAR), train.X, train.Y, cv=ShuffleSplit(2, test_size=0.25,
                                                                                        random_state=0))
    assert shuffled["test_score"].shape == (2,)


def test_cross_validate_takes_label_lists_and_refuses_bad_input(data):
    train, _ = data
    names = [[f"t{j}" for j in train.Y[i].indices] for i in range(train.Y.shape[0])]
    result = cross_validate(XMCClassifier(**LINEAR), train.X, names, cv=2, return_estimator=True)
    assert all(len(model.classes_) == len({n for row in names for n in row}) for model in result["estimator"])
    ids = [list(train.Y[i].indices) for i in range(train.Y.shape[0])]
    assert cross_validate(XMCClassifier(**LINEAR), train.X, ids, cv=2)["test_score"].shape == (2,)
    with pytest.raises(InputError, match="X has 240 rows but Y has 10"):
        cross_validate(XMCClassifier(**LINEAR), train.X, train.Y[:10], cv=2)
    with pytest.raises(InputError, match="groups has 3 entries"):
        cross_validate(XMCClassifier(**LINEAR), train.X, train.Y, cv=2, groups=[0, 1, 2])
    with pytest.raises(InputError, match="cv must be"):
        cross_validate(XMCClassifier(**LINEAR), train.X, train.Y, cv=1)


def test_grid_search_with_a_holoxmc_scorer(data):
    train, _ = data
    search = GridSearchCV(XMCClassifier(**LINEAR), {"head_options": [{"C": 0.1}, {"C": 1.0}]}, cv=2,
                          scoring=scorer("nDCG@3")).fit(train.X, train.Y.toarray())
    assert np.isfinite(search.best_score_) and search.best_params_["head_options"]["C"] in (0.1, 1.0)

"""The shortlist-and-re-rank model: shortlist scores agree with full scoring (with and without
the kNN retriever), save/load, resume from finished label blocks, re-ranking helps the
retriever, bad settings and tampered tensors are refused."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from safetensors.torch import load_file, save_file

from holoxmc.data import make_realistic
from holoxmc.errors import InputError
from holoxmc.models.rerank.model import RerankModel
from holoxmc.sparse import l2_rows
from holoxmc.models.rerank import fit as rerank_fit
from holoxmc.models.rerank.fit import ALPHAS, BLOCK_FILE, RerankConfig, fit_rerank


@pytest.fixture(scope="module")
def data():
    return make_realistic(600, 40, 300, n_test=200, seed=3)


@pytest.fixture(scope="module")
def model(data):
    train, _ = data
    return fit_rerank(train.X, train.Y, RerankConfig(shortlist=10, alpha=0.5, frequent_labels=0))


@pytest.fixture(scope="module")
def knn_model(data):
    train, _ = data
    return fit_rerank(train.X, train.Y, RerankConfig(shortlist=10, alpha=0.5, knn=7, knn_weight=0.8))


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


def test_knn_shortlist_scores_equal_full_scores_on_shortlisted_labels(knn_model, data):
    _, test = data
    knn_model = RerankModel.from_tensors(knn_model.tensors(), knn_model.n_features, knn_model.n_labels)
    knn_model.prior = np.linspace(0, 0.1, knn_model.n_labels).astype(np.float32)
    labels, mixed = knn_model.shortlist_scores(test.X)
    full = knn_model.full_scores(test.X)
    np.testing.assert_allclose(mixed, np.take_along_axis(full, labels, axis=1), rtol=1e-5, atol=1e-6)
    # the shortlist is the retriever's best labels, computed densely here by hand
    X = l2_rows(test.X).toarray()
    neighbours = knn_model.neighbours_t.T.toarray()
    S = X @ neighbours.T
    near = np.argsort(-S, axis=1, kind="stable")[:, :7]
    sims = np.take_along_axis(S, near, axis=1)
    votes = np.einsum("nk,nkl->nl", sims / sims.sum(1, keepdims=True), knn_model.neighbour_labels.toarray()[near])
    retriever = X @ knn_model.centroids_t.toarray() + 0.8 * votes + knn_model.prior
    kth = np.sort(retriever, axis=1)[:, -10]
    assert np.all(np.take_along_axis(retriever, labels, axis=1) >= kth[:, None] - 1e-5)


def test_a_training_row_is_not_its_own_neighbour(knn_model):
    X = sp.csr_matrix(knn_model.neighbours_t.T)[:5]
    own = np.asarray((X @ knn_model.neighbours_t).toarray()).argmax(axis=1)
    assert np.all(np.asarray(knn_model.knn_votes(X).sum(axis=1)).ravel() > 0)
    kept = (X @ knn_model.neighbours_t).toarray()
    votes_without = knn_model.knn_votes(X, exclude=np.arange(5)).toarray()
    votes_with = knn_model.knn_votes(X).toarray()
    assert np.all(own == np.arange(5)) and kept.shape[1] > 7
    assert not np.allclose(votes_with, votes_without)


@pytest.fixture(scope="module")
def frequent_model(data):
    train, _ = data
    token = rerank_fit.KEEP_FIT_ROWS.set(True)  # leaves the rows each label trained on
    try:
        return fit_rerank(train.X, train.Y, RerankConfig(shortlist=4, alpha=0.5, negatives=0, frequent_labels=3))
    finally:
        rerank_fit.KEEP_FIT_ROWS.reset(token)


def test_the_most_frequent_labels_train_on_every_row_and_are_on_every_shortlist(frequent_model, data):
    """``frequent_labels``: the three labels of most training rows learn from every row (not
    only the rows whose shortlist holds them) and are candidates of every row, each once."""
    train, test = data
    counts = np.asarray(train.Y.getnnz(axis=0))
    assert sorted(frequent_model.always.tolist()) == sorted(np.argsort(-counts, kind="stable")[:3].tolist())
    rows = sp.csc_matrix(frequent_model.fit_rows)
    assert all(rows[:, label].nnz == train.X.shape[0] for label in frequent_model.always)
    assert min(rows[:, label].nnz for label in range(train.Y.shape[1])) < train.X.shape[0]  # the others do not
    labels, scores = frequent_model.predict_topk(test.X, 7)  # shortlist 4 + 3: every candidate
    for row, row_scores in zip(labels, scores):
        listed = row[row >= 0]
        assert set(frequent_model.always) <= set(listed.tolist()) and len(set(listed.tolist())) == len(listed)
        assert np.isneginf(row_scores[row < 0]).all()
    plain = fit_rerank(train.X, train.Y, RerankConfig(shortlist=4, alpha=0.5, negatives=0, frequent_labels=0))
    assert plain.always.size == 0 and plain.predict_topk(test.X, 7)[0].min() == -1


def test_without_a_count_the_labels_more_often_right_than_a_shortlist_entry_are_always_listed(data):
    """``frequent_labels=None`` (the default): the labels on at least (labels per row /
    shortlist) of the training rows; none with kNN or the clustered retriever."""
    train, _ = data
    counts, rows = np.asarray(train.Y.getnnz(axis=0)), train.X.shape[0]
    expected = np.flatnonzero(counts / rows >= train.Y.nnz / rows / 30)
    assert 0 < expected.size < train.Y.shape[1]
    assert RerankConfig().frequent_labels is None
    model = fit_rerank(train.X, train.Y, RerankConfig(shortlist=30, alpha=0.5))
    np.testing.assert_array_equal(model.always, expected)
    for other in ({"knn": 5}, {"retriever": "clusters", "clusters": 4, "beam": 2}):
        assert fit_rerank(train.X, train.Y, RerankConfig(shortlist=30, alpha=0.5, **other)).always.size == 0


def test_a_repeated_always_listed_label_mixes_without_nan(frequent_model, data):
    """At alpha 1 the dropped copy of a label already on the list scores ``-inf`` without a
    ``0 x -inf`` in the mix (which numpy warns of and would make NaN)."""
    _, test = data
    model = RerankModel.from_tensors(frequent_model.tensors(), frequent_model.n_features, frequent_model.n_labels)
    model.alpha = 1.0
    with np.errstate(invalid="raise"):
        labels, mixed = model.shortlist_scores(test.X)
    assert (labels < 0).any() and np.isneginf(mixed[labels < 0]).all() and not np.isnan(mixed).any()


@pytest.mark.parametrize("which", ["model", "knn_model", "frequent_model"])
def test_save_load_round_trip_predicts_identically(which, request, data, tmp_path):
    model = request.getfixturevalue(which)
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
    assert fitted.alpha in ALPHAS


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


def test_a_kNN_model_with_scalar_row_pointers_is_one_error(knn_model):
    tensors = {name: t.clone() for name, t in knn_model.tensors().items()}
    tensors["neighbours.indptr"] = torch.tensor(5, dtype=torch.int64)
    with pytest.raises(InputError, match="row pointers"):
        RerankModel.from_tensors(tensors, knn_model.n_features, knn_model.n_labels)


def test_a_block_file_with_negative_counts_or_nan_weights_is_trained_again(data, tmp_path):
    from safetensors.torch import load_file, save_file

    train, _ = data
    config = RerankConfig(shortlist=8, alpha=0.5, label_block=16)
    first = fit_rerank(train.X, train.Y, config, run_dir=tmp_path)
    path = sorted(tmp_path.glob("rerank_block_*.safetensors"))[0]
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
    tensors = load_file(str(path))
    tensors["values"] = torch.full_like(tensors["values"], float("nan"))
    save_file(tensors, str(path), metadata=metadata)
    resumed = fit_rerank(train.X, train.Y, config, run_dir=tmp_path, resume=True)
    assert (first.weights != resumed.weights).nnz == 0 and np.isfinite(resumed.weights.data).all()


def test_bad_fit_input_is_one_error(data):
    train, _ = data
    with pytest.raises(InputError, match="600 rows but Y has 10"):
        fit_rerank(train.X, train.Y[:10])
    with pytest.raises(InputError, match="X_val, Y_val have 299 features"):
        fit_rerank(train.X, train.Y, RerankConfig(shortlist=5), train.X[:5, :299], train.Y[:5])


@pytest.mark.parametrize("setting", [{"shortlist": 0}, {"C": 0.0}, {"C": float("nan")}, {"prune": -1.0},
                                     {"alpha": 1.5}, {"knn": -1}, {"knn_weight": -0.5}, {"negatives": -2},
                                     {"max_iter": 0}, {"tol": 0.0}, {"label_block": 0}, {"shortlist": "50"},
                                     {"knn": 2.5}, {"C": True}, {"frequent_labels": -1},
                                     {"frequent_labels": 5, "retriever": "clusters"},
                                     {"frequent_labels": 5, "knn": 3}])
def test_bad_settings_are_one_error(setting):
    with pytest.raises(InputError):
        RerankConfig(**setting)


def test_estimator_refuses_an_unknown_option_as_one_error(data):
    from holoxmc.estimator import XMCClassifier

    train, _ = data
    with pytest.raises(InputError, match="not accepted by head 'rerank'"):
        XMCClassifier(head="rerank", head_options={"depth": 3}).fit(train.X, train.Y)


def test_every_label_with_positives_learns_against_negatives(data):
    """A label no other row shortlists got a constant score before random negatives."""
    train, _ = data
    fitted = fit_rerank(train.X, train.Y, RerankConfig(shortlist=3, alpha=1.0))
    seen = np.flatnonzero(np.asarray(train.Y.sum(axis=0)).ravel() > 0)
    weights = sp.csc_matrix(fitted.weights)
    assert np.all(np.diff(weights.indptr)[seen] > 0)


def test_resume_trains_only_the_missing_blocks_and_gives_the_same_model(data, tmp_path, monkeypatch):
    train, test = data
    config = RerankConfig(shortlist=8, alpha=0.5, label_block=16)
    first = fit_rerank(train.X, train.Y, config, run_dir=tmp_path)
    files = sorted(tmp_path.glob("rerank_block_*.safetensors"))
    assert [f.name for f in files] == [BLOCK_FILE.format(start=s, stop=min(s + 16, 40)) for s in (0, 16, 32)]
    files[1].unlink()  # as if the fit had stopped before that block
    trained = []
    fit_labels = rerank_fit.fit_labels_dcd

    def counting(*args):
        trained.extend(args[8])  # the labels of the call
        return fit_labels(*args)

    monkeypatch.setattr(rerank_fit, "fit_labels_dcd", counting)
    resumed = fit_rerank(train.X, train.Y, config, run_dir=tmp_path, resume=True)
    assert 0 < len(trained) <= 16
    assert (first.weights != resumed.weights).nnz == 0
    np.testing.assert_array_equal(first.bias, resumed.bias)
    # other data: the kept blocks do not fit it, so every label trains again
    trained.clear()
    fit_rerank(train.X[:500], train.Y[:500], config, run_dir=tmp_path, resume=True)
    assert len(trained) > 16


@pytest.mark.usefixtures("map_every_array")
@pytest.mark.parametrize("retriever", [{}, {"retriever": "clusters", "clusters": 4, "beam": 2}])
def test_label_blocks_in_worker_processes_give_the_same_model(data, retriever):
    train, _ = data
    config = RerankConfig(shortlist=8, alpha=0.5, label_block=16, **retriever)
    one = fit_rerank(train.X, train.Y, config)
    two = fit_rerank(train.X, train.Y, config, workers=2)
    assert (one.weights != two.weights).nnz == 0
    np.testing.assert_array_equal(one.bias, two.bias)


def test_estimator_fits_saves_and_loads_head_rerank(data, tmp_path):
    from holoxmc.estimator import XMCClassifier

    train, test = data
    clf = XMCClassifier(head="rerank", head_options={"shortlist": 10, "alpha": 0.5}).fit(train.X, train.Y)
    assert isinstance(clf.rerank_, RerankModel)
    assert clf.fit_result_.train_seconds > 0  # the fit's seconds are recorded (metrics.json's train_seconds)
    clf.save(tmp_path / "m")
    loaded = XMCClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(clf.predict_topk(test.X, 5)[0], loaded.predict_topk(test.X, 5)[0])


def test_full_scores_in_small_batches_equal_one_batch(knn_model, data, monkeypatch):
    """Dense scoring (decision_function, thresholds) works in batches of ``batch_rows`` rows,
    so the kNN block of one call stays bounded; the scores do not depend on the batching."""
    _, test = data
    whole = knn_model.full_scores(test.X)
    monkeypatch.setattr(type(knn_model), "dense_batch_rows", lambda self: 7)
    np.testing.assert_allclose(knn_model.full_scores(test.X), whole, rtol=1e-6, atol=1e-7)
    assert knn_model.full_scores(test.X[:0]).shape == (0, knn_model.n_labels)

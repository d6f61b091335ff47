"""XMCClassifier: fit/predict/score, save/load round trip, boundary validation."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc import hrr
from holoxmc.data import make_synthetic
from holoxmc.data.batch import input_batch
from holoxmc.distributed import threads_per_worker
from holoxmc import estimator
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.validation import check_Y
from holoxmc.metrics import evaluate, inverse_propensity, label_set_f1
from holoxmc.settings import for_head

from test_trainer import assert_same_weights, weights

SMALL = dict(hidden=(64,), dim=64, epochs=10, batch_size=32, lr=1e-2, dropout=0.0, seed=1, progress=False)


def small(head: str, base: dict = SMALL, **changes) -> dict:
    """``base`` with ``changes``, cut to the settings ``head`` takes (the settings table's
    rows, holoxmc.settings.for_head): a head refuses a setting it does not use, as dense d'."""
    return for_head(head, base | changes)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(600, 40, 200, n_test=150, labels_per_point=2.0, seed=4)


def popularity_p1(train, test) -> float:
    """P@1 of predicting the five most frequent training labels for every test row."""
    popular = np.argsort(-np.asarray(train.Y.sum(0)).ravel())[:5]
    return evaluate(np.tile(popular, (len(test), 1)), test.Y)["P@1"]


@pytest.fixture(scope="module")
def fitted(data):
    train, _ = data
    fitted = {head: XMCClassifier(head=head, **small(head)).fit(train.X, train.Y) for head in ("hrr", "dense")}
    circulant = {"code": "circulant", "ranking": 1.0, "label_bias": True}  # d' = 16: 40 labels in 3 groups
    fitted["hrr-circulant"] = XMCClassifier(head="hrr", **SMALL | {"dim": 16, "head_options": circulant})
    fitted["hrr-circulant"].fit(train.X, train.Y)
    return fitted


@pytest.mark.parametrize("head", ["hrr", "dense", "hrr-circulant"])
def test_fit_beats_popularity_baseline_on_held_out_data(data, fitted, head):
    train, test = data
    clf = fitted[head]
    metrics = clf.evaluate(test.X, test.Y)
    assert metrics["P@1"] > popularity_p1(train, test) + 25
    assert {"P@1", "P@5", "nDCG@3", "PSP@1", "PSnDCG@5"} <= metrics.keys()
    assert len(clf.fit_result_.history) == SMALL["epochs"]


@pytest.mark.parametrize("head", ["hrr", "dense"])
def test_sparse_updates_learn_as_well_as_dense_adam(data, fitted, head):
    train, test = data
    clf = XMCClassifier(head=head, **small(head, sparse_updates=True)).fit(train.X, train.Y)
    assert clf.network_.backbone.input_layer.sparse and not fitted[head].network_.backbone.input_layer.sparse
    sparse_p1, dense_p1 = clf.evaluate(test.X, test.Y)["P@1"], fitted[head].evaluate(test.X, test.Y)["P@1"]
    assert sparse_p1 > popularity_p1(train, test) + 25
    # 150 test rows (one is 0.67 points); seeds 1-3 differed by 8.0 / 0 / 2.7 (dense), 0 / 1.3 / 0.7 (HRR)
    assert abs(sparse_p1 - dense_p1) < 10


def test_predict_matches_score_and_decision_function(data, fitted):
    train, test = data
    clf = fitted["hrr"]
    indices, scores = clf.predict_topk(test.X, k=5)
    assert indices.shape == scores.shape == (len(test), 5)
    assert np.all(np.diff(scores, axis=1) <= 1e-6)  # best first
    assert all(len(set(row)) == 5 for row in indices)
    inv_prop = inverse_propensity(train.Y)
    assert clf.evaluate(test.X, test.Y) == evaluate(indices, test.Y, inv_prop=inv_prop)
    full = clf.decision_function(test.X[:20])
    assert full.shape == (20, train.n_labels)
    assert np.array_equal(np.argsort(-full, axis=1, kind="stable")[:, 0], indices[:20, 0])
    np.testing.assert_allclose(np.take_along_axis(full, indices[:20], 1), scores[:20], rtol=1e-5, atol=1e-6)


def reference_confidences(clf: XMCClassifier, X: sp.csr_matrix) -> np.ndarray:
    """Every label's confidence, from scratch: the HRR cosine cos(p* ⊗ ŝ, c_i) over the
    full code (|cos| with loss="abs"), or the dense head's sigmoid of its logits."""
    if clf.head == "dense":
        return 1 / (1 + np.exp(-clf.decision_function(X).astype(np.float64)))
    network = clf.network_
    with torch.no_grad():
        out = network.head(network.backbone(input_batch(X, np.arange(X.shape[0]))))
        query = hrr.unbind(out, network.head.roles()[0])
        codes = torch.cat([vectors for _, vectors in network.head.label_chunks()])
        cosines = torch.nn.functional.normalize(query, dim=1) @ codes.T  # the codes have unit norm
    return (cosines.abs() if network.head.loss_kind == "abs" else cosines).numpy()


@pytest.mark.parametrize("head", ["hrr", "dense", "hrr-circulant"])
@pytest.mark.parametrize("threshold, relative", [(0.5, True), (0.8, True), (0.5, False), (0.2, False)])
def test_predict_above_keeps_every_label_whose_confidence_exceeds_the_cut(data, fitted, head, threshold, relative):
    _, test = data
    clf = fitted[head]
    found = clf.predict_above(test.X, threshold, relative=relative, batch_size=64)  # 3 batches, the last short
    assert sp.isspmatrix_csr(found) and found.shape == (len(test), test.n_labels) and found.has_sorted_indices
    expected = reference_confidences(clf, test.X)
    cut = threshold * expected.max(1, keepdims=True) if relative else threshold
    kept = expected > cut
    np.testing.assert_array_equal(found.toarray() != 0, kept)
    np.testing.assert_allclose(found.data, expected[kept], rtol=1e-4, atol=1e-5)
    sizes = np.diff(found.indptr)
    assert sizes.min() < sizes.max()  # a label set of its own size per row
    if relative:
        assert sizes.min() >= 1  # the best label always clears a relative cut below 1


def test_hrr_confidences_above_one_half_are_mostly_present_labels(data, fitted):
    """Appendix H of the HRR paper: cos ≈ 1 for present labels, ≈ 0 for absent ones."""
    _, test = data
    found = fitted["hrr"].predict_above(test.X, 0.5, relative=False)
    hits = found.multiply(test.Y).count_nonzero()
    assert hits / found.nnz > 0.6 and hits / test.Y.nnz > 0.3


@pytest.mark.parametrize("threshold, relative", [(0.5, True), (0.3, False)])
def test_solar_confidence_is_the_mean_bucket_probability_of_every_label(data, solar, threshold, relative):
    _, test = data
    expected = solar.decision_function(test.X) / solar.solar_.config.n_chunks  # "prob": a sum over the K chunks
    cut = threshold * expected.max(1, keepdims=True) if relative else threshold
    found = solar.predict_above(test.X, threshold, relative=relative, batch_size=64)
    np.testing.assert_array_equal(found.toarray() != 0, expected > cut)
    np.testing.assert_allclose(found.data, expected[expected > cut], rtol=1e-5, atol=1e-6)
    chunks = list(solar.solar_.confidence_chunks(test.X[:9], label_chunk=7))  # 40 labels: 6 chunks, the last short
    assert [start for start, _ in chunks] == list(range(0, 40, 7))
    np.testing.assert_allclose(torch.cat([c for _, c in chunks], 1).numpy(), expected[:9], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("head", ["hrr", "dense"])
@pytest.mark.parametrize("relative", [True, False])
def test_tuned_threshold_is_the_best_of_its_grid_as_predict_above_makes_the_sets(data, fitted, head, relative):
    train, _ = data
    X_val, Y_val = train.X[:150], train.Y[:150]  # stand for a held-out split; never the test set
    grid = (0.2, 0.4, 0.6, 0.8)
    best, table = fitted[head].tune_threshold(X_val, Y_val, grid, relative=relative)
    for t in grid:
        expected = label_set_f1(fitted[head].predict_above(X_val, t, relative=relative), Y_val)
        assert table[t] == pytest.approx(expected)
    assert table[best]["micro-F1"] == max(scores["micro-F1"] for scores in table.values())
    by_example, _ = fitted[head].tune_threshold(X_val, Y_val, grid, relative=relative, metric="example-F1")
    assert table[by_example]["example-F1"] == max(scores["example-F1"] for scores in table.values())
    assert len({scores["labels per point"] for scores in table.values()}) == len(grid)  # the cuts differ
    with pytest.raises(InputError, match="metric must be"):
        fitted[head].tune_threshold(X_val, Y_val, metric="P@1")
    for bad in ([0.5, float("nan")], [], [0.5, "0.7"], [0.5, None], 0.5):
        with pytest.raises(InputError, match="thresholds must be finite"):
            fitted[head].tune_threshold(X_val, Y_val, bad)


def test_predict_above_refuses_thresholds_that_are_not_numbers_or_fractions(data, fitted):
    _, test = data
    for bad in (-0.1, 1.0, 1.5):  # relative to the best confidence: a fraction
        with pytest.raises(InputError, match="give one in"):
            fitted["hrr"].predict_above(test.X, bad)
        with pytest.raises(InputError, match="give one in"):
            fitted["hrr"].tune_threshold(test.X, test.Y, [0.5, bad])
    assert fitted["hrr"].predict_above(test.X, 1.5, relative=False).nnz == 0  # no cosine exceeds 1
    for bad in (float("nan"), "0.5", True, None):
        with pytest.raises(InputError, match="threshold must be a finite number"):
            fitted["hrr"].predict_above(test.X, bad)


@pytest.mark.parametrize("head", ["hrr", "dense", "hrr-circulant"])
def test_save_load_round_trip_is_exact(tmp_path, data, fitted, head):
    _, test = data
    clf = fitted[head]
    clf.save(tmp_path / "model")
    assert sorted(p.name for p in (tmp_path / "model").iterdir()) == ["config.json", "model.safetensors"]
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["params"]["head"] == clf.head and config["n_labels"] == test.n_labels
    loaded = XMCClassifier.load(tmp_path / "model")
    original, again = clf.predict_topk(test.X, k=5), loaded.predict_topk(test.X, k=5)
    assert np.array_equal(original[0], again[0]) and np.array_equal(original[1], again[1])
    assert loaded.evaluate(test.X, test.Y) == clf.evaluate(test.X, test.Y)
    assert loaded.get_params() == clf.get_params()


def test_parameter_counts_show_the_hrr_compression(fitted):
    hrr, dense = fitted["hrr"].n_parameters(), fitted["dense"].n_parameters()
    assert dense["output_layer"] == 64 * 40 + 40
    assert hrr["output_layer"] == 64 * 64 + 64
    assert hrr["total"] - hrr["output_layer"] == dense["total"] - dense["output_layer"]


def test_the_estimator_and_loader_are_reachable_from_the_package_root():
    import holoxmc
    from holoxmc.data import load

    assert holoxmc.XMCClassifier is XMCClassifier and holoxmc.load is load
    with pytest.raises(AttributeError, match="no attribute 'fit'"):
        holoxmc.fit


@pytest.mark.parametrize("head", ["hrr", "dense", "solar"])
def test_fewer_labels_than_the_metrics_cut_offs(head):
    """Three labels: training validates and ``score`` reports P@1..5, ranks 4 and 5 as misses."""
    train, test = make_synthetic(300, 3, 20, n_test=50, labels_per_point=1.0, seed=0)
    clf = XMCClassifier(head=head, hidden=(16,), epochs=2, progress=False).fit(train.X, train.Y)
    metrics = clf.evaluate(test.X, test.Y)
    top3 = evaluate(clf.predict_topk(test.X, k=3)[0], test.Y, ks=(1, 2, 3))
    assert {k: metrics[k] for k in top3} == top3
    assert metrics["P@5"] == pytest.approx(metrics["P@3"] * 3 / 5)


def test_same_seed_same_model(data):
    train, _ = data
    params = SMALL | {"epochs": 2}
    a = XMCClassifier(head="hrr", **params).fit(train.X, train.Y)
    b = XMCClassifier(head="hrr", **params).fit(train.X, train.Y)
    for (name, x), (_, y) in zip(a.network_.state_dict().items(), b.network_.state_dict().items()):
        assert torch.equal(x, y), name


def test_label_lists_and_explicit_validation_set(data):
    train, _ = data
    label_lists = [train.Y.indices[a:b].tolist() for a, b in zip(train.Y.indptr[:-1], train.Y.indptr[1:])]
    clf = XMCClassifier(head="hrr", **SMALL | {"epochs": 2}).fit(train.X[:500], label_lists[:500], train.X[500:], train.Y[500:])
    assert clf.n_labels_ == max(max(r) for r in label_lists[:500]) + 1
    assert clf.fit_result_.history[0]["val"]["P@1"] >= 0


def test_label_lists_that_repeat_an_id_are_refused_not_merged(data, fitted):
    """Dense 0/1 rows given as lists read as label ids: ``[0, 1, 1]`` would become labels
    {0, 1}, and score other labels than the same rows as an array."""
    with pytest.raises(InputError, match=r"Y row 0: label id 1 appears twice.*as a numpy array or a sparse matrix"):
        check_Y([[0, 1, 1], [1, 0, 0]], 2, n_labels=3)
    with pytest.raises(InputError, match="Y row 1: label id 0 appears twice"):
        check_Y([[2], [0, 2, 0], []], 3, n_labels=3)
    Y = check_Y([[2, 0], [], [0], [0, 1]], 4, n_labels=3)  # an id may end one row and begin the next
    assert Y.toarray().tolist() == [[1, 0, 1], [0, 0, 0], [1, 0, 0], [1, 1, 0]]
    _, test = data
    rows = test.Y[:5].toarray().astype(int)
    assert (rows.sum(1) < rows.shape[1] - 1).all()  # each row repeats the id 0
    with pytest.raises(InputError, match="appears twice"):
        fitted["hrr"].evaluate(test.X[:5], rows.tolist())
    assert fitted["hrr"].evaluate(test.X[:5], rows)["P@1"] == fitted["hrr"].evaluate(test.X[:5], test.Y[:5])["P@1"]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda c, d: c.predict(d.X[:, :10]), "features"),
        (lambda c, d: c.predict(d.X[:0]), "no rows"),
        (lambda c, d: c.predict_topk(d.X, k=0), "k must be"),
        (lambda c, d: c.score(d.X, d.Y[:-1]), "rows"),
        (lambda c, d: c.score(d.X, sp.hstack([d.Y, d.Y]).tocsr()), "label columns"),
        (lambda c, d: c.score(d.X, [[0, 999]] * len(d)), "out of range"),
        (lambda c, d: c.score(d.X, d.Y * 2), "binary"),
        (lambda c, d: c.score(d.X, [[1.5]] * len(d)), "row 0: label ids must be integers"),
        (lambda c, d: c.score(d.X, [["a", "b"]] * len(d)), "Y holds label names, and this model was fitted on label ids"),
        (lambda c, d: c.predict("not a matrix"), "X must"),
        (lambda c, d: c.predict(sp.csr_matrix(np.full((1, d.n_features), np.nan))), "NaN"),
    ],
)
def test_bad_input_is_an_input_error(data, fitted, call, match):
    _, test = data
    with pytest.raises(InputError, match=match):
        call(fitted["hrr"], test)


def test_decision_function_refuses_huge_score_matrices(data, fitted, monkeypatch):
    _, test = data
    monkeypatch.setattr(estimator, "MAX_DENSE_SCORES", 100)
    with pytest.raises(InputError, match="use predict"):
        fitted["dense"].decision_function(test.X[:3])
    assert fitted["dense"].decision_function(test.X[:2]).shape == (2, test.n_labels)


def test_fit_validation_and_unfitted_use(data, tmp_path):
    train, _ = data
    with pytest.raises(InputError, match="not fitted"):
        XMCClassifier().predict(train.X)
    with pytest.raises(InputError, match="unknown head"):
        XMCClassifier(head="nope").fit(train.X, train.Y)
    with pytest.raises(InputError, match="rows"):
        XMCClassifier(head="hrr", **SMALL).fit(train.X, train.Y[:10])
    with pytest.raises(InputError, match="not a saved model"):
        XMCClassifier.load(tmp_path)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"backbone": "mlp"}, r"backbone must be one of \['fc', 'cnn', 'lstm'\], got 'mlp'"),
        ({"dim": 32.5}, r"dim \(the HRR dimension d'\) must be an integer >= 2, got 32.5"),
        ({"dim": -5}, "must be an integer >= 2, got -5"),
        ({"epochs": 2.5}, "epochs must be a positive integer or None, got 2.5"),
        ({"batch_size": "64"}, "batch_size must be a positive integer or None, got '64'"),
        ({"lr": "0.01"}, "lr must be a finite number > 0 or None, got '0.01'"),
        ({"seed": -1}, "seed must be a non-negative integer"),
        ({"propensity": (0.55,)}, "propensity must be two finite numbers"),
        ({"n_models": 2, "workers": 0}, "workers must be a positive integer, got 0"),
        ({"n_models": 2, "workers": 2.0}, "workers must be a positive integer, got 2.0"),
        ({"n_models": 2, "workers": None}, "workers must be a positive integer, got None"),
        ({"head": "solar", "workers": 0}, "workers must be a positive integer, got 0"),
        ({"head": "solar", "head_options": {"n_bucket": 4}}, r"options \['n_bucket'\] are not accepted by head 'solar'"),
        ({"precision": "half"}, "precision must be one of"),
        ({"head": "linear", "precision": "bfloat16"}, r"'precision'\] do not apply to head 'linear'"),
    ],
)
def test_bad_settings_are_one_input_error_before_any_training(data, params, match):
    train, _ = data
    with pytest.raises(InputError, match=match):
        XMCClassifier(**{"head": "hrr"} | small(params.get("head", "hrr")) | params).fit(train.X, train.Y)
    XMCClassifier(head="hrr", **SMALL | {"epochs": np.int64(1), "dim": np.int64(16), "lr": np.float32(0.01)}).fit(train.X, train.Y)


def _broken_configs(config: dict) -> dict[str, tuple[bytes, str]]:
    """A saved config.json spoiled in ways a load must name: case -> (bytes to write, expected message)."""
    def without(key: str) -> bytes:
        return json.dumps({k: v for k, v in config.items() if k != key}).encode()

    return {
        "no params": (without("params"), "config.json: missing key 'params'"),
        "no n_labels": (without("n_labels"), "config.json: missing key 'n_labels'"),
        "no network": (without("network"), "config.json: missing key 'network'"),
        "params a list": (json.dumps(config | {"params": []}).encode(), "'params' must be a JSON object"),
        "unknown param": (json.dumps(config | {"params": config["params"] | {"colour": 1}}).encode(),
                          r"unknown params \['colour'\]"),
        "n_features text": (json.dumps(config | {"n_features": "40"}).encode(),
                            "'n_features' must be an integer, got '40'"),
        "not UTF-8": (b'{"format": "\xff"}', "config.json is not UTF-8 text"),
        "invalid JSON": (b'{"format": ', "config.json is not valid JSON"),
        "a list": (b"[]", "config.json must hold a JSON object, got a JSON array"),
    }


def test_a_broken_config_is_one_input_error_naming_the_file_and_the_fault(tmp_path, fitted):
    folder = fitted["hrr"].save(tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    for content, message in _broken_configs(config).values():
        (folder / "config.json").write_bytes(content)
        with pytest.raises(InputError, match=message):
            XMCClassifier.load(folder)


def test_saved_files_are_readable_as_the_umask_allows(tmp_path, fitted):
    """Not mkstemp's 0600: a run folder shared by several machines or users stays readable."""
    for mask, mode in ((0o022, 0o644), (0o007, 0o660)):
        previous = os.umask(mask)
        try:
            folder = fitted["hrr"].save(tmp_path / f"model-{mask:o}")
        finally:
            os.umask(previous)
        assert {p.name: p.stat().st_mode & 0o777 for p in folder.iterdir()} == \
            {"config.json": mode, "model.safetensors": mode}


@pytest.mark.parametrize("head", ["hrr", "solar"])
def test_numpy_scalar_settings_checkpoint_save_and_load(data, tmp_path, head):
    train, test = data
    numpy_settings = {"epochs": np.int64(2), "lr": np.float32(0.01), "hidden": (np.int64(16),), "seed": np.int64(3)}
    clf = XMCClassifier(head=head, **small(head) | numpy_settings).fit(train.X, train.Y, run_dir=tmp_path / "run")
    clf.save(tmp_path / "model")
    loaded = XMCClassifier.load(tmp_path / "model")
    assert loaded.get_params()["epochs"] == 2 and loaded.get_params()["seed"] == 3
    assert np.array_equal(loaded.predict_topk(test.X, k=3)[0], clf.predict_topk(test.X, k=3)[0])


ENSEMBLE = SMALL | {"epochs": 4}


def untimed(result) -> list[dict]:
    """A fit's per-epoch history without its wall-clock seconds."""
    return [{key: value for key, value in epoch.items() if key != "seconds"} for epoch in result.history]


@pytest.mark.parametrize("head, options", [("hrr", {}), ("dense", {}),
                                           ("hrr", {"dim": 16, "head_options": {"code": "circulant"}})])
def test_ensemble_is_the_mean_of_the_networks_its_seeds_train_alone(tmp_path, data, head, options):
    train, test = data
    params = small(head, ENSEMBLE | options) | {"head": head}
    ensemble = XMCClassifier(n_models=3, **params).fit(train.X, train.Y)
    assert ensemble.member_seeds() == [1, 101, 201]
    alone = [XMCClassifier(**params | {"seed": seed}).fit(train.X, train.Y) for seed in ensemble.member_seeds()]
    mean = np.mean([clf.decision_function(test.X) for clf in alone], axis=0)
    np.testing.assert_allclose(ensemble.decision_function(test.X), mean, rtol=1e-5, atol=1e-6)
    indices, scores = ensemble.predict_topk(test.X, k=5)
    np.testing.assert_allclose(scores, np.take_along_axis(mean, indices, 1), rtol=1e-5, atol=1e-6)
    assert (np.sort(mean, 1)[:, ::-1][:, :5] - scores).max() < 1e-5  # the top five by the mean score
    assert ensemble.evaluate(test.X, test.Y) == evaluate(indices, test.Y, inv_prop=ensemble.inv_prop_)
    assert ensemble.n_parameters() == {key: 3 * value for key, value in alone[0].n_parameters().items()}
    everything = -2.0  # below every cosine and probability: predict_above keeps all confidences
    mean_confidence = np.mean([clf.predict_above(test.X, everything, relative=False).toarray() for clf in alone],
                              axis=0)
    found = ensemble.predict_above(test.X, 0.3, relative=False).toarray()
    np.testing.assert_allclose(found, np.where(mean_confidence > 0.3, mean_confidence, 0.0), rtol=1e-5, atol=1e-6)
    assert [untimed(r) for r in ensemble.fit_results_] == [untimed(clf.fit_result_) for clf in alone]

    ensemble.save(tmp_path)
    loaded = XMCClassifier.load(tmp_path)
    np.testing.assert_array_equal(loaded.decision_function(test.X), ensemble.decision_function(test.X))
    assert [r.history for r in loaded.fit_results_] == [r.history for r in ensemble.fit_results_]


def test_ensemble_resumes_member_by_member(tmp_path, data):
    """A run stopped after two members continues with the third and ends as an uninterrupted one."""
    train, test = data
    stopped = XMCClassifier(head="hrr", n_models=2, **ENSEMBLE).fit(train.X, train.Y, run_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["member-0", "member-1"]
    resumed = XMCClassifier(head="hrr", n_models=3, **ENSEMBLE).fit(train.X, train.Y, run_dir=tmp_path, resume=True)
    # the first two members come back from their checkpoints, timings included: not trained again
    assert [r.history for r in resumed.fit_results_[:2]] == [r.history for r in stopped.fit_results_]
    whole = XMCClassifier(head="hrr", n_models=3, **ENSEMBLE).fit(train.X, train.Y)
    np.testing.assert_array_equal(resumed.decision_function(test.X), whole.decision_function(test.X))
    assert [untimed(r) for r in resumed.fit_results_] == [untimed(r) for r in whole.fit_results_]


@pytest.mark.xdist_group("ray")  # one local Ray instance at a time under `make test`
def test_ensemble_networks_trained_in_worker_processes_and_ray_tasks_equal_those_trained_here(data, tmp_path):
    train, test = data
    params = ENSEMBLE | {"n_models": 2}
    previous = torch.get_num_threads()
    torch.set_num_threads(threads_per_worker(2))  # what each of two workers gets
    try:
        here = XMCClassifier(head="hrr", **params).fit(train.X, train.Y)
    finally:
        torch.set_num_threads(previous)
    apart = XMCClassifier(head="hrr", **params | {"workers": 2}).fit(train.X, train.Y, run_dir=tmp_path / "apart")
    assert sorted(p.name for p in (tmp_path / "apart").iterdir()) == ["member-0", "member-1"]
    assert_same_weights(weights(apart.network_), weights(here.network_))  # bit-identical: same seeds and threads
    assert [untimed(r) for r in apart.fit_results_] == [untimed(r) for r in here.fit_results_]
    # scores agree to float rounding (BLAS may sum differently for differently aligned copies)
    np.testing.assert_allclose(apart.decision_function(test.X), here.decision_function(test.X), rtol=1e-5, atol=1e-6)
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'holoxmc[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = XMCClassifier(head="hrr", **params | {"workers": 2, "ray_address": "local"}).fit(train.X, train.Y)
    finally:
        ray.shutdown()
    assert_same_weights(weights(remote.network_), weights(here.network_))


@pytest.mark.parametrize("head", ["hrr", "dense"])
def test_linear_path_trains_with_sparse_updates_and_round_trips(tmp_path, data, fitted, head):
    train, test = data
    clf = XMCClassifier(head=head, **small(head, linear_width=16, sparse_updates=True)).fit(train.X, train.Y)
    backbone = clf.network_.backbone
    assert backbone.linear_path.sparse and backbone.linear_path.weight.shape == (train.X.shape[1], 16)
    assert clf.network_.config["linear_width"] == 16 and "linear_width" not in fitted[head].network_.config
    assert clf.evaluate(test.X, test.Y)["P@1"] > popularity_p1(train, test) + 25
    clf.save(tmp_path / "wide")
    loaded = XMCClassifier.load(tmp_path / "wide")
    assert loaded.get_params() == clf.get_params()
    for got, expected in zip(loaded.predict_topk(test.X, k=5), clf.predict_topk(test.X, k=5)):
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("params, match", [({"linear_width": -1}, "non-negative integer"),
                                           ({"linear_width": 2.5}, "non-negative integer"),
                                           ({"linear_width": 8, "head": "solar"}, r"\['linear_width'\] do not apply to head 'solar'"),
                                           ({"linear_width": 8, "backbone": "cnn"}, r"'linear_width'\] do not apply to backbone 'cnn'")])
def test_bad_linear_width_is_an_input_error(data, params, match):
    train, _ = data
    with pytest.raises(InputError, match=match):
        XMCClassifier(**{"head": "hrr"} | small(params.get("head", "hrr")) | params).fit(train.X, train.Y)


def test_one_network_is_not_trained_apart(data):
    train, _ = data
    with pytest.raises(InputError, match="n_models > 1"):
        XMCClassifier(head="hrr", **SMALL | {"workers": 2}).fit(train.X, train.Y)


@pytest.mark.parametrize("n_models, head, match", [(0, "hrr", "positive integer"), (2.0, "dense", "positive integer"),
                                                   (True, "hrr", "positive integer"), (2, "solar", r"\['n_models'\] do not apply to head 'solar'")])
def test_bad_ensemble_sizes_are_input_errors(data, n_models, head, match):
    train, _ = data
    with pytest.raises(InputError, match=match):
        XMCClassifier(head=head, n_models=n_models, **small(head)).fit(train.X, train.Y)


SOLAR_SMALL = dict(hidden=(64,), epochs=8, batch_size=32, lr=1e-2, seed=1, progress=False,
                   head_options={"n_chunks": 4, "n_buckets": 10})


@pytest.fixture(scope="module")
def solar(data):
    train, _ = data
    return XMCClassifier(head="solar", **SOLAR_SMALL).fit(train.X, train.Y)


def test_solar_head_fits_predicts_scores_and_round_trips(tmp_path, data, solar):
    train, test = data
    metrics = solar.evaluate(test.X, test.Y)
    assert metrics["P@1"] > popularity_p1(train, test) + 15
    indices, scores = solar.predict_topk(test.X, k=5)
    assert indices.shape == (len(test), 5) and np.all(np.diff(scores, axis=1) <= 1e-6)
    assert metrics == evaluate(indices, test.Y, inv_prop=inverse_propensity(train.Y))
    # K chunk networks, each with a B-wide output layer over its hidden layer.
    assert solar.n_parameters()["output_layer"] == 4 * (64 * 10 + 10)
    assert len(solar.fit_result_.history) == 8 and solar.fit_result_.train_seconds > 0
    loaded = XMCClassifier.load(solar.save(tmp_path / "solar"))
    again, again_scores = loaded.predict_topk(test.X, k=5)
    assert np.array_equal(again, indices) and np.array_equal(again_scores, scores)


def test_solar_decision_function_sums_bucket_probabilities(data, solar):
    _, test = data
    full = solar.decision_function(test.X[:10])
    logits = solar.solar_.chunk_logits(sp.csr_matrix(test.X[:10], dtype=np.float32))  # (n, K, B)
    buckets = solar.solar_.code.buckets  # (K, L)
    expected = sum(torch.sigmoid(logits[:, k, buckets[k]]).numpy() for k in range(buckets.shape[0]))
    np.testing.assert_allclose(full, expected, rtol=1e-6)


@pytest.mark.parametrize("head", ["hrr", "dense", "solar"])
def test_bfloat16_training_learns_and_saves_float32_weights(tmp_path, data, head):
    train, test = data
    params = (SOLAR_SMALL if head == "solar" else small(head)) | {"precision": "bfloat16"}
    clf = XMCClassifier(head=head, **params).fit(train.X, train.Y)
    assert clf.evaluate(test.X, test.Y)["P@1"] > popularity_p1(train, test) + 15
    networks = clf.solar_.networks if head == "solar" else [clf.network_]
    assert all(p.dtype == torch.float32 for network in networks for p in network.parameters())
    if head == "solar":
        assert clf.solar_.config.train.precision == "bfloat16"
    again = XMCClassifier.load(clf.save(tmp_path / head))
    assert again.precision == "bfloat16"
    assert np.array_equal(again.predict_topk(test.X, k=5)[0], clf.predict_topk(test.X, k=5)[0])


def test_solar_defaults_are_the_tuned_solar_settings():
    clf = XMCClassifier(head="solar")
    assert clf.setting("hidden") == (512,) and clf.setting("lr") == 5e-3 and clf.setting("epochs") == 15
    assert XMCClassifier(head="hrr").setting("hidden") == (512, 512)
    assert XMCClassifier(head="solar", epochs=3).setting("epochs") == 3
    with pytest.raises(InputError, match="backbone 'fc'"):
        XMCClassifier(head="solar", backbone="cnn").fit(np.zeros((4, 3), np.int64), [[0], [1], [0], [1]])
    with pytest.raises(InputError, match="refit"):
        XMCClassifier(head="solar", refit=True).fit(sp.csr_matrix(np.eye(4, dtype=np.float32)), [[0], [1], [0], [1]])

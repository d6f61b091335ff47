"""The linear one-vs-rest model: liblinear per label, C chosen on validation, pruning,
persistence, the estimator's ``head="linear"`` and ``holoxmc train --model linear``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from sklearn.preprocessing import normalize
from sklearn.svm import LinearSVC

from holoxmc.cli import main
from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import MODEL_FILE, XMCClassifier
from holoxmc.metrics import evaluate
from holoxmc.train import split_validation
from holoxmc.models.linear.fit import DEFAULT_C_GRID, LinearConfig, fit_linear


@pytest.fixture(scope="module")
def data():
    return make_synthetic(600, 20, 80, n_test=150, labels_per_point=2.0, seed=4)


def test_each_label_is_scikit_learns_linear_svm_on_the_normalised_rows(data):
    train, _ = data
    model, history = fit_linear(train.X, train.Y, LinearConfig(C=0.5, prune=0.0, seed=3))
    X = normalize(sp.csr_matrix(train.X, dtype=np.float64))
    for label in (0, 7, 19):
        y = np.where(train.Y[:, label].toarray().ravel() > 0, 1, -1)
        svm = LinearSVC(C=0.5, dual=True, random_state=3).fit(X, y)
        np.testing.assert_allclose(model.weights[:, label].toarray().ravel(), svm.coef_.ravel(), rtol=1e-5, atol=1e-7)
        assert model.bias[label] == pytest.approx(svm.intercept_[0], rel=1e-5)
    assert [entry["C"] for entry in history] == [0.5] and history[0]["unconverged_labels"] == 0


@pytest.mark.parametrize("dense_table", [True, False])
def test_margins_are_the_normalised_rows_times_the_weights(data, monkeypatch, dense_table):
    train, test = data
    if not dense_table:  # the sparse product of weights too large to densify
        monkeypatch.setattr("holoxmc.models.linear.model.DENSE_SCORING_ENTRIES", 0)
    model, _ = fit_linear(train.X, train.Y, LinearConfig(C=1.0))
    expected = normalize(test.X.astype(np.float64)) @ model.weights.toarray() + model.bias
    np.testing.assert_allclose(model.margins(test.X), expected, rtol=1e-4, atol=1e-5)
    indices, scores = model.predict(test.X, k=4, batch_size=32)
    np.testing.assert_array_equal(scores, np.take_along_axis(model.margins(test.X), indices, 1))
    assert np.all(np.diff(scores, axis=1) <= 0)


def test_c_is_chosen_by_validation_p_at_1_then_refit_on_every_row(data):
    train, _ = data
    config = LinearConfig(C_grid=(0.01, 1.0, 10.0), seed=5)
    model, history = fit_linear(train.X, train.Y, config, val_fraction=0.2)
    grid, refit = history[:3], history[3]
    assert [entry["C"] for entry in grid] == [0.01, 1.0, 10.0] and refit["refit"] is True
    best = max(grid, key=lambda entry: entry["val"]["P@1"])  # first of equals: max keeps it
    assert refit["C"] == best["C"]
    # the refit model is the fixed-C model of that C on every row; the grid's were trained without the held-out rows
    fixed, _ = fit_linear(train.X, train.Y, LinearConfig(C=best["C"], seed=5))
    np.testing.assert_array_equal(model.weights.toarray(), fixed.weights.toarray())
    inner, held = split_validation(train.X.shape[0], 0.2, 5)
    partial, _ = fit_linear(train.X[inner], train.Y[inner], LinearConfig(C=best["C"], seed=5))
    P1 = evaluate(partial.predict_topk(train.X[held], k=5)[0], train.Y[held], ks=(1,))["P@1"]
    assert P1 == pytest.approx(best["val"]["P@1"])
    kept, _ = fit_linear(train.X, train.Y, config, val_fraction=0.2, refit=False)
    np.testing.assert_array_equal(kept.weights.toarray(), partial.weights.toarray())


def test_a_given_validation_set_chooses_c_then_refit_adds_its_rows(data):
    train, test = data
    config = LinearConfig(C_grid=(0.1, 10.0))
    model, history = fit_linear(train.X, train.Y, config, test.X, test.Y, refit=False)
    assert len(history) == 2 and not any("refit" in entry for entry in history)
    best = max(history, key=lambda entry: entry["val"]["P@1"])
    fixed, _ = fit_linear(train.X, train.Y, LinearConfig(C=best["C"]))
    np.testing.assert_array_equal(model.weights.toarray(), fixed.weights.toarray())
    P1 = evaluate(fixed.predict_topk(test.X, k=5)[0], test.Y, ks=(1,))["P@1"]
    assert P1 == pytest.approx(best["val"]["P@1"])  # the given rows scored once normalised, as the model does
    # refit, as the Trainer's with a given validation set: the chosen C on the training and validation rows together
    refit, refit_history = fit_linear(train.X, train.Y, config, test.X, test.Y)
    assert refit_history[-1] == refit_history[-1] | {"C": best["C"], "refit": True}
    both, _ = fit_linear(sp.vstack([train.X, test.X]), sp.vstack([train.Y, test.Y]), LinearConfig(C=best["C"]))
    np.testing.assert_array_equal(refit.weights.toarray(), both.weights.toarray())


def test_confidences_are_platt_scaled_on_the_chosen_models_validation_margins(data):
    train, test = data
    model, _ = fit_linear(train.X, train.Y, LinearConfig(C_grid=(1.0,)), test.X, test.Y, refit=False)
    margins, present = model.margins(test.X), test.Y.toarray() > 0
    x, y = margins.ravel().astype(np.float64), present.ravel()
    a, b = model.calibration
    p = 1.0 / (1.0 + np.exp(-(a * x + b)))
    assert a > 0 and abs(np.mean(p - y)) < 1e-5 and abs(np.mean((p - y) * x)) < 1e-5  # the likelihood's maximum
    confidence = next(model.confidence_chunks(test.X))[1].numpy()
    # calibrated, absent labels sit near 0 (sigmoid(margin) left them near sigmoid(-1) = 0.27)
    assert confidence[~present].mean() < 0.1 < 0.5 < confidence[present].mean()
    assert (1 / (1 + np.exp(-margins[~present]))).mean() > 0.2  # what the plain sigmoid(margin) gave them
    fixed, _ = fit_linear(train.X, train.Y, LinearConfig(C=1.0))  # no validation rows: nothing to fit on
    assert fixed.calibration == (1.0, 0.0)


def test_pruning_drops_exactly_the_small_weights(data):
    train, _ = data
    full, _ = fit_linear(train.X, train.Y, LinearConfig(C=1.0, prune=0.0))
    pruned, _ = fit_linear(train.X, train.Y, LinearConfig(C=1.0, prune=0.05))
    dense = full.weights.toarray()
    np.testing.assert_array_equal(pruned.weights.toarray(), np.where(np.abs(dense) >= 0.05, dense, 0))
    assert 0 < pruned.weights.nnz < full.weights.nnz
    assert pruned.n_parameters == pruned.weights.nnz + 20


def test_labels_with_one_class_get_constant_scores_ranked_last_or_first():
    X = sp.random(50, 10, density=0.5, format="csr", random_state=0, dtype=np.float32)
    Y = np.zeros((50, 4), np.float32)
    Y[:25, 0] = Y[25:, 1] = 1  # label 2: never present; label 3: in every row
    Y[:, 3] = 1
    model, _ = fit_linear(X, sp.csr_matrix(Y), LinearConfig(C=1.0))
    assert model.bias[2] == -np.inf and model.bias[3] == np.inf
    assert model.weights[:, 2].nnz == model.weights[:, 3].nnz == 0
    indices, _ = model.predict(X, k=4)
    assert np.all(indices[:, 0] == 3) and np.all(indices[:, -1] == 2)


@pytest.mark.parametrize("config", [LinearConfig(C=1.0, label_block=6), LinearConfig(C_grid=(0.01, 1.0), label_block=6)])
def test_label_blocks_in_worker_processes_train_the_same_weights(data, config, map_every_array):
    train, _ = data
    here, here_history = fit_linear(train.X, train.Y, config)
    apart, apart_history = fit_linear(train.X, train.Y, config, workers=2)
    np.testing.assert_array_equal(here.weights.toarray(), apart.weights.toarray())
    np.testing.assert_array_equal(here.bias, apart.bias)
    # a grid's (C, label block) jobs all run in one pool: each C's validation scores are its own
    assert [(e["C"], e.get("val")) for e in here_history] == [(e["C"], e.get("val")) for e in apart_history]


@pytest.mark.xdist_group("ray")  # one local Ray instance at a time under `make test`
def test_ray_tasks_train_the_same_weights_and_ask_for_no_gpu(data, monkeypatch):
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'holoxmc[ray]'")
    train, _ = data
    config = LinearConfig(C_grid=(0.01, 1.0), label_block=6)
    here, here_history = fit_linear(train.X, train.Y, config)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    asked, remote = [], ray.remote

    def recording_remote(*args, **kwargs):  # notes the GPUs a task asks for, then runs it on the CPUs
        asked.append(kwargs.get("num_gpus"))
        return remote(*args, **(kwargs | {"num_gpus": 0} if "num_gpus" in kwargs else kwargs))

    monkeypatch.setattr(ray, "remote", recording_remote)
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 2.0, "GPU": 1.0})  # as a cluster with a GPU
    try:
        there, there_history = fit_linear(train.X, train.Y, config, ray_address="local")
    finally:
        ray.shutdown()
    # grid and refit: CPU-only tasks, which need not wait for a GPU (Ray's own calls name no GPUs)
    assert [gpus for gpus in asked if gpus is not None] == [0, 0]
    np.testing.assert_array_equal(here.weights.toarray(), there.weights.toarray())
    np.testing.assert_array_equal(here.bias, there.bias)
    assert [(e["C"], e.get("val")) for e in here_history] == [(e["C"], e.get("val")) for e in there_history]


def test_a_label_that_does_not_converge_is_reported():
    X = sp.random(200, 30, density=0.3, format="csr", random_state=1, dtype=np.float32)
    Y = sp.csr_matrix((np.random.default_rng(0).random((200, 3)) < 0.5).astype(np.float32))  # labels are noise
    with pytest.warns(Warning, match="max_iter=1 on 3 of 3 labels"):
        _, history = fit_linear(X, Y, LinearConfig(C=100.0, max_iter=1))
    assert history[0]["unconverged_labels"] == 3


@pytest.mark.parametrize(
    "options, message",
    [
        ({"C": 0.0}, "C must be a positive"),
        ({"C": float("nan")}, "C must be a positive"),
        ({"C_grid": ()}, "C_grid must be a non-empty list"),
        ({"C_grid": None}, "C_grid must be a non-empty list"),
        ({"C_grid": 1.0}, "C_grid must be a non-empty list"),
        ({"C": "1"}, "C must be a number"),
        ({"tol": 0.0}, "tol must be"),
        ({"seed": 1.5}, "seed must be an int"),
        ({"C_grid": (1.0, -1.0)}, "C must be a positive"),
        ({"prune": -0.1}, "prune must be"),
        ({"max_iter": 0}, "max_iter must be"),
        ({"label_block": 1.5}, "label_block must be"),
        ({"normalize_rows": "yes"}, "normalize_rows must be"),
    ],
)
def test_bad_configs_are_refused(options, message):
    with pytest.raises(InputError, match=message):
        LinearConfig(**options)


def test_choosing_c_needs_a_validation_share(data):
    train, _ = data
    with pytest.raises(InputError, match="validation share"):
        fit_linear(train.X, train.Y, LinearConfig(), val_fraction=0.0)


def test_fit_linear_checks_its_inputs_and_reads_only_nonzero_labels(data):
    train, test = data
    with pytest.raises(InputError, match="X has 600 rows but Y has 599"):
        fit_linear(train.X, train.Y[:599], LinearConfig(C=1.0))
    with pytest.raises(InputError, match=r"Y has shape \(600, 0\): no rows or no labels"):
        fit_linear(train.X, train.Y[:, :0], LinearConfig(C=1.0))
    with pytest.raises(InputError, match="both X_val and Y_val"):
        fit_linear(train.X, train.Y, LinearConfig(), test.X)
    with pytest.raises(InputError, match="X_val, Y_val have 80 features and 19 labels"):
        fit_linear(train.X, train.Y, LinearConfig(), test.X, test.Y[:, :19])
    stored_zeros = sp.csr_matrix(train.Y, copy=True)
    stored_zeros.data[stored_zeros.indices == 5] = 0.0  # column 5 keeps its entries, now stored zeros
    assert stored_zeros[:, 5].nnz > 0 and not stored_zeros[:, 5].toarray().any()
    model, _ = fit_linear(train.X, stored_zeros, LinearConfig(C=1.0))
    assert model.bias[5] == -np.inf and stored_zeros[:, 5].nnz > 0  # ranked last; the caller's Y untouched


def test_raw_rows_are_scored_as_given_without_normalising(data):
    train, test = data
    model, _ = fit_linear(train.X, train.Y, LinearConfig(C=1.0, normalize_rows=False, prune=0.0))
    y = np.where(train.Y[:, 3].toarray().ravel() > 0, 1, -1)
    svm = LinearSVC(C=1.0, dual=True, random_state=0).fit(sp.csr_matrix(train.X, dtype=np.float64), y)
    np.testing.assert_allclose(model.weights[:, 3].toarray().ravel(), svm.coef_.ravel(), rtol=1e-5, atol=1e-7)
    expected = test.X.astype(np.float64) @ model.weights.toarray() + model.bias
    np.testing.assert_allclose(model.margins(test.X), expected, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------- estimator
def test_the_estimator_fits_scores_saves_and_loads_a_linear_model(data, tmp_path):
    train, test = data
    clf = XMCClassifier(head="linear", refit=True, head_options={"C_grid": [0.3, 3.0]}).fit(train.X, train.Y)
    assert clf.evaluate(test.X, test.Y)["P@1"] > 60
    margins = clf.decision_function(test.X, batch_size=40)
    np.testing.assert_array_equal(margins, clf.linear_.margins(test.X))
    above = clf.predict_above(test.X, 0.5, relative=False)
    a, b = clf.linear_.calibration
    np.testing.assert_array_equal(above.toarray() > 0, torch.sigmoid(torch.from_numpy(margins) * a + b).numpy() > 0.5)
    loaded = XMCClassifier.load(clf.save(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.decision_function(test.X), margins)
    assert loaded.linear_.calibration == clf.linear_.calibration
    assert (loaded.predict_above(test.X, 0.5) != clf.predict_above(test.X, 0.5)).nnz == 0
    assert loaded.n_parameters() == clf.n_parameters() == {"total": clf.linear_.n_parameters,
                                                           "output_layer": clf.linear_.n_parameters}
    assert json.loads((tmp_path / "model" / "config.json").read_text())["network"] is None
    assert clf.setting("epochs") is None  # no network settings, and no error asking for one


def test_a_classifier_refit_as_linear_saves_no_stale_network(data, tmp_path):
    train, _ = data
    clf = XMCClassifier(head="dense", hidden=(8,), epochs=1, progress=False).fit(train.X, train.Y)
    clf.set_params(head="linear", hidden=None, epochs=None).fit(train.X, train.Y)
    assert json.loads((clf.save(tmp_path / "model") / "config.json").read_text())["network"] is None
    assert XMCClassifier.load(tmp_path / "model").head == "linear"


def test_a_saved_linear_model_with_broken_weights_is_one_error(data, tmp_path):
    train, _ = data
    clf = XMCClassifier(head="linear", head_options={"C": 1.0}).fit(train.X, train.Y)
    path = clf.save(tmp_path / "model") / MODEL_FILE
    tensors = load_file(str(path))
    with safe_open(str(path), "pt") as f:  # keep the metadata (its scoring digest): only the weights are broken
        metadata = f.metadata()
    tensors["linear.weights.indices"] = tensors["linear.weights.indices"] + 1000
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(InputError, match="do not form a"):
        XMCClassifier.load(tmp_path / "model")


@pytest.mark.parametrize(
    "params, message",
    [
        ({"epochs": 3}, "do not apply to head 'linear': epochs applies to heads"),
        ({"hidden": (16,)}, "do not apply to head 'linear'"),
        ({"n_models": 2}, "do not apply to head 'linear'"),
        ({"backbone": "cnn"}, "takes sparse features"),
        ({"device": "cuda"}, "on the CPU|CUDA is not available here"),
        ({"device": "gpu"}, "on the CPU|device 'gpu'"),
        ({"val_fraction": "0.1"}, "val_fraction must be a finite number"),
        ({"head_options": {"C_grid": 1.0}}, "C_grid must be a non-empty list"),
        ({"head_options": {"dim": 3}}, "not accepted by head 'linear'"),
        ({"head_options": {"seed": 3}}, "not accepted by head 'linear'"),
        ({"val_fraction": 1.5}, "val_fraction must be"),
    ],
)
def test_the_estimator_refuses_what_a_linear_model_does_not_have(data, params, message):
    train, _ = data
    with pytest.raises(InputError, match=message):
        XMCClassifier(head="linear", **params).fit(train.X, train.Y)


# ---------------------------------------------------------------------------- CLI
def test_cli_trains_a_linear_model_with_its_fits_in_the_metrics(toy, tmp_path, capsys):
    run_dir = tmp_path / "linear"
    assert main(["train", str(toy), "--model", "linear", "--out", str(run_dir), "--quiet"]) == 0
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [fit["C"] for fit in metrics["fits"] if not fit.get("refit")] == list(DEFAULT_C_GRID)
    assert metrics["epoch_seconds"] == [] and metrics["best_epoch"] is None
    assert metrics["train_seconds"] == pytest.approx(sum(fit["seconds"] for fit in metrics["fits"]))
    assert metrics["test"]["P@1"] > 50
    capsys.readouterr()
    assert main(["evaluate", str(run_dir), str(toy)]) == 0
    evaluated = json.loads((run_dir / "eval-toy-test.json").read_text())["metrics"]
    assert {key: evaluated[key] for key in metrics["test"]} == metrics["test"]
    fixed = tmp_path / "fixed"
    assert main(["train", str(toy), "--model", "linear", "--C", "0.3", "--out", str(fixed), "--quiet"]) == 0
    assert [fit["C"] for fit in json.loads((fixed / "metrics.json").read_text())["fits"]] == [0.3]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", "linear", "--epochs", "3"], "--epochs configures a network"),
        (["--model", "linear", "--dim", "8"], "--dim configures a network"),
        (["--model", "fc", "--C", "1"], "--C applies to --model linear only"),
        (["--model", "linear", "--C", "-1"], "C must be a positive"),
    ],
)
def test_cli_refuses_network_options_for_a_linear_model(toy, tmp_path, capsys, argv, message):
    assert main(["train", str(toy), "--out", str(tmp_path / "run"), "--quiet", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "run").exists()


def test_a_fit_is_deterministic_for_its_seed(data):
    train, _ = data
    first, first_history = fit_linear(train.X, train.Y, LinearConfig(seed=9))
    second, second_history = fit_linear(train.X, train.Y, LinearConfig(seed=9))
    np.testing.assert_array_equal(first.weights.toarray(), second.weights.toarray())
    np.testing.assert_array_equal(first.bias, second.bias)
    assert [e.get("val") for e in first_history] == [e.get("val") for e in second_history]
    # the seed is used: another one carves another validation split, which scores the grid otherwise
    _, other_history = fit_linear(train.X, train.Y, LinearConfig(seed=10))
    assert [e.get("val") for e in other_history] != [e.get("val") for e in first_history]

"""``holoxmc train / evaluate / predict``: the files they write, errors, kill-and-resume."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import holoxmc
from holoxmc.cli import main
from holoxmc.errors import InputError
from holoxmc.cli.train import train_params
from holoxmc.data import make_synthetic
from holoxmc.data.readers import write_xml_repo
from holoxmc.estimator import DATASET_PRESETS, XMCClassifier
from holoxmc.metrics import evaluate, label_set_f1

FAST = ["--hidden", "32", "--dropout", "0", "--epochs", "8", "--batch-size", "32", "--lr", "0.01", "--quiet"]
#: What a finished run folder holds: the run marker, the model, its history and metrics.
RUN_FILES = [".holoxmc-run", "config.json", "history.csv", "metrics.json", "model.safetensors"]
METRIC_KEYS = {f"{m}@{k}" for m in ("P", "nDCG", "PSP", "PSnDCG", "Recall") for k in range(1, 6)}


@pytest.fixture(scope="module")
def trained(toy, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "hrr"
    assert main(["train", str(toy), "--model", "hrr-fc", "--out", str(run_dir), "--dim", "64", *FAST]) == 0
    return run_dir


def test_train_writes_config_model_and_metrics(trained):
    assert sorted(p.name for p in trained.iterdir()) == RUN_FILES
    metrics = json.loads((trained / "metrics.json").read_text())
    assert set(metrics["test"]) == METRIC_KEYS
    assert all(0.0 <= v <= 100.0 for v in metrics["test"].values())
    train, test = make_synthetic(800, 30, 120, n_test=200, labels_per_point=2.0, seed=2)
    most_frequent = np.argsort(-np.asarray(train.Y.sum(0)).ravel())[:5]
    popularity = evaluate(np.tile(most_frequent, (len(test), 1)), test.Y)["P@1"]
    assert metrics["test"]["P@1"] > popularity + 20
    assert len(metrics["epoch_seconds"]) == 8 and metrics["train_seconds"] == pytest.approx(sum(metrics["epoch_seconds"]))
    assert metrics["predict_ms_per_point"] > 0
    assert metrics["params"]["output_layer"] == 32 * 64 + 64
    assert metrics["params"]["total"] > metrics["params"]["output_layer"]
    config = json.loads((trained / "config.json").read_text())
    assert config["network"]["dim"] == 64 and "dim" not in config["params"] and config["params"]["head"] == "hrr"
    assert config["written_by"] == {"holoxmc": holoxmc.__version__, "torch": torch.__version__}


def test_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"holoxmc {holoxmc.__version__}"
    assert importlib.metadata.version("holoxmc") == holoxmc.__version__  # one source: pyproject reads it


def test_evaluate_reproduces_the_training_metrics(trained, toy, capsys):
    output = trained.parent / "eval.json"
    assert main(["evaluate", str(trained), str(toy), "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "P" in printed and "PSnDCG" in printed
    evaluated = json.loads(output.read_text())["metrics"]
    expected = json.loads((trained / "metrics.json").read_text())["test"]
    assert {k: evaluated[k] for k in expected} == expected


def test_predict_writes_one_line_per_point(trained, toy, tmp_path):
    output = tmp_path / "predictions.txt"
    assert main(["predict", str(trained), str(toy / "toy_test.txt"), "--top-k", "3", "--output", str(output)]) == 0
    lines = output.read_text().splitlines()
    assert len(lines) == 200
    parsed = [[pair.split(":") for pair in line.split()] for line in lines]
    assert all(len(row) == 3 for row in parsed)
    _, test = make_synthetic(800, 30, 120, n_test=200, labels_per_point=2.0, seed=2)
    indices, scores = XMCClassifier.load(trained).predict_topk(test.X, k=3)
    assert np.array_equal(np.array([[int(label) for label, _ in row] for row in parsed]), indices)
    np.testing.assert_allclose([[float(s) for _, s in row] for row in parsed], scores, rtol=1e-5)


def test_predict_with_a_threshold_writes_each_point_its_labels_above_it(trained, toy, tmp_path, capsys):
    output = tmp_path / "above.txt"
    assert main(["predict", str(trained), str(toy / "toy_test.txt"), "--threshold", "0.5", "--output", str(output)]) == 0
    lines = output.read_text().split("\n")[:-1]  # one line per point, an empty one where no label clears 0.5
    assert len(lines) == 200
    parsed = [[pair.split(":") for pair in line.split()] for line in lines]
    _, test = make_synthetic(800, 30, 120, n_test=200, labels_per_point=2.0, seed=2)
    found = XMCClassifier.load(trained).predict_above(test.X, 0.5)  # relative to each point's best label
    for row, (start, stop) in zip(parsed, zip(found.indptr[:-1], found.indptr[1:])):
        assert sorted(int(label) for label, _ in row) == found.indices[start:stop].tolist()
        scores = [float(score) for _, score in row]
        assert scores == sorted(scores, reverse=True) and all(score > 0.5 * scores[0] for score in scores)
    assert len({len(row) for row in parsed}) > 1
    assert main(["predict", str(trained), str(toy / "toy_test.txt"), "--threshold", "0.5", "--absolute",
                 "--output", str(output)]) == 0
    absolute = [[float(pair.split(":")[1]) for pair in line.split()] for line in output.read_text().split("\n")[:-1]]
    assert all(score > 0.5 for row in absolute for score in row)
    assert sum(map(len, absolute)) == XMCClassifier.load(trained).predict_above(test.X, 0.5, relative=False).nnz
    capsys.readouterr()
    assert main(["predict", str(trained), str(toy / "toy_test.txt"), "--threshold", "0.5", "--top-k", "3"]) == 2
    assert "give one" in capsys.readouterr().err


def test_evaluate_with_a_threshold_reports_the_f1_of_those_label_sets(trained, toy, tmp_path, capsys):
    output = tmp_path / "eval.json"
    assert main(["evaluate", str(trained), str(toy), "--threshold", "0.5", "--output", str(output)]) == 0
    assert "label sets > 0.5 x best: micro-F1" in capsys.readouterr().out
    report = json.loads(output.read_text())
    _, test = make_synthetic(800, 30, 120, n_test=200, labels_per_point=2.0, seed=2)
    expected = label_set_f1(XMCClassifier.load(trained).predict_above(test.X, 0.5), test.Y)
    assert report["label_sets"] == {"threshold": 0.5, "relative": True, **expected}
    trained_metrics = json.loads((trained / "metrics.json").read_text())["test"]
    assert {k: report["metrics"][k] for k in trained_metrics} == trained_metrics  # the ranking metrics as before


@pytest.mark.parametrize("flag, expected", [([], True), (["--no-sparse-updates"], False)])
def test_train_chooses_sparse_updates_for_wide_inputs_and_reports_it(tmp_path, flag, expected):
    train, test = make_synthetic(300, 10, 20_000, n_test=50, labels_per_point=2.0, seed=4)
    write_xml_repo(tmp_path / "wide" / "wide_train.txt", train.X, train.Y)
    write_xml_repo(tmp_path / "wide" / "wide_test.txt", test.X, test.Y)
    run_dir = tmp_path / "run"
    assert main(["train", str(tmp_path / "wide"), "--model", "fc", "--out", str(run_dir), *FAST, *flag]) == 0
    assert json.loads((run_dir / "metrics.json").read_text())["sparse_updates"] is expected


def test_dense_model_reports_its_output_layer(toy, tmp_path):
    run_dir = tmp_path / "fc"
    assert main(["train", str(toy), "--model", "fc", "--out", str(run_dir), *FAST]) == 0
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["params"]["output_layer"] == 32 * 30 + 30


def test_bfloat16_precision_reaches_the_saved_model(toy, tmp_path):
    run_dir = tmp_path / "bf16"
    assert main(["train", str(toy), "--model", "hrr-fc", "--out", str(run_dir), "--precision", "bfloat16", *FAST]) == 0
    assert json.loads((run_dir / "config.json").read_text())["params"]["precision"] == "bfloat16"
    clf = XMCClassifier.load(run_dir)
    assert clf.precision == "bfloat16" and clf.train_config().precision == "bfloat16"
    assert all(p.dtype == torch.float32 for p in clf.network_.parameters())


def test_linear_path_width_reaches_the_saved_model(toy, tmp_path):
    run_dir = tmp_path / "wide"
    assert main(["train", str(toy), "--model", "fc", "--out", str(run_dir), "--linear-width", "12", *FAST]) == 0
    assert json.loads((run_dir / "config.json").read_text())["params"]["linear_width"] == 12
    assert XMCClassifier.load(run_dir).network_.backbone.out_features == 32 + 12


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "no-such-dataset", "--out", "{tmp}/run"], "neither an existing path"),
        (["train", "{toy}", "--out", "{tmp}/busy"], "not empty"),
        (["train", "{toy}", "--out", "{tmp}/run", "--epochs", "0"], "--epochs: must be a positive integer"),
        (["evaluate", "{tmp}/missing", "{toy}"], "not a saved model"),
        (["predict", "{tmp}/missing", "{toy}"], "not a saved model"),
        (["predict", "{tmp}/missing", "{toy}", "--absolute"], "--absolute applies to --threshold"),
        (["train", "{toy}", "--model", "fc", "--out", "{tmp}/run", "--dim", "8"], "HRR/XR models only"),
        (["train", "{toy}", "--model", "fc", "--out", "{tmp}/run", "--ranking", "1"], "HRR models only"),
        (["train", "{toy}", "--model", "fc", "--out", "{tmp}/run", "--label-code", "circulant"], "HRR models only"),
        (["train", "{toy}", "--model", "fc", "--out", "{tmp}/run", "--no-code-cache"], "HRR models only"),
        (["train", "{toy}", "--model", "fc", "--out", "{tmp}/run", "--chunks", "3"], "--model solar only"),
        (["train", "{toy}", "--model", "hrr-fc", "--out", "{tmp}/run", "--label-bias"], "needs ranking > 0"),
        (["train", "{toy}", "--model", "hrr-fc", "--out", "{tmp}/run", "--device", "gpu"], "not a device name"),
        (["train", "{toy}", "--model", "hrr-fc", "--out", "{tmp}/run", "--sparse-updates", "--weight-decay", "0.01"], "no weight decay"),
        (["train", "{toy}", "--out", "{tmp}/run", "--n-models", "0"], "--n-models: must be a positive integer"),
        (["train", "{toy}", "--model", "hrr-fc", "--out", "{tmp}/run", "--workers", "2"], "--n-models above 1"),
        (["train", "{toy}", "--model", "fc", "--out", "{tmp}/run", "--ray-address", "auto"], "--n-models above 1"),
        (["train", "{toy}", "--model", "solar", "--out", "{tmp}/run", "--n-models", "2"], "['n_models'] do not apply to head 'solar'"),
        (["train", "{toy}", "--model", "solar", "--out", "{tmp}/run", "--linear-width", "8"], "['linear_width'] do not apply to head 'solar'"),
        (["train", "{toy}", "--out", "{tmp}/run", "--linear-width", "-1"], "non-negative integer"),
        (["train", "{toy}", "--model", "linear", "--out", "{tmp}/run", "--precision", "bfloat16"], "configures a network"),
        (["train", "{toy}", "--out", "{tmp}/run", "--seed", "-5"], "argument --seed: must be a non-negative integer"),
        (["train", "{toy}", "--model", "solar", "--out", "{tmp}/run", "--seed", "-1"], "--seed: must be"),
        (["train", "{toy}", "--out", "{tmp}/run", "--weight-decay", "inf"], "--weight-decay: must be a finite number"),
        (["train", "{toy}", "--out", "{tmp}/run", "--n-models", "2", "--workers", "0"], "--workers: must be a positive integer"),
        (["train", "{toy}", "--model", "solar", "--out", "{tmp}/run", "--workers", "0"], "--workers: must be a positive integer"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_no_debris(toy, tmp_path, capsys, argv, message):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("x")
    argv = [a.format(tmp=tmp_path, toy=toy) for a in argv]
    assert main(argv + (["--quiet"] if argv[0] == "train" else [])) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("holoxmc: error:") and message in err[0]
    assert not (tmp_path / "run").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]


def test_an_output_that_cannot_be_written_is_one_error_naming_it(trained, toy, tmp_path, capsys):
    """A folder, or a path under a file, as --output: exit 2, one line, nothing left behind."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("x")
    cases = [
        (["predict", str(trained), str(toy / "toy_test.txt"), "--output", str(tmp_path / "folder")],
         f"{tmp_path / 'folder'}: cannot write it (Is a directory)"),
        (["evaluate", str(trained), str(toy), "--output", str(tmp_path / "file.txt" / "x.json")],
         f"{tmp_path / 'file.txt' / 'x.json'}: cannot write it ({tmp_path / 'file.txt'} is a file, not a folder)"),
        (["evaluate", str(trained), str(toy), "--output", str(tmp_path / "file.txt" / "sub" / "x.json")],
         f"{tmp_path / 'file.txt' / 'sub' / 'x.json'}: cannot write it ({tmp_path / 'file.txt'} is a file"),
    ]
    run_files = sorted(p.name for p in trained.iterdir())
    for argv, message in cases:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"holoxmc: error: {message}")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["file.txt", "folder"]
    assert (tmp_path / "file.txt").read_text() == "x" and sorted(p.name for p in trained.iterdir()) == run_files


@pytest.mark.parametrize("error", [PermissionError(13, "Permission denied", "run/config.json"), OSError("no file")])
def test_an_os_error_naming_a_file_is_one_line_and_exit_2(monkeypatch, capsys, error):
    """E.g. a config.json its user may not read; an OSError naming no file is a bug: it propagates."""
    def failing(args):
        raise error

    monkeypatch.setattr("holoxmc.cli.train.run_predict", failing)
    if error.filename is None:
        with pytest.raises(OSError, match="no file"):
            main(["predict", "run", "data"])
    else:
        assert main(["predict", "run", "data"]) == 2
        assert capsys.readouterr().err == "holoxmc: error: run/config.json: Permission denied\n"


def test_a_config_without_params_is_one_error_naming_the_file(trained, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    for name in ("config.json", "model.safetensors"):
        (run / name).write_bytes((trained / name).read_bytes())
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({k: v for k, v in config.items() if k != "params"}))
    assert main(["predict", str(run), "synthetic"]) == 2
    assert capsys.readouterr().err == f"holoxmc: error: {run / 'config.json'}: missing key 'params'\n"


@pytest.mark.parametrize("folder, preset", [("Amazon-670K", (0.6, 2.6)), ("wikilshtc-325k", (0.5, 0.4)),
                                            ("AmazonCat-13K", (0.55, 1.5)), ("bibtex", (0.55, 1.5))])
def test_propensities_follow_the_name_of_a_dataset_folder_not_its_whole_path(tmp_path, folder, preset):
    (tmp_path / folder).mkdir()
    assert train_params(str(tmp_path / folder), "hrr-fc", {})["propensity"] == preset
    assert train_params(folder, "hrr-fc", {})["propensity"] == preset  # a registry name (or an unknown one)


def test_data_options_reach_the_loader_and_the_run_remembers_them(tmp_path, capsys):
    sizes = ["--data-option", "n_points=300", "--data-option", "n_test=60", "--data-option", "n_labels=25",
             "--data-option", "n_features=40", "--data-option", "labels_per_point=2.5"]
    run = tmp_path / "run"
    assert main(["train", "synthetic", "--model", "hrr-fc", "--dim", "32", "--out", str(run), *FAST, *sizes]) == 0
    data = json.loads((run / "metrics.json").read_text())["data"]
    assert (data["train"], data["test"], data["labels"], data["features"]) == (300, 60, 25, 40)
    assert data["options"]["labels_per_point"] == 2.5 and data["source"] == "synthetic"
    output = tmp_path / "eval.json"
    assert main(["evaluate", str(run), "synthetic", "--output", str(output)]) == 0  # the run's own options
    expected = json.loads((run / "metrics.json").read_text())["test"]
    assert {k: v for k, v in json.loads(output.read_text())["metrics"].items() if k in expected} == expected
    capsys.readouterr()
    for argv, message in [
        (["evaluate", str(run), "synthetic", "--data-option", "n_features=41"], "has 41 features, expected 40"),
        (["train", "synthetic", "--out", str(tmp_path / "other"), "--data-option", "colour=red"],
         "options ['colour'] do not apply to synthetic data"),
        (["train", "synthetic", "--out", str(tmp_path / "other"), "--data-option", "n_points"], "takes KEY=VALUE"),
    ]:
        assert main(argv) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize("model", ["hrr-fc", "solar"])
def test_a_set_with_fewer_labels_than_the_cut_offs_trains_and_reports_p_at_5(tmp_path, model):
    train, test = make_synthetic(300, 4, 30, n_test=40, labels_per_point=1.5, seed=5)
    folder = tmp_path / "four"
    write_xml_repo(folder / "four_train.txt", train.X, train.Y)
    write_xml_repo(folder / "four_test.txt", test.X, test.Y)
    assert main(["train", str(folder), "--model", model, "--out", str(tmp_path / "run"), "--epochs", "2", "--quiet"]) == 0
    reported = json.loads((tmp_path / "run" / "metrics.json").read_text())["test"]
    assert reported["P@5"] == pytest.approx(reported["P@4"] * 4 / 5)  # rank 5 predicts nothing
    predictions = tmp_path / "predictions.txt"
    assert main(["predict", str(tmp_path / "run"), str(folder / "four_test.txt"), "--output", str(predictions)]) == 0
    assert {len(line.split()) for line in predictions.read_text().splitlines()} == {4}  # the default top-5 is all 4


def test_headerless_files_are_read_at_the_widths_of_train_and_of_the_model(tmp_path, capsys):
    """svmlight files carry no widths: a test split without train's largest feature and
    label ids still trains, evaluates and predicts; an id beyond the model's is one error
    naming the file and line."""
    train, test = make_synthetic(300, 12, 40, n_test=20, labels_per_point=2.0, seed=3)
    folder = tmp_path / "plain"
    folder.mkdir()
    for name, X, Y in (("train", train.X, train.Y), ("test", test.X[:, :30], test.Y[:, :9])):  # test: smaller ids only
        lines = [",".join(map(str, Y[i].indices)) + " " + " ".join(f"{j}:{v:.6g}" for j, v in zip(X[i].indices, X[i].data))
                 for i in range(X.shape[0])]
        (folder / f"plain_{name}.txt").write_text("\n".join(lines) + "\n")
    run = tmp_path / "run"
    assert main(["train", str(folder), "--model", "hrr-fc", "--dim", "32", "--out", str(run), *FAST]) == 0
    assert json.loads((run / "metrics.json").read_text())["data"]["test"] == 20
    assert main(["evaluate", str(run), str(folder)]) == 0
    point = folder / "point.txt"
    point.write_text("0:1 3:0.5\n")  # no label, features far below D
    assert main(["predict", str(run), str(point), "--top-k", "2"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()[-1].split()) == 2
    point.write_text("0:1\n2:1 40:1\n")
    assert main(["predict", str(run), str(point)]) == 2
    assert "point.txt:2: feature index 40 >= D=40, the width this file is read at" in capsys.readouterr().err
    point.write_text("")
    assert main(["predict", str(run), str(point)]) == 2
    assert capsys.readouterr().err == f"holoxmc: error: {point}: empty file\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_cuda_without_cuda_is_one_clear_error(toy, trained, tmp_path, capsys):
    assert main(["train", str(toy), "--model", "hrr-fc", "--out", str(tmp_path / "run"), "--device", "cuda", "--quiet"]) == 2
    assert not (tmp_path / "run").exists()
    assert main(["evaluate", str(trained), str(toy), "--device", "cuda:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all("CUDA is not available here" in line for line in err)


def test_killed_cli_run_resumes_to_the_uninterrupted_metrics(toy, tmp_path, kill_during_epochs):
    argv = [str(toy), "--model", "hrr-fc", "--dim", "64", "--hidden", "64", "--epochs", "12",
            "--batch-size", "32", "--lr", "0.003", "--seed", "5", "--quiet"]
    assert main(["train", *argv, "--out", str(tmp_path / "reference")]) == 0

    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "holoxmc", "train", *argv, "--out", str(killed)]
    assert 2 <= kill_during_epochs(command, killed) < 12

    assert main(["train", *argv, "--out", str(killed), "--resume"]) == 0
    assert sorted(p.name for p in killed.iterdir()) == RUN_FILES
    resumed = json.loads((killed / "metrics.json").read_text())
    reference = json.loads((tmp_path / "reference" / "metrics.json").read_text())
    assert resumed["test"] == reference["test"]
    assert resumed["best_epoch"] == reference["best_epoch"]
    assert len(resumed["epoch_seconds"]) == 12
    same = XMCClassifier.load(killed).network_.state_dict()
    for name, tensor in XMCClassifier.load(tmp_path / "reference").network_.state_dict().items():
        assert tensor.equal(same[name]), name


def test_solar_model_trains_through_the_same_cli(toy, tmp_path):
    run_dir = tmp_path / "solar"
    argv = ["train", str(toy), "--model", "solar", "--out", str(run_dir), "--chunks", "3", "--buckets", "8",
            "--hidden", "32", "--epochs", "6", "--batch-size", "32", "--lr", "0.01", "--quiet"]
    assert main(argv) == 0
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert set(metrics["test"]) == METRIC_KEYS
    assert 1 <= metrics["candidates_per_point"] <= 30 and metrics["predict_ms_per_point"] > 0
    assert metrics["params"]["output_layer"] == 3 * (32 * 8 + 8)
    assert len(metrics["epoch_seconds"]) == 6
    assert {"config.json", "model.safetensors", "metrics.json", "solar.json"} <= {p.name for p in run_dir.iterdir()}
    assert sorted(p.name for p in run_dir.glob("chunk_*")) == ["chunk_000", "chunk_001", "chunk_002"]
    output = tmp_path / "eval.json"
    assert main(["evaluate", str(run_dir), str(toy), "--output", str(output)]) == 0
    assert json.loads(output.read_text())["metrics"]["P@1"] == metrics["test"]["P@1"]


def test_solar_predictions_list_only_the_candidates_it_found(tmp_path):
    """One chunk of 200 buckets over 400 labels: the 10 best buckets hold about 20 labels,
    fewer than the 40 asked for, and the unfilled ranks are left out of the lines."""
    train, test = make_synthetic(400, 400, 60, n_test=30, labels_per_point=1.5, seed=6)
    folder = tmp_path / "wide"
    write_xml_repo(folder / "wide_train.txt", train.X, train.Y)
    write_xml_repo(folder / "wide_test.txt", test.X, test.Y)
    run = tmp_path / "run"
    assert main(["train", str(folder), "--model", "solar", "--chunks", "1", "--buckets", "200", "--epochs", "1",
                 "--out", str(run), "--quiet"]) == 0
    predictions = tmp_path / "top40.txt"
    assert main(["predict", str(run), str(folder / "wide_test.txt"), "--top-k", "40", "--output", str(predictions)]) == 0
    rows = [[pair.rsplit(":", 1) for pair in line.split()] for line in predictions.read_text().splitlines()]
    assert len(rows) == 30 and all(1 <= len(row) < 40 for row in rows)
    assert all(0 <= int(label) < 400 and float(score) > float("-inf") for row in rows for label, score in row)


@pytest.mark.parametrize("model, head", [("hrr-fc", "hrr"), ("fc", "dense")])
def test_a_dataset_preset_applies_only_when_named(model, head, tmp_path):
    """`holoxmc train bibtex --model M` gets the library defaults, as `XMCClassifier()` does;
    `--preset bibtex` the tuned preset, under any option given."""
    preset = DATASET_PRESETS["bibtex"][head]
    folder = tmp_path / "Bibtex"
    folder.mkdir()
    for data in ("bibtex", "BibTeX", str(folder), "my-own-set"):
        params = train_params(data, model, {"epochs": None, "seed": None})
        assert params == {"head": head, "backbone": "fc", "propensity": (0.55, 1.5)}
    for name in ("bibtex", "BibTeX"):
        params = train_params("my-own-set", model, {}, preset=name)
        assert {key: params[key] for key in preset} == {key: tuple(v) if key == "hidden" else v
                                                         for key, v in preset.items()}
    assert train_params("bibtex", model, {"n_models": 2, "workers": 2})["workers"] == 2  # an ensemble's networks
    overridden = train_params("bibtex", model, {"epochs": 3, "hidden": [64]}, preset="bibtex")
    assert (overridden["epochs"], overridden["hidden"], overridden["refit"]) == (3, (64,), preset["refit"])
    with pytest.raises(InputError, match="unknown preset 'wiki'; choose from"):
        train_params("bibtex", model, {}, preset="wiki")


def test_hrr_head_options_reach_the_saved_model(toy, tmp_path):
    run_dir = tmp_path / "ranked"
    argv = ["train", str(toy), "--model", "hrr-fc", "--out", str(run_dir), "--dim", "64",
            "--ranking", "0.5", "--loss", "abs", "--learn-pm", *FAST]
    assert main(argv) == 0
    params = json.loads((run_dir / "config.json").read_text())["params"]
    assert params["head_options"] == {"ranking": 0.5, "loss": "abs", "learn_pm": True}
    head = XMCClassifier.load(run_dir).network_.head
    assert (head.ranking, head.loss_kind, head.learn_pm) == (0.5, "abs", True)


def test_label_bias_is_trained_saved_and_loaded(toy, tmp_path):
    run_dir = tmp_path / "biased"
    argv = ["train", str(toy), "--model", "hrr-fc", "--out", str(run_dir), "--dim", "64",
            "--ranking", "1", "--label-bias", *FAST]
    assert main(argv) == 0
    assert json.loads((run_dir / "config.json").read_text())["params"]["head_options"] == {
        "ranking": 1.0, "label_bias": True}
    clf = XMCClassifier.load(run_dir)
    assert clf.network_.head.label_bias.abs().max() > 0  # trained, saved and loaded


def test_circulant_label_code_is_trained_saved_and_reloaded_from_its_seed(toy, tmp_path):
    run_dir = tmp_path / "circulant"
    argv = ["train", str(toy), "--model", "hrr-fc", "--out", str(run_dir), "--dim", "16",  # 30 labels: 2 groups
            "--ranking", "1", "--label-bias", "--label-code", "circulant", "--no-code-cache", *FAST]
    assert main(argv) == 0
    assert json.loads((run_dir / "config.json").read_text())["params"]["head_options"] == {
        "ranking": 1.0, "label_bias": True, "code": "circulant", "cache_codes": False}
    head = XMCClassifier.load(run_dir).network_.head
    assert head.code.circulant and head.code.n_groups == 2 and not head.prebound
    output = tmp_path / "eval.json"
    assert main(["evaluate", str(run_dir), str(toy), "--output", str(output)]) == 0
    metrics = json.loads((run_dir / "metrics.json").read_text())["test"]
    evaluated = json.loads(output.read_text())["metrics"]
    assert {name: evaluated[name] for name in metrics} == metrics  # the reloaded code decodes the same


def test_refit_run_leaves_only_its_three_files(toy, tmp_path):
    run_dir = tmp_path / "refit"
    assert main(["train", str(toy), "--model", "hrr-fc", "--out", str(run_dir), "--dim", "64", "--refit", *FAST]) == 0
    assert sorted(p.name for p in run_dir.iterdir()) == RUN_FILES
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert len(metrics["epoch_seconds"]) == 8 + metrics["best_epoch"]
    assert json.loads((run_dir / "config.json").read_text())["params"]["refit"] is True


def test_ensemble_run_is_killed_in_its_second_member_and_resumes_to_the_same_metrics(toy, tmp_path, kill_during_epochs):
    argv = [str(toy), "--model", "hrr-fc", "--dim", "64", "--hidden", "64", "--epochs", "10", "--batch-size", "32",
            "--lr", "0.003", "--n-models", "3", "--refit", "--quiet"]
    assert main(["train", *argv, "--out", str(tmp_path / "reference")]) == 0
    reference = json.loads((tmp_path / "reference" / "metrics.json").read_text())
    assert len(reference["best_epoch"]) == 3 and reference["sparse_updates"] == [False] * 3
    assert len(reference["epoch_seconds"]) == 3 * 10 + sum(reference["best_epoch"])
    config = json.loads((tmp_path / "reference" / "config.json").read_text())
    assert config["params"]["n_models"] == 3 and [m["seed"] for m in config["network"]["members"]] == [0, 100, 200]

    killed = tmp_path / "killed"
    command = [sys.executable, "-m", "holoxmc", "train", *argv, "--out", str(killed)]
    assert 2 <= kill_during_epochs(command, killed / "member-1") < 10
    assert main(["train", *argv, "--out", str(killed), "--resume"]) == 0
    assert sorted(p.name for p in killed.iterdir()) == RUN_FILES
    resumed = json.loads((killed / "metrics.json").read_text())
    assert (resumed["test"], resumed["best_epoch"]) == (reference["test"], reference["best_epoch"])

    output = tmp_path / "eval.json"
    assert main(["evaluate", str(killed), str(toy), "--output", str(output)]) == 0
    assert json.loads(output.read_text())["metrics"]["P@1"] == reference["test"]["P@1"]
    lines = tmp_path / "top.txt"
    assert main(["predict", str(killed), str(toy / "toy_test.txt"), "--top-k", "3", "--output", str(lines)]) == 0
    _, test = make_synthetic(800, 30, 120, n_test=200, labels_per_point=2.0, seed=2)
    indices, _ = XMCClassifier.load(killed).predict_topk(test.X, k=3)
    assert [[int(pair.split(":")[0]) for pair in line.split()] for line in lines.read_text().splitlines()] == indices.tolist()

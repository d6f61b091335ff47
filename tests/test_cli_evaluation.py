"""Honest evaluation from the command line: one data file is never scored on its own rows,
svmlight folders pair by name, and `holoxmc train` with no flags is `XMCClassifier()`."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from holoxmc.cli import main
from holoxmc.data import load, make_synthetic
from holoxmc.data.dataset import holdout_split
from holoxmc.estimator import XMCClassifier

SMALL = ["--model", "hrr-fc", "--hidden", "16", "--epochs", "2", "--quiet"]


def _write_svm(path: Path, dataset) -> Path:
    text = io.BytesIO()
    dump_svmlight_file(dataset.X, dataset.Y, text, multilabel=True, zero_based=True)
    path.write_bytes(gzip.compress(text.getvalue()) if path.suffix == ".gz" else text.getvalue())
    return path


@pytest.fixture(scope="module")
def svm_pair(tmp_path_factory) -> tuple[Path, Path]:
    """``my_train.svm`` (240 rows) and ``my_test.svm`` (60 rows), D = 40, L = 12."""
    train, test = make_synthetic(240, 12, 40, n_test=60, seed=3)
    folder = tmp_path_factory.mktemp("svm")
    return _write_svm(folder / "my_train.svm", train), _write_svm(folder / "my_test.svm", test)


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_one_file_without_test_rows_is_refused_before_training(svm_pair, tmp_path, capsys):
    code, output = _run(["train", str(svm_pair[0]), "--out", str(tmp_path / "r"), *SMALL], capsys)
    assert code == 2
    assert "never scored on the rows it trained on" in output and "--test FILE" in output
    assert "--test-fraction" in output and not (tmp_path / "r").exists()


def test_a_test_file_is_scored_and_recorded(svm_pair, tmp_path, capsys):
    run_dir = tmp_path / "r"
    code, output = _run(["train", str(svm_pair[0]), "--test", str(svm_pair[1]), "--out", str(run_dir), *SMALL],
                        capsys)
    assert code == 0, output
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["evaluation"] == {"split": "test file", "file": str(svm_pair[1])}
    assert (metrics["data"]["train"], metrics["data"]["test"]) == (240, 60)
    assert f"(test file {svm_pair[1]})" in output


def test_a_test_fraction_holds_rows_out_by_the_seed(svm_pair, tmp_path, capsys):
    run_dir = tmp_path / "r"
    argv = ["train", str(svm_pair[0]), "--test-fraction", "0.25", "--seed", "4", "--out", str(run_dir), *SMALL]
    code, output = _run(argv, capsys)
    assert code == 0, output
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["evaluation"] == {"split": "test fraction", "fraction": 0.25, "seed": 4}
    assert (metrics["data"]["train"], metrics["data"]["test"]) == (180, 60)
    whole = load(svm_pair[0])
    train, test = holdout_split(whole, 0.25, seed=4)
    rows = {row.tobytes() for row in whole.X.toarray()}
    assert len(rows) == len(whole)  # distinct rows: the split can be checked row by row
    assert not {r.tobytes() for r in train.X.toarray()} & {r.tobytes() for r in test.X.toarray()}
    again = holdout_split(whole, 0.25, seed=4)[1]
    assert (again.X != test.X).nnz == 0 and (holdout_split(whole, 0.25, seed=5)[1].X != test.X).nnz > 0


@pytest.mark.parametrize("extra, message", [
    (["--test-fraction", "1.5"], "must be in (0, 1)"),
    (["--test-fraction", "0.25", "--test", "x.svm"], "give one"),
])
def test_bad_test_options_are_one_error(svm_pair, tmp_path, capsys, extra, message):
    code, output = _run(["train", str(svm_pair[0]), *extra, "--out", str(tmp_path / "r"), *SMALL], capsys)
    assert code == 2 and message in output and "Traceback" not in output


def test_a_test_fraction_of_data_with_its_own_test_split_is_refused(svm_pair, tmp_path, capsys):
    code, output = _run(["train", str(svm_pair[0].parent), "--test-fraction", "0.2", "--out", str(tmp_path / "r"),
                         *SMALL], capsys)
    assert code == 2 and "has its own test split" in output


def test_a_test_file_wider_than_training_is_one_error_naming_its_line(svm_pair, tmp_path, capsys):
    wide = make_synthetic(20, 12, 80, n_test=5, seed=1)[0]
    test_file = _write_svm(tmp_path / "wide.svm", wide)
    code, output = _run(["train", str(svm_pair[0]), "--test", str(test_file), "--out", str(tmp_path / "r"),
                         *SMALL], capsys)
    assert code == 2 and f"{test_file}:1: feature index" in output and "width this file is read at" in output


@pytest.mark.parametrize("suffix", [".svm", ".svmlight", ".libsvm", ".svm.gz", ".txt"])
def test_a_folder_pairs_svmlight_files_by_name(svm_pair, tmp_path, suffix):
    folder = tmp_path / "mine"
    folder.mkdir()
    train, test = load(svm_pair[0]), load(svm_pair[1], widths=(40, 12))
    _write_svm(folder / f"my_train{suffix}", train)
    _write_svm(folder / f"my_test{suffix}", test)
    assert (len(load(folder, "train")), len(load(folder, "test", widths=(40, 12)))) == (240, 60)


def test_train_with_no_flags_is_the_estimator_with_no_arguments(svm_pair, tmp_path, capsys):
    """Same model, same settings, same data: the CLI's predictions are the API's."""
    run_dir = tmp_path / "r"
    code, output = _run(["train", str(svm_pair[0].parent), "--out", str(run_dir), "--quiet"], capsys)
    assert code == 0, output
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["settings"]["preset"] is None and metrics["settings"]["model"] == "auto"
    train, test = load(svm_pair[0].parent, "train"), load(svm_pair[0].parent, "test", widths=(40, 12))
    api = XMCClassifier(progress=False).fit(train.X, train.Y)
    cli = XMCClassifier.load(run_dir)  # saved as the model auto chose, with the candidates tried
    assert api.head == "auto" and cli.head == cli.head_ == api.head_
    assert [trial.model for trial in cli.selection_] == [trial.model for trial in api.selection_]
    ignored = ("head", "progress", "propensity")
    assert {key: value for key, value in cli.get_params().items() if key not in ignored} == {
        key: value for key, value in api.get_params().items() if key not in ignored}
    np.testing.assert_array_equal(cli.predict_topk(test.X, k=5)[0], api.predict_topk(test.X, k=5)[0])
    assert metrics["test"]["P@1"] == pytest.approx(api.evaluate(test.X, test.Y)["P@1"])

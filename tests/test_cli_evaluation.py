"""``holoxmc train``'s test set (issue 31): a single file never scores its own training rows;
``--test FILE`` / ``--test-fraction F``; the folder pairing by suffix; ``evaluate`` says what it scored."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from holoxmc.cli import main
from holoxmc.data import load
from holoxmc.data.synthetic import make_synthetic

FAST = ["--model", "linear", "--C", "1", "--quiet"]


def _write_svm(path: Path, X: sp.spmatrix, Y: sp.spmatrix) -> Path:
    """``X``/``Y`` as a multilabel svmlight file (gzipped when the name ends with .gz)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wb") as handle:
        dump_svmlight_file(sp.csr_matrix(X), sp.csr_matrix(Y), handle, multilabel=True, zero_based=True)
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    """``my_train.svm`` (120 rows) and ``my_test.svm`` (40 rows), D = 25, L = 6; every
    feature and label occurs in the train file."""
    folder = tmp_path_factory.mktemp("own")
    train, test = make_synthetic(120, 6, 25, n_test=40, labels_per_point=1.5, seed=3)
    X, Y = train.X.tolil(), train.Y.tolil()
    X[0, :] = 1.0
    Y[0, :] = 1
    train.X, train.Y = X.tocsr(), Y.tocsr()
    return _write_svm(folder / "my_train.svm", train.X, train.Y), _write_svm(folder / "my_test.svm", test.X, test.Y)


def _metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


def test_single_file_without_a_test_set_is_refused(pair, tmp_path, capsys):
    assert main(["train", str(pair[0]), "--out", str(tmp_path / "run"), *FAST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--test FILE" in err[0] and "--test-fraction" in err[0]
    assert not (tmp_path / "run").exists()


def test_test_file_is_scored_and_recorded(pair, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", str(pair[0]), "--test", str(pair[1]), "--out", str(run), *FAST]) == 0
    metrics = _metrics(run)
    assert metrics["evaluation"] == {"split": "test file", "file": str(pair[1])}
    assert metrics["data"]["train"] == 120 and metrics["data"]["test"] == 40
    assert f"test file {pair[1]}" in capsys.readouterr().out


def test_test_fraction_holds_out_seeded_rows(pair, tmp_path):
    runs = [tmp_path / name for name in ("a", "b")]
    for run in runs:
        assert main(["train", str(pair[0]), "--test-fraction", "0.25", "--seed", "5", "--out", str(run), *FAST]) == 0
    metrics = [_metrics(run) for run in runs]
    assert metrics[0]["evaluation"] == {"split": "test fraction", "fraction": 0.25, "seed": 5}
    assert metrics[0]["data"]["train"] == 90 and metrics[0]["data"]["test"] == 30
    assert metrics[0]["test"] == metrics[1]["test"]  # the same seed holds out the same rows


@pytest.mark.parametrize("flags, message", [
    (["--test-fraction", "0"], "between 0 and 1"),
    (["--test-fraction", "1"], "between 0 and 1"),
    (["--test-fraction", "1.5"], "between 0 and 1"),
    (["--test-fraction", "0.999"], "leaves no training rows"),
    (["--test", "{test}", "--test-fraction", "0.2"], "give one"),
])
def test_hostile_evaluation_flags(pair, tmp_path, capsys, flags, message):
    flags = [flag.format(test=pair[1]) for flag in flags]
    assert main(["train", str(pair[0]), *flags, "--out", str(tmp_path / "run"), *FAST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "run").exists()


def test_test_file_wider_than_train_is_one_clear_error(pair, tmp_path, capsys):
    """A test file with a feature (or label) id beyond the training widths: an error naming
    the file and line, before any training."""
    X, Y = sp.lil_matrix((2, 40)), sp.lil_matrix((2, 6))
    X[1, 30] = 1.0
    Y[0, 0] = Y[1, 1] = 1
    wide = _write_svm(tmp_path / "wide.svm", X, Y)
    assert main(["train", str(pair[0]), "--test", str(wide), "--out", str(tmp_path / "run"), *FAST]) == 2
    err = capsys.readouterr().err
    assert "wide.svm:2" in err and "D=25" in err
    Y = sp.lil_matrix((1, 9))
    Y[0, 8] = 1
    more_labels = _write_svm(tmp_path / "labels.svm", sp.csr_matrix((1, 25)), Y)
    assert main(["train", str(pair[0]), "--test", str(more_labels), "--out", str(tmp_path / "run"), *FAST]) == 2
    assert "labels.svm:1" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("names", [("X_train.svm", "X_test.svm"), ("train.libsvm.gz", "test.libsvm.gz"),
                                   ("a_train.svmlight", "a_test.svmlight"), ("train.txt", "test.txt")])
def test_folder_pairs_by_suffix(tmp_path, names):
    train, test = make_synthetic(60, 5, 20, n_test=15, seed=1)
    for name, data in zip(names, (train, test)):
        _write_svm(tmp_path / "set" / name, data.X, data.Y)
    loaded = [load(tmp_path / "set", split) for split in ("train", "test")]
    assert [len(d) for d in loaded] == [60, 15]
    assert (loaded[0].X != train.X).nnz == 0 and (loaded[1].Y != test.Y).nnz == 0


def test_evaluate_says_what_it_scored(pair, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", str(pair[0]), "--test", str(pair[1]), "--out", str(run), *FAST]) == 0
    capsys.readouterr()
    output = tmp_path / "e.json"
    assert main(["evaluate", str(run), str(pair[1]), "--output", str(output)]) == 0
    assert f"(file {pair[1]})" in capsys.readouterr().out
    assert json.loads(output.read_text())["evaluation"] == {"split": "file", "file": str(pair[1])}


def test_train_help_says_how_folders_pair(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert "X_train.svm" in out and "--test-fraction" in out and ".libsvm" in out

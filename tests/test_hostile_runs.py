"""Run folders, processes, signals and the command line under hostile use: foreign and
busy run folders, empty inputs, read-only outputs, resumes with other options, kills,
Ctrl-C, odd label names, and what ``--help`` imports."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from holoxmc.cli import main
from holoxmc.cli.train import MODEL_NAMES, format_prediction, parse_prediction
from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.cli.rundir import MARKER, run_lock

SRC = str(Path(__file__).resolve().parents[1] / "src")
FAST = ["--model", "fc", "--hidden", "8", "--dropout", "0", "--epochs", "2", "--batch-size", "50", "-q"]


def _cli(*args: str, **kwargs) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=SRC)
    return subprocess.Popen([sys.executable, "-m", "holoxmc", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def _one_error(capsys, text: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("holoxmc: error:") and text in err[0], err
    return err[0]


# ------------------------------------------------------------------ run folders
def test_resume_into_a_folder_holoxmc_did_not_make_leaves_it_alone(tiny, tmp_path, capsys):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "config.json").write_text("{}")
    for extra, message in ((["--resume"], "not a holoxmc run folder"), ([], "not empty")):
        assert main(["train", str(tiny), "--out", str(project), *FAST, *extra]) == 2
        _one_error(capsys, message)
    assert (project / "config.json").read_text() == "{}"
    assert sorted(p.name for p in project.iterdir()) == ["config.json"]


def test_a_run_folder_gets_its_marker_and_history(tiny, tmp_path, capsys):
    run = tmp_path / "R"
    assert main(["train", str(tiny), "--out", str(run), *FAST]) == 0
    names = {p.name for p in run.iterdir()}
    assert {MARKER, "config.json", "model.safetensors", "history.csv", "metrics.json"} == names
    lines = (run / "history.csv").read_text().splitlines()
    assert lines[0].split(",")[:5] == ["member", "phase", "epoch", "loss", "seconds"] and "val_P@1" in lines[0]
    assert [line.split(",")[2] for line in lines[1:]] == ["1", "2"]
    assert json.loads((run / MARKER).read_text())["format"].startswith("holoxmc-run")


def test_resume_with_another_model_or_dim_is_the_configuration_error(tiny, tmp_path, capsys, monkeypatch):
    run = tmp_path / "R"
    with monkeypatch.context() as patch:  # the run stops after training, its checkpoint left: an unfinished run
        patch.setattr("holoxmc.estimator.XMCClassifier.save", lambda *a: (_ for _ in ()).throw(InputError("stop")))
        assert main(["train", str(tiny), "--out", str(run), *FAST]) == 2
    checkpoint = (run / "checkpoint.json").read_text()
    for other in (["--model", "hrr-fc"], ["--model", "hrr-fc", "--dim", "16"], ["--hidden", "12"]):
        capsys.readouterr()
        assert main(["train", str(tiny), "--out", str(run), *FAST, *other, "--resume"]) == 2
        _one_error(capsys, "another configuration")
    assert (run / "checkpoint.json").read_text() == checkpoint and not (run / "config.json").exists()


def test_the_trainer_refuses_a_checkpoint_of_another_network_shape(tmp_path):
    from holoxmc.backbones import build_network
    from holoxmc.train import TrainConfig, Trainer

    train, _ = make_synthetic(100, 8, 20, n_test=10, seed=1)
    config = TrainConfig(epochs=1, batch_size=50, progress=False)
    Trainer(config).fit(build_network("fc", "dense", n_features=20, n_labels=8, hidden=[8]), train.X, train.Y,
                        run_dir=tmp_path)
    wider = build_network("fc", "dense", n_features=20, n_labels=8, hidden=[12])
    with pytest.raises(InputError, match="another configuration"):
        Trainer(config).fit(wider, train.X, train.Y, run_dir=tmp_path, resume=True)


def test_a_second_writer_is_refused_naming_the_holder(tiny, tmp_path, capsys):
    run = tmp_path / "R"
    run.mkdir()
    with run_lock(run):
        assert main(["train", str(tiny), "--out", str(run), *FAST, "--resume"]) == 2
        _one_error(capsys, f"pid {os.getpid()}")
    assert not (run / "metrics.json").exists()


def test_two_trainings_at_once_one_refused_with_exit_2(tiny, tmp_path):
    run = tmp_path / "R"
    first = _cli("train", str(tiny), "--out", str(run), *FAST[:-3], "--epochs", "300", "-q")
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (run / "checkpoint.json").exists() and first.poll() is None:
            time.sleep(0.1)
        assert first.poll() is None, first.communicate()
        second = _cli("train", str(tiny), "--out", str(run), *FAST[:-3], "--epochs", "300", "-q", "--resume")
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2 and f"pid {first.pid}" in err and "Traceback" not in err
    finally:
        first.kill()
        first.communicate()


def test_inputs_are_checked_before_any_work(tiny, tmp_path, capsys):
    empty_test = tmp_path / "emptytest"
    empty_test.mkdir()
    (empty_test / "emptytest_train.txt").write_text((tiny / "tiny_train.txt").read_text())
    (empty_test / "emptytest_test.txt").write_text("0 30 10\n")
    assert main(["train", str(empty_test), "--out", str(tmp_path / "R"), *FAST]) == 2
    capsys.readouterr()
    assert not (tmp_path / "R").exists()
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "nowhere")
    assert main(["train", str(tiny), "--out", str(dangling), *FAST]) == 2
    _one_error(capsys, "does not exist")
    assert not (tmp_path / "nowhere").exists()


def test_a_read_only_out_folder_is_refused_before_training(tiny, tmp_path, capsys, monkeypatch):
    import holoxmc.cli.rundir

    locked = tmp_path / "locked"
    locked.mkdir()
    real_access = os.access
    monkeypatch.setattr(holoxmc.cli.rundir.os, "access",
                        lambda path, mode: Path(path) != locked and real_access(path, mode))
    monkeypatch.setattr("holoxmc.data.load", lambda *a, **k: pytest.fail("data was read before the check"))
    assert main(["train", str(tiny), "--out", str(locked / "R"), *FAST]) == 2
    _one_error(capsys, "not a writable folder")


def test_evaluate_checks_where_it_writes_before_computing(tiny, tmp_path, capsys, monkeypatch):
    run = tmp_path / "R"
    assert main(["train", str(tiny), "--out", str(run), *FAST]) == 0
    capsys.readouterr()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != run and real_access(path, mode))
    monkeypatch.setattr("holoxmc.estimator.XMCClassifier.load", lambda *a, **k: pytest.fail("computed first"))
    assert main(["evaluate", str(run), str(tiny)]) == 2
    _one_error(capsys, "read-only")


def test_a_diverging_run_is_one_error_and_leaves_no_model(tiny, tmp_path, capsys):
    run = tmp_path / "R"
    assert main(["train", str(tiny), "--out", str(run), *FAST, "--lr", "1e38", "--schedule", "none"]) == 2
    _one_error(capsys, "diverged")
    assert not (run / "model.safetensors").exists() and not (run / "metrics.json").exists()


# ------------------------------------------------------------------ the command line
@pytest.mark.parametrize("argv, text", [
    (["demo", "--epochs", "-1"], "--epochs: must be a positive integer"),
    (["train", "x", "--out", "y", "--lr", "inf"], "--lr: must be a finite number"),
    (["train", "x", "--out", "y", "--epochs", "two"], "not an integer"),
    (["train", "x", "--out", "y", "--model", "nope"], "invalid choice"),
])
def test_wrong_arguments_are_one_line_before_any_output(argv, text, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    _one_error(type("C", (), {"readouterr": lambda self: captured})(), text)


def test_model_names_are_the_estimators():
    from holoxmc.estimator import MODELS

    assert tuple(sorted(MODELS)) == MODEL_NAMES


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"], ["demo", "--help"]])
def test_help_does_not_import_torch(argv):
    code = ("import sys\nfrom holoxmc.cli import main\ntry:\n    main(%r)\nexcept SystemExit:\n    pass\n"
            "print('torch' in sys.modules)" % argv)
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=SRC), capture_output=True,
                         text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"


def test_ctrl_c_during_start_up_is_one_line_and_exit_130(monkeypatch, capsys):
    import holoxmc.cli

    def interrupted(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(holoxmc.cli.importlib, "import_module", interrupted)
    assert main(["train", "--help"]) == 130
    assert capsys.readouterr().err == "holoxmc: interrupted\n"


def test_sigterm_is_one_line_exit_143_and_releases_the_folder(tiny, tmp_path):
    run = tmp_path / "R"
    process = _cli("train", str(tiny), "--out", str(run), *FAST[:-3], "--epochs", "300")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (run / "checkpoint.json").exists() and process.poll() is None:
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143 and err.strip().splitlines()[-1] == "holoxmc: terminated", err
    assert "Traceback" not in err
    with run_lock(run):
        pass  # the lock is free again


def test_without_a_terminal_training_logs_one_line_per_epoch_and_quiet_none(tiny, tmp_path):
    loud = _cli("train", str(tiny), "--out", str(tmp_path / "A"), *FAST[:-1])
    _, err = loud.communicate(timeout=300)
    assert loud.returncode == 0, err
    assert [line.split(":")[0] for line in err.splitlines()] == ["epoch 1/2", "epoch 2/2"]
    quiet = _cli("train", str(tiny), "--out", str(tmp_path / "B"), *FAST)
    _, err = quiet.communicate(timeout=300)
    assert quiet.returncode == 0 and err == ""


def test_plot_draws_the_history(tiny, tmp_path):
    pytest.importorskip("matplotlib")
    assert main(["train", str(tiny), "--out", str(tmp_path / "R"), *FAST, "--plot"]) == 0
    assert (tmp_path / "R" / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("model", ["linear", "rerank"])
def test_plot_draws_models_whose_history_has_no_epochs(tiny, tmp_path, model):
    pytest.importorskip("matplotlib")
    assert main(["train", str(tiny), "--out", str(tmp_path / "R"), "--model", model, "-q", "--plot"]) == 0
    assert (tmp_path / "R" / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_history_skips_rows_without_an_epoch(tmp_path):
    pytest.importorskip("matplotlib")
    from holoxmc.cli.train import plot_history, write_history

    rows = [{"member": 0, "phase": "select", "epoch": 1, "loss": 0.5, "val_P@1": 40.0},
            {"member": 0, "phase": "select", "C": 0.3, "val_P@1": 60.0}]  # as the xr head's linear stage
    history = write_history(tmp_path / "h.csv", rows)
    assert plot_history(history, tmp_path / "h.png").read_bytes()[:4] == b"\x89PNG"[:4]


def test_plot_without_matplotlib_is_one_error_before_training(tiny, tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["train", str(tiny), "--out", str(tmp_path / "R"), *FAST, "--plot"]) == 2
    _one_error(capsys, "matplotlib")
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("name", ["machine learning", "a:b", '"quoted"', "", "tab\there", "naïve", "new\nline", "x y:z"])
def test_label_names_round_trip_through_the_predict_format(name):
    line = " ".join([format_prediction(name, 0.5), format_prediction("plain", 0.25), format_prediction(3, 1e-7)])
    assert parse_prediction(line) == [(name, 0.5), ("plain", 0.25), ("3", 1e-7)]
    assert "\n" not in line


def test_predict_with_label_names_holding_spaces_is_parseable(tmp_path):
    rows = [{"text": f"w{i % 3} filler{i % 7}", "labels": ["machine learning" if i % 3 == 0 else f"tag {i % 3}"]}
            for i in range(90)]
    data = tmp_path / "texts"
    data.mkdir()
    for split, part in (("train", rows[:70]), ("test", rows[70:])):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in part))
    run = tmp_path / "R"
    assert main(["train", str(data), "--out", str(run), *FAST]) == 0
    output = tmp_path / "predictions.txt"
    assert main(["predict", str(run), str(data / "test.jsonl"), "--label-names", "--top-k", "3",
                 "--output", str(output)]) == 0
    parsed = [parse_prediction(line) for line in output.read_text().splitlines()]
    assert len(parsed) == 20 and all(len(row) == 3 for row in parsed)
    assert {label for row in parsed for label, _ in row} == {"machine learning", "tag 1", "tag 2"}


@pytest.mark.parametrize("scores, expected", [([10.0, 20.0, 30.0], "no: still rising"), ([10.0, 30.0, 25.0], "yes"),
                                              ([10.0, 30.0, 30.0], "yes"), ([10.0], "?")])
def test_the_demo_marks_a_model_whose_validation_p1_still_rises(scores, expected):
    from holoxmc.cli.demo import comparison_table, converged

    assert converged([{"val": {"P@1": s}} for s in scores]) == expected
    report = {"test": dict.fromkeys(["P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5"], 1.0), "epoch_seconds": [1.0],
              "params": {"total": 10, "output_layer": 5}, "predict_ms_per_point": 0.1,
              "settings": {"epochs": 3, "lr": 1e-3}, "seconds": 2.5, "converged": expected}
    assert comparison_table({"fc": report}).splitlines()[-1].endswith(f"  {expected}")

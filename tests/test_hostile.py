"""Hostile inputs and faults: untrusted model folders, absurd sizes, non-finite settings,
divergence. Each case is one clear InputError (exit 2 from the CLI), never a traceback and
never an allocation sized by a claim that was not checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc.cli import main
from holoxmc.data import make_synthetic
from holoxmc.errors import HoloxmcError, InputError, TrainingDiverged
from holoxmc.estimator import XMCClassifier
from holoxmc.settings import for_head
from holoxmc.train import TrainConfig, Trainer

SMALL = {"hidden": (16,), "epochs": 2, "progress": False}


@pytest.fixture(scope="module")
def data():
    train, _ = make_synthetic(200, 10, 30, n_test=50, seed=1)
    return train


@pytest.fixture(scope="module")
def saved(tmp_path_factory, data) -> dict[str, Path]:
    """One saved model folder per head kind (written by this version)."""
    root = tmp_path_factory.mktemp("saved")
    models = {
        "hrr": XMCClassifier(head="hrr", dim=32, **SMALL),
        "dense": XMCClassifier(head="dense", **SMALL),
        "solar": XMCClassifier(head="solar", hidden=(16,), epochs=2, progress=False,
                               head_options={"n_chunks": 2, "n_buckets": 4}),
        "linear": XMCClassifier(head="linear", progress=False),
    }
    return {name: clf.fit(data.X, data.Y).save(root / name) for name, clf in models.items()}


def _edited(source: Path, target: Path, edit, name: str = "config.json") -> Path:
    shutil.copytree(source, target)
    config = json.loads((target / name).read_text())
    edit(config)
    (target / name).write_text(json.dumps(config))
    return target


def _set(path: str, value):
    def edit(config: dict) -> None:
        *parents, last = path.split(".")
        for key in parents:
            config = config[key]
        config[last] = value
    return edit


# ---------------------------------------------------------------- model folders (defect 1 and the low ones)
@pytest.mark.parametrize("head, path, value, message", [
    ("hrr", "n_labels", 10**10, "larger than holoxmc accepts"),
    ("hrr", "n_labels", float("nan"), "must be an integer"),
    ("hrr", "n_labels", 11, "does not hold the n_labels"),
    ("hrr", "network.n_labels", 10**10, "differs from n_labels"),
    ("hrr", "network.hidden", [10**6], "matches no stored tensor"),
    ("hrr", "network.dim", 10**7, "matches no stored tensor"),
    ("hrr", "network.label_chunk", 10**12, "larger than holoxmc accepts"),
    ("hrr", "network", None, "'network' must be a JSON object"),
    ("hrr", "network.seed", 5, "edited after the model was saved"),
    ("hrr", "params.hidden", "abc", "hidden must be None or"),
    ("hrr", "params.lr", float("inf"), "lr must be a finite number"),
    ("hrr", "history", 5, "'history' must be a list"),
    ("dense", "network.hidden", [16, 16, 16], "edited after the model was saved"),
    ("linear", "n_features", 10**9, "edited after the model was saved"),
])
def test_an_edited_config_is_one_input_error_before_any_allocation(saved, tmp_path, head, path, value, message):
    folder = _edited(saved[head], tmp_path / "m", _set(path, value))
    with pytest.raises(InputError, match=message):
        XMCClassifier.load(folder)


@pytest.mark.parametrize("path, value, message", [
    ("config.n_buckets", 10**8, "matches no tensor of chunk"),
    ("config.hidden", [16, 10**6], "matches no tensor of chunk"),
    ("n_labels", 10**9, "do not match the stored label codes"),
    ("config", None, "'config' must be a JSON object"),
])
def test_an_edited_solar_folder_is_one_input_error(saved, tmp_path, path, value, message):
    folder = _edited(saved["solar"], tmp_path / "m", _set(path, value), name="solar.json")
    with pytest.raises(InputError, match=message):
        XMCClassifier.load(folder)


def test_the_cli_refuses_an_edited_model_folder_with_exit_2(saved, tiny, tmp_path, capsys):
    folder = _edited(saved["hrr"], tmp_path / "m", _set("n_labels", 10_000_000_000))
    assert main(["predict", str(folder), str(tiny), "--top-k", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("holoxmc: error: ") and err.count("\n") == 1


def test_nan_weights_are_refused_at_load(saved, tmp_path):
    from safetensors.torch import load_file, save_file
    folder = tmp_path / "m"
    shutil.copytree(saved["hrr"], folder)
    tensors = load_file(folder / "model.safetensors")
    name = next(k for k in tensors if k.startswith("network.") and tensors[k].is_floating_point())
    tensors[name][0] = float("nan")
    from safetensors import safe_open
    with safe_open(str(saved["hrr"] / "model.safetensors"), framework="pt") as f:
        metadata = f.metadata()
    save_file(tensors, folder / "model.safetensors", metadata=metadata)
    with pytest.raises(InputError, match=f"tensor '{name}' holds NaN"):
        XMCClassifier.load(folder)


def test_an_unedited_folder_still_loads_and_predicts_the_same(saved, data):
    for head, folder in saved.items():
        first = XMCClassifier.load(folder).predict_topk(data.X[:5], k=3)
        again = XMCClassifier.load(folder).predict_topk(data.X[:5], k=3)
        np.testing.assert_array_equal(first[0], again[0])


# ---------------------------------------------------------------- settings and sizes at fit / predict
@pytest.mark.parametrize("params, message", [
    ({"lr": float("inf")}, "lr must be a finite number"),
    ({"lr": float("nan")}, "lr must be a finite number"),
    ({"dropout": float("nan")}, "dropout must be"),
    ({"head_options": {"ranking": float("nan")}}, r"head_options\['ranking'\] must be finite"),
    ({"weight_decay": float("nan")}, "weight_decay must be a finite number"),
    ({"hidden": (0,)}, "hidden must be None or"),
])
def test_non_finite_or_bad_settings_are_refused_before_training(data, params, message):
    with pytest.raises(InputError, match=message):
        XMCClassifier(head="hrr", **(SMALL | params)).fit(data.X, data.Y)


@pytest.mark.parametrize("flag", [["--lr", "inf"], ["--ranking", "nan"], ["--dropout", "nan"]])
def test_the_cli_refuses_non_finite_settings(tiny, tmp_path, capsys, flag):
    assert main(["train", str(tiny), "--model", "hrr-fc", "--epochs", "1", "--out", str(tmp_path / "r"), "--quiet", *flag]) == 2
    assert not (tmp_path / "r" / "metrics.json").exists()


@pytest.mark.parametrize("batch_size", [-1, 0, 2.5, True])
def test_predict_refuses_a_bad_batch_size(saved, data, batch_size):
    clf = XMCClassifier.load(saved["hrr"])
    for call in (lambda: clf.predict_topk(data.X, k=2, batch_size=batch_size),
                 lambda: clf.decision_function(data.X, batch_size=batch_size),
                 lambda: clf.predict_above(data.X, batch_size=batch_size)):
        with pytest.raises(InputError, match="batch_size must be a positive integer"):
            call()


def test_a_huge_label_id_is_refused_before_allocating(data):
    Y = [[10**12]] + [[0]] * (data.X.shape[0] - 1)
    with pytest.raises(InputError, match="larger than holoxmc accepts"):
        XMCClassifier(head="hrr", **SMALL).fit(data.X, Y)


def test_a_huge_token_id_is_refused_before_allocating():
    tokens = np.array([[1, 2, 3], [4, 10**12, 0]], dtype=np.int64)
    with pytest.raises(InputError, match="larger than holoxmc accepts"):
        XMCClassifier(head="hrr", backbone="lstm", epochs=1, progress=False).fit(tokens, [[0], [1]])


def test_a_network_no_machine_holds_is_refused_before_building(data):
    with pytest.raises(InputError, match="more than this machine's"):
        XMCClassifier(head="dense", hidden=(2**20, 2**20), epochs=1, progress=False).fit(data.X, data.Y)


# ---------------------------------------------------------------- divergence
class _NaNLoss(torch.nn.Module):
    """A network whose loss turns NaN: the trainer must stop, not save a NaN model."""

    def __init__(self, network: torch.nn.Module) -> None:
        super().__init__()
        self.network = network

    def loss(self, x, labels):
        return self.network.loss(x, labels) * float("nan")

    def topk(self, x, k):
        return self.network.topk(x, k)


def test_a_loss_that_turns_nan_stops_training_with_one_error(data):
    from holoxmc.backbones import build_network
    network = _NaNLoss(build_network("fc", "dense", n_features=30, n_labels=10, hidden=[8]))
    with pytest.raises(TrainingDiverged, match="diverged in epoch 1"):
        Trainer(TrainConfig(epochs=2, batch_size=32, progress=False)).fit(network, data.X, data.Y)
    assert issubclass(TrainingDiverged, HoloxmcError)


def test_sparse_inputs_with_nan_are_refused(data):
    X = data.X.copy().astype(np.float32)
    X.data[0] = np.nan
    with pytest.raises(InputError, match="NaN"):
        XMCClassifier(head="hrr", **SMALL).fit(sp.csr_matrix(X), data.Y)


# ---------------------------------------------------------------- processes (defect 2, Ctrl-C)
def _workers(procs, pid: int) -> list[int]:
    """The worker processes of ``pid`` (multiprocessing's resource tracker is not one)."""
    return [child for child, command in procs.children(pid).items() if "resource_tracker" not in command]


def _start_workers(procs, tiny: Path, out: Path, model: list[str]):
    import subprocess
    import sys
    import time
    import signal
    # a suite started in the background without job control ignores SIGINT, and a child inherits
    # that: give the run the default disposition a terminal's Ctrl-C meets
    process = subprocess.Popen(
        [sys.executable, "-m", "holoxmc", "train", str(tiny), *model, "--workers", "2", "--epochs", "300",
         "--out", str(out), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None and (
            len(_workers(procs, process.pid)) < 2 or not any(out.rglob("checkpoint.json"))):
        time.sleep(0.2)  # until the workers train (their start-up, which arms the parent check, is over)
    children = _workers(procs, process.pid)
    assert process.poll() is None and len(children) == 2, "the workers did not start"
    return process, children


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")


@needs_proc
@pytest.mark.parametrize("model, how", [
    (["--model", "solar"], "SIGKILL"),
    (["--model", "solar"], "SIGTERM"),
    (["--model", "hrr-fc", "--hidden", "16", "--n-models", "2"], "SIGKILL"),
])
def test_workers_die_with_their_parent(procs, tiny, tmp_path, model, how):
    import signal
    process, children = _start_workers(procs, tiny, tmp_path / "R", model)
    process.send_signal(getattr(signal, how))
    process.wait(timeout=30)
    assert procs.all_gone(children), "a worker outlived its parent"


@needs_proc
def test_ctrl_c_to_a_workers_group_is_one_line_and_ends_the_workers(procs, tiny, tmp_path):
    import os
    import signal
    process, children = _start_workers(procs, tiny, tmp_path / "R", ["--model", "solar"])
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "Traceback" not in err and "holoxmc: interrupted" in err
    assert procs.all_gone(children)


# ---------------------------------------------------------------- run folders (defects 4, 5, 7, 8; bad --out)
def test_resume_never_writes_into_a_folder_holoxmc_did_not_start(tiny, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "config.json").write_text("{}")
    assert main(["train", str(tiny), "--model", "hrr-fc", "--epochs", "1", "--out", str(project), "--resume", "--quiet"]) == 2
    assert (project / "config.json").read_text() == "{}" and sorted(p.name for p in project.iterdir()) == ["config.json"]


def test_an_empty_test_split_is_refused_before_any_training(tiny, tmp_path):
    folder = tmp_path / "empty_test"
    folder.mkdir()
    shutil.copy(tiny / "tiny_train.txt", folder / "x_train.txt")
    (folder / "x_test.txt").write_text("0 30 10\n")
    assert main(["train", str(folder), "--epochs", "1", "--out", str(tmp_path / "R"), "--quiet"]) == 2
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("make_out", ["dangling link", "under a file"])
def test_a_bad_out_is_refused_before_any_work(tiny, tmp_path, capsys, make_out):
    if make_out == "dangling link":
        out = tmp_path / "link"
        out.symlink_to(tmp_path / "nowhere")
    else:
        (tmp_path / "file").write_text("x")
        out = tmp_path / "file" / "run"
    assert main(["train", str(tiny), "--model", "hrr-fc", "--epochs", "1", "--out", str(out), "--quiet"]) == 2
    assert "epoch" not in capsys.readouterr().err


def test_a_second_writer_of_a_run_folder_is_refused(tiny, tmp_path, capsys):
    from holoxmc.cli.rundir import run_lock
    out = tmp_path / "R"
    out.mkdir()
    with run_lock(out):  # as a running `train` holds it
        assert main(["train", str(tiny), "--model", "hrr-fc", "--epochs", "1", "--out", str(out), "--resume", "--quiet"]) == 2
        assert "another holoxmc process" in capsys.readouterr().err
        assert main(["train", str(tiny), "--model", "hrr-fc", "--epochs", "1", "--out", str(out), "--quiet"]) == 2
    assert main(["train", str(tiny), "--model", "hrr-fc", "--epochs", "1", "--hidden", "16", "--out", str(out), "--resume", "--quiet"]) == 0


@pytest.mark.parametrize("other", [{"dim": 64}, {"head": "dense"}, {"hidden": (32,)}])
def test_resume_with_another_model_is_the_another_configuration_error(data, tmp_path, other):
    run = tmp_path / "R"
    first = {"head": "hrr", "dim": 32, "hidden": (16,), "epochs": 2, "progress": False}
    XMCClassifier(**first).fit(data.X, data.Y, run_dir=run)  # leaves its checkpoint
    settings = first | other
    with pytest.raises(InputError, match="another configuration"):  # a dense network, given the settings it takes
        XMCClassifier(**for_head(settings["head"], settings)).fit(data.X, data.Y, run_dir=run, resume=True)


@pytest.mark.parametrize("field, value", [
    ("epoch", -3), ("epoch", "2"), ("history", {"a": 1}), ("best_score", float("nan")), ("since_best", None),
])
def test_a_tampered_trainer_state_is_one_input_error(data, tmp_path, field, value):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    run = tmp_path / "R"
    settings = {"head": "hrr", "dim": 32, "hidden": (16,), "epochs": 2, "progress": False}
    XMCClassifier(**settings).fit(data.X, data.Y, run_dir=run)
    path = run / "checkpoint.safetensors"
    with safe_open(str(path), framework="pt") as f:
        metadata = dict(f.metadata())
    key = "trainer_state"
    state = json.loads(metadata[key])
    state[field] = value
    metadata[key] = json.dumps(state)
    save_file(load_file(path), path, metadata=metadata)
    with pytest.raises(InputError, match="checkpoint.safetensors: "):
        XMCClassifier(**settings).fit(data.X, data.Y, run_dir=run, resume=True)


def test_resume_of_a_finished_run_removes_checkpoints_a_kill_left(tiny, tmp_path):
    out = tmp_path / "R"
    assert main(["train", str(tiny), "--model", "hrr-fc", "--epochs", "1", "--hidden", "16", "--out", str(out), "--quiet"]) == 0
    (out / "checkpoint.safetensors").write_bytes(b"left by a kill")
    (out / "checkpoint.json").write_text("{}")
    assert main(["train", str(tiny), "--model", "hrr-fc", "--epochs", "1", "--hidden", "16", "--out", str(out), "--resume", "--quiet"]) == 0
    assert not (out / "checkpoint.safetensors").exists() and not (out / "checkpoint.json").exists()

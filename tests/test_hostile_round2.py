"""Hostile inputs, round two (issue 53): outputs that are not regular files, a linked run
marker, resumes as another model and the resume race, side files without bounds (FIFOs,
device links, folders, deep nesting, other JSON types, huge sizes), header sizes of every
model, and ``.npz`` members claiming more than they hold. Each case is one clear error line
(exit 2) or correct behaviour, in bounded time and memory, and nothing of the user's is
overwritten or deleted."""

from __future__ import annotations

import io
import json
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from holoxmc.cli import main
from holoxmc.cli.rundir import MARKER
from holoxmc.errors import HoloxmcError, InputError

SRC = str(Path(__file__).resolve().parents[1] / "src")
FAST = ["--model", "fc", "--hidden", "8", "--dropout", "0", "--epochs", "2", "--batch-size", "50", "-q"]
SOLAR = ["--model", "solar", "--chunks", "2", "--buckets", "4", "--hidden", "8", "--epochs", "1", "-q"]


def _one_error(capsys, text: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("holoxmc: error:") and text in err[0], err
    return err[0]


def _snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under ``folder``: its kind and, for a regular file, its bytes."""
    out = {}
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        out[str(path.relative_to(folder))] = (stat.S_IFMT(mode), path.read_bytes() if stat.S_ISREG(mode) else b"")
    return out


def _unfinished(tiny: Path, run: Path, options: list[str], monkeypatch) -> None:
    """A run that trained and then stopped before its model was saved: its checkpoints stay."""
    with monkeypatch.context() as patch:
        patch.setattr("holoxmc.estimator.XMCClassifier.save", lambda *a: (_ for _ in ()).throw(InputError("stop")))
        assert main(["train", str(tiny), "--out", str(run), *options]) == 2


@pytest.fixture(scope="module")
def base(tiny, tmp_path_factory) -> Path:
    """A finished fc run of ``tiny``."""
    run = tmp_path_factory.mktemp("runs") / "base"
    assert main(["train", str(tiny), "--out", str(run), *FAST]) == 0
    return run


class _FifoUnblocker:
    """Opens, for writing, every FIFO given once a reader waits on it, after ``delay`` seconds:
    code that (wrongly) blocks on a FIFO then reads an empty file instead of hanging the tests."""

    def __init__(self, *fifos: Path, delay: float = 20.0):
        self.fifos, self.delay, self.done = fifos, delay, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        if self.done.wait(self.delay):
            return
        while not self.done.wait(0.2):
            for fifo in self.fifos:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    pass

    def __enter__(self) -> "_FifoUnblocker":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()


# ------------------------------------------------------------------ High 1: outputs
def _special(path: Path, kind: str, tmp_path: Path) -> Path | None:
    """Make ``path`` a FIFO, a link to a device, or a link to a user's file (returned)."""
    if kind == "fifo":
        os.mkfifo(path)
        return None
    if kind == "device link":
        path.symlink_to("/dev/null")
        return None
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    path.symlink_to(victim)
    return victim


@pytest.mark.parametrize("command", ["predict", "evaluate"])
@pytest.mark.parametrize("kind", ["fifo", "device link", "file link"])
def test_an_output_that_is_not_a_regular_file_is_refused_and_left_alone(base, tiny, tmp_path, capsys, command, kind):
    out = tmp_path / "out"
    victim = _special(out, kind, tmp_path)
    before = out.lstat()
    data = str(tiny / "tiny_test.txt") if command == "predict" else str(tiny)
    with _FifoUnblocker(out):
        assert main([command, str(base), data, "--output", str(out), "-q"]) == 2
    _one_error(capsys, "cannot write it")
    after = out.lstat()
    assert (stat.S_IFMT(after.st_mode), after.st_ino) == (stat.S_IFMT(before.st_mode), before.st_ino)
    if victim is not None:
        assert victim.read_text() == "the user's own file\n"


def test_a_device_node_is_refused_as_an_output_before_any_work():
    from holoxmc.cli.train import _check_output_file

    with pytest.raises(InputError, match="a character device"):
        _check_output_file(Path("/dev/null"))  # checked only: nothing is written


def test_atomic_writes_never_replace_a_link_or_a_fifo(tmp_path):
    from holoxmc.io import atomic_write_files, atomic_write_json

    (tmp_path / "target.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "target.json")
    os.mkfifo(tmp_path / "fifo.json")
    for name in ("link.json", "fifo.json"):
        with pytest.raises(InputError, match="cannot write it"):
            atomic_write_json(tmp_path / name, {"a": 1})
        with pytest.raises(InputError, match="cannot write it"):
            atomic_write_files(tmp_path, {"other": b"x", name: b"{}"})
    assert (tmp_path / "link.json").is_symlink() and stat.S_ISFIFO((tmp_path / "fifo.json").lstat().st_mode)
    assert (tmp_path / "target.json").read_text() == "{}" and not (tmp_path / "other").exists()


# ------------------------------------------------------------------ High 2: the run marker
@pytest.mark.parametrize("resume", [False, True])
def test_a_linked_run_marker_is_never_written_through(tiny, tmp_path, capsys, resume):
    run, victim = tmp_path / "R", tmp_path / "victim"
    run.mkdir()
    victim.write_text("precious\n")
    (run / MARKER).symlink_to(victim)
    assert main(["train", str(tiny), "--out", str(run), *FAST, *(["--resume"] if resume else [])]) == 2
    _one_error(capsys, "marker is not a regular file")
    assert victim.read_text() == "precious\n" and (run / MARKER).is_symlink()
    assert sorted(p.name for p in run.iterdir()) == [MARKER]


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_run_marker_that_is_not_a_file_is_refused(tiny, tmp_path, capsys, kind):
    run = tmp_path / "R"
    run.mkdir()
    os.mkfifo(run / MARKER) if kind == "fifo" else (run / MARKER).mkdir()
    with _FifoUnblocker(run / MARKER):
        assert main(["train", str(tiny), "--out", str(run), *FAST]) == 2
    _one_error(capsys, "marker is not a regular file")


# ------------------------------------------------------------------ High 3 and Medium 1: resumes
@pytest.mark.parametrize("other", [["--model", "solar"], ["--model", "linear"], ["--model", "rerank"], []])
def test_resume_as_another_kind_of_model_touches_nothing(tiny, tmp_path, capsys, monkeypatch, other):
    run = tmp_path / "K"
    _unfinished(tiny, run, FAST, monkeypatch)
    before = _snapshot(run)
    assert "checkpoint.safetensors" in before
    capsys.readouterr()
    assert main(["train", str(tiny), "--out", str(run), *other, "-q", "--resume"]) == 2
    _one_error(capsys, "another configuration")
    assert _snapshot(run) == before


@pytest.mark.parametrize("other", [["--model", "fc", "--hidden", "8"], ["--model", "linear"]])
def test_a_killed_solar_run_resumed_as_another_model_touches_nothing(tiny, tmp_path, capsys, monkeypatch, other):
    run = tmp_path / "S"
    _unfinished(tiny, run, SOLAR, monkeypatch)
    before = _snapshot(run)
    assert "solar.json" in before
    capsys.readouterr()
    assert main(["train", str(tiny), "--out", str(run), *other, "-q", "--resume"]) == 2
    _one_error(capsys, "another configuration")
    assert _snapshot(run) == before


def test_a_finished_run_resumed_as_another_model_is_another_configuration(base, tiny, tmp_path, capsys):
    run = tmp_path / "F"
    shutil.copytree(base, run)
    before = _snapshot(run)
    assert main(["train", str(tiny), "--out", str(run), "--model", "hrr-fc", "-q", "--resume"]) == 2
    _one_error(capsys, "another configuration")
    assert main(["train", str(tiny), "--out", str(run), *FAST, "--resume"]) == 0
    assert "run already complete" in capsys.readouterr().err
    assert _snapshot(run) == before


def test_a_run_finished_while_a_resume_loaded_its_data_is_not_trained_again(tiny, tmp_path, capsys, monkeypatch):
    """The race of issue 53: the "complete" check must hold under the lock, not only before it."""
    from holoxmc.cli import train as train_cli

    run = tmp_path / "R"
    _unfinished(tiny, run, FAST, monkeypatch)
    real_splits, finished = train_cli._splits, {}

    def splits_while_the_first_run_ends(*args, **kwargs):
        out = real_splits(*args, **kwargs)
        if not finished:  # the other process finishes meanwhile
            monkeypatch.setattr(train_cli, "_splits", real_splits)
            assert main(["train", str(tiny), "--out", str(run), *FAST, "--resume"]) == 0
            finished.update(_snapshot(run))
            monkeypatch.setattr(train_cli, "_splits", splits_while_the_first_run_ends)
        return out

    monkeypatch.setattr(train_cli, "_splits", splits_while_the_first_run_ends)
    capsys.readouterr()
    options = list(FAST)
    options[options.index("--epochs") + 1] = "5"  # what a second run would change
    assert main(["train", str(tiny), "--out", str(run), *options, "--resume"]) == 0
    assert "run already complete" in capsys.readouterr().err
    assert finished and _snapshot(run) == finished


# ------------------------------------------------------------------ High 4: side files without bounds
def _deep(depth: int = 200_000) -> str:
    return "[" * depth + "]" * depth


def _make_kind(path: Path, kind: str) -> None:
    """Replace the side file ``path`` by a hostile ``kind`` of file."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device link":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    elif kind == "huge":  # 3 GB, sparse: nothing of it may be read
        with open(path, "wb") as f:
            f.truncate(3 * 2**30)
    elif kind == "deep":
        path.write_text(_deep())
    else:
        path.write_text(kind)  # another JSON type


KINDS = ["fifo", "device link", "folder", "huge", "deep", "[1, 2]", '"x"', "null", "not json {"]
KIND_MESSAGES = {"fifo": "not a regular file (a FIFO", "device link": "not a regular file (a character device",
                 "folder": "not a regular file (a folder)", "huge": "more than holoxmc reads",
                 "deep": "levels deep", "[1, 2]": "must hold a JSON object, got a JSON array",
                 '"x"': "must hold a JSON object, got a JSON string", "null": "must hold a JSON object, got null",
                 "not json {": "not valid JSON"}


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    from holoxmc.data import make_synthetic
    from holoxmc.estimator import XMCClassifier

    train, _ = make_synthetic(120, 8, 20, n_test=10, seed=3)
    root = tmp_path_factory.mktemp("saved2")
    models = {"dense": XMCClassifier(head="dense", hidden=(8,), epochs=1, progress=False),
              "solar": XMCClassifier(head="solar", hidden=(8,), epochs=1, progress=False,
                                     head_options={"n_chunks": 2, "n_buckets": 4})}
    return {name: clf.fit(train.X, train.Y).save(root / name) for name, clf in models.items()}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("head, name", [("dense", "config.json"), ("solar", "config.json"), ("solar", "solar.json")])
def test_a_model_folder_side_file_of_any_kind_is_one_input_error(saved, tmp_path, head, name, kind):
    from holoxmc.estimator import XMCClassifier

    folder = tmp_path / "m"
    shutil.copytree(saved[head], folder)
    _make_kind(folder / name, kind)
    with _FifoUnblocker(folder / name), pytest.raises(HoloxmcError, match=re.escape(KIND_MESSAGES[kind])) as caught:
        XMCClassifier.load(folder)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_folder_metrics_file_of_any_kind_is_one_error_line(base, tiny, tmp_path, capsys, kind):
    run = tmp_path / "M"
    shutil.copytree(base, run)
    _make_kind(run / "metrics.json", kind)
    with _FifoUnblocker(run / "metrics.json"):
        assert main(["evaluate", str(run), str(tiny), "--output", str(tmp_path / "e.json"), "-q"]) == 2
    _one_error(capsys, KIND_MESSAGES[kind])


@pytest.mark.parametrize("data, expected", [({"data": "x"}, 0), ({"data": {"source": "SOURCE", "options": ["x"]}}, 2),
                                            ({"data": {"source": "SOURCE", "options": "x"}}, 2)])
def test_metrics_file_fields_of_another_type(base, tiny, tmp_path, capsys, data, expected):
    run = tmp_path / "M"
    shutil.copytree(base, run)
    (run / "metrics.json").write_text(json.dumps(data).replace("SOURCE", str(tiny)))
    assert main(["evaluate", str(run), str(tiny), "--output", str(tmp_path / "e.json"), "-q"]) == expected
    if expected:
        _one_error(capsys, "'data.options' must be a JSON object")


@pytest.mark.parametrize("kind", KINDS)
def test_a_text_encoder_file_of_any_kind_is_one_data_format_error(tmp_path, kind):
    from holoxmc.data.text import TextEncoder
    from holoxmc.errors import DataFormatError

    path = tmp_path / "text_encoder.json"
    TextEncoder.fit(["red apple", "green apple"], ["a"], min_df=1).save(path)
    _make_kind(path, kind)
    with _FifoUnblocker(path), pytest.raises(DataFormatError, match=re.escape(KIND_MESSAGES[kind])):
        TextEncoder.load(path)


def test_text_encoder_fields_of_another_type(tmp_path):
    from holoxmc.data.text import TextEncoder
    from holoxmc.errors import DataFormatError

    state = TextEncoder.fit(["red apple", "green apple"], ["a"], min_df=1).to_dict()
    for bad in ({**state, "labels": "abc"}, {**state, "labels": [1, 2]}, {**state, "tfidf": ["x"]},
                {**state, "tfidf": {**state["tfidf"], "terms": "ab"}}):
        (tmp_path / "e.json").write_text(json.dumps(bad))
        with pytest.raises(DataFormatError, match="not a text encoder file"):
            TextEncoder.load(tmp_path / "e.json")


def test_an_npz_encoder_nested_deep_is_one_data_format_error(tmp_path):
    from holoxmc.data.cache import load_npz, save_npz
    from holoxmc.data.dataset import Dataset
    from holoxmc.data.text import TextEncoder
    from holoxmc.errors import DataFormatError
    import scipy.sparse as sp

    encoder = TextEncoder.fit(["red apple", "green apple"], ["a"], min_df=1)
    save_npz(Dataset(sp.csr_matrix((2, 3), dtype=np.float32), sp.csr_matrix([[1], [1]]), "t", encoder=encoder),
             tmp_path / "good.npz")
    _rewrite_npz(tmp_path / "good.npz", tmp_path / "deep.npz", {"encoder.npy": _npy(np.array(_deep()))})
    with pytest.raises(DataFormatError, match="levels deep"):
        load_npz(tmp_path / "deep.npz")


@pytest.mark.parametrize("target, kind", [("manifest.json", "fifo"), ("manifest.json", "device link"),
                                          ("manifest.json", "deep"), ("shard", "fifo"), ("shard", "device link"),
                                          ("shard", "folder")])
def test_a_shard_store_file_of_another_kind_is_one_data_format_error(tmp_path, target, kind):
    from holoxmc.data import make_synthetic, open_shards, write_shards
    from holoxmc.errors import DataFormatError

    data, _ = make_synthetic(30, 5, 12, n_test=1, seed=0)
    folder = write_shards(data, tmp_path / "store", rows_per_shard=10)
    path = folder / "manifest.json" if target == "manifest.json" else sorted(folder.glob("shard-*X_indices.npy"))[0]
    _make_kind(path, kind)
    with _FifoUnblocker(path), pytest.raises(DataFormatError, match=re.escape(KIND_MESSAGES[kind])):
        open_shards(folder).load()


# ------------------------------------------------------------------ High 5: sizes a header claims, every model
def _limited(max_bytes: int = 4_000_000 * 1024):
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))
    return limit


@pytest.mark.parametrize("model", ["linear", "rerank", "solar", "auto"])
def test_a_header_claiming_huge_d_is_refused_for_every_model(tmp_path, model):
    """``ulimit -v 4000000``, as the issue ran it: one line, exit 2, never a crash."""
    data = tmp_path / "d.txt"
    data.write_text("3 600000000 10\n1 1:1\n2 2:1\n0 3:1\n")
    command = [sys.executable, "-m", "holoxmc", "train", str(data), "--test", str(data), "--out", str(tmp_path / "R"),
               "-q", *([] if model == "auto" else ["--model", model])]
    done = subprocess.run(command, env=dict(os.environ, PYTHONPATH=SRC), capture_output=True, text=True, timeout=120,
                          preexec_fn=_limited())
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "would need" in lines[0], (done.returncode, lines[-3:])
    assert not (tmp_path / "R").exists()


def test_the_memory_check_counts_the_address_space_limit():
    from holoxmc.limits import check_feature_memory

    check_feature_memory("linear", 1000)
    for head in ("linear", "rerank", "solar", "auto"):
        with pytest.raises(InputError, match="would need"):
            check_feature_memory(head, 2**31 - 1, workers=64, n_chunks=64)


# ------------------------------------------------------------------ High 6: .npz member bombs
def _npy(array: np.ndarray, claimed_shape: tuple[int, ...] | None = None) -> bytes:
    buffer = io.BytesIO()
    if claimed_shape is None:
        np.lib.format.write_array(buffer, array, allow_pickle=False)
        return buffer.getvalue()
    header = np.lib.format.header_data_from_array_1_0(array) | {"shape": claimed_shape}
    np.lib.format.write_array_header_1_0(buffer, header)
    return buffer.getvalue() + array.tobytes()


def _rewrite_npz(source: Path, target: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, members.get(info.filename, zin.read(info)))


def test_an_npz_member_claiming_more_than_it_holds_is_refused_before_allocating(tmp_path, capsys):
    import tracemalloc

    from holoxmc.data import make_synthetic
    from holoxmc.data.cache import save_npz

    train, _ = make_synthetic(20, 5, 10, n_test=1, seed=0)
    save_npz(train, tmp_path / "good.npz")
    payload = np.zeros(1 << 20, dtype=np.float32)  # 4 MiB held, 2**36 float32 (256 GiB) claimed
    _rewrite_npz(tmp_path / "good.npz", tmp_path / "bomb.npz", {"X_data.npy": _npy(payload, (2**36,))})
    assert (tmp_path / "bomb.npz").stat().st_size < 2**20
    tracemalloc.start()
    try:
        assert main(["data", "info", str(tmp_path / "bomb.npz")]) == 2
        assert tracemalloc.get_traced_memory()[1] < 64 * 2**20
    finally:
        tracemalloc.stop()
    _one_error(capsys, "X_data.npy: its header claims 274877906944 bytes")


# ------------------------------------------------------------------ Medium
@pytest.mark.parametrize("name", ["train_test.txt", "data.train.test.svm"])
def test_one_file_named_for_both_splits_is_never_both(tiny, tmp_path, capsys, name):
    folder = tmp_path / "pair2"
    folder.mkdir()
    shutil.copy(tiny / "tiny_train.txt", folder / name)
    assert main(["train", str(folder), "--model", "linear", "--out", str(tmp_path / "R"), "-q"]) == 2
    _one_error(capsys, "both the words 'train' and 'test'")
    assert not (tmp_path / "R").exists()


def test_workers_with_the_default_model_are_refused_before_any_work(tiny, tmp_path, capsys):
    assert main(["train", str(tiny), "--workers", "2", "--out", str(tmp_path / "R"), "-q"]) == 2
    _one_error(capsys, "--workers does not apply to --model auto")
    assert not (tmp_path / "R").exists()


def test_a_checkpoint_missing_an_optimizer_tensor_is_one_error_on_resume(tiny, tmp_path, capsys, monkeypatch):
    from safetensors import safe_open
    from safetensors.torch import save_file

    run = tmp_path / "R"
    _unfinished(tiny, run, FAST, monkeypatch)
    path = run / "checkpoint.safetensors"
    with safe_open(str(path), framework="pt") as f:
        tensors = {name: f.get_tensor(name) for name in f.keys()}
        metadata = f.metadata()
    dropped = sorted(name for name in tensors if name.endswith(".exp_avg"))[-1]
    save_file({name: t for name, t in tensors.items() if name != dropped}, str(path), metadata=metadata)
    capsys.readouterr()
    assert main(["train", str(tiny), "--out", str(run), *FAST, "--resume"]) == 2
    _one_error(capsys, f"no tensor '{dropped.partition('.')[2]}'")


@pytest.fixture(scope="module")
def text_run(tmp_path_factory) -> tuple[Path, Path]:
    """A finished fc run trained on raw texts: ``(run folder, data folder)``."""
    root = tmp_path_factory.mktemp("text")
    words = ["apple", "pear", "car", "bus", "red", "green", "fast", "slow"]
    rng = np.random.default_rng(0)
    for split, rows in (("train", 60), ("test", 12)):
        with open(root / f"{split}.jsonl", "w") as f:
            for _ in range(rows):
                picked = rng.choice(len(words), 3, replace=False)
                f.write(json.dumps({"text": " ".join(words[i] for i in picked),
                                    "labels": sorted({f"l{i % 4}" for i in picked})}) + "\n")
    run = root / "run"
    assert main(["train", str(root), "--out", str(run), *FAST]) == 0
    return run, root


def _edited_encoder(text_run, tmp_path, edit) -> Path:
    run = tmp_path / "T"
    shutil.copytree(text_run[0], run)
    state = json.loads((run / "text_encoder.json").read_text())
    edit(state)
    (run / "text_encoder.json").write_text(json.dumps(state))
    return run


def test_a_text_encoder_with_fewer_labels_than_the_model_is_one_error(text_run, tmp_path, capsys):
    run = _edited_encoder(text_run, tmp_path, lambda state: state["labels"].pop())
    assert main(["predict", str(run), str(text_run[1] / "test.jsonl"), "--label-names", "-q"]) == 2
    _one_error(capsys, "labels; the model has")


# ------------------------------------------------------------------ Low
def test_a_lone_surrogate_label_name_is_written_escaped_and_reads_back(text_run, tmp_path, capsys):
    from holoxmc.cli.train import parse_prediction

    run = _edited_encoder(text_run, tmp_path, lambda state: state["labels"].__setitem__(0, "\ud800"))
    out = tmp_path / "p.txt"
    assert main(["predict", str(run), str(text_run[1] / "test.jsonl"), "--label-names", "--output", str(out),
                 "-q"]) == 0
    labels = {label for line in out.read_text(encoding="utf-8").splitlines() for label, _ in parse_prediction(line)}
    assert "\ud800" in labels and '"\\ud800"' in out.read_text(encoding="utf-8")


# ------------------------------------------------------------------ Medium 3 and 4: the caller's Y, huge cut-offs
@pytest.fixture(scope="module")
def fitted():
    from holoxmc.data import make_synthetic
    from holoxmc.estimator import XMCClassifier

    train, test = make_synthetic(120, 8, 20, n_test=30, seed=3)
    return XMCClassifier(head="dense", hidden=(8,), epochs=1, progress=False).fit(train.X, train.Y), test


def test_fit_evaluate_and_score_leave_the_callers_y_alone(fitted):
    import scipy.sparse as sp

    from holoxmc.estimator import XMCClassifier

    clf, test = fitted
    dense = test.Y.toarray().astype(np.float32)
    every = sp.csr_matrix(np.ones_like(dense))  # every entry stored: the zeros are explicit
    Y = sp.csr_matrix((dense.ravel(), every.indices, every.indptr), shape=dense.shape)
    sharing = sp.csr_matrix((np.arange(Y.nnz, dtype=np.float32), Y.indices, Y.indptr), shape=Y.shape)
    before = (Y.nnz, Y.data.copy(), Y.indices.copy(), Y.indptr.copy(), sharing.toarray())
    clf.evaluate(test.X, Y)
    clf.score(test.X, Y)
    XMCClassifier(head="dense", hidden=(8,), epochs=1, progress=False).fit(test.X, Y)
    assert Y.nnz == before[0] and np.array_equal(Y.data, before[1])
    assert np.array_equal(Y.indices, before[2]) and np.array_equal(Y.indptr, before[3])
    assert np.array_equal(sharing.toarray(), before[4])


@pytest.mark.parametrize("call", ["ks", "recall_ks", "score"])
def test_a_huge_cut_off_is_one_input_error(fitted, call):
    clf, test = fitted
    with pytest.raises(InputError, match="larger than holoxmc evaluates"):
        if call == "ks":
            clf.evaluate(test.X, test.Y, ks=(10**9,))
        elif call == "recall_ks":
            clf.evaluate(test.X, test.Y, recall_ks=(10**12,))
        else:
            clf.score(test.X, test.Y, metric="P@1000000000")


def test_padding_past_the_labels_is_bounded_by_memory():
    from holoxmc.metrics import pad_predictions

    assert pad_predictions(np.array([[2, 0]]), 4).tolist() == [[2, 0, -1, -1]]
    with pytest.raises(InputError, match="would need"):
        pad_predictions(np.zeros((10**6, 2), dtype=np.int64), 10**5)


def test_an_ensemble_too_large_for_memory_is_refused_before_training(fitted, monkeypatch):
    """Medium 5: every hidden layer of every member counts (hidden=(4096, 4096), 300 members)."""
    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    started = []
    monkeypatch.setattr("holoxmc.train.Trainer.fit", lambda *a, **k: started.append(1) or (_ for _ in ()).throw(
        AssertionError("training started")))
    with pytest.raises(InputError, match="training these 300 networks .* would need"):
        XMCClassifier(head="dense", hidden=(4096, 4096), epochs=1, n_models=300, progress=False).fit(test.X, test.Y)
    assert not started


# ------------------------------------------------------------------ Low
def test_temporaries_of_a_killed_final_save_are_gone_after_resume(tiny, tmp_path, monkeypatch):
    run = tmp_path / "R"
    _unfinished(tiny, run, FAST, monkeypatch)
    for name in ("history.csv", "metrics.json"):  # as a kill during the final save leaves them
        (run / f".{name}.k1ll3d.tmp").write_text("partial")
    assert main(["train", str(tiny), "--out", str(run), *FAST, "--resume"]) == 0
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]


def test_a_model_file_stripped_of_its_scoring_digest_is_refused(saved, tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_file

    from holoxmc.estimator import XMCClassifier

    folder = tmp_path / "m"
    shutil.copytree(saved["dense"], folder)
    path = folder / "model.safetensors"
    with safe_open(str(path), framework="pt") as f:
        tensors, metadata = {name: f.get_tensor(name) for name in f.keys()}, dict(f.metadata())
    del metadata["scoring_config_sha256"]
    save_file(tensors, str(path), metadata=metadata)
    config = json.loads((folder / "config.json").read_text())
    config["network"]["seed"] += 1
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="no scoring digest"):
        XMCClassifier.load(folder)


def test_training_rows_without_any_label_are_refused(fitted):
    import scipy.sparse as sp

    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    with pytest.raises(InputError, match="Y has no labels at all"):
        XMCClassifier(head="dense", hidden=(8,), epochs=1, progress=False).fit(test.X, sp.csr_matrix(test.Y.shape))


def test_complex_features_are_refused(fitted):
    from holoxmc.estimator import XMCClassifier

    clf, test = fitted
    for X in (test.X.astype(np.complex64), test.X.toarray().astype(np.complex128)):
        with pytest.raises(InputError, match="complex values"):
            XMCClassifier(head="dense", hidden=(8,), epochs=1, progress=False).fit(X, test.Y)
        with pytest.raises(InputError, match="complex values"):
            clf.predict_topk(X, 1) if hasattr(clf, "predict_topk") else clf.predict(X)


def test_a_feature_value_that_underflows_a_double_is_refused(tmp_path, capsys):
    path = tmp_path / "u.txt"
    path.write_text("3 5 2\n1 1:1e-400\n0 2:1\n1 0:1\n")
    assert main(["data", "info", str(path)]) == 2
    _one_error(capsys, "u.txt:2: feature value '1e-400' at index 1 underflows to 0")


@pytest.mark.parametrize("propensity", [(-1, -1), (0.55, -1.0), (0.55, 0.0), (-0.5, 1.5)])
def test_propensity_parameters_that_break_the_weights_are_refused(fitted, propensity):
    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    with pytest.raises(InputError, match="propensity"):
        XMCClassifier(head="linear", propensity=propensity, progress=False).fit(test.X, test.Y)


def test_a_warning_is_one_line_on_the_command_line(tiny, tmp_path):
    """``--C 1e308`` makes liblinear stop at max_iter: its warning, not the source line that raised it."""
    command = [sys.executable, "-W", "default", "-m", "holoxmc", "train", str(tiny), "--model", "linear", "--C",
               "1e308", "--out", str(tmp_path / "R"), "-q"]
    done = subprocess.run(command, env=dict(os.environ, PYTHONPATH=SRC), capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 0 and lines, (done.returncode, lines[-3:])
    assert all(line.startswith("holoxmc: warning:") for line in lines), lines


def test_weights_that_do_not_fit_the_network_are_one_line(saved, tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_file

    from holoxmc.estimator import XMCClassifier

    folder = tmp_path / "m"
    shutil.copytree(saved["dense"], folder)
    path = folder / "model.safetensors"
    with safe_open(str(path), framework="pt") as f:
        tensors, metadata = {name: f.get_tensor(name) for name in f.keys()}, dict(f.metadata())
    renamed = sorted(name for name in tensors if name.startswith("network."))[-1]
    tensors[renamed + "_renamed"] = tensors.pop(renamed)
    save_file(tensors, str(path), metadata=metadata)
    with pytest.raises(InputError, match="weights do not match") as caught:
        XMCClassifier.load(folder)
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------ Remaining cases
@pytest.mark.parametrize("head, setting, taken_by", [
    ("dense", {"dim": 64}, "dim applies to heads 'hrr', 'xr'"),
    ("solar", {"dim": 64, "hidden": (8,), "epochs": 1}, "dim applies to heads 'hrr', 'xr'"),
    ("rerank", {"val_fraction": 0.2}, "val_fraction applies to heads 'auto', 'hrr', 'dense', 'solar', 'xr', 'linear'"),
    ("dense", {"time_budget": 5.0}, "time_budget applies to head 'auto'"),
])
def test_a_setting_its_head_does_not_take_is_refused_naming_the_heads_that_take_it(fitted, head, setting, taken_by):
    """As the linear model refuses ``epochs``: the settings table says which heads take each."""
    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    name = next(iter(setting))
    with pytest.raises(InputError, match=re.escape(f"['{name}'] do not apply to head '{head}': {taken_by}")):
        XMCClassifier(head=head, progress=False, **setting).fit(test.X, test.Y)


def test_every_family_takes_the_settings_the_table_gives_it():
    from holoxmc.models.registry import FAMILIES, HEAD_SPECIFIC
    from holoxmc.settings import SETTING

    for head, kind in FAMILIES.items():
        assert kind.settings == {name for name in HEAD_SPECIFIC if head in SETTING[name].heads}, head
        assert ("dim" in kind.settings) == kind.code_dim, head  # d' sizes a label code, nothing else


def test_auto_still_takes_its_shared_settings(fitted):
    """``head="auto"`` hands ``val_fraction`` to its candidates: the re-rank one, which holds
    nothing out, gets its default instead of refusing it."""
    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    clf = XMCClassifier(val_fraction=0.2, time_budget=30.0, seed=2, progress=False).fit(test.X, test.Y)
    assert clf.selection_[0].model == "rerank" and clf.selection_[0].val_p1 is not None


@pytest.mark.parametrize("head, untaken", [("dense", {"dim": 64}), ("solar", {"dim": 64, "time_budget": 5.0})])
def test_a_saved_model_holding_a_setting_its_head_never_took_still_loads(saved, fitted, tmp_path, head, untaken):
    """An older holoxmc saved dense's ignored ``dim``, and ``head="auto"`` its ``time_budget``
    with the winner: the value never changed the model, which loads with the default."""
    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    folder = tmp_path / "m"
    shutil.copytree(saved[head], folder)
    config = json.loads((folder / "config.json").read_text())
    config["params"] |= untaken
    (folder / "config.json").write_text(json.dumps(config))
    loaded = XMCClassifier.load(folder)
    assert all(loaded.get_params()[name] == XMCClassifier().get_params()[name] for name in untaken)
    assert np.array_equal(loaded.predict_topk(test.X)[0], XMCClassifier.load(saved[head]).predict_topk(test.X)[0])


@pytest.mark.parametrize("device", ["meta", "xla"])
@pytest.mark.parametrize("head", ["dense", "linear", "auto"])
def test_a_device_that_cannot_hold_a_model_is_refused_before_any_work(fitted, head, device):
    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    with pytest.raises(InputError, match=f"device '{device}'"):
        XMCClassifier(head=head, device=device, progress=False).fit(test.X, test.Y)


def test_the_meta_device_is_one_line_on_the_command_line(tiny, tmp_path, capsys):
    assert main(["train", str(tiny), "--device", "meta", "--out", str(tmp_path / "R"), *FAST]) == 2
    _one_error(capsys, "device 'meta' cannot hold a trained model")
    assert not (tmp_path / "R").exists()


@pytest.mark.parametrize("head, setting, named", [
    ("dense", {"weight_decay": 1e308}, "weight_decay 1e+308 is far above any sane value"),
    ("hrr", {"head_options": {"ranking": 1e308}}, "ranking 1e+308 is far above any sane value"),
    ("dense", {"lr": 1e308}, "lr 1e+308 is far above any sane value"),
])
def test_a_divergence_names_the_setting_that_is_extreme(fitted, head, setting, named):
    from holoxmc.errors import TrainingDiverged
    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    with pytest.raises(TrainingDiverged, match=re.escape(named)) as caught:
        XMCClassifier(head=head, hidden=(8,), epochs=2, batch_size=8, progress=False, **setting).fit(test.X, test.Y)
    assert "smaller learning rate" not in str(caught.value)


def test_a_divergence_with_no_extreme_setting_still_points_at_the_learning_rate():
    from holoxmc.train.trainer import TrainConfig, divergence_hint

    assert divergence_hint(TrainConfig(lr=0.5), None) == "lr 0.5: try a smaller learning rate, or grad_clip"


def test_the_default_head_on_one_row_says_it_needs_two(fitted, tiny, tmp_path, capsys):
    from holoxmc.estimator import XMCClassifier

    _, test = fitted
    with pytest.raises(InputError, match="needs at least 2 rows; got 1"):
        XMCClassifier(progress=False).fit(test.X[:1], test.Y[:1])
    one = tmp_path / "one.txt"
    one.write_text("1 30 10\n1 1:1\n")
    assert main(["train", str(one), "--test", str(tiny / "tiny_test.txt"), "--out", str(tmp_path / "R"), "-q"]) == 2
    _one_error(capsys, "head='auto' chooses its model on held-out training rows, so it needs at least 2 rows; got 1")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_run_killed_while_its_workers_train_prints_no_leaked_semaphore_warning(procs, tiny, tmp_path):
    """``kill -9`` of a run whose worker pool is up: multiprocessing's resource tracker outlives
    it, removes the pool's semaphores and (before) warned of "leaked semaphore objects" on the
    killed run's terminal, where the ``--resume`` that followed was running."""
    errors = tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "holoxmc", "train", str(tiny), "--model", "fc", "--hidden", "8", "--n-models", "2",
               "--workers", "2", "--epochs", "3000", "--out", str(tmp_path / "K"), "-q"]
    with open(errors, "wb") as stderr:
        process = subprocess.Popen(command, env=dict(os.environ, PYTHONPATH=SRC), stdout=subprocess.DEVNULL,
                                   stderr=stderr)
    children: dict[int, str] = {}

    def pool_up() -> bool:
        return sum("spawn_main" in cmd for cmd in children.values()) == 2 and \
            any("resource_tracker" in cmd for cmd in children.values())
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None and not pool_up():
            time.sleep(0.1)
            children = procs.children(process.pid)
        assert pool_up() and process.poll() is None, errors.read_text()  # killed while its pool trains
    finally:
        process.kill()
        process.wait()
    procs.all_gone(children, 60)  # the workers follow their parent; then the tracker cleans up and ends
    left = [pid for pid in children if procs.alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, children
    assert "leaked semaphore" not in errors.read_text(), errors.read_text()


HUGE_D_FIT = """
import sys

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier

X = sp.csr_matrix((np.ones(3), np.array([1, 2, 3]), np.array([0, 1, 2, 3])), shape=(3, 600_000_000))
for head in sys.argv[1:]:
    try:
        XMCClassifier(head=head, progress=False).fit(X, sp.identity(3, format="csr"))
        print(head, "fitted")
    except InputError as exc:
        print(head, exc)
"""

HEADS = ["linear", "rerank", "solar", "dense", "hrr", "auto"]


def test_fit_refuses_a_huge_d_for_every_head_before_allocating():
    """The command line's check of a header's D, in ``fit`` itself (``ulimit -v 4000000``);
    every head in one process, one after another."""
    done = subprocess.run([sys.executable, "-c", HUGE_D_FIT, *HEADS], env=dict(os.environ, PYTHONPATH=SRC),
                          capture_output=True, text=True, timeout=240, preexec_fn=_limited())
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-500:])
    said = dict(line.split(" ", 1) for line in done.stdout.strip().splitlines())
    assert list(said) == HEADS and all("would need" in said[head] for head in HEADS), done.stdout


RUN = {"model": "fc", "head": "dense", "backbone": "fc", "n_models": 1}


class _Killed(BaseException):
    """A kill, where the marker's write is cut."""


def test_a_run_marker_is_replaced_whole_so_a_kill_never_cuts_it(tmp_path, monkeypatch):
    from holoxmc.cli import rundir

    run = tmp_path / "R"
    run.mkdir()
    old = {"format": "holoxmc-run/1", "holoxmc": "0.2.0", "pid": 1, "settings": RUN, "note": "x" * 500}
    (run / MARKER).write_text(json.dumps(old))

    def killed(*args, **kwargs):
        raise _Killed
    with monkeypatch.context() as patch:  # the step between the record's bytes and their place: the cut
        patch.setattr(os, "ftruncate", killed)
        patch.setattr(os, "replace", killed)
        with pytest.raises(_Killed), rundir.run_lock(run, RUN, resume=True):
            pass
    assert json.loads((run / MARKER).read_text()) == old  # the old record, whole
    (run / f"{MARKER}.4242.deadbeef.tmp").write_text('{"format": "holo')  # a killed write's temporary file
    with rundir.run_lock(run, RUN, resume=True) as recorded:
        assert recorded == RUN
        with pytest.raises(InputError, match=rf"another holoxmc process \(pid {os.getpid()}\)"):
            with rundir.run_lock(run, RUN, resume=True):
                pass  # the lock is held on the marker that replaced the old one
    assert json.loads((run / MARKER).read_text()) == {"format": "holoxmc-run/1", "holoxmc": old["holoxmc"],
                                                      "pid": os.getpid(), "settings": RUN}
    assert sorted(p.name for p in run.iterdir()) == [MARKER]


@pytest.mark.parametrize("garbled", ['{"format": "holoxmc-run/1", "pid": 12}}', '{"format": "holo', "[1]",
                                     '{"settings": "fc"}'])
def test_a_garbled_run_marker_is_one_error_and_left_alone(tiny, tmp_path, capsys, garbled):
    run = tmp_path / "R"
    run.mkdir()
    (run / MARKER).write_text(garbled)
    assert main(["train", str(tiny), "--out", str(run), *FAST, "--resume"]) == 2
    _one_error(capsys, "cannot tell which run this folder holds")
    assert (run / MARKER).read_text() == garbled and sorted(p.name for p in run.iterdir()) == [MARKER]


def test_negative_inverse_propensities_are_refused():
    import scipy.sparse as sp

    from holoxmc.metrics import evaluate, evaluate_scores, psp_at_k

    Y = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 0]], dtype=np.float32))
    scores, weights = np.array([[0.9, 0.1, 0.5], [0.1, 0.9, 0.1]]), np.array([-1.0, -2.0, -1.0])
    for call in (lambda: evaluate(np.array([[0], [1]]), Y, inv_prop=weights, ks=(1,)),
                 lambda: evaluate_scores(scores, Y, inv_prop=weights, ks=(1,)),
                 lambda: psp_at_k(Y.toarray(), scores, k=1, inv_prop=weights)):
        with pytest.raises(InputError, match="inv_prop must hold non-negative weights"):
            call()

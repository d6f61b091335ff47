"""Fixtures shared by several test modules."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import torch

from holoxmc.data import make_synthetic
from holoxmc.data.readers import write_xml_repo


@pytest.fixture(autouse=True)
def _torch_threads_restored():
    """Every test ends with torch's thread count as it began: a test that trains at one
    thread would otherwise change the float sums, and so the weights, of later tests."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def _data_cache_of_the_session(tmp_path_factory):
    """The command line keeps prepared data in ``$HOLOXMC_CACHE``: a folder of this test
    session (set before any fixture runs a command), so that no test writes into the home
    folder or reads what an earlier session prepared."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOLOXMC_CACHE", str(tmp_path_factory.mktemp("prepared")))
        yield


@pytest.fixture
def map_every_array(monkeypatch):
    """Every array of ``run_jobs``' shared data reaches local workers mapped read-only from a
    file, as arrays of a MiB or more do (the tests' data are smaller): a job that writes into
    its shared data fails here, not only at scale."""
    from holoxmc.distributed import jobs

    monkeypatch.setattr(jobs, "MAP_BYTES", 1)


@pytest.fixture
def shortlist_widths(monkeypatch) -> list[int]:
    """The widths of the training shortlists each re-rank fit builds, recorded in order."""
    from holoxmc.models.rerank import fit as rerank_fit

    widths: list[int] = []
    real = rerank_fit.training_shortlists

    def recorded(*args, **kwargs):
        out = real(*args, **kwargs)
        widths.append(out.shape[1])
        return out
    monkeypatch.setattr(rerank_fit, "training_shortlists", recorded)
    return widths


@pytest.fixture(scope="session")
def toy(tmp_path_factory) -> Path:
    """A small dataset folder in the XML-repository format: toy_train.txt, toy_test.txt
    (800 / 200 points, 120 features, 30 labels)."""
    folder = tmp_path_factory.mktemp("data") / "toy"
    train, test = make_synthetic(800, 30, 120, n_test=200, labels_per_point=2.0, seed=2)
    write_xml_repo(folder / "toy_train.txt", train.X, train.Y)
    write_xml_repo(folder / "toy_test.txt", test.X, test.Y)
    return folder


@pytest.fixture(scope="session")
def tiny(tmp_path_factory) -> Path:
    """The hostile-input reproducers' folder: an XML-repository pair tiny_train.txt /
    tiny_test.txt of 200 / 50 rows, D = 30, L = 10."""
    folder = tmp_path_factory.mktemp("data") / "tiny"
    train, test = make_synthetic(200, 10, 30, n_test=50, seed=0)
    write_xml_repo(folder / "tiny_train.txt", train.X, train.Y)
    write_xml_repo(folder / "tiny_test.txt", test.X, test.Y)
    return folder


class Processes:
    """Processes read from ``/proc`` (Linux), for the tests that start, signal and wait for
    worker processes: one scan gives each process its parent."""

    @staticmethod
    def _parents() -> dict[int, int]:
        parents = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                parents[int(stat.parent.name)] = int(stat.read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):  # ended meanwhile
                continue
        return parents

    @classmethod
    def children(cls, pid: int) -> dict[int, str]:
        """The processes whose parent is ``pid``: their command lines (``""`` once ended)."""
        found = {}
        for child, parent in cls._parents().items():
            if parent == pid:
                try:
                    found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    found[child] = ""
        return found

    @classmethod
    def descendants(cls, pid: int) -> list[int]:
        """The processes below ``pid`` (children, theirs, ...)."""
        below: dict[int, list[int]] = {}
        for child, parent in cls._parents().items():
            below.setdefault(parent, []).append(child)
        found, todo = [], [pid]
        while todo:
            step = below.get(todo.pop(), [])
            found += step
            todo += step
        return found

    @staticmethod
    def alive(pid: int) -> bool:
        """Whether ``pid`` runs (a zombie waiting to be reaped does not)."""
        try:
            return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
        except (OSError, IndexError):
            return False

    @classmethod
    def all_gone(cls, pids: Iterable[int], seconds: float = 30.0) -> bool:
        """Wait up to ``seconds`` for every one of ``pids`` to end; whether they all did."""
        pids = list(pids)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and any(cls.alive(pid) for pid in pids):
            time.sleep(0.02)
        return not any(cls.alive(pid) for pid in pids)


@pytest.fixture
def procs() -> type[Processes]:
    """The :class:`Processes` helpers."""
    return Processes


def _kill_during_epochs(command: list[str], run_dir: Path, after_epoch: int = 2) -> int:
    """Start the training ``command`` (writing to ``run_dir``), SIGKILL it with all its
    descendants once its checkpoint has passed ``after_epoch``, wait until they have ended,
    and return the checkpoint's epoch.

    The descendants are found in ``/proc``, not by process group: torchrun starts each
    worker in a session of its own, where a signal to the launcher's group does not reach
    it (an orphaned rank would finish the run behind the test's back)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    checkpoint = run_dir / "checkpoint.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if checkpoint.exists() and json.loads(checkpoint.read_text())["epoch"] >= after_epoch:
            break
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGSTOP)  # starts no worker while they are collected
    workers = Processes.descendants(process.pid)
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert Processes.all_gone(workers, 60), "a killed worker did not end"
    assert not (run_dir / "metrics.json").exists(), "the run finished before it could be killed"
    assert checkpoint.exists(), f"no checkpoint within 120 s (the run's exit status: {process.returncode})"
    return json.loads(checkpoint.read_text())["epoch"]


@pytest.fixture
def kill_during_epochs() -> Callable[..., int]:
    """``kill_during_epochs(command, run_dir, after_epoch=2) -> epoch reached`` (see above)."""
    return _kill_during_epochs

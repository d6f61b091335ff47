"""Independent jobs inline, in spawned worker processes and as Ray tasks."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc.distributed import JobsFailed, run_jobs, threads_per_worker
from holoxmc.distributed import jobs
from holoxmc.distributed.jobs import MAP_BYTES
from holoxmc.errors import InputError


def _describe_worker(job: int, shared: dict) -> tuple[int, int, int]:
    """Module-level so spawned workers can import it: (job * factor, torch threads, pid)."""
    if job < 0:
        raise ValueError(f"negative job {job}")
    return job * shared["factor"], torch.get_num_threads(), os.getpid()


def _use_shared_arrays(job: int, shared: dict) -> tuple[float, bool, bool, float]:
    """(a row product of the shared CSR, whether its data and the big array are writeable, a small array's sum)."""
    X = shared["X"]
    return (float((X[job] @ X.T).sum()), X.data.flags.writeable, shared["big"].flags.writeable,
            float(shared["small"].sum()))


def test_local_workers_map_large_shared_arrays_read_only_and_leave_no_files(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rng = np.random.default_rng(0)
    X = sp.random(200, 3000, density=0.3, format="csr", random_state=0, dtype=np.float64)  # data > MAP_BYTES
    assert X.data.nbytes >= MAP_BYTES
    shared = {"X": X, "big": rng.random(MAP_BYTES // 8 + 1), "small": np.arange(10.0)}
    inline = run_jobs(_use_shared_arrays, [0, 5, 199], shared=shared)
    mapped = run_jobs(_use_shared_arrays, [0, 5, 199], shared=shared, workers=2)
    assert [r[0] for r in mapped] == [r[0] for r in inline]  # the same matrix, bit for bit
    assert all(not data_writeable and not big_writeable for _, data_writeable, big_writeable, _ in mapped)
    assert all(r[1] and r[2] for r in inline)  # this process keeps its own, writeable arrays
    assert {r[3] for r in mapped} == {45.0}
    assert not list(tmp_path.iterdir())  # the mapped files are removed with the pool


def test_a_buffer_that_cannot_be_written_is_pickled_in_band(monkeypatch):
    def disk_full(path, view):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(jobs, "_write_buffer", disk_full)
    shared = {"X": sp.random(200, 3000, density=0.3, format="csr", random_state=0, dtype=np.float64),
              "big": np.ones(MAP_BYTES // 8 + 1), "small": np.arange(10.0)}
    results = run_jobs(_use_shared_arrays, [0, 7], shared=shared, workers=2)
    assert [r[0] for r in results] == [r[0] for r in run_jobs(_use_shared_arrays, [0, 7], shared=shared)]
    assert all(r[1] and r[2] for r in results)  # copies in each worker, as before mapping


def test_folders_left_by_killed_processes_are_removed_by_the_next_pool(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    stale = tmp_path / f"holoxmc-jobs-{ended.pid}-x1"
    live = tmp_path / f"holoxmc-jobs-{os.getppid()}-x2"  # a process that is still running
    for folder in (stale, live):
        folder.mkdir()
        (folder / "0.buffer").write_bytes(b"0" * 10)
    run_jobs(_describe_worker, [1, 2], shared={"factor": 1}, workers=2)
    assert not stale.exists() and live.exists()


def test_a_scratch_folder_sweeps_folders_of_ended_processes_and_removes_its_own(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    stale = tmp_path / f"holoxmc-jobs-{ended.pid}-x3"
    stale.mkdir()
    with jobs.scratch_folder() as folder:
        assert not stale.exists() and os.path.basename(folder).startswith(f"holoxmc-jobs-{os.getpid()}-")
    assert not list(tmp_path.iterdir())


def test_inline_runs_in_order_and_restores_threads():
    before = torch.get_num_threads()
    results = run_jobs(_describe_worker, [3, 1, 2], shared={"factor": 10}, threads_per_job=1)
    assert [r[0] for r in results] == [30, 10, 20]
    assert {r[1] for r in results} == {1}
    assert {r[2] for r in results} == {os.getpid()}
    assert torch.get_num_threads() == before


def test_local_workers_run_in_other_processes_with_given_threads():
    results = run_jobs(_describe_worker, [1, 2, 3, 4], shared={"factor": 3}, workers=2, threads_per_job=1)
    assert [r[0] for r in results] == [3, 6, 9, 12]
    assert {r[1] for r in results} == {1}
    pids = {r[2] for r in results}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_job_does_not_stop_the_others(workers):
    with pytest.raises(JobsFailed) as info:
        run_jobs(_describe_worker, [1, -5, 2], shared={"factor": 1}, workers=workers)
    error = info.value
    assert [f.position for f in error.failures] == [1]
    assert "negative job -5" in error.failures[0].error
    assert [r if r is None else r[0] for r in error.results] == [1, None, 2]
    assert "1 of 3 jobs failed" in str(error)


def test_invalid_arguments():
    assert run_jobs(_describe_worker, [], shared=None) == []
    with pytest.raises(InputError):
        run_jobs(_describe_worker, [1], workers=0)
    for threads in (0, 1.5, "2", True):
        with pytest.raises(InputError, match="threads_per_job must be a positive integer"):
            run_jobs(_describe_worker, [1], threads_per_job=threads)


@pytest.mark.parametrize("workers", [0, -1, 2.0, True, None])
def test_threads_per_worker_refuses_a_worker_count_that_is_not_a_positive_integer(workers):
    with pytest.raises(InputError, match="workers must be a positive integer"):
        threads_per_worker(workers)


@pytest.mark.xdist_group("ray")  # one local Ray instance at a time under `make test`
def test_ray_tasks_return_results_and_report_failures():
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'holoxmc[ray]'")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        # pow is importable everywhere; pow(0, -1) raises ZeroDivisionError inside its task.
        assert run_jobs(pow, [1, 2, 3], shared=3, ray_address="local") == [1, 8, 27]
        with pytest.raises(JobsFailed) as info:
            run_jobs(pow, [2, 0], shared=-1, ray_address="local")
        assert [f.position for f in info.value.failures] == [1]
        assert info.value.results[0] == 0.5
        assert "ZeroDivisionError" in info.value.failures[0].error
    finally:
        ray.shutdown()


def test_ray_tasks_fit_the_largest_node_and_a_new_address_restarts_our_session():
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'holoxmc[ray]'")
    try:
        # More threads than any node has: each task asks for the largest node's CPUs (it
        # waited forever for 64 before). pow is importable in Ray's workers; this module is not.
        assert run_jobs(pow, [1, 2], shared=3, ray_address="local", threads_per_job=64, gpu=False) == [1, 8]
        # Our local session is not reused for another address (it ran there silently before);
        # no cluster runs at "auto" here, so that is one clear error.
        with pytest.raises(InputError, match="cannot start or reach Ray"):
            run_jobs(pow, [1], shared=2, ray_address="auto", gpu=False)
        assert not ray.is_initialized()
    finally:
        ray.shutdown()

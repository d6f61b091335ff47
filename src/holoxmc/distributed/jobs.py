"""Run independent jobs — no communication between them — inline, in local worker processes
or as Ray tasks, with the same results everywhere.

A job is a picklable value handed to a module-level function ``fn(job, shared)``; ``shared``
is read-only data every job needs (e.g. the training matrices). It is shipped once into the
object store (Ray) or, for local workers, pickled once with its large numpy arrays written to
temporary files that every worker maps read-only (no copy per worker; torch tensors are
pickled whole, a copy each); never once per job. A job must not write into ``shared``: in a
worker its large arrays are read-only. Every backend runs
``fn`` with the same number of torch threads, so floating-point results are bit-identical.

A job that raises does not stop the others: every job runs to its end, then
:class:`JobsFailed` reports the failed ones, and a re-run only needs those. A local worker
process that dies (killed, out of memory) takes the process pool down with it: the jobs not
finished by then are reported failed too.

Ray, once started here, stays up for the next call (as ``ray.init`` leaves it, until the
process exits or calls ``ray.shutdown()``); a call for another address restarts it there.
A Ray session the caller started itself is used as it is.
"""

from __future__ import annotations

import ctypes
import mmap
import multiprocessing
import numbers
import os
import pickle
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from holoxmc.errors import HoloxmcError, InputError

__all__ = ["run_jobs", "scratch_folder", "threads_per_worker", "JobsFailed", "JobFailure"]

Job = TypeVar("Job")
Result = TypeVar("Result")


@dataclass(frozen=True)
class JobFailure:
    """One failed job: its position in the job list and the error, as text."""

    position: int
    error: str


class JobsFailed(HoloxmcError):
    """Some jobs failed; the others finished. ``results`` holds ``None`` at failed positions."""

    def __init__(self, failures: list[JobFailure], results: list[Any]):
        self.failures = failures
        self.results = results
        shown = "; ".join(f"job {f.position}: {f.error}" for f in failures[:3])
        more = f" (+{len(failures) - 3} more)" if len(failures) > 3 else ""
        super().__init__(f"{len(failures)} of {len(results)} jobs failed: {shown}{more}")


# prctl's option number that asks for a signal when the parent process dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
# How often a worker's watch thread checks that its parent is alive.
_WATCH_SECONDS = 1.0
# Per-worker-process state of the local backend: filled once by the pool initializer.
_WORKER_SHARED: Any = None
#: Buffers of ``shared`` (a numpy array's data, ...) of at least this many bytes reach local
#: workers as read-only memory maps of a temporary file each, shared by every worker, instead of
#: a pickled copy in each (pickle protocol 5's out-of-band buffers, as joblib's auto-memmapping).
MAP_BYTES = 1 << 20
# Name of those files' folder: this prefix, the creating process's id, a dash.
_FOLDER_PREFIX = "holoxmc-jobs-"
# The Ray session this module started: its driver job id and the address asked for.
_OUR_RAY: dict[str, Any] = {}


@dataclass(frozen=True)
class _Mapped:
    """``shared`` pickled (protocol 5) without its large buffers, and the files that hold them in order."""

    pickled: bytes
    paths: tuple[str, ...]


def _map_out(shared: Any, folder: str) -> _Mapped:
    """Pickle ``shared``, writing each buffer of at least :data:`MAP_BYTES` to a file in
    ``folder``; everything in-band (a copy per worker, as before) when a file cannot be
    written (a full or read-only ``TMPDIR``)."""
    paths: list[str] = []

    def out_of_band(buffer: pickle.PickleBuffer) -> bool:
        view = buffer.raw()
        if view.nbytes < max(MAP_BYTES, 1):  # an empty file cannot be mapped
            return True  # pickled in-band
        paths.append(os.path.join(folder, f"{len(paths)}.buffer"))
        _write_buffer(paths[-1], view)
        return False
    try:
        return _Mapped(pickle.dumps(shared, protocol=5, buffer_callback=out_of_band), tuple(paths))
    except OSError:
        return _Mapped(pickle.dumps(shared, protocol=5), ())


def _write_buffer(path: str, view: memoryview) -> None:
    with open(path, "wb") as file:
        file.write(view)


def _sweep_folders() -> None:
    """Remove the folders of :func:`_map_out` left by processes that ended without removing
    them (killed): their names hold the creating process's id."""
    for folder in Path(tempfile.gettempdir()).glob(_FOLDER_PREFIX + "*-*"):
        pid = folder.name[len(_FOLDER_PREFIX):].partition("-")[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def _map_in(mapped: _Mapped) -> Any:
    """The object :func:`_map_out` pickled, its large arrays read-only views of the mapped files."""
    buffers = []
    for path in mapped.paths:
        with open(path, "rb") as file:
            buffers.append(mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ))
    return pickle.loads(mapped.pickled, buffers=buffers)


def _init_local_worker(threads: int, shared: _Mapped, parent: int) -> None:
    global _WORKER_SHARED
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends the pool
    torch.set_num_threads(threads)
    _WORKER_SHARED = _map_in(shared)


def _die_with_parent(parent: int) -> None:
    """End this worker process when ``parent`` (the process that started the pool) ends,
    however it ends (SIGKILL included): the kernel's parent-death signal on Linux, and a
    thread that watches the parent's pid everywhere (it only ever calls ``os._exit``)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="holoxmc-parent-watch", daemon=True).start()


def _call_in_local_worker(fn: Callable[[Any, Any], Any], job: Any) -> Any:
    return fn(job, _WORKER_SHARED)


def _call_with_threads(fn: Callable[[Any, Any], Any], job: Any, shared: Any, threads: int) -> Any:
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return fn(job, shared)
    finally:
        torch.set_num_threads(previous)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _run_inline(fn, jobs, shared, threads) -> tuple[list[Any], list[JobFailure]]:
    results: list[Any] = [None] * len(jobs)
    failures: list[JobFailure] = []
    for i, job in enumerate(jobs):
        try:
            results[i] = _call_with_threads(fn, job, shared, threads)
        except Exception as exc:  # one failed job must not stop the others
            failures.append(JobFailure(i, _describe(exc)))
    return results, failures


@contextmanager
def scratch_folder() -> Iterator[str]:
    """A temporary folder for this process's jobs (e.g. results they leave on disk rather than
    send back), removed on leaving; one left by a killed process is removed by a later
    :func:`run_jobs` with local workers or call of this function (its name holds the pid).

    Example:
        >>> with scratch_folder() as folder:
        ...     os.path.isdir(folder)
        True
    """
    _sweep_folders()
    with tempfile.TemporaryDirectory(prefix=f"{_FOLDER_PREFIX}{os.getpid()}-", ignore_cleanup_errors=True) as folder:
        yield folder


#: The ``-W`` option multiprocessing's resource tracker starts with (:func:`_start_resource_tracker`).
_TRACKER_WARNING = "ignore:resource_tracker:UserWarning:multiprocessing.resource_tracker"


def _start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker, if this process has none running yet, with its
    "leaked semaphore objects" warning off. A pool's queues hold semaphores that the tracker
    removes once every process using them has died; when the pool's owner was killed
    (``kill -9``), the tracker outlives it, removes them and warns: a warning about nothing left
    behind, which the killed run's terminal showed, often during the ``--resume`` that followed.
    The tracker reads its warning filters from the ``-W`` options it inherits (here that one
    alone); a tracker started earlier by the caller is left as it is."""
    from multiprocessing import resource_tracker

    added = _TRACKER_WARNING not in sys.warnoptions
    if added:
        sys.warnoptions.append(_TRACKER_WARNING)
    try:
        resource_tracker.ensure_running()
    finally:
        if added:
            sys.warnoptions.remove(_TRACKER_WARNING)


def _run_local(fn, jobs, shared, workers, threads) -> tuple[list[Any], list[JobFailure]]:
    context = multiprocessing.get_context("spawn")  # fork is unsafe with torch threads
    _start_resource_tracker()
    with scratch_folder() as folder:  # removed once the pool is down
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_init_local_worker,
                                   initargs=(threads, _map_out(shared, folder), os.getpid()))
        return _collect(pool, fn, jobs)


def _collect(pool: ProcessPoolExecutor, fn: Callable[[Any, Any], Any],
             jobs: list[Any]) -> tuple[list[Any], list[JobFailure]]:
    """Submit every job to ``pool``, wait for all of them and shut the pool down."""
    results: list[Any] = [None] * len(jobs)
    failures: list[JobFailure] = []
    try:
        futures = [pool.submit(_call_in_local_worker, fn, job) for job in jobs]
        for i, future in enumerate(futures):
            try:
                results[i] = future.result()
            except Exception as exc:  # includes BrokenProcessPool when a worker is killed
                failures.append(JobFailure(i, _describe(exc)))
    except BaseException:  # Ctrl-C, SIGTERM turned into an exception, ...: no worker outlives the call
        _terminate(pool)
        raise
    pool.shutdown()
    return results, failures


def _terminate(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: cancel queued jobs and end its worker processes."""
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
    for process in processes:
        process.join(timeout=5)
    pool.shutdown(wait=True)  # closes the pool's queues, whose semaphores would be reported leaked


def _connect_ray(ray: Any, address: str | None) -> None:
    """Make this process a driver of the Ray cluster at ``address`` (``None``: a new local
    instance), reusing the session already running when it is the caller's own or ours for
    the same address."""
    if ray.is_initialized():
        ours = _OUR_RAY.get("job") == _ray_session(ray)  # a job id alone repeats across sessions
        if not ours or _OUR_RAY["address"] == address:
            return
        ray.shutdown()
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        where = "a new local instance" if address is None else repr(address)
        raise InputError(f"cannot start or reach Ray at {where}: {exc}") from None
    _OUR_RAY.update(job=_ray_session(ray), address=address)


def _ray_session(ray: Any) -> tuple[str, str]:
    """This driver's job and its cluster's address: which Ray session it is (the first
    job of every new local instance has the same id)."""
    context = ray.get_runtime_context()
    return str(context.get_job_id()), str(context.gcs_address)


def _largest_node_cpus(ray: Any) -> int:
    """CPUs of the cluster's largest live node (0 when Ray reports none)."""
    return int(max((node["Resources"].get("CPU", 0) for node in ray.nodes() if node.get("Alive")), default=0))


def _run_ray(fn, jobs, shared, address, threads, gpu) -> tuple[list[Any], list[JobFailure]]:
    try:
        import ray
    except ImportError as exc:
        raise InputError("Ray is not installed: pip install 'holoxmc[ray]'") from exc
    _connect_ray(ray, address)
    largest = _largest_node_cpus(ray)
    if largest:  # a task asking for more CPUs than any node has would wait forever
        threads = max(1, min(threads, largest))
    gpus = 1 if gpu and ray.cluster_resources().get("GPU", 0) >= 1 else 0
    task = ray.remote(num_cpus=threads, num_gpus=gpus, max_retries=0)(_call_with_threads)
    shared_ref = ray.put(shared)
    refs = [task.remote(fn, job, shared_ref, threads) for job in jobs]
    results: list[Any] = [None] * len(jobs)
    failures: list[JobFailure] = []
    for i, ref in enumerate(refs):
        try:
            results[i] = ray.get(ref)
        except Exception as exc:  # RayTaskError wraps the job's own error
            failures.append(JobFailure(i, _describe(getattr(exc, "cause", None) or exc)))
    return results, failures


def threads_per_worker(workers: int) -> int:
    """Torch threads for each of ``workers`` jobs running at once: this machine's cores
    shared among them (at least one).

    Example:
        >>> threads_per_worker(10**6)
        1
    """
    check_workers(workers)
    return max(1, (os.cpu_count() or 1) // workers)


def check_workers(workers: int) -> None:
    """Refuse a worker count that is not a positive integer (``0`` would divide by zero)."""
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or workers < 1:
        raise InputError(f"workers must be a positive integer, got {workers!r}")


def run_jobs(
    fn: Callable[[Job, Any], Result],
    jobs: Sequence[Job],
    shared: Any = None,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    threads_per_job: int = 1,
    gpu: bool = True,
) -> list[Result]:
    """Run ``fn(job, shared)`` for every job, with no communication between jobs.

    Args:
        fn: a module-level (picklable) function.
        jobs: the jobs; results come back in the same order.
        shared: read-only data for every job (jobs must not write into it), shipped once to Ray or,
            for local workers, pickled once with its large numpy arrays mapped read-only from
            temporary files (:data:`MAP_BYTES`).
        workers: local worker processes (spawned); ``1`` runs in this process.
        ray_address: run each job as a Ray task on this cluster (``"auto"``, ``"ray://host:10001"``,
            or ``"local"`` for a fresh local instance); a task asks for one GPU when the cluster
            has GPUs and ``gpu`` is true. Overrides ``workers``. An address Ray cannot be
            started at or reached at is an :class:`~holoxmc.errors.InputError`.
        threads_per_job: torch threads inside each job (the same in every backend, so results are
            bit-identical; keep ``workers * threads_per_job`` at or below the core count). A Ray
            task asks for as many CPUs, at most the CPUs of the cluster's largest node (then
            runs with that many threads).
        gpu: whether a Ray task may use a GPU (``False`` for CPU-only jobs, so that they do not
            wait for one).

    Returns:
        the results of ``fn``, in job order.

    Raises:
        JobsFailed: after every job ran, when any of them raised (or its worker died).

    Example:
        >>> run_jobs(pow, [1, 2, 3], shared=2)
        [1, 4, 9]
    """
    check_workers(workers)
    if isinstance(threads_per_job, bool) or not isinstance(threads_per_job, numbers.Integral) or threads_per_job < 1:
        raise InputError(f"threads_per_job must be a positive integer, got {threads_per_job!r}")
    jobs = list(jobs)
    if not jobs:
        return []
    if ray_address is not None:
        address = None if ray_address == "local" else ray_address
        results, failures = _run_ray(fn, jobs, shared, address, threads_per_job, gpu)
    elif workers == 1:
        results, failures = _run_inline(fn, jobs, shared, threads_per_job)
    else:
        results, failures = _run_local(fn, jobs, shared, min(workers, len(jobs)), threads_per_job)
    if failures:
        raise JobsFailed(failures, results)
    return results


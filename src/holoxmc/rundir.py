"""Run folders: where ``holoxmc train`` writes, checked before any work and held by one
writer at a time.

A run folder holds a marker file, :data:`MARKER_FILE`, written before anything else: only
a folder with it is continued (``--resume``) or written into when it is not empty, so a
folder of the user's own files is never overwritten. The marker records the settings the
run was started with; a resume with other settings is refused. While a run writes, it
holds an exclusive ``fcntl.flock`` on :data:`LOCK_FILE` (which names its process id): a
second writer is refused at once, naming that process. The kernel drops the lock when the
process ends, however it ends, so a killed run leaves no stale lock.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp()) / "run"
    >>> check_run_target(folder)
    >>> with RunFolder(folder, settings={"model": "hrr-fc"}) as run:
    ...     run.is_new
    True
    >>> sorted(p.name for p in folder.iterdir())
    ['.holoxmc-lock', '.holoxmc-run']
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any

from holoxmc.errors import InputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock, the marker checks still apply
    fcntl = None  # type: ignore[assignment]

__all__ = ["MARKER_FILE", "LOCK_FILE", "RunFolder", "check_run_target", "check_run_contents", "check_output_file",
           "read_marker"]

#: Written first into every run folder holoxmc creates: what it is and the settings it started with.
MARKER_FILE = ".holoxmc-run"
#: Held with ``flock`` by the one process writing the run; holds that process's id.
LOCK_FILE = ".holoxmc-lock"
_FORMAT = "holoxmc-run-1"
#: Files of this module, which do not make a folder "not empty".
OWN_FILES = (MARKER_FILE, LOCK_FILE)


def _nearest_existing(path: Path) -> Path:
    """``path`` or the closest of its parents that exists."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(".")


def _check_folder_writable(folder: Path, what: Path) -> None:
    if not folder.is_dir():
        raise InputError(f"{what}: cannot write it ({folder} is a file, not a folder)")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(f"{what}: cannot write it ({folder} is read-only)")


def check_run_target(run_dir: Path) -> None:
    """Refuse a ``--out`` folder that cannot become a run folder, before any work: a file,
    a dangling symbolic link, or a folder (or the closest existing parent of a new one)
    that this process cannot write.

    Args:
        run_dir: the run folder, existing or not.

    Raises:
        InputError: naming ``run_dir`` and the fault.

    Example:
        >>> check_run_target(Path("/proc/holoxmc-run"))
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: /proc/holoxmc-run: cannot write it (/proc is read-only)
    """
    if run_dir.is_symlink() and not run_dir.exists():
        raise InputError(f"{run_dir}: a symbolic link to {os.readlink(run_dir)}, which does not exist")
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError(f"{run_dir}: exists and is not a folder")
    _check_folder_writable(_nearest_existing(run_dir), run_dir)


def check_output_file(path: Path) -> None:
    """Refuse an output file that cannot be written, before the work that produces it: a
    folder, a path under a file, or a read-only folder.

    Raises:
        InputError: ``"<path>: cannot write it (<why>)"``.
    """
    if path.is_dir():
        raise InputError(f"{path}: cannot write it (Is a directory)")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"{path}: cannot write it (the file is read-only)")
    _check_folder_writable(_nearest_existing(path.parent), path)


def read_marker(run_dir: Path) -> dict[str, Any] | None:
    """The marker of ``run_dir`` as a dict; ``None`` when it has none.

    Raises:
        InputError: the marker is not one this library wrote.
    """
    path = run_dir / MARKER_FILE
    if not path.is_file():
        return None
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a holoxmc run marker ({exc})") from None
    if not isinstance(marker, dict) or marker.get("format") != _FORMAT:
        raise InputError(f"{path}: not a holoxmc run marker (format {_FORMAT!r} expected)")
    return marker


def check_run_contents(run_dir: Path, *, resume: bool, finished_file: str | None = None) -> dict[str, Any] | None:
    """Check what ``run_dir`` holds before a run writes into it.

    Args:
        run_dir: the run folder (missing or empty: a new run).
        resume: whether the run is to be continued.
        finished_file: the file a complete run has (``None``: no such check).

    Returns:
        the marker of the run to continue, or ``None`` for a new run.

    Raises:
        InputError: the folder holds files and no marker (not made by holoxmc), a finished
            run, or a run to continue without ``resume``.
    """
    others = sorted(p.name for p in run_dir.iterdir() if p.name not in OWN_FILES) if run_dir.is_dir() else []
    if not others:
        return None
    marker = read_marker(run_dir)
    if marker is None:
        hint = "it was not made by holoxmc, so it is neither continued nor overwritten" if resume else \
            "choose another --out"
        listed = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise InputError(f"{run_dir}: not empty ({listed}) and not a holoxmc run folder (no {MARKER_FILE}): {hint}")
    if finished_file is not None and (run_dir / finished_file).exists():
        raise InputError(f"{run_dir}: holds a finished run ({finished_file}); choose another --out")
    if not resume:
        raise InputError(f"{run_dir}: not empty; use --resume to continue it, or choose another --out")
    return marker


class RunFolder:
    """The run folder a training run writes, held for the run (a context manager).

    On entry it creates the folder, takes its lock (or refuses: another process writes
    it), and checks it: a new or empty folder gets the marker with ``settings``; an existing
    run is continued only with ``resume`` and the same ``settings``; a folder holding a
    finished run (``finished_file``) or files of its own is refused. On an error inside
    the block, a folder this object created and nothing else wrote into is removed.

    Args:
        run_dir: the folder.
        settings: JSON settings the run is matched by on resume.
        resume: continue the run in the folder.
        finished_file: the file a complete run has (``None``: no such check).

    Attributes:
        is_new: the folder held no run before (its marker was written now).
    """

    def __init__(self, run_dir: Path, settings: dict[str, Any], *, resume: bool = False,
                 finished_file: str | None = None):
        self.run_dir = Path(run_dir)
        self.settings = json.loads(json.dumps(settings))  # as it reads back from the marker
        self.resume = resume
        self.finished_file = finished_file
        self.is_new = False
        self._created = False
        self._lock_fd: int | None = None

    def __enter__(self) -> "RunFolder":
        check_run_target(self.run_dir)
        self._created = not self.run_dir.exists()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lock()
            self._check_contents()
        except BaseException:
            self._release(failed=True)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self._release(failed=kind is not None)

    def _lock(self) -> None:
        fd = os.open(self.run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
                os.close(fd)
                raise InputError(f"{self.run_dir}: another holoxmc process (pid {holder}) is writing this run "
                                 "folder; wait for it to end, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self._lock_fd = fd

    def _check_contents(self) -> None:
        marker = check_run_contents(self.run_dir, resume=self.resume, finished_file=self.finished_file)
        if marker is None:  # a new or empty folder: a new run
            self._write_marker()
            self.is_new = True
            return
        recorded = marker.get("settings") or {}
        if recorded != self.settings:
            changed = sorted(key for key in {*self.settings, *recorded} if recorded.get(key) != self.settings.get(key))
            raise InputError(f"{self.run_dir}: the checkpoint was made with another configuration or data "
                             f"({', '.join(changed)} differ); use the same options to resume, or a new run directory")

    def _write_marker(self) -> None:
        from holoxmc import __version__
        from holoxmc.io import atomic_write_json

        atomic_write_json(self.run_dir / MARKER_FILE,
                          {"format": _FORMAT, "holoxmc": __version__, "settings": self.settings})

    def _release(self, *, failed: bool) -> None:
        if failed and self.is_new and self._lock_fd is not None \
                and not any(p.name not in OWN_FILES for p in self.run_dir.iterdir()):
            (self.run_dir / MARKER_FILE).unlink(missing_ok=True)  # nothing was written: leave no run behind
            if self._created:
                (self.run_dir / LOCK_FILE).unlink(missing_ok=True)
                self.run_dir.rmdir()
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # drops the lock
            self._lock_fd = None

"""The run folder of ``holoxmc train``: checked before any work, marked as holoxmc's, and
written by one process at a time.

- A folder is resumed (or trained into when not empty) only if it holds :data:`MARKER`,
  which ``train`` writes first: a user's own folder is never overwritten.
- :func:`run_lock` holds an exclusive ``flock`` on that marker for the whole run (the file is
  created in place, never replaced, so every process locks the same file); a second ``train``
  into the same folder is refused at once (exit 2) and names the holder's pid.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from holoxmc import __version__
from holoxmc.errors import InputError
from holoxmc.io import to_json

__all__ = ["MARKER", "check_run_dir", "claim_run_dir", "run_lock"]

#: The file that marks a folder as a holoxmc run folder; ``train`` locks it while it writes.
MARKER = ".holoxmc-run"


def _contents(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.iterdir() if p.name != MARKER] if run_dir.is_dir() else []


def check_run_dir(run_dir: Path, *, resume: bool) -> None:
    """Refuse, before any work, a ``--out`` that cannot or must not be written.

    Raises:
        InputError: a dangling link or a file in its place, a folder holding something that
            ``train`` did not write, a non-empty folder without ``--resume``, or a folder
            (or the nearest existing parent) that this process cannot write.
    """
    if run_dir.is_symlink() and not run_dir.exists():
        raise InputError(f"{run_dir}: a link to {os.readlink(run_dir)}, which does not exist")
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError(f"{run_dir}: exists and is not a folder")
    if _contents(run_dir):
        if not resume:
            raise InputError(f"{run_dir}: not empty; use --resume to continue it, or choose another --out")
        if not (run_dir / MARKER).is_file():
            raise InputError(f"{run_dir}: not a holoxmc run folder (no {MARKER}); holoxmc resumes only runs it "
                             "started, and never overwrites other files: choose another --out")
    existing = next(folder for folder in (run_dir, *run_dir.parents) if folder.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{run_dir}: cannot write there ({existing} is not a writable folder)")


def claim_run_dir(run_dir: Path) -> None:
    """Create ``run_dir`` if needed (the marker is created by :func:`run_lock`)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{run_dir}: cannot create it ({exc.strerror or exc})") from None


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Mark ``run_dir`` as a holoxmc run folder and hold its lock while the block runs.

    Raises:
        InputError: another process holds it (its pid is named).
    """
    path = run_dir / MARKER
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise InputError(f"{path}: cannot create the run folder's marker ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            holder = _holder(os.pread(fd, 4096, 0))
            raise InputError(f"{run_dir}: another holoxmc process (pid {holder}) is writing this run folder; "
                             "wait for it, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, to_json({"format": "holoxmc-run/1", "holoxmc": __version__, "pid": os.getpid()}).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _holder(content: bytes) -> str:
    try:
        return str(json.loads(content)["pid"])
    except (ValueError, KeyError, TypeError):
        return "unknown"

"""The run folder of ``holoxmc train``: checked before any work, marked as holoxmc's, and
written by one process at a time.

- A folder is resumed (or trained into when not empty) only if it holds :data:`MARKER`,
  which ``train`` writes first: a user's own folder is never overwritten.
- :func:`run_lock` holds an exclusive ``flock`` on that marker for the whole run; a second
  ``train`` into the same folder is refused at once (exit 2) and names the holder's pid. The
  record is written to a new file beside the marker, locked, and renamed over it (a kill leaves
  the old record or the new one, never a part); a lock taken on a marker that was replaced
  meanwhile is taken again on the new one.
- The marker is opened without following a link and must be a regular file: a link planted
  there is refused, never written through. A marker that is not holoxmc's record (cut short by
  an older holoxmc, or edited) is one error: the folder is left alone.
- The marker records the run's model (``settings``: the model name, head, backbone and
  ensemble size); ``--resume`` with another model is refused before anything is touched.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import json
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from holoxmc import __version__
from holoxmc.errors import InputError
from holoxmc.io import file_kind, parse_json, read_bounded, read_json, to_json

__all__ = ["MARKER", "check_run_dir", "claim_run_dir", "run_lock", "recorded_settings", "check_same_settings"]

#: The file that marks a folder as a holoxmc run folder; ``train`` locks it while it writes.
MARKER = ".holoxmc-run"
#: The most bytes of a marker read back (holoxmc writes about 200).
_MARKER_BYTES = 1 << 16
#: Times a lock is taken again on a marker another writer replaced meanwhile.
_LOCK_TRIES = 20


def _is_marker(path: Path) -> bool:
    """``path`` is a regular file, not a link to one."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _contents(run_dir: Path) -> list[Path]:
    """What ``run_dir`` holds besides its marker (and a temporary marker a killed write left)."""
    return [p for p in run_dir.iterdir() if p.name != MARKER and not _is_marker_temp(p)] if run_dir.is_dir() else []


def check_run_dir(run_dir: Path, *, resume: bool) -> None:
    """Refuse, before any work, a ``--out`` that cannot or must not be written.

    Raises:
        InputError: a dangling link or a file in its place, a marker that is a link, FIFO,
            folder or device, a folder holding something that
            ``train`` did not write, a non-empty folder without ``--resume``, or a folder
            (or the nearest existing parent) that this process cannot write.
    """
    if run_dir.is_symlink() and not run_dir.exists():
        raise InputError(f"{run_dir}: a link to {os.readlink(run_dir)}, which does not exist")
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError(f"{run_dir}: exists and is not a folder")
    marker = run_dir / MARKER
    if (marker.is_symlink() or marker.exists()) and not _is_marker(marker):
        raise InputError(f"{marker}: the run folder's marker is not a regular file ({_kind(marker)}); holoxmc does "
                         "not write through it")
    if _contents(run_dir):
        if not resume:
            raise InputError(f"{run_dir}: not empty; use --resume to continue it, or choose another --out")
        if not _is_marker(marker):
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


def _kind(path: Path) -> str:
    try:
        return file_kind(os.lstat(path).st_mode)
    except OSError as exc:
        return exc.strerror or str(exc)


def _open_marker(path: Path) -> int:
    """The marker opened for reading and writing: created if missing, never through a link
    (``O_NOFOLLOW``), never blocking on a FIFO, and a regular file (``fstat``)."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if path.is_symlink():
            raise InputError(f"{path}: the run folder's marker is a symbolic link; holoxmc does not write "
                             "through it") from None
        raise InputError(f"{path}: cannot create the run folder's marker ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(f"{path}: the run folder's marker is not a regular file ({file_kind(mode)}); holoxmc "
                         "does not write through it")
    os.set_blocking(fd, True)
    return fd


def _record(content: bytes, where: Path) -> dict:
    """The marker's JSON record; ``{}`` for an empty marker (created, and the run killed before
    its record was written).

    Raises:
        InputError: a marker that is not such a record (cut short, or edited): holoxmc cannot
            tell which run the folder holds, so it neither resumes nor replaces it.
    """
    if not content.strip():
        return {}
    try:
        record = parse_json(content, str(where), what="run marker")
        if not isinstance(record.get("settings", {}), (dict, type(None))):
            raise InputError(f"{where}: the run marker's 'settings' must hold a JSON object")
    except InputError as exc:
        raise InputError(f"{exc}; holoxmc cannot tell which run this folder holds and leaves it alone: choose "
                         "another --out") from None
    return record


def recorded_settings(run_dir: Path) -> dict | None:
    """The model settings the run in ``run_dir`` recorded (``None`` when it recorded none:
    an older holoxmc's run): from its marker, else from a finished run's ``metrics.json``."""
    path = run_dir / MARKER
    if _is_marker(path):
        settings = _record(read_bounded(path, limit=_MARKER_BYTES, follow_links=False, what="run marker"),
                           path).get("settings")
        if isinstance(settings, dict):
            return settings
    metrics = run_dir / "metrics.json"
    if _is_marker(metrics):
        try:
            model = read_json(metrics, what="metrics file").get("settings", {}).get("model")
        except (InputError, AttributeError):
            return None
        return {"model": model} if isinstance(model, str) else None
    return None


def check_same_settings(run_dir: Path, recorded: dict | None, settings: dict) -> None:
    """Refuse to continue, or to call complete, a run of another model.

    Raises:
        InputError: ``"<run_dir>: holds a run of another configuration (--model X) ..."``.
    """
    if recorded is None:
        return
    differ = sorted(key for key in recorded if recorded[key] != settings.get(key))
    if differ:
        shown = ", ".join(f"{key} {recorded[key]!r}" for key in differ)
        raise InputError(f"{run_dir}: holds a run of another configuration ({shown}; this call: "
                         f"{', '.join(f'{key} {settings.get(key)!r}' for key in differ)}); use the same options to "
                         "resume it, or choose another --out")


def _locked_marker(path: Path, run_dir: Path) -> int:
    """The marker opened (:func:`_open_marker`) and ``flock``ed, still the file at ``path``: a
    writer replaces the marker whole (:func:`_replace_marker`), so a lock taken on a file that was
    replaced meanwhile is no lock, and the new one is opened again.

    Raises:
        InputError: another process holds the lock (its pid is named), or the marker keeps changing.
    """
    for _ in range(_LOCK_TRIES):
        fd = _open_marker(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            content = os.pread(fd, 4096, 0)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                raise
            holder = _holder(content)
            raise InputError(f"{run_dir}: another holoxmc process (pid {holder}) is writing this run folder; "
                             "wait for it, or choose another --out") from None
        if _same_file(fd, path):
            return fd
        os.close(fd)  # replaced (or removed) between the open and the lock: open the marker there now
    raise InputError(f"{path}: the run folder's marker kept changing while holoxmc locked it; is another process "
                     "writing this folder?")


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is the file at ``path`` (not a link to it)."""
    try:
        there = os.lstat(path)
    except OSError:
        return False
    here = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _is_marker_temp(path: Path) -> bool:
    """A temporary file of :func:`_replace_marker` (left behind by a killed write)."""
    return path.name.startswith(MARKER + ".") and path.name.endswith(".tmp") and _is_marker(path)


def _replace_marker(path: Path, content: bytes, locked: int) -> int:
    """Replace the marker, whose locked descriptor is ``locked``, with ``content`` whole: a
    temporary file beside it (created new, ``O_EXCL | O_NOFOLLOW``), written, fsynced and locked,
    then renamed over the marker. A kill at any point leaves the old record or the new one,
    never a part; a temporary file it leaves is removed by the next lock's holder. Nothing is
    written through a link: the marker must still be the regular file locked, and a rename
    replaces a path, never what a link there points to.

    Returns:
        The new marker's descriptor, locked (the caller closes ``locked``).

    Raises:
        InputError: the marker is no longer the file that was locked, or the folder cannot be written.
    """
    for stale in path.parent.glob(f"{glob.escape(MARKER)}.*.tmp"):  # of a killed write: this process holds the lock
        if _is_marker_temp(stale):
            stale.unlink(missing_ok=True)
    temp = path.with_name(f"{MARKER}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(temp, flags, 0o644)
    except OSError as exc:
        raise InputError(f"{path}: cannot write the run folder's marker ({exc.strerror or exc})") from None
    try:
        written = 0
        while written < len(content):
            written += os.write(fd, content[written:])
        os.fsync(fd)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new: no one else can hold it
        if not _same_file(locked, path):
            raise InputError(f"{path}: the run folder's marker was replaced while this run held it "
                             f"({_kind(path)}); holoxmc does not write over it")
        os.replace(temp, path)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)
    return fd


def _sync_folder(folder: Path) -> None:
    """fsync ``folder`` so that a rename in it survives a crash (where the system allows)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def run_lock(run_dir: Path, settings: dict | None = None, *, resume: bool = False) -> Iterator[dict | None]:
    """Mark ``run_dir`` as a holoxmc run folder and hold its lock while the block runs; the
    marker records ``settings`` (with ``resume``, once the run's own, if any, match them).

    Yields:
        The settings the folder's run recorded before (``None`` if none).

    Raises:
        InputError: another process holds it (its pid is named), the marker is a link or
            not a regular file, or the run recorded other ``settings``
            (:func:`check_same_settings`): nothing is written then.
    """
    path = run_dir / MARKER
    fd = _locked_marker(path, run_dir)
    try:
        recorded = _record(os.pread(fd, _MARKER_BYTES, 0), path).get("settings")
        recorded = recorded if isinstance(recorded, dict) else None
        if settings is not None and resume:
            check_same_settings(run_dir, recorded, settings)
        record = {"format": "holoxmc-run/1", "holoxmc": __version__, "pid": os.getpid(),
                  "settings": settings if settings is not None else recorded}
        replaced = _replace_marker(path, to_json(record).encode(), fd)  # whole: a kill leaves the old or the new
        os.close(fd)
        fd = replaced
        yield recorded
    finally:
        os.close(fd)  # closing releases the lock


def _holder(content: bytes) -> str:
    try:
        return str(json.loads(content)["pid"])
    except (ValueError, KeyError, TypeError):
        return "unknown"

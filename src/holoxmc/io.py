"""Atomic file writes: a reader never sees a half-written file, a failed run leaves none."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from holoxmc.errors import InputError

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "json_text", "to_json", "finite_or_null", "atomic_write_files"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace``,
    with the mode a new file gets (``0o666`` less the umask), not ``mkstemp``'s ``0o600``.

    Raises:
        InputError: ``path`` cannot be written (a folder, under a file, no permission, ...).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_and_replace(path, data)
    except OSError as exc:
        raise InputError(f"{path}: cannot write it ({_reason(exc, path)})") from exc


def _write_and_replace(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_files(folder: str | os.PathLike, files: dict[str, bytes]) -> None:
    """Write several files of ``folder`` together: every one is written and fsynced to a
    temporary file first, and only then are they renamed into place, in the given order
    (put the file a reader checks first, such as ``config.json``, last). A failure while
    writing leaves the folder's old files untouched and no temporary file behind; stale
    temporary files of an earlier killed write are removed first.

    Raises:
        InputError: ``folder`` cannot be written.
    """
    folder = Path(folder)
    temps: list[tuple[str, Path]] = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name in files:
            for stale in folder.glob(f".{name}.*.tmp"):
                stale.unlink(missing_ok=True)
        for name, data in files.items():
            fd, temp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            temps.append((name, Path(temp_name)))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(temp_name, 0o666 & ~_umask())
        for name, temp in temps:
            os.replace(temp, folder / name)
    except OSError as exc:
        raise InputError(f"{folder}: cannot write it ({_reason(exc, folder / 'x')})") from exc
    finally:
        for _, temp in temps:
            temp.unlink(missing_ok=True)


def _umask() -> int:
    """This process's umask (reading it means setting it: it is put back at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _reason(exc: OSError, path: Path) -> str:
    """What went wrong: the file that stands where ``path`` needs a folder, or the system's word."""
    files = [folder for folder in path.parents if folder.is_file()]
    return f"{files[0]} is a file, not a folder" if files else exc.strerror or str(exc)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Atomically write UTF-8 ``text`` to ``path``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def to_json(obj: Any, **options: Any) -> str:
    """``json.dumps`` that also writes numpy scalars (settings such as ``epochs=np.int64(5)``)
    as the Python numbers they hold.

    Example:
        >>> to_json({"epochs": np.int64(5), "lr": np.float32(0.5)})
        '{"epochs": 5, "lr": 0.5}'
    """
    return json.dumps(obj, default=_numpy_scalar, **options)


def _numpy_scalar(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_text(obj: Any, *, allow_nan: bool = True) -> str:
    """``obj`` as the indented JSON text, with a final newline, that the project's files hold."""
    return to_json(obj, indent=2, sort_keys=False, allow_nan=allow_nan) + "\n"


def finite_or_null(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float (numpy's included) replaced by ``None``:
    the project's JSON files are strict JSON, and a number that is not finite (a diverged
    loss, an unset best score) is written as ``null``.

    Example:
        >>> finite_or_null({"loss": float("nan"), "scores": [1.5, np.float32("inf")]})
        {'loss': None, 'scores': [1.5, None]}
    """
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {key: finite_or_null(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_or_null(value) for value in obj]
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Atomically write ``obj`` as indented, strict JSON to ``path`` (non-finite numbers
    as ``null``, :func:`finite_or_null`)."""
    atomic_write_text(path, json_text(finite_or_null(obj), allow_nan=False))

"""Atomic file writes: a reader never sees a half-written file, a failed run leaves none."""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from holoxmc.errors import InputError

__all__ = ["atomic_write_bytes", "atomic_write_text", "atomic_write_json", "json_text", "to_json", "finite_or_null",
           "atomic_write_files", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "file_kind", "read_bounded", "parse_json",
           "read_json", "check_writable_target"]

#: The largest side file (``config.json``, ``metrics.json``, ``solar.json``, a text encoder,
#: a shard manifest) holoxmc reads: a larger one is refused before it is read.
MAX_JSON_BYTES = 256 * 2**20
#: The deepest nesting of arrays and objects accepted in a side file (holoxmc writes at most 6).
MAX_JSON_DEPTH = 64
_JSON_TYPES: dict[type, str] = {dict: "a JSON object", list: "a JSON array", str: "a JSON string"}
_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``"a FIFO"``, ``"a folder"``, ...)."""
    return next((name for test, name in _FILE_KINDS if test(mode)), "a regular file" if stat.S_ISREG(mode)
                else "not a file")


def read_bounded(path: str | os.PathLike, *, limit: int = MAX_JSON_BYTES, follow_links: bool = True,
                 what: str = "file") -> bytes:
    """The bytes of the regular file ``path``, refusing anything else before reading it.

    The file is opened without blocking (a FIFO would wait for a writer forever) and, with
    ``follow_links=False``, without following a symbolic link; ``fstat`` must then show a
    regular file of at most ``limit`` bytes, and no more than ``limit`` bytes are read (a
    file that grows meanwhile is refused too).

    Raises:
        InputError: ``"<path>: <what> is not a regular file (a FIFO)"``, too large, missing
            or unreadable: one line.

    Example:
        >>> read_bounded("/dev/zero", what="metrics file")
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: /dev/zero: the metrics file is not a regular file (a character device)
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | (0 if follow_links else getattr(os, "O_NOFOLLOW", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_links and os.path.islink(path):
            raise InputError(f"{path}: the {what} is a symbolic link; holoxmc does not follow it") from None
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"{path}: the {what} is not a regular file ({file_kind(info.st_mode)})")
        if info.st_size > limit:
            raise InputError(f"{path}: the {what} is {info.st_size} bytes, more than holoxmc reads ({limit})")
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while chunk := os.read(fd, min(info.st_size + 1 - size, 1 << 20) if size <= info.st_size else 1):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit or size > info.st_size:
                raise InputError(f"{path}: the {what} grew while it was read (another process writes it)")
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def _depth(text: bytes, block: int = 1 << 20) -> int:
    """The deepest nesting of ``[`` / ``{`` in the JSON ``text``, strings left out; read in
    blocks of ``block`` bytes (vectorised, a few bytes of memory per byte of a block)."""
    deepest = depth = inside = run = 0
    brackets = np.zeros(256, dtype=np.int64)
    brackets[[ord("["), ord("{")]], brackets[[ord("]"), ord("}")]] = 1, -1
    for start in range(0, len(text), block):
        data = np.frombuffer(text, dtype=np.uint8, count=min(block, len(text) - start), offset=start)
        backslash = data == ord("\\")
        index = np.arange(data.size)
        last_other = np.maximum.accumulate(np.where(backslash, -1, index))
        runs = index - last_other + np.where(last_other < 0, run, 0)  # backslashes ending at each byte
        preceding = np.concatenate(([run], runs[:-1]))
        quote = (data == ord('"')) & (preceding % 2 == 0)  # a quote after an odd run is escaped
        opened = (inside + np.cumsum(quote) - quote) % 2 == 1
        step = np.where(opened, 0, brackets[data])
        levels = depth + np.cumsum(step)
        deepest = max(deepest, int(levels.max(initial=depth)))
        depth, inside = int(levels[-1]), (inside + int(quote.sum())) % 2
        run = int(runs[-1]) if backslash[-1] else 0
    return deepest


def parse_json(text: str | bytes, where: str, *, expect: type | None = dict, max_depth: int = MAX_JSON_DEPTH,
               what: str = "file") -> Any:
    """The JSON value in ``text``, checked before it is built: UTF-8, at most ``max_depth``
    levels deep (a deeper file would exhaust Python's recursion), and of type ``expect``.

    Raises:
        InputError: ``"<where>: <what> is not valid JSON (...)"``, too deep, or another
            type: one line.

    Example:
        >>> parse_json("[1, 2]", "metrics.json", what="metrics file")
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: metrics.json: the metrics file must hold a JSON object, got a JSON array
    """
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if raw.count(b"[") + raw.count(b"{") > max_depth and (depth := _depth(raw)) > max_depth:
        raise InputError(f"{where}: the {what} nests {depth} levels deep, more than holoxmc reads ({max_depth})")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{where}: the {what} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{where}: the {what} is not valid JSON ({exc})") from None
    if expect is not None and not isinstance(value, expect):
        raise InputError(f"{where}: the {what} must hold {_JSON_TYPES.get(expect, expect.__name__)}, "
                         f"got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return _JSON_TYPES.get(type(value), type(value).__name__)


def read_json(path: str | os.PathLike, *, what: str = "file", expect: type | None = dict,
              limit: int = MAX_JSON_BYTES, follow_links: bool = True) -> Any:
    """The JSON in the side file ``path``, read by :func:`read_bounded` and parsed by
    :func:`parse_json`: a regular file (a FIFO, device, folder or, with
    ``follow_links=False``, a link is refused), at most ``limit`` bytes, at most
    :data:`MAX_JSON_DEPTH` deep, holding ``expect``.

    Raises:
        InputError: one line naming ``path`` and what is wrong.
    """
    return parse_json(read_bounded(path, limit=limit, follow_links=follow_links, what=what), str(path),
                      expect=expect, what=what)


def check_writable_target(path: str | os.PathLike) -> None:
    """Refuse an output path that holds anything but a regular file (a FIFO, device, socket
    or folder) or that is a symbolic link: an atomic write replaces what is there, so
    holoxmc writes only a new path or a regular file.

    Raises:
        InputError: ``"<path>: cannot write it (a FIFO; holoxmc writes a new or a regular file)"``.
    """
    try:
        info = os.lstat(path)
    except OSError:  # nothing there (or a file where a folder should be): the write itself says what is wrong
        return
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path}: cannot write it ({file_kind(info.st_mode)}; holoxmc writes only a new path "
                         "or a regular file, which it replaces)")


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and ``os.replace``,
    with the mode a new file gets (``0o666`` less the umask), not ``mkstemp``'s ``0o600``.
    Only a new path or a regular file is written (:func:`check_writable_target`): a link,
    FIFO or device there is refused, never replaced.

    Raises:
        InputError: ``path`` cannot be written (a folder, under a file, no permission, a
            link or device, ...).
    """
    path = Path(path)
    check_writable_target(path)
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
    for name in files:
        check_writable_target(folder / name)
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

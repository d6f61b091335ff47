"""Readers of the multi-label file formats: Extreme Classification Repository text (with
header, plain or gzip, train/test pairs and the split-file variant), svmlight/libsvm
multilabel, MATLAB ``.mat`` and raw-text JSON lines.

Parsing is scikit-learn's ``load_svmlight_file(multilabel=True)``; this module adds what
that parser does not check (header counts, declared ``D``/``L``, negative or non-integer
labels, NaN/inf, values float32 cannot hold, duplicate labels, ``qid:`` tokens it would
drop, blank lines it would skip, commented lines) with vectorised NumPy checks. Only when
something is wrong does a line-by-line scan locate the first faulty line, so every error
names the file, the 1-based line and the fault.

Where scikit-learn is not loaded yet, a body of at most :data:`PYTHON_PARSE_BYTES` is parsed
by :func:`parse_svmlight_rows`, that parser's loop in Python (the same rows, values and
errors): reading the points ``holoxmc predict`` is given then imports no scikit-learn.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import numbers
import os
import re
import stat
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import DataFormatError, InputError
from holoxmc.io import atomic_write_bytes
from holoxmc.limits import MAX_SIZE, check_size, physical_memory_bytes

__all__ = [
    "parse_svmlight_rows",
    "PYTHON_PARSE_BYTES",
    "read_bytes",
    "open_data_file",
    "MAX_GZIP_RATIO",
    "read_xml_repo",
    "read_svmlight",
    "read_xml_repo_split",
    "read_split_indices",
    "read_mat",
    "read_jsonl",
    "GROUP_FIELD",
    "JsonlRecords",
    "has_xml_repo_header",
    "write_xml_repo",
]

PathLike = str | os.PathLike
_HEADER = re.compile(rb"^\s*(\d+)\s+(\d+)\s+(\d+)\s*$")
_GZIP_MAGIC = b"\x1f\x8b"


#: A gzip file may expand to at most this many times its compressed size (plus 1 MiB).
#: Extreme-classification text compresses about 3-10x; a gzip bomb expands about 1000x.
MAX_GZIP_RATIO = 100
_BOM = b"\xef\xbb\xbf"
_FILE_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def open_data_file(path: PathLike) -> BinaryIO:
    """``path`` opened for binary reading once it is a readable regular file.

    The file is opened without blocking (a FIFO would wait for a writer forever), then
    checked with ``fstat``: a folder, FIFO, device or socket is refused.

    Raises:
        DataFormatError: ``no such file``, ``permission denied``, ``not a regular file``.

    Example:
        >>> open_data_file("/dev/zero")
        Traceback (most recent call last):
        ...
        holoxmc.errors.DataFormatError: /dev/zero: not a regular file (a character device)
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise DataFormatError(path, None, "cannot read file: no such file") from None
    except PermissionError:
        raise DataFormatError(path, None, "cannot read file: permission denied") from None
    except OSError as exc:
        raise DataFormatError(path, None, f"cannot read file: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a file")
        raise DataFormatError(path, None, f"not a regular file ({kind})")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_bytes(path: PathLike) -> bytes:
    """The content of the text data file ``path``: gunzipped when it starts with the gzip
    magic bytes, without a leading UTF-8 byte-order mark.

    Only a regular file is read (see :func:`open_data_file`). Gzip data is decompressed as a
    stream and refused once it exceeds ``MAX_GZIP_RATIO`` times the compressed size plus
    1 MiB, or half this machine's memory; a plain file must fit in memory too.

    Raises:
        DataFormatError: unreadable, not a regular file, empty, corrupt or oversized gzip.
    """
    with open_data_file(path) as f:
        size = os.fstat(f.fileno()).st_size
        _check_fits(path, size)
        compressed = f.read(2) == _GZIP_MAGIC
        f.seek(0)
        content = _gunzip(path, f, size) if compressed else f.read()
    if content.startswith(_BOM):
        content = content[len(_BOM):]
    if not content:
        raise DataFormatError(path, None, "empty file")
    return content


def _check_fits(path: PathLike, n_bytes: int) -> None:
    """:class:`DataFormatError` when ``n_bytes`` of content could not be held in half the memory."""
    if n_bytes > physical_memory_bytes() // 2:
        raise DataFormatError(path, None, f"{n_bytes / 2**30:.1f} GiB of data is more than half this machine's "
                                          f"{physical_memory_bytes() / 2**30:.1f} GiB of memory")


def _gunzip(path: PathLike, f: BinaryIO, compressed_size: int) -> bytes:
    """The decompressed content of the gzip stream ``f``, read in chunks up to the bound."""
    limit = min(MAX_GZIP_RATIO * compressed_size + 2**20, physical_memory_bytes() // 2)
    chunks: list[bytes] = []
    total = 0
    try:
        with gzip.GzipFile(fileobj=f, mode="rb") as stream:
            while chunk := stream.read(min(1 << 22, limit + 1 - total)):
                total += len(chunk)
                if total > limit:
                    raise DataFormatError(path, None, f"gzip data expands beyond {limit} bytes ({MAX_GZIP_RATIO}x its "
                                                      f"{compressed_size} compressed bytes plus 1 MiB): refused")
                chunks.append(chunk)
    except (OSError, EOFError, zlib.error) as exc:
        raise DataFormatError(path, None, f"unreadable gzip data: {exc}") from None
    return b"".join(chunks)


def has_xml_repo_header(path: PathLike) -> bool:
    """Whether the first line of ``path`` is an XML-repository header ``N D L`` (reads only
    that line; an unreadable file is left for the reader to report)."""
    try:
        with open_data_file(path) as raw:
            compressed = raw.read(2) == _GZIP_MAGIC
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw as f:
                first_line = f.readline(256)
    except (OSError, EOFError, zlib.error, DataFormatError):
        return False
    return _HEADER.match(first_line.removeprefix(_BOM).rstrip(b"\r\n")) is not None


def _short(token: bytes) -> str:
    text = token.decode("utf-8", "replace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _parse_float(token: bytes) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _beyond(what: str, index: int, width: int | None, declared: bool) -> str | None:
    """Why ``index`` is out of range for a ``width`` the header declared (``declared``), the
    caller gave, or (``None``) the largest size holoxmc accepts; ``None`` when it is in range."""
    if width is None:
        return None if index < MAX_SIZE else f"{what} index {index} is larger than holoxmc accepts (at most {MAX_SIZE - 1})"
    if index < width:
        return None
    symbol = "D" if what == "feature" else "L"
    if declared:
        return f"{what} index {index} >= declared {symbol}={width}"
    return f"{what} index {index} >= {symbol}={width}, the width this file is read at"


def _line_fault(
    line: bytes, n_features: int | None, n_labels: int | None, allow_comments: bool, declared: bool = False
) -> str | None:
    """The first fault of one data line in the XML-repository/svmlight grammar, or ``None``;
    ``declared``: the widths come from the file's header."""
    if b"#" in line:
        if not allow_comments:
            return "'#' is not allowed (svmlight would ignore the rest of the line as a comment)"
        line = line.split(b"#", 1)[0]
    parts = line.split()
    if not parts:
        return None
    if line[:1].isspace() or b":" in parts[0]:
        label_tokens: list[bytes] = []
        feature_tokens = parts
    else:
        label_tokens = parts[0].split(b",")
        feature_tokens = parts[1:]
    seen_labels: set[float] = set()
    for token in label_tokens:
        value = _parse_float(token)
        if value is None:
            return f"bad label token {_short(token)}"
        if not math.isfinite(value) or value != int(value):
            return f"label {_short(token)} is not an integer"
        if value < 0:
            return f"negative label index {int(value)}"
        beyond = _beyond("label", int(value), n_labels, declared)
        if beyond is not None:
            return beyond
        if value in seen_labels:
            return f"duplicate label {int(value)}"
        seen_labels.add(value)
    previous = -1
    for token in feature_tokens:
        index_token, colon, value_token = token.partition(b":")
        if index_token.startswith(b"qid"):
            return f"query id token {_short(token)} is not allowed (scikit-learn's parser would drop it)"
        if not colon:
            return f"bad feature token {_short(token)} (expected index:value)"
        try:
            index = int(index_token)
        except ValueError:
            return f"bad feature index {_short(index_token)}"
        if index < 0:
            return f"negative feature index {index}"
        beyond = _beyond("feature", index, n_features, declared)
        if beyond is not None:
            return beyond
        if index == previous:
            return f"duplicate feature index {index}"
        if index < previous:
            return f"feature indices not ascending ({previous} then {index})"
        previous = index
        value = _parse_float(value_token)
        if value is None:
            return f"bad feature value {_short(value_token)}"
        if not math.isfinite(value):
            return f"non-finite feature value {_short(value_token)} at index {index}"
        fault = "underflows to 0" if value == 0 and _written_nonzero(value_token) else _float32_fault(value)
        if fault is not None:
            return f"feature value {_short(value_token)} at index {index} {fault}"
    return None


def _written_nonzero(token: bytes) -> bool:
    """Whether the number ``token`` has a nonzero digit before its exponent (``1e-400`` does:
    Python reads it as 0.0, an underflow, not a written zero).

    Example:
        >>> _written_nonzero(b"1e-400"), _written_nonzero(b"0.000e5")
        (True, False)
    """
    mantissa = token.lower().split(b"e", 1)[0]
    return any(digit in mantissa for digit in b"123456789")


def _float32_fault(value: float) -> str | None:
    """Why the finite ``value`` would become inf or 0 as float32, or ``None`` when it would not."""
    with np.errstate(over="ignore"):
        stored = np.float32(value)
    if np.isinf(stored):
        return "overflows float32"
    if stored == 0 and value != 0:
        return "underflows float32 to 0"
    return None


def _locate_fault(
    body: bytes, first_line: int, n_features: int | None, n_labels: int | None, allow_comments: bool, declared: bool
) -> tuple[int, str] | None:
    """Slow path: scan lines until the first fault; ``(line number, message)`` or ``None``."""
    for offset, line in enumerate(body.split(b"\n")):
        fault = _line_fault(line, n_features, n_labels, allow_comments, declared)
        if fault is not None:
            return first_line + offset, fault
    return None


def _blank_rows(body: bytes, n_parsed: int) -> list[int]:
    """Row positions of the whitespace-only lines of ``body`` (points without labels and
    features), which scikit-learn's parser skips like comment-only lines; ``n_parsed`` is
    the number of rows it returned (a final newline ends the last line)."""
    n_lines = body.count(b"\n") + (len(body) > 0 and not body.endswith(b"\n"))
    if n_lines == n_parsed:
        return []
    rows: list[int] = []
    row = 0
    for line in body.split(b"\n")[:n_lines]:
        if not line.strip():
            rows.append(row)
        elif not line.split(b"#", 1)[0].strip():
            continue  # a comment-only line is not a point
        row += 1
    return rows


#: Bodies up to this many bytes are parsed by :func:`parse_svmlight_rows` (Python) while
#: scikit-learn is not loaded: its compiled loop parsed Bibtex's test split (1.1 MB) in 0.40 s,
#: the Python one in 0.53 s, and importing scikit-learn takes 1.3 s or more, as long as the
#: Python loop takes for about 12 MB more.
PYTHON_PARSE_BYTES = 1 << 24
_INT_RANGE = range(-(2**31), 2**31)  # the parser's C ``int`` feature index


def parse_svmlight_rows(body: bytes) -> tuple[sp.csr_matrix, list[tuple[float, ...]]]:
    """scikit-learn's ``load_svmlight_file(io.BytesIO(body), multilabel=True,
    zero_based=True, dtype=np.float32)``, its loop (``_svmlight_format_fast``) written out in
    Python: the same ``X`` (``max index + 1`` columns, at least 1) and sorted label tuples, and
    a ``ValueError`` / ``OverflowError`` of the same type for what that parser refuses (the
    message may be worded otherwise: its compiled float conversion words a few refusals, such
    as ``'.'``, its own way; :func:`read_xml_repo` names the line and fault either way); no
    scikit-learn import. For small bodies (:data:`PYTHON_PARSE_BYTES`): it is slower per byte.

    Example:
        >>> X, labels = parse_svmlight_rows(b"1,0 0:1 2:0.5\\n 1:2\\n")
        >>> X.toarray().tolist(), labels
        ([[1.0, 0.0, 0.5], [0.0, 2.0, 0.0]], [(0.0, 1.0), ()])
    """
    data: list[float] = []
    indices: list[int] = []
    indptr = [0]
    labels: list[tuple[float, ...]] = []
    for line in io.BytesIO(body):
        cut = line.find(b"#")
        if cut >= 0 and b"\0" not in line[:cut]:  # a C string: a NUL byte ends the search for '#'
            line = line[:cut]
        line_parts = line.split()
        if not line_parts:
            continue
        target, features = line_parts[0], line_parts[1:]
        if b":" in target:
            labels.append(())
            features = line_parts
        else:
            labels.append(tuple(sorted(float(y) for y in target.split(b","))))
        if features and features[0].startswith(b"qid"):
            _pair(features.pop(0))
        previous = -1
        for token in features:
            index_text, value = _pair(token)
            index = int(index_text)
            if index not in _INT_RANGE:
                raise OverflowError("value too large to convert to int")
            if index < 0:
                raise ValueError(f"Invalid index {index} in SVMlight/LibSVM data file.")
            if index <= previous:
                raise ValueError("Feature indices in SVMlight/LibSVM data file should be sorted and unique.")
            indices.append(index)
            data.append(float(value))
            previous = index
        indptr.append(len(data))
    with np.errstate(over="ignore"):  # a float32 overflow is inf, refused by the caller's checks
        values = np.array(data, dtype=np.float32)
    columns = np.array(indices, dtype=np.int64)
    width = int(columns.max()) + 1 if len(columns) else 1
    X = sp.csr_matrix((values, columns, np.array(indptr, dtype=np.int64)), shape=(len(indptr) - 1, width))
    X.sort_indices()
    return X, labels


def _pair(token: bytes) -> list[bytes]:
    """``index:value`` split at the first colon, refused as the compiled parser refuses it."""
    pair = token.split(b":", 1)
    if len(pair) < 2:
        raise ValueError("need more than 1 value to unpack")
    return pair


def _svmlight_rows(body: bytes) -> tuple[Any, list[tuple[float, ...]]]:
    """``(X, sorted label tuples)`` of ``body``: :func:`parse_svmlight_rows` up to
    :data:`PYTHON_PARSE_BYTES` where scikit-learn is not loaded, else scikit-learn's
    ``load_svmlight_file`` (the two give the same answer)."""
    if len(body) <= PYTHON_PARSE_BYTES and "sklearn" not in sys.modules:
        return parse_svmlight_rows(body)
    from sklearn.datasets import load_svmlight_file

    return load_svmlight_file(io.BytesIO(body), multilabel=True, zero_based=True, dtype=np.float32)


def _parse_body(
    path: PathLike,
    body: bytes,
    first_line: int,
    n_features: int | None,
    n_labels: int | None,
    allow_comments: bool,
    declared: bool = False,
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Parse svmlight multilabel ``body`` into validated ``(X, Y)``; ``declared``: the
    widths come from the file's header (for the messages)."""

    def fail(default_message: str) -> DataFormatError:
        found = _locate_fault(body, first_line, n_features, n_labels, allow_comments, declared)
        if found is None:
            return DataFormatError(path, None, default_message)
        return DataFormatError(path, found[0], found[1])

    def check_all_lines() -> None:
        found = _locate_fault(body, first_line, n_features, n_labels, allow_comments, declared)
        if found is not None:
            raise DataFormatError(path, found[0], found[1])

    if not allow_comments and b"#" in body:
        raise fail("'#' found")
    if b"qid" in body:  # scikit-learn drops a first feature token starting with "qid"
        check_all_lines()
    try:
        X, label_tuples = _svmlight_rows(body)
    except (ValueError, OverflowError) as exc:
        raise fail(f"unparseable data ({exc})") from None
    counts = np.fromiter(map(len, label_tuples), dtype=np.int64, count=len(label_tuples))
    labels = np.fromiter(chain.from_iterable(label_tuples), dtype=np.float64, count=int(counts.sum()))
    if not np.all(np.isfinite(labels)) or (labels.size and (labels.min() < 0 or labels.max() >= 2**62)):
        raise fail("bad label value")
    label_ints = labels.astype(np.int64)
    if np.any(label_ints != labels):
        raise fail("non-integer label")
    if labels.size and labels.max() >= (MAX_SIZE if n_labels is None else n_labels):
        raise fail(f"label index {int(labels.max())} beyond the label width")
    label_rows = np.repeat(np.arange(len(counts)), counts)
    # sklearn sorts the labels of each row, so duplicates are neighbours
    if np.any((label_ints[1:] == label_ints[:-1]) & (label_rows[1:] == label_rows[:-1])):
        raise fail("duplicate label")
    if X.nnz and not np.all(np.isfinite(X.data)):
        raise fail("non-finite feature value")
    if X.nnz and np.any(X.data == 0):  # a written 0, or a value that underflowed float32
        check_all_lines()
    if X.shape[1] > (MAX_SIZE if n_features is None else n_features):
        raise fail(f"feature index {X.shape[1] - 1} beyond the feature width")
    D = X.shape[1] if n_features is None else n_features
    L = int(labels.max()) + 1 if n_labels is None and labels.size else (n_labels or 0)
    X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], D))
    label_indptr = np.concatenate([[0], np.cumsum(counts)])
    Y = sp.csr_matrix((np.ones(labels.size, dtype=np.float32), label_ints, label_indptr), shape=(len(counts), L))
    blank = _blank_rows(body, X.shape[0])
    return _insert_empty_rows(X, blank), _insert_empty_rows(Y, blank)


def _insert_empty_rows(M: sp.csr_matrix, rows: list[int]) -> sp.csr_matrix:
    """Insert empty rows so that they end up at the given final row positions (ascending)."""
    if not rows:
        return M
    counts = np.insert(np.diff(M.indptr), np.asarray(rows) - np.arange(len(rows)), 0)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return sp.csr_matrix((M.data, M.indices, indptr), shape=(len(counts), M.shape[1]))


def read_xml_repo(path: PathLike) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Read an Extreme Classification Repository text file (plain or gzip).

    Format: a header ``N D L``, then one line per point ``l1,l2,... f:v f:v ...`` with 0-based,
    ascending feature indices; a point without labels starts with a space; a line with
    only whitespace (as ``write_xml_repo`` writes an empty point) is a point without labels
    and features, counted against ``N`` like any other line.

    Returns:
        ``X`` ``(N, D)`` CSR float32 and ``Y`` ``(N, L)`` CSR float32 binary.

    Raises:
        DataFormatError: naming the file, line and fault.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "toy.txt"
        >>> _ = p.write_text("2 3 2\\n0,1 0:1 2:0.5\\n 1:2\\n")
        >>> X, Y = read_xml_repo(p)
        >>> X.shape, Y.toarray().tolist()
        ((2, 3), [[1.0, 1.0], [0.0, 0.0]])
    """
    text = read_bytes(path)
    header, _, body = text.partition(b"\n")
    match = _HEADER.match(header)
    if match is None:
        raise DataFormatError(path, 1, f"bad header {_short(header)} (expected 'num_points num_features num_labels')")
    n_points, n_features, n_labels = (
        _declared_size(path, name, int(value), minimum)
        for name, value, minimum in zip(("num_points", "num_features", "num_labels"), match.groups(), (0, 1, 1))
    )
    X, Y = _parse_body(path, body, 2, n_features, n_labels, allow_comments=False, declared=True)
    if X.shape[0] != n_points:
        blank = np.flatnonzero((np.diff(X.indptr) == 0) & (np.diff(Y.indptr) == 0))  # only blank lines are empty rows
        note = f" (line {blank[0] + 2} is blank: a point without labels and features)" if blank.size else ""
        raise DataFormatError(path, 1, f"header declares {n_points} points, file has {X.shape[0]} data lines{note}")
    return X, Y


def _declared_size(path: PathLike, name: str, value: int, minimum: int) -> int:
    """A size the header of ``path`` declares, once within ``[minimum, MAX_SIZE]``."""
    try:
        return check_size(f"header {name}", value, minimum=minimum)
    except InputError as exc:
        raise DataFormatError(path, 1, str(exc)) from None


def write_xml_repo(path: PathLike, X: sp.spmatrix, Y: sp.spmatrix) -> None:
    """Write ``X``, ``Y`` in the XML-repository text format (gzip if ``path`` ends in ``.gz``).

    The body is scikit-learn's ``dump_svmlight_file(multilabel=True, zero_based=True)``;
    the file is written atomically.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "toy.txt"
        >>> write_xml_repo(p, sp.csr_matrix([[0, 2.5]]), sp.csr_matrix([[1, 1, 0]]))
        >>> p.read_text()
        '1 2 3\\n0,1 1:2.5\\n'
    """
    X, Y = sp.csr_matrix(X), sp.csr_matrix(Y)
    if X.shape[0] != Y.shape[0]:
        raise InputError(f"X has {X.shape[0]} rows but Y has {Y.shape[0]}")
    from sklearn.datasets import dump_svmlight_file

    body = io.BytesIO()
    dump_svmlight_file(X, Y, body, zero_based=True, multilabel=True)
    content = f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}\n".encode() + body.getvalue()
    if os.fspath(path).endswith(".gz"):
        content = gzip.compress(content, mtime=0)
    atomic_write_bytes(path, content)


def read_svmlight(
    path: PathLike, n_features: int | None = None, n_labels: int | None = None
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Read a headerless svmlight/libsvm multilabel file (``l1,l2 f:v ...``, 0-based).

    ``#`` starts a comment; a comment-only line is not a point, a whitespace-only line is a
    point without labels and features (as in :func:`read_xml_repo`).

    Args:
        n_features, n_labels: the widths to read the file at (pass the train sizes when
            reading a test file, so both agree); inferred from the largest index when
            ``None`` (an index must then be below ``limits.MAX_SIZE - 1``).

    Returns:
        ``X`` ``(n, D)`` CSR float32 and ``Y`` ``(n, L)`` CSR float32 binary.
    """
    X, Y = _parse_body(path, read_bytes(path), 1, n_features, n_labels, allow_comments=True)
    return X, Y


def read_split_indices(path: PathLike, n_points: int) -> np.ndarray:
    """Read a split file of the XML repository (``name_trSplit.txt``/``name_tstSplit.txt``).

    Each column is one alternative split, listing 1-based row numbers of ``Name_data.txt``;
    a row number may appear once per column.

    Returns:
        ``(n_rows, n_splits)`` int64 array of **0-based** row indices.
    """
    rows: list[list[int]] = []
    first_seen: list[dict[int, int]] = []  # per column: row number -> line it first appears on
    for number, line in enumerate(read_bytes(path).split(b"\n"), start=1):
        tokens = line.split()
        if not tokens:
            continue
        try:
            values = [int(token) for token in tokens]
        except ValueError:
            raise DataFormatError(path, number, f"bad split index in {_short(line)}") from None
        if rows and len(values) != len(rows[0]):
            raise DataFormatError(path, number, f"{len(values)} columns, previous lines have {len(rows[0])}")
        bad = [v for v in values if not 1 <= v <= n_points]
        if bad:
            raise DataFormatError(path, number, f"split index {bad[0]} outside 1..{n_points}")
        if not first_seen:
            first_seen = [{} for _ in values]
        for column, (value, seen) in enumerate(zip(values, first_seen)):
            if value in seen:
                raise DataFormatError(path, number, f"row {value} repeated in column {column} "
                                                    f"(first on line {seen[value]})")
            seen[value] = number
        rows.append(values)
    if not rows:
        raise DataFormatError(path, None, "empty split file")
    return np.asarray(rows, dtype=np.int64) - 1


def read_xml_repo_split(
    data_path: PathLike, split_path: PathLike, column: int = 0
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Rows of ``Name_data.txt`` selected by one column of a split file.

    Args:
        data_path: the full data file (XML-repository format with header).
        split_path: ``name_trSplit.txt`` or ``name_tstSplit.txt``.
        column: which alternative split (0-based column, an integer).
    """
    if isinstance(column, bool) or not isinstance(column, numbers.Integral):
        raise InputError(f"split column must be an integer, got {column!r}")
    X, Y = read_xml_repo(data_path)
    splits = read_split_indices(split_path, X.shape[0])
    if not 0 <= column < splits.shape[1]:
        raise InputError(f"split column {column} not in 0..{splits.shape[1] - 1} of {split_path}")
    rows = splits[:, column]
    return X[rows], Y[rows]


# MATLAB files: (features, labels) variable names for each split, in the order tried.
_MAT_KEYS = {
    "train": (("X", "Y"), ("train_data", "train_target")),
    "test": (("Xtest", "Ytest"), ("test_data", "test_target")),
}


def read_mat(path: PathLike, split: str = "train", label_major: bool | None = None) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Read one split of a MATLAB ``.mat`` multi-label file.

    Recognised variables: ``X``/``Y``/``Xtest``/``Ytest`` (XML-repository ``Bibtex.mat``) and
    ``train_data``/``train_target``/``test_data``/``test_target`` (MULAN ``delicious.mat``,
    dense uint8). Label matrices may be label-major ``(L, n)``.

    Args:
        split: ``"train"`` or ``"test"``.
        label_major: whether labels are stored ``(L, n)``; inferred from the shapes when
            ``None``: label-major only when the labels are ``(L, n)`` with ``n`` the rows of
            the features and ``L != n``, point-major when they are ``(n, L)``; any other
            shape, a square one, or the other split stored the other way is a
            :class:`DataFormatError` naming the shapes (nothing is transposed on a guess).

    Returns:
        ``X`` ``(n, D)`` CSR float32 and ``Y`` ``(n, L)`` CSR float32 binary.
    """
    if split not in _MAT_KEYS:
        raise InputError(f"split must be 'train' or 'test', got {split!r}")
    contents = _loadmat_isolated(path)
    for x_key, y_key in _MAT_KEYS[split]:
        if x_key in contents and y_key in contents:
            break
    else:
        names = sorted(k for k in contents if not k.startswith("__"))
        raise DataFormatError(path, None, f"no {split} variables {_MAT_KEYS[split]} (found {names})")
    X, Y = _as_matrix(path, x_key, contents[x_key]), _as_matrix(path, y_key, contents[y_key])
    n = X.shape[0]
    if label_major is None:
        label_major = _label_major(path, y_key, Y.shape, n)
        _check_same_orientation(path, contents, split, label_major)
    if label_major:
        Y = Y.T.tocsr()
    if Y.shape[0] != n:
        raise DataFormatError(path, None, f"{x_key} has {n} rows but {y_key} has shape {Y.shape}")
    if not np.all(np.isfinite(X.data)):
        raise DataFormatError(path, None, f"non-finite value in {x_key}")
    Y.eliminate_zeros()
    if np.any(Y.data != 1):
        raise DataFormatError(path, None, f"{y_key} has values other than 0/1 (e.g. {Y.data[Y.data != 1][0]:g})")
    return sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y, dtype=np.float32)


def _label_major(path: PathLike, y_key: str, shape: tuple[int, ...], n: int) -> bool:
    """Whether labels of ``shape`` for ``n`` points are stored label-major ``(L, n)``."""
    if shape[0] == shape[1] == n:
        raise DataFormatError(path, None, f"{y_key} is square {shape}; pass label_major=True/False")
    if shape[0] != n and shape[1] != n:
        raise DataFormatError(path, None, f"{y_key} has shape {shape}, neither ({n}, L) nor (L, {n}) for the {n} "
                                          "rows of the features")
    return shape[0] != n


def _check_same_orientation(path: PathLike, contents: dict[str, Any], split: str, label_major: bool) -> None:
    """A :class:`DataFormatError` when the other split's labels (if present, with a shape
    that tells) are stored the other way round than ``label_major``."""
    other = "test" if split == "train" else "train"
    for x_key, y_key in _MAT_KEYS[other]:
        x_shape, y_shape = getattr(contents.get(x_key), "shape", None), getattr(contents.get(y_key), "shape", None)
        if x_shape is None or y_shape is None or len(x_shape) != 2 or len(y_shape) != 2:
            continue
        n = x_shape[0]
        if y_shape[0] == y_shape[1] or n not in y_shape:
            return
        if (y_shape[0] != n) != label_major:
            stored = "label-major (L, n)" if label_major else "point-major (n, L)"
            raise DataFormatError(path, None, f"the {split} labels read as {stored} but {y_key} {y_shape} for "
                                              f"{x_key} {x_shape} is stored the other way: fix the file or pass "
                                              "label_major")
        return


def _loadmat_isolated(path: PathLike, timeout: float = 600.0) -> dict[str, object]:
    """The variables of a ``.mat`` file, read by ``scipy.io.loadmat`` in a child interpreter.

    scipy's compiled MATLAB reader can crash the interpreter (segmentation fault) on some
    corrupt files (found by fuzzing); in a child that crash becomes a
    :class:`DataFormatError` instead of killing the caller. Arrays come back through a
    temporary ``.npz`` (no pickle). Sparse variables are rebuilt without conversion, for
    :func:`_as_matrix` to validate before any scipy operation touches them.
    """
    open_data_file(path).close()  # missing, unreadable or not a regular file: one clear error
    with tempfile.TemporaryDirectory(prefix="holoxmc-mat-") as folder:
        out = Path(folder) / "variables.npz"
        try:
            child = subprocess.run(
                [sys.executable, "-c", _MAT_CHILD, os.fspath(path), os.fspath(out)],
                capture_output=True, text=True, timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise DataFormatError(path, None, f"not a readable MATLAB file: reading took over {timeout:g} s") from None
        if child.returncode < 0:
            raise DataFormatError(
                path, None, f"not a readable MATLAB file: scipy's reader crashed (signal {-child.returncode})"
            )
        if child.returncode != 0:
            reason = (child.stderr.strip().splitlines() or ["unknown error"])[-1]
            raise DataFormatError(path, None, f"not a readable MATLAB file: {reason}")
        with np.load(out, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    variables: dict[str, object] = {}
    for name, array in arrays.items():
        key, _, part = name.rpartition(".")
        if part == "dense":
            variables[key] = array
        elif part == "unsupported":
            variables[key] = str(array)
        elif part == "format":
            matrix_class = sp.csc_matrix if str(array) == "csc" else sp.csr_matrix
            shape = tuple(int(v) for v in arrays[f"{key}.shape"])
            parts = (arrays[f"{key}.data"], arrays[f"{key}.indices"], arrays[f"{key}.indptr"])
            try:
                variables[key] = matrix_class(parts, shape=shape)
            except ValueError as exc:
                raise DataFormatError(path, None, f"variable {key} is a corrupt sparse matrix: {exc}") from None
    return variables


# Runs in the child interpreter: load a .mat file, write its variables as plain arrays.
_MAT_CHILD = """
import sys
import numpy as np, scipy.io, scipy.sparse as sp
arrays = {}
for key, value in scipy.io.loadmat(sys.argv[1]).items():
    if key.startswith("__"):
        continue
    if sp.issparse(value):
        arrays.update({key + ".data": value.data, key + ".indices": value.indices,
                       key + ".indptr": value.indptr, key + ".shape": np.array(value.shape),
                       key + ".format": np.array(value.format)})
    elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        arrays[key + ".dense"] = value
    else:
        arrays[key + ".unsupported"] = np.array(type(value).__name__)
np.savez(sys.argv[2], **arrays)
"""


def _as_matrix(path: PathLike, key: str, value: Any) -> sp.csr_matrix:
    if sp.issparse(value):
        # a corrupt file can give out-of-range indices, on which scipy's conversions crash
        if value.dtype.kind not in "biuf":
            raise DataFormatError(path, None, f"variable {key} has non-numeric type {value.dtype}")
        try:
            value.check_format(full_check=True)
        except (ValueError, AttributeError) as exc:
            raise DataFormatError(path, None, f"variable {key} is a corrupt sparse matrix: {exc}") from None
        matrix = sp.csr_matrix(value)
    elif isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype.kind in "biuf":
        matrix = sp.csr_matrix(value)
    else:
        raise DataFormatError(path, None, f"variable {key} is not a 2-D numeric matrix")
    if matrix.dtype.kind not in "biuf":
        raise DataFormatError(path, None, f"variable {key} has non-numeric type {matrix.dtype}")
    matrix.sort_indices()
    return matrix


@dataclass
class JsonlRecords:
    """Contents of a raw-text JSON-lines file: parallel lists, one entry per record."""

    texts: list[str]
    labels: list[list[str]]
    lines: list[int]  # 1-based line number of each record, for error messages
    groups: list[str | int | None] = field(default_factory=list)  # each record's group (None: none given)


#: The JSON-lines field that names a record's group (``holoxmc train --group-field``).
GROUP_FIELD = "group"


def read_jsonl(path: PathLike, *, require_labels: bool = True, group_field: str = GROUP_FIELD) -> JsonlRecords:
    """Read ``{"id": ..., "text": ..., "labels": [...], "group": ...}`` lines (plain or gzip).

    ``id`` is optional and not used (records are told apart by line number); ``text`` must
    be a string and ``labels`` a list of distinct strings. With ``require_labels=False`` (texts to
    predict) a line may leave ``labels`` out; its labels are then ``[]``. ``group_field``
    (optional on every line: a string or an integer) names the record's group — its source,
    author, product family — which validation splits keep on one side.
    """
    records = JsonlRecords([], [], [])
    for number, line in enumerate(read_bytes(path).split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise DataFormatError(path, number, f"invalid JSON: {exc}") from None
        if not isinstance(record, dict):
            raise DataFormatError(path, number, "a line must be a JSON object")
        text, labels = record.get("text"), record.get("labels", None if require_labels else [])
        if not isinstance(text, str):
            raise DataFormatError(path, number, "'text' must be a string")
        if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
            raise DataFormatError(path, number, "'labels' must be a list of strings")
        if len(set(labels)) != len(labels):
            raise DataFormatError(path, number, "duplicate label")
        group = record.get(group_field)
        if group is not None and (isinstance(group, bool) or not isinstance(group, (str, int))):
            raise DataFormatError(path, number, f"{group_field!r} must be a string or an integer, got {group!r}")
        records.groups.append(group)
        records.texts.append(text)
        records.labels.append(labels)
        records.lines.append(number)
    if not records.texts:
        raise DataFormatError(path, None, "no records")
    return records

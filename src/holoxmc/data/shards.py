"""A dataset as CSR shards on disk, read back memory-mapped a shard at a time, so that
training and scoring hold a few shards of rows, never the whole split.

Layout of a shard folder: ``manifest.json`` (written last) and, for shard ``i`` of
``rows_per_shard`` rows, ``shard-{i:05d}-{array}.npy`` for the arrays ``X_indptr``,
``X_indices``, ``X_data`` (float32 features) and ``Y_indptr``, ``Y_indices`` (the labels,
whose values are all 1). Each shard's ``indptr`` starts at 0. The manifest holds the sizes
(rows, features, labels), every shard's rows and nnz, and every file's dtype, byte count
and SHA-256.

Reading trusts nothing it has not checked: :func:`open_shards` compares every file's
``.npy`` header and size with the manifest before anything is mapped or allocated, and a
shard's checksum and structure (monotone ``indptr``, indices in range, finite values,
sorted distinct labels) are checked the first time it is read. Any disagreement is one
:class:`~holoxmc.errors.DataFormatError` naming the file.

Example:
    >>> import tempfile, scipy.sparse as sp, numpy as np
    >>> from holoxmc.data.dataset import Dataset
    >>> d = Dataset(sp.random(10, 6, density=0.3, format="csr", random_state=0), sp.eye(10, 4, format="csr"), "toy")
    >>> store = open_shards(write_shards(d, tempfile.mkdtemp(), rows_per_shard=4))
    >>> store.n_rows, store.n_features, store.n_labels, store.n_shards
    (10, 6, 4, 3)
    >>> [X.shape[0] for X, _ in store.chunks()]
    [4, 4, 2]
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import re
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.data.dataset import Dataset
from holoxmc.data.readers import open_data_file
from holoxmc.errors import DataFormatError, InputError
from holoxmc.io import atomic_write_bytes, atomic_write_json, parse_json, read_bounded
from holoxmc.limits import MAX_SIZE, check_allocation, check_size

__all__ = ["write_shards", "open_shards", "ShardStore", "ShardedRows", "MANIFEST", "SHARD_FORMAT", "is_sharded"]

#: The manifest's file name; a folder without it is no shard store.
MANIFEST = "manifest.json"
#: ``format`` and ``version`` of the manifests this holoxmc writes and reads.
SHARD_FORMAT, SHARD_VERSION = "holoxmc-shards", 1
#: The arrays of a shard: (matrix, part).
ARRAYS = ("X_indptr", "X_indices", "X_data", "Y_indptr", "Y_indices")
#: Index dtypes a shard may use (indptr and indices alike), and the features' dtype.
INDEX_DTYPES, DATA_DTYPE = ("int32", "int64"), "float32"
#: A manifest larger than this is refused before it is parsed.
MAX_MANIFEST_BYTES = 64 * 2**20
#: Shards a store keeps mapped at once (a batch spans at most two neighbours).
OPEN_SHARDS = 2
_SHARD_FILE = re.compile(r"shard-\d{5,}-(X_indptr|X_indices|X_data|Y_indptr|Y_indices)\.npy")


def write_shards(data: Dataset | Iterable[tuple[sp.spmatrix, sp.spmatrix]], directory: str | os.PathLike,
                 rows_per_shard: int = 65536, *, name: str | None = None) -> Path:
    """Write a split's ``X`` and ``Y`` as shards of ``rows_per_shard`` rows (the last may be
    shorter) and the manifest, each file atomically, the manifest last; an earlier store in
    ``directory`` is replaced (its manifest removed first, its surplus shards after).

    Args:
        data: the split (texts, tokens and label names are not stored), or its rows as
            consecutive ``(X, Y)`` blocks of any sizes (a generator: a split larger than
            memory is written a block at a time), each checked as a :class:`Dataset` is.
        directory: the store's folder; created if missing. A folder that holds files but
            no manifest is refused.
        rows_per_shard: rows per shard, at least 1.
        name: the dataset's name in the manifest (default: the Dataset's, or the folder's).

    Returns:
        the folder.

    Raises:
        InputError: a bad ``rows_per_shard``, blocks of different widths or bad values, no
            block at all, or a folder that is not a shard store.

    Example:
        >>> import tempfile, scipy.sparse as sp
        >>> blocks = ((sp.random(5, 4, density=0.5, format="csr"), sp.eye(5, 3, format="csr")) for _ in range(3))
        >>> open_shards(write_shards(blocks, tempfile.mkdtemp(), rows_per_shard=4)).n_shards
        4
    """
    rows_per_shard = check_size("rows_per_shard", rows_per_shard)
    blocks: Iterator[tuple[sp.csr_matrix, sp.csr_matrix]]
    if isinstance(data, Dataset):
        name, blocks = name or data.name, iter([(data.X, data.Y)])
    else:
        name = name or Path(directory).name
        blocks = (_checked_block(X, Y, name) for X, Y in data)
    first = next(blocks, None)
    if first is None:
        raise InputError("write_shards got no block: give a Dataset or at least one (X, Y) block")
    widths = (first[0].shape[1], first[1].shape[1])
    folder = _shard_folder(Path(directory))
    shards = [_write_shard(folder, index, X, Y)
              for index, (X, Y) in enumerate(_in_shards(itertools.chain([first], blocks), rows_per_shard, widths))]
    manifest = {"format": SHARD_FORMAT, "version": SHARD_VERSION, "name": name,
                "n_rows": sum(shard["rows"] for shard in shards), "n_features": widths[0], "n_labels": widths[1],
                "rows_per_shard": rows_per_shard, "shards": shards}
    written = {entry["file"] for shard in shards for entry in shard["files"].values()}
    atomic_write_json(folder / MANIFEST, manifest)
    for stale in folder.glob("shard-*.npy"):
        if stale.name not in written:
            stale.unlink()
    return folder


def _shard_folder(folder: Path) -> Path:
    """``folder``, made if missing, its earlier manifest removed (so a reader never sees
    old and new shards mixed); a folder of other files is refused (shard files without a
    manifest are a write that stopped part-way, and may be written over)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{folder}: cannot make the shard folder ({exc.strerror or exc})") from None
    others = [path for path in folder.iterdir() if not (path.name.startswith("shard-") and path.suffix == ".npy")]
    if others and not (folder / MANIFEST).is_file():
        raise InputError(f"{folder}: holds files but no {MANIFEST}: not a shard store, refusing to write into it")
    (folder / MANIFEST).unlink(missing_ok=True)
    return folder


def _checked_block(X: Any, Y: Any, name: str) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """One ``(X, Y)`` block checked and converted as a :class:`Dataset` is."""
    block = Dataset(X, Y, name)
    return block.X, block.Y


def _in_shards(blocks: Iterator[tuple[sp.csr_matrix, sp.csr_matrix]], rows_per_shard: int,
               widths: tuple[int, int]) -> Iterator[tuple[sp.csr_matrix, sp.csr_matrix]]:
    """``blocks`` cut and joined into shards of ``rows_per_shard`` rows (the last may be
    shorter; no rows, no shard).

    Raises:
        InputError: a block whose widths are not ``widths`` (the first block's).
    """
    pending: list[tuple[sp.csr_matrix, sp.csr_matrix]] = []
    count = 0
    for X, Y in blocks:
        if (X.shape[1], Y.shape[1]) != widths:
            raise InputError(f"a block of {X.shape[1]} features and {Y.shape[1]} labels after blocks of "
                             f"{widths[0]} and {widths[1]}")
        start = 0
        while start < X.shape[0]:
            take = min(rows_per_shard - count, X.shape[0] - start)
            pending.append((X[start:start + take], Y[start:start + take]))
            count, start = count + take, start + take
            if count == rows_per_shard:
                yield _joined(pending)
                pending, count = [], 0
    if count:
        yield _joined(pending)


def _joined(parts: list[tuple[sp.csr_matrix, sp.csr_matrix]]) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    if len(parts) == 1:
        return parts[0]
    return sp.vstack([X for X, _ in parts], format="csr"), sp.vstack([Y for _, Y in parts], format="csr")


def _write_shard(folder: Path, index: int, X: sp.csr_matrix, Y: sp.csr_matrix) -> dict[str, Any]:
    """Write one shard's five arrays; its manifest entry."""
    X, Y = sp.csr_matrix(X), sp.csr_matrix(Y)
    X.sort_indices()
    index_dtype = {name: np.int32 if max(M.nnz, M.shape[1]) <= MAX_SIZE else np.int64 for name, M in (("X", X), ("Y", Y))}
    arrays = {
        "X_indptr": X.indptr.astype(index_dtype["X"]), "X_indices": X.indices.astype(index_dtype["X"]),
        "X_data": X.data.astype(np.float32), "Y_indptr": Y.indptr.astype(index_dtype["Y"]),
        "Y_indices": Y.indices.astype(index_dtype["Y"]),
    }
    files = {}
    for name, array in arrays.items():
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
        data = buffer.getvalue()
        file = f"shard-{index:05d}-{name}.npy"
        atomic_write_bytes(folder / file, data)
        files[name] = {"file": file, "dtype": str(array.dtype), "bytes": len(data),
                       "sha256": hashlib.sha256(data).hexdigest()}
    return {"rows": int(X.shape[0]), "X_nnz": int(X.nnz), "Y_nnz": int(Y.nnz), "files": files}


def is_sharded(value: Any) -> bool:
    """Whether ``value`` is rows of a shard store (:class:`ShardedRows`) or a store itself."""
    return isinstance(value, (ShardedRows, ShardStore))


@dataclass(frozen=True)
class _ShardInfo:
    """One shard as the manifest describes it, its files already checked against it."""

    rows: int
    nnz: dict[str, int]
    files: dict[str, dict[str, Any]]


class ShardStore:
    """A shard folder opened for reading (see :func:`open_shards`).

    Attributes:
        folder: the store's folder; name: the dataset's name.
        n_rows, n_features, n_labels: the sizes of the split.
        X, Y: the features and labels as :class:`ShardedRows`, which the estimator and the
            trainer read batch by batch.
    """

    def __init__(self, folder: Path, manifest: dict[str, Any], shards: list[_ShardInfo]) -> None:
        self.folder = folder
        self.name = str(manifest.get("name", folder.name))
        self.n_rows, self.n_features, self.n_labels = (int(manifest[key]) for key in ("n_rows", "n_features", "n_labels"))
        self._shards = shards
        self.bounds = np.zeros(len(shards) + 1, dtype=np.int64)
        np.cumsum([shard.rows for shard in shards], out=self.bounds[1:])
        self._open: OrderedDict[int, tuple[sp.csr_matrix, sp.csr_matrix]] = OrderedDict()
        self._checked: set[int] = set()
        self.X = ShardedRows(self, "X")
        self.Y = ShardedRows(self, "Y")

    def __len__(self) -> int:
        return self.n_rows

    @property
    def n_shards(self) -> int:
        return len(self._shards)

    def __repr__(self) -> str:
        return (f"ShardStore({str(self.folder)!r}: {self.n_rows} rows x {self.n_features} features, "
                f"{self.n_labels} labels, {self.n_shards} shards)")

    def shard(self, index: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """``(X, Y)`` of shard ``index`` as CSR matrices over its memory-mapped files,
        checked (checksum and structure) the first time; at most :data:`OPEN_SHARDS` stay mapped.

        Raises:
            DataFormatError: the shard's files disagree with the manifest or are malformed.
        """
        if index in self._open:
            self._open.move_to_end(index)
            return self._open[index]
        pair = self._read_shard(index)
        self._open[index] = pair
        while len(self._open) > OPEN_SHARDS:
            self._open.popitem(last=False)
        return pair

    def chunks(self) -> Iterator[tuple[sp.csr_matrix, sp.csr_matrix]]:
        """``(X, Y)`` of every shard in order: CSR row blocks that together are the split."""
        for index in range(self.n_shards):
            yield self.shard(index)

    def load(self) -> Dataset:
        """The whole split in memory (as :func:`holoxmc.data.load` returns it)."""
        X = sp.vstack([X for X, _ in self.chunks()], format="csr") if self.n_shards else sp.csr_matrix((0, self.n_features))
        Y = sp.vstack([Y for _, Y in self.chunks()], format="csr") if self.n_shards else sp.csr_matrix((0, self.n_labels))
        return Dataset(X, Y, self.name)

    def digest(self) -> str:
        """SHA-256 over the manifest's sizes and file checksums: what a checkpoint is matched by."""
        record = [self.n_rows, self.n_features, self.n_labels,
                  [[entry["sha256"] for entry in shard.files.values()] for shard in self._shards]]
        return hashlib.sha256(json.dumps(record).encode()).hexdigest()

    def label_counts(self) -> np.ndarray:
        """``(n_labels,)`` number of rows of each label, counted shard by shard."""
        return self.Y.column_counts()

    def _read_shard(self, index: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        info = self._shards[index]
        if index not in self._checked:
            for entry in info.files.values():
                _check_checksum(self.folder / entry["file"], entry["sha256"])
        arrays = {name: np.load(self.folder / entry["file"], mmap_mode="r", allow_pickle=False)
                  for name, entry in info.files.items()}
        if index not in self._checked:
            _check_structure(self.folder, info, arrays, self.n_features, self.n_labels)
            self._checked.add(index)
        X = sp.csr_matrix((arrays["X_data"], arrays["X_indices"], arrays["X_indptr"]),
                          shape=(info.rows, self.n_features), copy=False)
        ones = np.ones(info.nnz["Y"], dtype=np.float32)
        Y = sp.csr_matrix((ones, arrays["Y_indices"], arrays["Y_indptr"]), shape=(info.rows, self.n_labels), copy=False)
        return X, Y

    def rows(self, matrix: str, rows: np.ndarray) -> sp.csr_matrix:
        """Rows ``rows`` (global row ids, any order) of ``matrix`` (``"X"`` or ``"Y"``) as
        one CSR matrix in that order, read from the shards that hold them."""
        rows = np.asarray(rows, dtype=np.int64)
        width = self.n_features if matrix == "X" else self.n_labels
        if rows.size == 0:
            return sp.csr_matrix((0, width), dtype=np.float32)
        if rows.min() < 0 or rows.max() >= self.n_rows:
            raise IndexError(f"row ids must be in [0, {self.n_rows})")
        shard_of = np.searchsorted(self.bounds, rows, side="right") - 1
        parts, positions = [], []
        for index in _in_order_of_appearance(shard_of):
            where = np.flatnonzero(shard_of == index)
            block = self.shard(int(index))[0 if matrix == "X" else 1]
            parts.append(block[rows[where] - self.bounds[index]])
            positions.append(where)
        stacked = parts[0] if len(parts) == 1 else sp.vstack(parts, format="csr")
        order = np.concatenate(positions)
        if np.all(order[1:] > order[:-1]):
            return sp.csr_matrix(stacked)
        return sp.csr_matrix(stacked[np.argsort(order, kind="stable")])


def _in_order_of_appearance(values: np.ndarray) -> np.ndarray:
    """The distinct ``values`` in the order they first appear."""
    unique, first = np.unique(values, return_index=True)
    return unique[np.argsort(first)]


class ShardedRows:
    """The features (``X``) or labels (``Y``) of a :class:`ShardStore`, or a subset of its
    rows, used like a CSR matrix where holoxmc reads rows: ``shape``, and ``view[rows]``
    (an integer array of row ids) → those rows as an in-memory CSR matrix.

    Example:
        >>> store.X[np.array([3, 0])].shape  # doctest: +SKIP
        (2, 6)
    """

    def __init__(self, store: ShardStore, matrix: str, selection: np.ndarray | None = None) -> None:
        self.store = store
        self.matrix = matrix
        self.selection = selection

    @property
    def shape(self) -> tuple[int, int]:
        n = self.store.n_rows if self.selection is None else len(self.selection)
        return n, self.store.n_features if self.matrix == "X" else self.store.n_labels

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, rows: Any) -> sp.csr_matrix:
        if not isinstance(rows, slice) and np.asarray(rows).dtype.kind not in "iu" and np.size(rows):
            raise IndexError("select rows with a 1-D array of integer row ids or a slice (not a mask)")
        rows = np.arange(self.shape[0])[rows] if isinstance(rows, slice) else np.asarray(rows, dtype=np.int64)
        if rows.ndim != 1:
            raise IndexError("select rows with a 1-D array of row ids or a slice")
        return self.store.rows(self.matrix, rows if self.selection is None else self.selection[rows])

    def subset(self, rows: np.ndarray) -> "ShardedRows":
        """A view of rows ``rows`` of this one (nothing is read)."""
        rows = np.asarray(rows, dtype=np.int64)
        return ShardedRows(self.store, self.matrix, rows if self.selection is None else self.selection[rows])

    @property
    def row_blocks(self) -> np.ndarray:
        """The shard of each row (``(n,)`` int64): rows of one block are read together."""
        rows = np.arange(self.store.n_rows) if self.selection is None else self.selection
        return np.searchsorted(self.store.bounds, rows, side="right") - 1

    def chunks(self) -> Iterator[np.ndarray]:
        """Consecutive row-id blocks of this view, one per shard it touches (for scoring)."""
        blocks = self.row_blocks
        cuts = np.flatnonzero(np.diff(blocks)) + 1
        yield from (part for part in np.split(np.arange(len(blocks)), cuts) if part.size)

    def column_counts(self) -> np.ndarray:
        """Stored entries per column over this view's rows (a label's row count, for ``Y``)."""
        check_allocation(8 * self.shape[1], f"counts of {self.shape[1]} columns")
        counts = np.zeros(self.shape[1], dtype=np.int64)
        for part in self.chunks():
            counts += np.bincount(self[part].indices, minlength=self.shape[1])
        return counts

    def digest(self) -> str:
        """SHA-256 of the store's :meth:`ShardStore.digest`, the matrix and the selected rows."""
        digest = hashlib.sha256(f"{self.store.digest()}:{self.matrix}".encode())
        if self.selection is not None:
            digest.update(np.ascontiguousarray(self.selection).tobytes())
        return digest.hexdigest()

    def __repr__(self) -> str:
        return f"ShardedRows({self.matrix} of {self.store!r}, shape={self.shape})"


# ---------------------------------------------------------------------------- opening
def open_shards(directory: str | os.PathLike) -> ShardStore:
    """Open a folder written by :func:`write_shards`: the manifest is read and every file's
    ``.npy`` header and size are checked against it; nothing is mapped yet.

    Raises:
        DataFormatError: no manifest, a malformed one, or a file that disagrees with it
            (missing, truncated, another dtype or shape), naming the file.
    """
    folder = Path(directory)
    manifest = _read_manifest(folder / MANIFEST)
    where = folder / MANIFEST
    shards = [_check_shard(folder, where, number, entry, manifest) for number, entry in enumerate(manifest["shards"])]
    total = sum(shard.rows for shard in shards)
    if total != manifest["n_rows"]:
        raise DataFormatError(where, None, f"the shards hold {total} rows, the manifest says n_rows={manifest['n_rows']}")
    return ShardStore(folder, manifest, shards)


def _read_manifest(path: Path) -> dict[str, Any]:
    """The manifest's JSON, its format and sizes checked."""
    if not path.exists() and not path.is_symlink():
        raise DataFormatError(path, None, "no shard manifest here (write one with holoxmc.data.write_shards)")
    try:  # a regular file (no FIFO, no device), bounded, depth-checked
        manifest = parse_json(read_bounded(path, limit=MAX_MANIFEST_BYTES, what="shard manifest"), str(path),
                              expect=None, what="shard manifest")
    except InputError as exc:
        raise DataFormatError(path, None, f"not a shard manifest: {str(exc).removeprefix(f'{path}: ')}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != SHARD_FORMAT:
        raise DataFormatError(path, None, f"not a shard manifest (format must be {SHARD_FORMAT!r})")
    if manifest.get("version") != SHARD_VERSION:
        raise DataFormatError(path, None, f"shard format version {manifest.get('version')!r}; this holoxmc reads "
                                          f"{SHARD_VERSION} (write the store again)")
    try:
        for key, minimum in (("n_rows", 0), ("n_features", 1), ("n_labels", 1)):
            check_size(key, manifest.get(key), minimum=minimum)
    except InputError as exc:
        raise DataFormatError(path, None, str(exc)) from None
    if not isinstance(manifest.get("shards"), list):
        raise DataFormatError(path, None, "'shards' must be a list")
    return manifest


def _check_shard(folder: Path, where: Path, number: int, entry: Any, manifest: dict[str, Any]) -> _ShardInfo:
    """Shard ``number``'s manifest entry, its five files' headers and sizes checked against it."""
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict):
        raise DataFormatError(where, None, f"shard {number}: an entry needs 'rows', 'X_nnz', 'Y_nnz' and 'files'")
    try:
        rows = check_size(f"shard {number} rows", entry.get("rows"))
        nnz = {m: check_size(f"shard {number} {m}_nnz", entry.get(f"{m}_nnz"), minimum=0, limit=2**62) for m in "XY"}
    except InputError as exc:
        raise DataFormatError(where, None, str(exc)) from None
    files = entry["files"]
    if sorted(files) != sorted(ARRAYS):
        raise DataFormatError(where, None, f"shard {number}: files must be {list(ARRAYS)}, got {sorted(files)}")
    for name in ARRAYS:
        _check_file(folder, where, name, files[name], rows, nnz[name[0]])
    if files["X_indptr"]["dtype"] != files["X_indices"]["dtype"] or files["Y_indptr"]["dtype"] != files["Y_indices"]["dtype"]:
        raise DataFormatError(where, None, f"shard {number}: indptr and indices must share one dtype")
    return _ShardInfo(rows, nnz, files)


def _check_file(folder: Path, where: Path, name: str, entry: Any, rows: int, nnz: int) -> None:
    """One array file: a plain name in ``folder``, its header's dtype and shape those the
    manifest implies, its size the header's plus the array's bytes, the manifest's byte count."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) or not _SHARD_FILE.fullmatch(entry["file"]):
        raise DataFormatError(where, None, f"{name}: a file entry needs a shard file name, 'dtype', 'bytes', 'sha256'")
    path = folder / entry["file"]
    expected_dtype = DATA_DTYPE if name == "X_data" else entry.get("dtype")
    if expected_dtype not in (*INDEX_DTYPES, DATA_DTYPE) or entry.get("dtype") != expected_dtype:
        raise DataFormatError(where, None, f"{entry['file']}: dtype {entry.get('dtype')!r} is not one a shard uses")
    if not isinstance(entry.get("sha256"), str) or not isinstance(entry.get("bytes"), int):
        raise DataFormatError(where, None, f"{entry['file']}: 'bytes' and 'sha256' are missing")
    shape = (rows + 1,) if name.endswith("indptr") else (nnz,)
    if not path.exists() and not path.is_symlink():
        raise DataFormatError(path, None, "missing: the manifest lists it")
    try:
        with open_data_file(path) as f:  # a regular file: a FIFO or device is refused, never read
            size = os.fstat(f.fileno()).st_size
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            header = read_header(f)
            offset = f.tell()
    except FileNotFoundError:
        raise DataFormatError(path, None, "missing: the manifest lists it") from None
    except DataFormatError:
        raise
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise DataFormatError(path, None, f"not a .npy array file: {exc}") from None
    found_shape, fortran, dtype = header
    if tuple(found_shape) != shape or fortran or dtype != np.dtype(expected_dtype):
        raise DataFormatError(path, None, f"holds a {dtype} array of shape {tuple(found_shape)}; the manifest implies "
                                          f"{expected_dtype} of shape {shape}")
    expected_size = offset + int(np.prod(shape)) * dtype.itemsize
    if size != expected_size or entry["bytes"] != size:
        raise DataFormatError(path, None, f"{size} bytes; its header implies {expected_size} and the manifest says "
                                          f"{entry['bytes']} (truncated or overwritten)")


def _check_checksum(path: Path, expected: str) -> None:
    """The file's SHA-256 (read in blocks, nothing mapped) against the manifest's."""
    digest = hashlib.sha256()
    try:
        with open_data_file(path) as f:
            for block in iter(lambda: f.read(2**20), b""):
                digest.update(block)
    except OSError as exc:
        raise DataFormatError(path, None, f"cannot read it ({exc.strerror or exc})") from None
    if digest.hexdigest() != expected:
        raise DataFormatError(path, None, "its SHA-256 differs from the manifest's (the file was changed or corrupted)")


def _check_structure(folder: Path, info: _ShardInfo, arrays: dict[str, np.ndarray], n_features: int,
                     n_labels: int) -> None:
    """A shard's arrays are a valid CSR pair: ``indptr`` from 0 to nnz, never decreasing;
    indices in range; finite features; each row's labels sorted and distinct."""
    for matrix, width in (("X", n_features), ("Y", n_labels)):
        indptr, indices = arrays[f"{matrix}_indptr"], arrays[f"{matrix}_indices"]
        fault = None
        if indptr[0] != 0 or indptr[-1] != info.nnz[matrix] or np.any(np.diff(indptr) < 0):
            fault = (f"{matrix}_indptr", f"must rise from 0 to nnz={info.nnz[matrix]} and never fall")
        elif indices.size and (indices.min() < 0 or indices.max() >= width):
            fault = (f"{matrix}_indices", f"holds column ids outside [0, {width})")
        elif matrix == "X" and not np.all(np.isfinite(arrays["X_data"])):
            fault = ("X_data", "holds a NaN or infinite feature value")
        elif matrix == "Y" and _unsorted_in_rows(indptr, indices):
            fault = ("Y_indices", "a row's labels must be sorted and distinct")
        if fault is not None:
            raise DataFormatError(folder / info.files[fault[0]]["file"], None, fault[1])


def _unsorted_in_rows(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """Whether some row's ids are not strictly increasing."""
    if indices.size < 2:
        return False
    steps = np.diff(indices.astype(np.int64)) <= 0
    row_starts = indptr[1:-1]
    starts = row_starts[(row_starts > 0) & (row_starts < indices.size)]
    steps[starts - 1] = False  # the step from a row's last id to the next row's first
    return bool(steps.any())

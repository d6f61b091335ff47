"""``.npz`` cache of prepared datasets: arrays only (``allow_pickle=False``), written atomically.

Strings (texts, label names) are stored as their UTF-8 bytes (``uint8``) with ``int64``
offsets, so a cache is as large as its texts (a fixed-width string array is as wide as the
longest text in every row) and every string comes back exactly, trailing ``"\\x00"`` included.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
import zlib
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.data.dataset import Dataset
from holoxmc.data.readers import open_data_file
from holoxmc.data.text import TextEncoder
from holoxmc.errors import DataFormatError, HoloxmcError, InputError
from holoxmc.limits import check_allocation, check_size
from holoxmc.io import atomic_write_bytes, parse_json

__all__ = ["save_npz", "load_npz", "FORMAT_VERSION"]

#: Version of the cache layout; 2 stores strings as UTF-8 bytes plus offsets and holds
#: tokens of the tokenizer fitted on truncated texts; 3 adds the rows' groups. Other versions
#: are not read.
FORMAT_VERSION = 3


def save_npz(dataset: Dataset, path: str | os.PathLike) -> None:
    """Write ``dataset`` (matrices, name, texts, label names, tokens, text encoder as JSON)
    to a compressed ``.npz``.

    Example:
        >>> import tempfile, pathlib, scipy.sparse as sp
        >>> p = pathlib.Path(tempfile.mkdtemp()) / "toy.npz"
        >>> save_npz(Dataset(sp.csr_matrix((2, 3)), sp.csr_matrix([[1], [0]]), "toy"), p)
        >>> load_npz(p).n_labels
        1
    """
    arrays: dict[str, Any] = {"format_version": np.array(FORMAT_VERSION), "name": np.array(dataset.name)}
    for key, matrix in (("X", dataset.X), ("Y", dataset.Y)):
        arrays.update({
            f"{key}_data": matrix.data, f"{key}_indices": matrix.indices,
            f"{key}_indptr": matrix.indptr, f"{key}_shape": np.array(matrix.shape, dtype=np.int64),
        })
    for key in ("texts", "label_names"):
        strings = getattr(dataset, key)
        if strings is not None:
            arrays[f"{key}_utf8"], arrays[f"{key}_offsets"] = _pack_strings(strings)
    if dataset.tokens is not None:
        arrays["tokens"] = dataset.tokens
    if dataset.encoder is not None:
        arrays["encoder"] = np.array(json.dumps(dataset.encoder.to_dict()))
    if dataset.groups is not None:
        arrays["groups"] = np.array(json.dumps(dataset.groups))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())


def load_npz(path: str | os.PathLike) -> Dataset:
    """Read a dataset written by :func:`save_npz`; any corruption is a :class:`DataFormatError`."""
    try:
        with open_data_file(path) as f, np.load(f, allow_pickle=False) as npz:
            _check_members(npz.zip, path)
            if int(npz["format_version"]) != FORMAT_VERSION:
                raise DataFormatError(path, None, f"unsupported cache format {int(npz['format_version'])} (this "
                                                  f"holoxmc writes {FORMAT_VERSION}; delete the file to rebuild it)")
            matrices = [_stored_matrix(npz, key) for key in ("X", "Y")]
            _check_finite(matrices[0])
            return Dataset(
                matrices[0],
                matrices[1],
                str(npz["name"]),
                texts=_unpack_strings(npz, "texts"),
                label_names=_unpack_strings(npz, "label_names"),
                tokens=npz["tokens"] if "tokens" in npz else None,
                encoder=TextEncoder.from_dict(parse_json(str(npz["encoder"]), f"{path} (encoder)", what="text encoder"))
                if "encoder" in npz else None,
                groups=_stored_groups(npz, matrices[0].shape[0], path),
            )
    except HoloxmcError as exc:
        if isinstance(exc, DataFormatError):
            raise
        raise DataFormatError(path, None, f"inconsistent cache: {exc}") from None
    # NotImplementedError: zipfile's answer to a corrupted compression method or flag.
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, NotImplementedError,
            zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise DataFormatError(path, None, f"not a holoxmc dataset cache: {type(exc).__name__}: {exc}") from None


def _check_members(archive: zipfile.ZipFile, path: str | os.PathLike) -> None:
    """Check every array of the ``.npz`` before one is read: its ``.npy`` header's shape and
    dtype must fit in the bytes the member holds (numpy allocates what a header claims before
    it reads), and all members together must fit in memory.

    Raises:
        DataFormatError: naming the member that claims more than it holds.
    """
    total = 0
    for info in archive.infolist():
        with archive.open(info) as member:
            version = np.lib.format.read_magic(member)
            if version not in ((1, 0), (2, 0)):
                raise DataFormatError(path, None, f"{info.filename}: .npy format version {version} is not one "
                                                  "holoxmc writes")
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                else np.lib.format.read_array_header_2_0
            shape, _, dtype = read_header(member)
        claimed = math.prod(shape) * dtype.itemsize
        if dtype.hasobject or claimed > info.file_size:
            raise DataFormatError(path, None, f"{info.filename}: its header claims {claimed} bytes "
                                              f"({dtype}, shape {shape}), the member holds {info.file_size}")
        total += info.file_size
    check_allocation(total, "its arrays", where=os.fspath(path))


def _stored_groups(npz: Any, n_rows: int, path: str | os.PathLike) -> list[Any] | None:
    """The rows' groups (``None`` when the cache holds none): one string, integer or null per row."""
    if "groups" not in npz:
        return None
    groups = parse_json(str(npz["groups"]), f"{path} (groups)", expect=list, what="groups")
    if len(groups) != n_rows or not all(g is None or (isinstance(g, (str, int)) and not isinstance(g, bool))
                                        for g in groups):
        raise DataFormatError(path, None, f"groups must hold one string, integer or null per row ({n_rows})")
    return groups


def _stored_matrix(npz: Any, key: str) -> sp.csr_matrix:
    """The CSR matrix stored under ``key``, its claimed shape checked against ``MAX_SIZE``
    before the matrix is built, its arrays against the shape."""
    shape = tuple(check_size(f"{key} shape", int(v), minimum=0) for v in npz[f"{key}_shape"])
    matrix = sp.csr_matrix((npz[f"{key}_data"], npz[f"{key}_indices"], npz[f"{key}_indptr"]), shape=shape)
    matrix.check_format(full_check=True)
    return matrix


def _check_finite(X: sp.csr_matrix) -> None:
    """:class:`InputError` naming the first NaN or infinite feature value of ``X``."""
    bad = np.flatnonzero(~np.isfinite(X.data))
    if bad.size:
        row = int(np.searchsorted(X.indptr, bad[0], side="right")) - 1
        raise InputError(f"X holds {bad.size} non-finite value(s), e.g. {X.data[bad[0]]} at row {row}, "
                         f"feature {X.indices[bad[0]]}")


def _pack_strings(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(uint8 UTF-8 bytes, int64 offsets)``: string ``i`` is ``bytes[offsets[i]:offsets[i + 1]]``
    (``surrogatepass``: lone surrogates, which JSON allows, survive the round trip)."""
    encoded = [text.encode("utf-8", "surrogatepass") for text in strings]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), offsets


def _unpack_strings(npz: Any, key: str) -> list[str] | None:
    """The strings :func:`_pack_strings` stored under ``key``, or ``None`` if absent."""
    if f"{key}_utf8" not in npz:
        return None
    data, offsets = npz[f"{key}_utf8"], npz[f"{key}_offsets"]
    if (data.dtype != np.uint8 or data.ndim != 1 or offsets.dtype != np.int64 or offsets.ndim != 1
            or not offsets.size or offsets[0] != 0 or offsets[-1] != data.size or np.any(np.diff(offsets) < 0)):
        raise ValueError(f"corrupt {key} arrays")
    raw = data.tobytes()
    return [raw[start:end].decode("utf-8", "surrogatepass") for start, end in zip(offsets[:-1], offsets[1:])]

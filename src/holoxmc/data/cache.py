"""``.npz`` cache of prepared datasets: arrays only (``allow_pickle=False``), written atomically."""

from __future__ import annotations

import io
import json
import os
import zipfile
import zlib
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.data.dataset import Dataset
from holoxmc.data.text import TextEncoder
from holoxmc.errors import DataFormatError, HoloxmcError
from holoxmc.io import atomic_write_bytes

__all__ = ["save_npz", "load_npz"]

_FORMAT_VERSION = 1


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
    arrays: dict[str, Any] = {"format_version": np.array(_FORMAT_VERSION), "name": np.array(dataset.name)}
    for key, matrix in (("X", dataset.X), ("Y", dataset.Y)):
        arrays.update({
            f"{key}_data": matrix.data, f"{key}_indices": matrix.indices,
            f"{key}_indptr": matrix.indptr, f"{key}_shape": np.array(matrix.shape, dtype=np.int64),
        })
    if dataset.texts is not None:
        arrays["texts"] = np.array(dataset.texts, dtype=str)
    if dataset.label_names is not None:
        arrays["label_names"] = np.array(dataset.label_names, dtype=str)
    if dataset.tokens is not None:
        arrays["tokens"] = dataset.tokens
    if dataset.encoder is not None:
        arrays["encoder"] = np.array(json.dumps(dataset.encoder.to_dict()))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())


def load_npz(path: str | os.PathLike) -> Dataset:
    """Read a dataset written by :func:`save_npz`; any corruption is a :class:`DataFormatError`."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            if int(npz["format_version"]) != _FORMAT_VERSION:
                raise DataFormatError(path, None, f"unsupported cache format {int(npz['format_version'])}")
            matrices = [
                sp.csr_matrix(
                    (npz[f"{key}_data"], npz[f"{key}_indices"], npz[f"{key}_indptr"]),
                    shape=tuple(int(v) for v in npz[f"{key}_shape"]),
                )
                for key in ("X", "Y")
            ]
            for matrix in matrices:
                matrix.check_format(full_check=True)
            return Dataset(
                matrices[0],
                matrices[1],
                str(npz["name"]),
                texts=npz["texts"].tolist() if "texts" in npz else None,
                label_names=npz["label_names"].tolist() if "label_names" in npz else None,
                tokens=npz["tokens"] if "tokens" in npz else None,
                encoder=TextEncoder.from_dict(json.loads(str(npz["encoder"]))) if "encoder" in npz else None,
            )
    except HoloxmcError as exc:
        if isinstance(exc, DataFormatError):
            raise
        raise DataFormatError(path, None, f"inconsistent cache: {exc}") from None
    # NotImplementedError: zipfile's answer to a corrupted compression method or flag.
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError, NotImplementedError,
            zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise DataFormatError(path, None, f"not a holoxmc dataset cache: {type(exc).__name__}: {exc}") from None

"""Generic sparse-matrix helpers shared by the model families: CSR arrays to and from named
tensors (safetensors), the top entries of dense or CSR rows, row chunks by cost, a thread map
for GIL-releasing work, and unit-length rows.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> top_columns(np.array([[0.1, 0.9, 0.5]]), 2).tolist()
    [[1, 2]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize
from sklearn.utils.extmath import row_norms
from torch import Tensor

from holoxmc.errors import InputError

__all__ = ["cost_chunks", "csr_from_tensors", "csr_tensors", "in_threads", "index_blocks", "l2_rows",
           "sparse_row_top", "top_columns"]


def csr_tensors(prefix: str, M: sp.csr_matrix) -> dict[str, Tensor]:
    """The three arrays of CSR ``M`` as tensors named ``{prefix}.indptr|indices|data``."""
    M = sp.csr_matrix(M, dtype=np.float32)
    return {f"{prefix}.indptr": torch.from_numpy(M.indptr.astype(np.int64)),
            f"{prefix}.indices": torch.from_numpy(M.indices.astype(np.int64)),
            f"{prefix}.data": torch.from_numpy(np.ascontiguousarray(M.data))}


def csr_from_tensors(tensors: dict[str, Tensor], prefix: str, shape: tuple[int, int]) -> sp.csr_matrix:
    """The ``shape`` CSR matrix :func:`csr_tensors` stored; refuses arrays that do not form one.

    Raises:
        InputError: a missing array, or pointers/indices out of ``shape``.
    """
    names = [f"{prefix}.{part}" for part in ("indptr", "indices", "data")]
    missing = [name for name in names if name not in tensors]
    if missing:
        raise InputError(f"missing tensor {missing[0]!r}")
    indptr, indices, data = (tensors[name].numpy() for name in names)
    rows, cols = shape
    if (indptr.ndim != 1 or indices.ndim != 1 or data.ndim != 1 or indptr.shape != (rows + 1,)
            or indptr[0] != 0 or indptr[-1] != len(indices) or len(indices) != len(data)
            or np.any(np.diff(indptr) < 0) or (len(indices) and (indices.min() < 0 or indices.max() >= cols))):
        raise InputError(f"the stored {prefix} do not form a {shape} sparse matrix")
    if not np.all(np.isfinite(data)):
        raise InputError(f"the stored {prefix} hold a value that is not finite")
    return sp.csr_matrix((data.astype(np.float32), indices, indptr), shape=shape)


def top_columns(S: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` largest entries of each row of dense ``S``, best first
    (ties within the kept columns: the lower column first; which of several tied columns at the
    ``k``-th place is kept is not specified)."""
    k = min(k, S.shape[1])
    part = np.argpartition(-S, k - 1, axis=1)[:, :k] if k < S.shape[1] else np.tile(np.arange(S.shape[1]),
                                                                                      (S.shape[0], 1))
    part.sort(axis=1)
    order = np.argsort(-np.take_along_axis(S, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def sparse_row_top(S: sp.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns and values of the ``k`` largest stored entries of each row of CSR ``S``, best
    first, ties the lower column first, also at the ``k``-th place (which tied entries are kept
    does not depend on the order a row stores its entries in, so shortlists taken from index
    blocks of any width agree); a row with fewer than ``k`` stored entries is filled
    with the lowest columns it does not store, valued 0 — the top ``k`` of the dense row when
    ``S`` holds no negative value. A loop over rows: each costs its stored entries, not
    ``S.shape[1]``.

    Example:
        >>> S = sp.csr_matrix(np.array([[0, 3, 1, 0], [0, 0, 0, 2]], np.float32))
        >>> cols, vals = sparse_row_top(S, 2)
        >>> cols.tolist(), vals.tolist()
        ([[1, 2], [3, 0]], [[3.0, 1.0], [2.0, 0.0]])
    """
    n, k = S.shape[0], min(k, S.shape[1])
    cols, vals = np.empty((n, k), np.int64), np.zeros((n, k), np.float32)
    for i in range(n):
        data, index = S.data[S.indptr[i]:S.indptr[i + 1]], S.indices[S.indptr[i]:S.indptr[i + 1]]
        if len(data) > k:
            keep = np.argpartition(-data, k - 1)[:k]
            kth = data[keep].min()
            if np.count_nonzero(data == kth) > np.count_nonzero(data[keep] == kth):  # a tie across the k-th place
                tied = np.flatnonzero(data == kth)
                above = np.flatnonzero(data > kth)
                keep = np.concatenate([above, tied[np.argsort(index[tied], kind="stable")[:k - len(above)]]])
            data, index = data[keep], index[keep]
        order = np.lexsort((index, -data))
        m = len(order)
        cols[i, :m], vals[i, :m] = index[order], data[order]
        if m < k:  # the (k - m)-th column it does not store is at most k - 1
            cols[i, m:] = np.setdiff1d(np.arange(k), index)[:k - m]
    return cols, vals


def cost_chunks(cost: np.ndarray, limit: int) -> Iterator[tuple[int, int]]:
    """``[start, stop)`` row ranges whose summed ``cost`` stays within ``limit`` (a row
    costlier than ``limit`` alone is a chunk of its own).

    Example:
        >>> list(cost_chunks(np.array([3, 3, 5, 1]), 6))
        [(0, 2), (2, 4)]
    """
    total, start = np.cumsum(cost), 0
    while start < len(cost):
        stop = max(start + 1, int(np.searchsorted(total, (total[start - 1] if start else 0) + limit, side="right")))
        yield start, stop
        start = stop


def in_threads(fn: Callable[[Any], None], items: Sequence[Any], threads: int) -> None:
    """``fn(item)`` for every item, on up to ``threads`` threads of this process (in a loop
    for one). Worth it where ``fn``'s time goes to code that releases the GIL, as
    scipy.sparse's products and numpy's partitions do: at L = 670K two threads scored the
    training shortlists of 32,768 rows in 22 s, two worker processes (which start and receive
    their data) in 37 s, and a whole fit took the same time either way (docs/results/rerank.md,
    "Index blocks and threads"); threads, unlike worker processes, share this process's arrays.

    Example:
        >>> out = [0] * 4
        >>> in_threads(lambda i: out.__setitem__(i, i * i), range(4), threads=2); out
        [0, 1, 4, 9]
    """
    if threads <= 1 or len(items) <= 1:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(min(threads, len(items))) as pool:
        for _ in pool.map(fn, items):  # re-raises the first error
            pass


#: Rows whose squared length is this close to 1 count as unit rows already.
UNIT_TOLERANCE = 1e-5


def l2_rows(X: Any) -> sp.csr_matrix:
    """``X`` as float32 CSR with unit-length rows (zero rows stay zero; scikit-learn's
    ``normalize``). A row already of unit length (its squared length within
    :data:`UNIT_TOLERANCE` of 1, as TF-IDF rows normalised in float64 are in float32) keeps
    its values, decided row by row (a row's values do not depend on the others); when every
    row does, ``X`` itself is returned, without a copy: do not modify the result in place.

    Example:
        >>> X = sp.csr_matrix(np.array([[3, 4], [0, 0]], np.float32))
        >>> l2_rows(X).toarray().tolist()
        [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
        >>> unit = l2_rows(X); np.shares_memory(l2_rows(unit).data, unit.data)
        True
    """
    X = sp.csr_matrix(X, dtype=np.float32)
    if not X.shape[0]:
        return X
    squares = row_norms(X, squared=True)  # no copy of X
    unit = (np.abs(squares - 1.0) <= UNIT_TOLERANCE) | (squares == 0.0)
    if unit.all():
        return X
    out = sp.csr_matrix(normalize(X, norm="l2", axis=1), dtype=np.float32)
    if out.nnz == X.nnz and np.array_equal(out.indptr, X.indptr):  # the same entries, in the same places
        kept = np.repeat(unit, np.diff(X.indptr))
        out.data[kept] = X.data[kept]
    return out


def index_blocks(index: sp.csr_matrix, labels: int) -> list[sp.csr_matrix]:
    """Column blocks of ``labels`` columns (the last one narrower) of CSR ``index``; the
    index itself when it is one block.

    Example:
        >>> blocks = index_blocks(sp.csr_matrix(np.arange(6, dtype=np.float32).reshape(2, 3)), 2)
        >>> [block.toarray().tolist() for block in blocks]
        [[[0.0, 1.0], [3.0, 4.0]], [[2.0], [5.0]]]
    """
    if index.shape[1] <= labels:
        return [index]
    return [sp.csr_matrix(index[:, start:start + labels]) for start in range(0, index.shape[1], labels)]

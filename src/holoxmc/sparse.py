"""Generic sparse-matrix helpers shared by the model families: CSR arrays to and from named
tensors (safetensors), the top entries of dense or CSR rows, row chunks by cost, a thread map
for GIL-releasing work, and unit-length rows.

Only NumPy and SciPy are imported here (torch when :func:`csr_tensors` is called): the
served linear and re-rank models score with these helpers alone.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> top_columns(np.array([[0.1, 0.9, 0.5]]), 2).tolist()
    [[1, 2]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
import os
import sys
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["best_columns", "cost_chunks", "csr_from_tensors", "csr_tensors", "default_threads", "in_threads", "index_blocks",
           "l2_rows", "normalize_rows", "sparse_row_top", "top_columns"]


def csr_tensors(prefix: str, M: sp.csr_matrix) -> dict[str, Tensor]:
    """The three arrays of CSR ``M`` as tensors named ``{prefix}.indptr|indices|data``."""
    import torch

    M = sp.csr_matrix(M, dtype=np.float32)
    return {f"{prefix}.indptr": torch.from_numpy(M.indptr.astype(np.int64)),
            f"{prefix}.indices": torch.from_numpy(M.indices.astype(np.int64)),
            f"{prefix}.data": torch.from_numpy(np.ascontiguousarray(M.data))}


def csr_from_tensors(tensors: dict[str, Any], prefix: str, shape: tuple[int, int]) -> sp.csr_matrix:
    """The ``shape`` CSR matrix :func:`csr_tensors` stored (as tensors, or as the NumPy arrays
    ``safetensors.numpy`` reads); refuses arrays that do not form one.

    Raises:
        InputError: a missing array, or pointers/indices out of ``shape``.
    """
    names = [f"{prefix}.{part}" for part in ("indptr", "indices", "data")]
    missing = [name for name in names if name not in tensors]
    if missing:
        raise InputError(f"missing tensor {missing[0]!r}")
    indptr, indices, data = (np.asarray(tensors[name]) for name in names)
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


#: :func:`best_columns` ranks by this many rounds of ``argmax`` at most; past it, by a partition.
ARGMAX_ROUNDS = 16


def best_columns(S: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the ``k`` largest entries of each row of dense ``S``, best first,
    every tie broken toward the lower column, also at the ``k``-th place (NaN ranks as
    ``-inf``): :func:`top_columns`' ranking made deterministic, and for small ``k`` much faster.
    Up to :data:`ARGMAX_ROUNDS`, ``k`` rounds of ``argmax`` (top-5 of a ``(2515, 159)`` float32
    block, Bibtex's test split under the linear model: 1.3 ms against 16 ms for
    :func:`top_columns`' partition and sorts); past it, the ``k``-th value by a partition, then the
    entries at or above it sorted.

    Example:
        >>> best_columns(np.array([[0.5, 0.9, 0.5, 0.1], [1.0, 1.0, 1.0, 1.0]]), 2).tolist()
        [[1, 0], [0, 1]]
    """
    n, m = S.shape
    k = min(k, m)
    nan = np.isnan(S)
    if nan.any():
        S = np.where(nan, -np.inf, S)
    if k <= ARGMAX_ROUNDS:
        work, rows = S.copy(), np.arange(n)
        out, low = np.empty((n, k), np.int64), np.zeros(n, bool)
        for j in range(k):
            out[:, j] = work.argmax(axis=1)  # the first (lowest) column of the row's largest value
            low |= np.isneginf(work[rows, out[:, j]])  # only -inf left: the pick may repeat a column
            work[rows, out[:, j]] = -np.inf
        if low.any():
            out[low] = np.argsort(-S[low], axis=1, kind="stable")[:, :k]
        return out
    kth = np.partition(S, m - k, axis=1)[:, m - k]
    r, c = np.nonzero(S >= kth[:, None])
    order = np.lexsort((c, -S[r, c], r))
    r, c = r[order], c[order].astype(np.int64)
    return c[np.searchsorted(r, np.arange(n))[:, None] + np.arange(k)]


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


def normalize_rows(X: Any) -> sp.csr_matrix:
    """``X`` as a new float32 CSR matrix whose rows have unit L2 length; a row whose squares
    sum to 0 is left as it is. The same values as scikit-learn's ``normalize(X)`` on float32
    CSR, bit for bit (each row's float32 squares summed in float64 in storage order, each value
    divided by the float64 root, then rounded to float32), without importing scikit-learn.

    Example:
        >>> normalize_rows(sp.csr_matrix(np.array([[3, 4], [0, 0]], np.float32))).toarray().tolist()
        [[0.6000000238418579, 0.800000011920929], [0.0, 0.0]]
    """
    X = sp.csr_matrix(X, dtype=np.float32, copy=True)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    squares = np.bincount(rows, weights=X.data * X.data, minlength=X.shape[0])  # in order, in float64
    norms = np.sqrt(squares)
    norms[norms == 0.0] = 1.0
    X.data = (X.data / norms[rows]).astype(np.float32)
    return X


def l2_rows(X: Any) -> sp.csr_matrix:
    """``X`` as float32 CSR with unit-length rows (zero rows stay zero; :func:`normalize_rows`).
    A row already of unit length (its squared length within :data:`UNIT_TOLERANCE` of 1, as
    TF-IDF rows normalised in float64 are in float32) keeps its values, decided row by row (a
    row's values do not depend on the others); when every row does, ``X`` itself is returned,
    without a copy: do not modify the result in place.

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
    squares = np.zeros(X.shape[0], np.float32)  # float32 sums in storage order, as scikit-learn's row_norms
    np.add.at(squares, np.repeat(np.arange(X.shape[0]), np.diff(X.indptr)), X.data * X.data)
    unit = (np.abs(squares - 1.0) <= UNIT_TOLERANCE) | (squares == 0.0)
    if unit.all():
        return X
    out = normalize_rows(X)
    if out.nnz == X.nnz and np.array_equal(out.indptr, X.indptr):  # the same entries, in the same places
        kept = np.repeat(unit, np.diff(X.indptr))
        out.data[kept] = X.data[kept]
    return out


def default_threads() -> int:
    """Threads a scoring call uses when not told: torch's intra-op thread count when torch is
    loaded already (so ``torch.set_num_threads`` bounds it, as it bounds everything else),
    else the cores this process may run on; torch is never imported for it.

    Example:
        >>> default_threads() >= 1
        True
    """
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.get_num_threads())
    affinity = getattr(os, "sched_getaffinity", None)
    return max(1, len(affinity(0)) if affinity is not None else (os.cpu_count() or 1))


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

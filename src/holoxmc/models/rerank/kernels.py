"""The re-rank model's two sparse loops, compiled: the PIFA shortlist's product and selection
in one pass (:func:`product_top`, the ``k`` best labels of each row of ``X @ index`` without
forming the product), and each row's margins on its own shortlist (:func:`label_margins`).

Why they are written here rather than left to scipy.sparse: at L = 670K a training row's
product stores about 36,000 scores; scipy builds them as a CSR matrix (a symbolic pass, a
numeric pass, the column blocks joined) and :func:`~holoxmc.sparse.sparse_row_top` then
selected from it row by row in Python. A re-rank fit there spent 42 % of its time in these
training shortlists (docs/results/speed.md, "At L = 670K"). :func:`product_top` accumulates
each row's scores in a dense array of one index block's width and keeps the row's ``k`` best
in a heap as it reads them back (a comparison per score, where a partition or sort of the
row's tens of thousands of scores cost four times the accumulation). The scores are summed in
the order scipy sums them (the row's features in turn, each one's postings in turn, in
float32), so they are scipy's, and the selection is :func:`~holoxmc.sparse.sparse_row_top`'s
(best first, ties the lower column first, also at the ``k``-th place). The margins were a
row-repeated copy of ``X`` multiplied element-wise with a gathered copy of the weight rows;
:func:`label_margins` spreads a row into a dense array once and reads each shortlisted
label's weights against it. Both run without the GIL (numba, ``nogil``), so threads share the
index and the weights, and each row's result depends on that row alone: the same at any
thread count.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> X = sp.csr_matrix(np.array([[1, 0], [0, 2]], np.float32))
    >>> index = sp.csr_matrix(np.array([[0, 3, 1, 0], [0, 0, 0, 2]], np.float32))
    >>> labels, scores = product_top(X, [index], [0], 2)
    >>> labels.tolist(), scores.tolist()
    ([[1, 2], [3, 0]], [[3.0, 1.0], [4.0, 0.0]])
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from numba import njit

from holoxmc.errors import InputError

__all__ = ["product_top", "label_margins", "dense_product"]


def product_top(X: sp.csr_matrix, blocks: Sequence[sp.csr_matrix], offsets: Sequence[int],
                k: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns and values of the ``k`` largest entries of each row of ``X @ index``, where the
    ``(D, L)`` index is given as CSR column ``blocks`` starting at columns ``offsets``: best
    first, ties the lower column first; a row with fewer than ``k`` nonzero scores is filled
    with the lowest columns it does not score, valued 0 (:func:`~holoxmc.sparse.sparse_row_top`
    of the product, which it equals when no value is negative).

    Args:
        X: ``(n, D)`` CSR rows.
        blocks: the index's ``(D, width)`` CSR column blocks, in column order.
        offsets: each block's first column in the whole index.
        k: labels per row (at most the index's columns).

    Shapes:
        returns labels ``(n, k)`` int64 and scores ``(n, k)`` float32.
    """
    n = X.shape[0]
    k = min(int(k), sum(block.shape[1] for block in blocks))
    if any(block.shape[0] != X.shape[1] for block in blocks):
        raise InputError(f"X has {X.shape[1]} features, the index blocks {[block.shape[0] for block in blocks]}")
    if k < 1:
        return np.zeros((n, 0), np.int64), np.zeros((n, 0), np.float32)
    X = sp.csr_matrix(X, dtype=np.float32)  # a repeated column adds its terms, as in scipy's product
    labels, scores, held = np.full((n, k), -1, np.int64), np.zeros((n, k), np.float32), np.zeros(n, np.int64)
    for block, offset in zip(blocks, offsets):
        _block_top(X.indptr, X.indices, X.data, block.indptr, block.indices, block.data.astype(np.float32, copy=False),
                   block.shape[1], int(offset), labels, scores, held)
    _finish(labels, scores, held)
    return labels, scores


def label_margins(X: sp.csr_matrix, weight_rows: sp.csr_matrix, labels: np.ndarray) -> np.ndarray:
    """``(n, s)`` dot products of each row of ``X`` with the weight rows of its ``s`` labels,
    summed in float64 and returned as float32 (the bias is not added).

    Args:
        X: ``(n, D)`` CSR rows; weight_rows: ``(L, D)`` CSR, one row of weights a label;
        labels: ``(n, s)`` label ids of each row (nonnegative).

    Example:
        >>> W = sp.csr_matrix(np.array([[1, 0], [0, 2], [3, 3]], np.float32))
        >>> label_margins(sp.csr_matrix(np.array([[1, 1]], np.float32)), W, np.array([[2, 0]])).tolist()
        [[6.0, 1.0]]
    """
    if X.shape[1] != weight_rows.shape[1] or labels.ndim != 2 or labels.shape[0] != X.shape[0]:
        raise InputError(f"rows {X.shape}, weight rows {weight_rows.shape} and labels {labels.shape} disagree")
    if labels.size and (labels.min() < 0 or labels.max() >= weight_rows.shape[0]):
        raise InputError(f"labels must lie in [0, {weight_rows.shape[0]})")
    X = sp.csr_matrix(X, dtype=np.float32)
    out = np.empty(labels.shape, np.float32)
    _margins(X.indptr, X.indices, X.data, weight_rows.indptr, weight_rows.indices,
             weight_rows.data.astype(np.float32, copy=False), np.ascontiguousarray(labels, dtype=np.int64),
             weight_rows.shape[1], out)
    return out


def dense_product(X: sp.csr_matrix, blocks: Sequence[sp.csr_matrix], offsets: Sequence[int],
                  n_columns: int) -> np.ndarray:
    """``X @ M`` as a dense ``(n, n_columns)`` float32 array, the ``(D, n_columns)`` CSR ``M``
    given as column ``blocks`` starting at ``offsets``: scipy's sums (the row's features in turn,
    each one's entries in turn, in float32), written where they land instead of built as a CSR
    matrix (a symbolic pass, a numeric pass) and then copied into a dense one.

    Args:
        X: ``(n, D)`` CSR rows.
        blocks: ``M``'s ``(D, width)`` CSR column blocks, in column order; offsets: each block's
            first column; n_columns: ``M``'s columns.

    Example:
        >>> X = sp.csr_matrix(np.array([[1, 0], [0, 2]], np.float32))
        >>> M = sp.csr_matrix(np.array([[0, 3, 1], [0, 0, 2]], np.float32))
        >>> dense_product(X, [M], [0], 3).tolist()
        [[0.0, 3.0, 1.0], [0.0, 0.0, 4.0]]
    """
    if any(block.shape[0] != X.shape[1] for block in blocks):
        raise InputError(f"X has {X.shape[1]} features, the blocks {[block.shape[0] for block in blocks]}")
    if len(offsets) != len(blocks) or any(offset < 0 or offset + block.shape[1] > n_columns
                                          for block, offset in zip(blocks, offsets)):
        raise InputError(f"blocks of widths {[block.shape[1] for block in blocks]} at offsets {list(offsets)} "
                         f"do not fit in {n_columns} columns")
    X = sp.csr_matrix(X, dtype=np.float32)
    out = np.zeros((X.shape[0], int(n_columns)), np.float32)
    for block, offset in zip(blocks, offsets):
        _add_product(X.indptr, X.indices, X.data, block.indptr, block.indices,
                     block.data.astype(np.float32, copy=False), int(offset), out)
    return out


@njit(nogil=True, cache=True)
def _add_product(x_indptr, x_indices, x_data, m_indptr, m_indices, m_data, offset, out):  # pragma: no cover
    """Each row's products with one block's entries added into its row of ``out``."""
    for i in range(len(x_indptr) - 1):
        row = out[i]
        for p in range(x_indptr[i], x_indptr[i + 1]):
            f, v = x_indices[p], x_data[p]
            for q in range(m_indptr[f], m_indptr[f + 1]):
                row[m_indices[q] + offset] += v * m_data[q]


@njit(nogil=True, cache=True)
def _margins(x_indptr, x_indices, x_data, w_indptr, w_indices, w_data, labels, n_features,
             out):  # pragma: no cover - compiled
    """Each row spread into a dense array, its labels' weight rows read against it, cleared."""
    dense = np.zeros(n_features, np.float32)
    for i in range(labels.shape[0]):
        for p in range(x_indptr[i], x_indptr[i + 1]):
            dense[x_indices[p]] += x_data[p]  # a repeated column adds up, as in scipy
        for j in range(labels.shape[1]):
            label = labels[i, j]
            total = 0.0
            for q in range(w_indptr[label], w_indptr[label + 1]):
                total += dense[w_indices[q]] * w_data[q]
            out[i, j] = total
        for p in range(x_indptr[i], x_indptr[i + 1]):
            dense[x_indices[p]] = 0.0


@njit(nogil=True, cache=True)
def _block_top(x_indptr, x_indices, x_data, c_indptr, c_indices, c_data, width, offset,
               cols, vals, held):  # pragma: no cover - compiled
    """Add one index block's nonzero scores (columns shifted by ``offset``) to each row's heap
    of its ``k`` best (``cols``/``vals`` row ``i``, ``held[i]`` entries, the worst at 0)."""
    acc = np.zeros(width, np.float32)
    k = cols.shape[1]
    for i in range(len(x_indptr) - 1):
        for p in range(x_indptr[i], x_indptr[i + 1]):
            f, v = x_indices[p], x_data[p]
            for q in range(c_indptr[f], c_indptr[f + 1]):
                acc[c_indices[q]] += v * c_data[q]
        size, row_cols, row_vals = held[i], cols[i], vals[i]
        for p in range(x_indptr[i], x_indptr[i + 1]):  # read each scored column once, and clear it
            f = x_indices[p]
            for q in range(c_indptr[f], c_indptr[f + 1]):
                label = c_indices[q]
                value = acc[label]
                if value == 0.0:  # scipy stores no zero sum (or read already)
                    continue
                acc[label] = 0.0
                # a full heap's worst at 0: most scores lose to it here, without a call
                if size == k and (value < row_vals[0] or (value == row_vals[0] and label + offset > row_cols[0])):
                    continue
                size = _push(row_cols, row_vals, size, label + offset, value)
        held[i] = size


@njit(nogil=True, cache=True)
def _worse(v1, c1, v2, c2):  # pragma: no cover - compiled
    """Whether score ``v1`` of column ``c1`` ranks below ``v2`` of ``c2`` (ties: the higher column)."""
    return v1 < v2 or (v1 == v2 and c1 > c2)


@njit(nogil=True, cache=True)
def _push(cols, vals, size, column, value):  # pragma: no cover - compiled
    """Offer one score to a heap of at most ``len(cols)`` entries, the worst at 0; its new size."""
    k = len(cols)
    if size == k:
        if not _worse(vals[0], cols[0], value, column):
            return size
        at = 0  # replace the worst, sift down
        while True:
            child = 2 * at + 1
            if child >= k:
                break
            if child + 1 < k and _worse(vals[child + 1], cols[child + 1], vals[child], cols[child]):
                child += 1
            if not _worse(vals[child], cols[child], value, column):
                break
            cols[at], vals[at] = cols[child], vals[child]
            at = child
        cols[at], vals[at] = column, value
        return size
    at = size  # append, sift up
    while at > 0:
        parent = (at - 1) // 2
        if not _worse(value, column, vals[parent], cols[parent]):
            break
        cols[at], vals[at] = cols[parent], vals[parent]
        at = parent
    cols[at], vals[at] = column, value
    return size + 1


@njit(nogil=True, cache=True)
def _finish(cols, vals, held):  # pragma: no cover - compiled
    """Each row's heap in order, best first (ties: the lower column), then its lowest unscored
    columns valued 0 where fewer than ``k`` were scored."""
    k = cols.shape[1]
    for i in range(cols.shape[0]):
        m = held[i]
        c, v = cols[i, :m].copy(), vals[i, :m].copy()
        order = np.argsort(c, kind="mergesort")
        c, v = c[order], v[order]
        order = np.argsort(-v, kind="mergesort")
        cols[i, :m], vals[i, :m] = c[order], v[order]
        if m == k:
            continue
        taken = np.sort(c)
        column, at, j = 0, 0, m
        while j < k:  # every scored column is held when fewer than k were scored
            while at < len(taken) and taken[at] < column:
                at += 1
            if at < len(taken) and taken[at] == column:
                column += 1
                continue
            cols[i, j], vals[i, j] = column, 0.0
            j += 1
            column += 1

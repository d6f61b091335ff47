"""Dual coordinate descent for the L2-regularised squared-hinge SVM, seeded per call.

The problem is liblinear's solver 1 (``L2R_L2LOSS_SVC_DUAL``, :class:`~sklearn.svm.LinearSVC`'s
default) with a bias feature of value ``bias`` appended to every row: minimise over ``(w, b)``

    ``0.5 * (‖w‖² + b²) + C * Σ_i max(0, 1 - y_i (x_i · w + b · bias))²``

through its dual ``min_α 0.5 αᵀ(Q + I / (2C))α - Σα, α ≥ 0`` (Hsieh et al., ICML 2008): each
outer iteration visits the active coordinates in a random order, takes each one's exact
minimising step, drops from the active set a coordinate at its bound whose gradient exceeds
the previous iteration's largest projected gradient (shrinking), and stops when the spread of
the projected gradients (largest minus smallest) is at most ``tol``, after one more pass over
every coordinate if some were shrunk. These are the steps and the stopping rule of liblinear's
``solve_l2r_l1l2_svc``, so at the same ``tol`` it stops at the same optimality gap.

Why it is written here rather than called from liblinear: liblinear draws its coordinate order
from one generator per process (scikit-learn's copy: ``mt_rand``, reseeded by every call), so
fits on concurrent threads interleave their draws and a model would depend on the thread count
(docs/results/speed.md, "Linear one-vs-rest: liblinear called directly"). This kernel carries
its own generator (splitmix64, seeded per call from the fit's seed and the label's index,
:func:`label_seed`), is compiled by numba without the GIL (``nogil``), and so trains labels on
every core of one process with results that depend only on each label's rows and seed: the
same at any thread or worker count. Time and accuracy against liblinear are in
docs/results/speed.md, "Re-rank label fits on threads".

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> X = sp.csr_matrix(np.eye(4))
    >>> w, b, converged = fit_label_dcd(X, np.array([1.0, 0, 0, 0]), 1.0, tol=0.1, max_iter=1000, seed=0)
    >>> bool(w[0] > 0), converged
    (True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

__all__ = ["fit_label_dcd", "fit_labels_dcd", "label_seed", "solve_dcd"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
#: A coordinate's step is skipped when its projected gradient is this small (liblinear's 1e-12).
_TINY_GRADIENT = 1e-12


def label_seed(seed: int, label: int) -> int:
    """The generator state of label ``label``'s fit under the fit's ``seed``: splitmix64's
    output for ``seed`` and ``label`` mixed, so that neighbouring labels and seeds get
    unrelated coordinate orders.

    Args:
        seed: the fit's seed (any integer; taken modulo 2⁶⁴).
        label: the label's index in the model.

    Returns:
        An integer in ``[0, 2⁶⁴)``.

    Example:
        >>> label_seed(0, 1) != label_seed(0, 2) != label_seed(1, 1)
        True
    """
    mask = (1 << 64) - 1
    z = ((int(seed) & mask) * int(_GOLDEN) + int(label) + 1) & mask
    z = ((z ^ (z >> 30)) * int(_MIX1)) & mask
    z = ((z ^ (z >> 27)) * int(_MIX2)) & mask
    return z ^ (z >> 31)


@njit(nogil=True, cache=True, inline="always")
def _next(state: Any) -> Any:  # pragma: no cover - compiled
    """splitmix64: ``(new state, 64 random bits)``."""
    state = state + _GOLDEN
    z = state
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return state, z ^ (z >> _S31)


@njit(nogil=True, cache=True)
def solve_dcd(values: Any, columns: Any, rowptr: Any, y: Any, n_features: int, C: float, bias: float, tol: float,
              max_iter: int, seed: Any) -> Any:  # pragma: no cover - compiled
    """The SVM of the module docstring on CSR rows ``(values, columns, rowptr)`` with
    ``columns`` in ``[0, n_features)``: ``(w, iterations)``, ``w`` of length
    ``n_features + 1`` whose last entry is the bias feature's weight (the intercept is
    ``bias * w[-1]``). ``y`` holds ``±1``; ``seed`` is a ``uint64`` state."""
    n = len(y)
    w = np.zeros(n_features + 1)
    alpha = np.zeros(n)
    diag = 0.5 / C
    qd = np.empty(n)
    for i in range(n):
        total = diag + bias * bias
        for p in range(rowptr[i], rowptr[i + 1]):
            total += float(values[p]) * float(values[p])
        qd[i] = total
    index = np.arange(n)
    active = n
    pg_max_old = np.inf  # (liblinear's smallest-gradient bound shrinks at the upper bound: none here)
    state = np.uint64(seed)
    iteration = 0
    while iteration < max_iter:
        pg_max_new, pg_min_new = -np.inf, np.inf
        for i in range(active):  # a random order of the active coordinates
            state, bits = _next(state)
            j = i + int((bits >> _S11) % np.uint64(active - i))
            index[i], index[j] = index[j], index[i]
        s = 0
        while s < active:
            i = index[s]
            margin = 0.0
            for p in range(rowptr[i], rowptr[i + 1]):
                margin += w[columns[p]] * float(values[p])
            margin += w[n_features] * bias
            gradient = y[i] * margin - 1.0 + alpha[i] * diag
            projected = 0.0
            if alpha[i] == 0.0:
                if gradient > pg_max_old:  # shrunk: at its bound and likely to stay there
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                if gradient < 0.0:
                    projected = gradient
            else:
                projected = gradient
            pg_max_new = max(pg_max_new, projected)
            pg_min_new = min(pg_min_new, projected)
            if abs(projected) > _TINY_GRADIENT:
                old = alpha[i]
                alpha[i] = max(old - gradient / qd[i], 0.0)
                step = (alpha[i] - old) * y[i]
                for p in range(rowptr[i], rowptr[i + 1]):
                    w[columns[p]] += step * float(values[p])
                w[n_features] += step * bias
            s += 1
        iteration += 1
        if pg_max_new - pg_min_new <= tol:
            if active == n:
                break
            active = n  # one more pass over every coordinate before stopping
            pg_max_old = np.inf
            continue
        pg_max_old = pg_max_new if pg_max_new > 0.0 else np.inf
    return w, iteration


def fit_label_dcd(X: sp.csr_matrix, y: np.ndarray, C: float, *, tol: float, max_iter: int, seed: int,
                  bias: float = 1.0) -> tuple[np.ndarray, float, bool]:
    """One label's SVM on all rows of ``X``: the counterpart of
    :func:`holoxmc.models.linear.fit.fit_label` (liblinear) with this module's solver.

    Args:
        X: ``(n, D)`` CSR rows (float32 or float64).
        y: ``(n,)`` 0/1 (nonzero: the label is present).
        C: the inverse regularisation; tol, max_iter: the stopping rule.
        seed: the generator state (:func:`label_seed`); bias: the bias feature's value.

    Returns:
        ``(w, b, converged)``: ``(D,)`` float64 weights, the intercept and whether it
        stopped before ``max_iter``.

    Example:
        >>> X = sp.csr_matrix(np.array([[1.0, 0], [0, 1], [1, 1]]))
        >>> w, b, ok = fit_label_dcd(X, np.array([1, 0, 1]), 1.0, tol=1e-6, max_iter=1000, seed=3)
        >>> bool(w[0] > 0 > w[1]), ok
        (True, True)
    """
    X = sp.csr_matrix(X)
    signs = np.where(np.asarray(y) != 0, 1.0, -1.0)
    w, iterations = solve_dcd(X.data, X.indices, X.indptr, signs, X.shape[1], float(C), float(bias), float(tol),
                              int(max_iter), np.uint64(seed))
    return w[:-1], float(bias * w[-1]), int(iterations) < max_iter


@njit(nogil=True, cache=True)
def _label_rows(data: Any, indices: Any, indptr: Any, rows: Any, slot: Any) -> Any:  # pragma: no cover - compiled
    """Rows ``rows`` of a CSR matrix with their columns renumbered ``0..F-1`` in increasing
    order: ``(values, local columns, row pointers, the F global columns)``, so that a label's
    solver works over the features its rows hold, not all ``D``. ``slot`` is ``D`` scratch
    entries, all ``-1``, and left so."""
    rowptr = np.zeros(len(rows) + 1, np.int64)
    for k in range(len(rows)):
        rowptr[k + 1] = rowptr[k] + indptr[rows[k] + 1] - indptr[rows[k]]
    values = np.empty(rowptr[-1], np.float64)
    columns = np.empty(rowptr[-1], np.int64)
    n_seen = 0
    for k in range(len(rows)):
        lo = indptr[rows[k]] - rowptr[k]
        for p in range(rowptr[k], rowptr[k + 1]):
            values[p] = data[lo + p]
            columns[p] = indices[lo + p]
            if slot[columns[p]] < 0:
                slot[columns[p]] = 0
                n_seen += 1
    features = np.empty(n_seen, np.int64)
    at = 0
    for p in range(len(columns)):
        if slot[columns[p]] == 0:
            slot[columns[p]] = 1
            features[at] = columns[p]
            at += 1
    features.sort()
    for f in range(n_seen):
        slot[features[f]] = f
    for p in range(len(columns)):
        columns[p] = slot[columns[p]]
    for f in range(n_seen):
        slot[features[f]] = -1
    return values, columns, rowptr, features


@njit(nogil=True, cache=True)
def _keep(w: Any, prune: float, most: int) -> Any:  # pragma: no cover - compiled
    """Positions of the weights kept: magnitude at least ``prune`` (``0``: the nonzero ones),
    then at most ``most`` of them (``0``: all), the largest in magnitude (ties: the lower
    positions), in increasing order."""
    magnitude = np.abs(w)
    keep = np.flatnonzero(magnitude >= prune) if prune > 0.0 else np.flatnonzero(w)
    if most > 0 and len(keep) > most:
        order = np.argsort(-magnitude[keep], kind="mergesort")
        keep = np.sort(keep[order[:most]])
    return keep


@njit(nogil=True, cache=True)
def fit_labels_dcd(data: Any, indices: Any, indptr: Any, n_features: int, rows_ptr: Any, rows: Any,
                   positives_ptr: Any, positives: Any, labels: Any, seeds: Any, C: float, bias: float, tol: float,
                   max_iter: int, prune: float, most: int) -> Any:  # pragma: no cover - compiled
    """One SVM per label of ``labels``, each on its own rows of the ``(n, n_features)`` CSR
    matrix ``(data, indices, indptr)``: label ``l``'s rows are ``rows[rows_ptr[l]:rows_ptr[l + 1]]`` and its
    positives ``positives[positives_ptr[l]:positives_ptr[l + 1]]`` (CSC columns' indices),
    seeded by ``seeds`` (one per label of ``labels``), its weights pruned by :func:`_keep`.
    All in compiled code without the GIL, so label blocks run on threads.

    Returns:
        ``(classes, counts, features, weights, biases, iterations)`` per label of ``labels``:
        ``classes`` ``1`` when all its rows are positive, ``-1`` when none is (then no SVM:
        no weights, bias 0), else ``0``; the kept weights' global feature indices and values
        concatenated in label order (``counts`` per label).
    """
    m = len(labels)
    classes = np.zeros(m, np.int8)
    counts = np.zeros(m, np.int64)
    biases = np.zeros(m)
    iterations = np.zeros(m, np.int64)
    kept_features = []
    kept_weights = []
    n_rows = len(indptr) - 1
    present = np.zeros(n_rows, np.bool_)
    slot = np.full(n_features, -1, np.int64)
    for j in range(m):
        label = labels[j]
        mine = rows[rows_ptr[label]:rows_ptr[label + 1]]
        hits = positives[positives_ptr[label]:positives_ptr[label + 1]]
        for r in hits:
            present[r] = True
        y = np.empty(len(mine))
        n_positive = 0
        for k in range(len(mine)):
            y[k] = 1.0 if present[mine[k]] else -1.0
            n_positive += present[mine[k]]
        for r in hits:
            present[r] = False
        if n_positive == 0 or n_positive == len(mine):
            classes[j] = 1 if n_positive else -1
            continue
        values, columns, rowptr, features = _label_rows(data, indices, indptr, mine, slot)
        w, iterations[j] = solve_dcd(values, columns, rowptr, y, len(features), C, bias, tol, max_iter, seeds[j])
        biases[j] = bias * w[-1]
        keep = _keep(w[:-1], prune, most)
        counts[j] = len(keep)
        kept_features.append(features[keep])
        kept_weights.append(w[keep])
    total = counts.sum()
    out_features = np.empty(total, np.int64)
    out_weights = np.empty(total)
    at = 0
    for f, v in zip(kept_features, kept_weights):
        out_features[at:at + len(f)] = f
        out_weights[at:at + len(f)] = v
        at += len(f)
    return classes, counts, out_features, out_weights, biases, iterations

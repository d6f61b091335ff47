"""Ranking metrics of extreme multi-label classification: P@k, nDCG@k, PSP@k, PSnDCG@k, Recall@k;
and, for label sets of their own size per row (``XMCClassifier.predict_above``), F1
(:func:`label_set_f1`).

Every value is in percent and averaged over *all* rows (a row without labels scores 0).
Propensity-scored metrics come in two conventions, and the key says which:

* ``"PSP@k"`` / ``"PSnDCG@k"``: normalised by the best achievable value, the convention of
  the Extreme Classification Repository, pyxclib and napkinXC (``normalize=True``):
  ``PSP@k = sum_i sum_{l in top_k(i)} y_il w_l / sum_i best_i@k`` where ``best_i@k`` sums the
  ``k`` largest ``w_l`` among row ``i``'s true labels.
* ``"PSP@k(raw)"`` / ``"PSnDCG@k(raw)"``: the unnormalised mean, HRR paper eq. 9:
  ``PSP@k = mean_i 1/k sum_{l in top_k(i)} y_il / p_l`` with ``1/p_l = w_l``.

``w_l`` are the inverse propensities of Jain et al. (2016), see :func:`inverse_propensity`.
P@k divides by ``k`` even when a row has fewer than ``k`` labels; nDCG@k divides by the ideal
DCG of ``min(k, n_labels_i)`` hits.

``"Recall@k"`` is the share of a row's true labels found in its top ``k``,
``mean_i |top_k(i) ∩ y_i| / |y_i|``, averaged over the rows with *at least one* label (the
exception to "all rows"): a row without labels has no recall (0/0), and counting it as 0 or
100 would move the figure with the share of unlabelled rows rather than with the ranking.
This is the recall the SOLAR paper reports (Recall@100 as the share of true labels
retrieved) and pyxclib's ``recall`` on data where every row has a label. Besides the ``ks``,
extra cut-offs (e.g. 100) can be asked for with ``recall_ks``; they need that many
predicted columns.

:class:`MetricAccumulator` sums per-row values *exactly* (integer arithmetic on the float
mantissas), so streaming over batches of any sizes gives bit-for-bit the value of
:func:`evaluate` on the whole set.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError
from holoxmc.limits import check_allocation
from holoxmc.presets import PROPENSITY_PRESETS, PROPENSITY_SETS, propensity_preset  # their one home

__all__ = [
    "PROPENSITY_PRESETS",
    "PROPENSITY_SETS",
    "propensity_preset",
    "inverse_propensity",
    "top_k",
    "pad_predictions",
    "evaluate",
    "evaluate_scores",
    "label_set_f1",
    "MetricAccumulator",
]

DEFAULT_KS: tuple[int, ...] = (1, 2, 3, 4, 5)

def inverse_propensity(Y_train: sp.spmatrix | np.ndarray, A: float = 0.55, B: float = 1.5) -> np.ndarray:
    """Inverse propensities ``w_l = 1 + C (N_l + B)^-A`` with ``C = (ln N - 1)(B + 1)^A``
    (Jain et al., 2016), counted on the *training* labels.

    Args:
        Y_train: ``(N, L)`` binary label matrix; every stored entry is a positive.
        A, B: dataset parameters (see :data:`PROPENSITY_PRESETS`).

    Returns:
        ``(L,)`` float64 weights; rare labels weigh more.

    Example:
        >>> import scipy.sparse as sp
        >>> w = inverse_propensity(sp.csr_matrix([[1, 0], [1, 1], [1, 0]]))
        >>> bool(w[1] > w[0])
        True
    """
    if hasattr(Y_train, "column_counts"):  # rows of a shard store, counted shard by shard
        n_rows, counts = Y_train.shape[0], Y_train.column_counts()
    else:
        Y = sp.csr_matrix(Y_train)
        n_rows, counts = Y.shape[0], np.bincount(Y.indices, minlength=Y.shape[1])
    if n_rows < 1:
        raise InputError("inverse_propensity needs at least one training row")
    if not (math.isfinite(A) and math.isfinite(B) and A >= 0 and B > 0):  # else weights below 1, complex or infinite
        raise InputError(f"propensity (A, B) needs A >= 0 and B > 0 (Jain et al.: 0.55, 1.5), got ({A!r}, {B!r})")
    counts = counts.astype(np.float64)
    C = (np.log(n_rows) - 1.0) * (B + 1.0) ** A
    return 1.0 + C * (counts + B) ** (-A)


def _top_per_row(indptr: np.ndarray, cols: np.ndarray, vals: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest ``vals`` of each CSR row (ties: earlier entry, i.e. smaller column
    of a canonical CSR, first), by ``k`` rounds of per-row maxima instead of a full sort.

    Returns ``(columns, values)`` of shape ``(n_rows, k)``, padded with ``-1`` / ``0``.
    """
    n_rows = len(indptr) - 1
    counts = np.diff(indptr)
    top_cols = np.full((n_rows, k), -1, dtype=np.int64)
    top_vals = np.zeros((n_rows, k), dtype=np.float64)
    nonempty = np.flatnonzero(counts)
    if nonempty.size == 0:
        return top_cols, top_vals
    starts = indptr[:-1][nonempty]
    rows = np.repeat(np.arange(n_rows), counts)
    positions = np.arange(len(vals))
    available = np.ones(len(vals), dtype=bool)
    for rank in range(min(k, int(counts.max()))):
        remaining = np.where(available, vals, -np.inf)
        row_max = np.full(n_rows, -np.inf)
        row_max[nonempty] = np.maximum.reduceat(remaining, starts)
        candidates = np.where(available & (remaining == row_max[rows]), positions, len(vals))
        first = np.full(n_rows, len(vals))
        first[nonempty] = np.minimum.reduceat(candidates, starts)
        found = np.flatnonzero(first < len(vals))
        top_cols[found, rank] = cols[first[found]]
        top_vals[found, rank] = vals[first[found]]
        available[first[found]] = False
    return top_cols, top_vals


def top_k(scores: np.ndarray | sp.spmatrix, k: int) -> np.ndarray:
    """Indices of the ``k`` highest scores per row, best first; equal scores rank the
    smaller label index first (on every numpy version, dense or sparse).

    Args:
        scores: ``(n, L)`` dense array (or torch tensor on CPU) or sparse matrix; absent
            entries of a sparse matrix are never predicted (padded with ``-1``).
        k: number of predictions per row.

    Returns:
        ``(n, k)`` int64 label indices.

    Example:
        >>> top_k(np.array([[0.1, 0.9, 0.5]]), 2).tolist()
        [[1, 2]]
    """
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    if sp.issparse(scores):
        S = sp.csr_matrix(scores)
        if not S.has_canonical_format:
            S = S.copy()
            S.sum_duplicates()
        if np.isnan(S.data).any():
            raise InputError("scores contain NaN")
        return _top_per_row(S.indptr, S.indices.astype(np.int64), S.data.astype(np.float64), k)[0]
    S = np.asarray(scores)
    if S.ndim != 2:
        raise InputError(f"scores must be 2-D (n, L), got shape {S.shape}")
    if k > S.shape[1]:
        raise InputError(f"k={k} exceeds the number of labels {S.shape[1]}")
    if np.isnan(S).any():
        raise InputError("scores contain NaN")
    # argpartition leaves the order of equal scores to the numpy version: sort the chosen
    # indices, and choose rows whose k-th score is tied beyond the k-th place by a stable sort
    candidates = np.sort(np.argpartition(-S, k - 1, axis=1)[:, :k], axis=1)
    kth = np.take_along_axis(S, candidates, axis=1).min(axis=1, keepdims=True)
    for row in np.flatnonzero((S >= kth).sum(axis=1) > k):
        candidates[row] = np.sort(np.argsort(-S[row], kind="stable")[:k])
    order = np.argsort(-np.take_along_axis(S, candidates, axis=1), axis=1, kind="stable")
    return np.take_along_axis(candidates, order, axis=1).astype(np.int64)


class _ExactColumnSums:
    """Exact, order-independent column sums of float64 matrices.

    Each value ``m * 2**e`` (``np.frexp``) is split into two 26/27-bit integer halves of its
    53-bit mantissa and added into integer bins per ``(column, exponent)``; the total is
    formed once, exactly, with Python integers and rounded to the nearest float.
    """

    _OFFSET = 1075  # frexp exponents of finite float64 lie in [-1073, 1024]
    _N_EXPONENTS = 2100
    _MAX_ROWS_PER_ADD = 1 << 25  # keeps float64 bincount sums of 27-bit ints exact

    def __init__(self, n_columns: int):
        self.n_columns = n_columns
        self._high = np.zeros(n_columns * self._N_EXPONENTS, dtype=np.int64)
        self._low = np.zeros(n_columns * self._N_EXPONENTS, dtype=np.int64)

    def add(self, values: np.ndarray) -> None:
        for start in range(0, values.shape[0], self._MAX_ROWS_PER_ADD):
            self._add(values[start : start + self._MAX_ROWS_PER_ADD])

    def _add(self, values: np.ndarray) -> None:
        mantissa, exponent = np.frexp(values)
        integers = (mantissa * float(1 << 53)).astype(np.int64)
        bins = (exponent + self._OFFSET) + np.arange(self.n_columns) * self._N_EXPONENTS
        size = self._high.shape[0]
        self._high += np.bincount(bins.ravel(), (integers >> 26).ravel(), minlength=size).astype(np.int64)
        self._low += np.bincount(bins.ravel(), (integers & ((1 << 26) - 1)).ravel(), minlength=size).astype(np.int64)

    def totals(self) -> np.ndarray:
        scale = self._OFFSET + 53
        exact = [0] * self.n_columns
        for flat in np.flatnonzero(self._high | self._low):
            column, exponent_bin = divmod(int(flat), self._N_EXPONENTS)
            exact[column] += ((int(self._high[flat]) << 26) + int(self._low[flat])) << exponent_bin
        return np.array([float(Fraction(value, 1 << scale)) for value in exact])


def _check_ks(ks: Iterable[int]) -> tuple[int, ...]:
    ks = tuple(int(k) for k in ks)
    if not ks or min(ks) < 1:
        raise InputError(f"ks must be positive integers, got {ks}")
    return ks


class MetricAccumulator:
    """Streaming P@k, nDCG@k, PSP@k, PSnDCG@k over batches; exact, so the result equals
    :func:`evaluate` on the concatenated batches bit for bit.

    Args:
        ks: cut-offs to report.
        inv_prop: ``(L,)`` inverse propensities (:func:`inverse_propensity` of the *train*
            labels); without them only P@k, nDCG@k and Recall@k are reported.
        recall_ks: extra cut-offs of Recall@k only (e.g. ``(100,)``); ``update`` then needs
            that many predicted columns.

    Example:
        >>> import scipy.sparse as sp
        >>> acc = MetricAccumulator(ks=(1,))
        >>> acc.update(np.array([[0], [1]]), sp.csr_matrix([[1, 0], [1, 0]]))
        >>> acc.result()
        {'P@1': 50.0, 'nDCG@1': 50.0, 'Recall@1': 50.0}
    """

    def __init__(self, ks: Sequence[int] = DEFAULT_KS, inv_prop: np.ndarray | None = None, recall_ks: Sequence[int] = ()):
        self.ks = _check_ks(ks)
        self.k_max = max(self.ks)
        self.recall_ks = tuple(sorted(set(self.ks) | set(_check_ks(recall_ks) if len(recall_ks) else ())))
        self.k_needed = max(self.k_max, max(self.recall_ks))
        if inv_prop is not None:
            inv_prop = np.asarray(inv_prop, dtype=np.float64)
            if inv_prop.ndim != 1 or not np.all(np.isfinite(inv_prop)):
                raise InputError("inv_prop must be a finite 1-D array of length n_labels")
            if inv_prop.size and inv_prop.min() < 0:  # PSP would be 0.00, its normaliser negative
                label = int(np.argmin(inv_prop))
                raise InputError(f"inv_prop must hold non-negative weights (inverse propensities are at least 1), "
                                 f"got {inv_prop[label]:g} for label {label}")
        self.inv_prop = inv_prop
        self._quantities = ("P", "nDCG") + (("PSP", "PSP_best", "PSnDCG", "PSnDCG_best") if inv_prop is not None else ())
        self._sums = _ExactColumnSums(len(self._quantities) * self.k_max)
        self._recall_sums = _ExactColumnSums(len(self.recall_ks))
        self.n_rows = 0
        self.n_labelled_rows = 0

    def update(self, topk_indices: np.ndarray, Y_true: sp.spmatrix) -> None:
        """Add a batch.

        Shapes:
            topk_indices: ``(B, k)`` int, best first, ``k >= max(ks)``; ``-1`` = no prediction.
            Y_true: ``(B, L)`` sparse binary; every stored entry is a positive.
        """
        topk, Y = self._validate(topk_indices, Y_true)
        per_row = self._per_row(topk, Y)
        self._sums.add(np.concatenate([per_row[q] for q in self._quantities], axis=1))
        self._recall_sums.add(per_row["Recall"])
        self.n_rows += topk.shape[0]
        self.n_labelled_rows += int(np.count_nonzero(np.diff(Y.indptr)))

    def result(self) -> dict[str, float]:
        """Metrics in percent, keys ``"P@k"``, ``"nDCG@k"`` and, with propensities,
        ``"PSP@k"``, ``"PSnDCG@k"`` (normalised), ``"PSP@k(raw)"``, ``"PSnDCG@k(raw)"``;
        ``"Recall@k"`` for every k in ``ks`` and ``recall_ks`` (over the labelled rows)."""
        totals = self._sums.totals().reshape(len(self._quantities), self.k_max)
        total = dict(zip(self._quantities, totals))
        n = max(self.n_rows, 1)
        out: dict[str, float] = {}
        for name in ("P", "nDCG"):
            out.update({f"{name}@{k}": float(100.0 * total[name][k - 1] / n) for k in self.ks})
        if self.inv_prop is not None:
            for name in ("PSP", "PSnDCG"):
                best = total[f"{name}_best"]
                out.update(
                    {f"{name}@{k}": float(100.0 * total[name][k - 1] / best[k - 1]) if best[k - 1] > 0 else 0.0 for k in self.ks}
                )
                out.update({f"{name}@{k}(raw)": float(100.0 * total[name][k - 1] / n) for k in self.ks})
        recall = self._recall_sums.totals()
        labelled = max(self.n_labelled_rows, 1)
        out.update({f"Recall@{k}": float(100.0 * recall[i] / labelled) for i, k in enumerate(self.recall_ks)})
        return out

    def _validate(self, topk_indices: np.ndarray, Y_true: sp.spmatrix) -> tuple[np.ndarray, sp.csr_matrix]:
        topk = np.asarray(topk_indices)
        if topk.ndim != 2 or not np.issubdtype(topk.dtype, np.integer):
            raise InputError(f"topk_indices must be a 2-D integer array, got {topk.dtype} {topk.shape}")
        if not sp.issparse(Y_true):
            raise InputError("Y_true must be a scipy sparse matrix (n, n_labels)")
        Y = sp.csr_matrix(Y_true)
        if not Y.has_canonical_format:
            Y = Y.copy()
            Y.sum_duplicates()
        n_labels = Y.shape[1]
        if topk.shape[0] != Y.shape[0]:
            raise InputError(f"topk_indices has {topk.shape[0]} rows but Y_true has {Y.shape[0]}")
        if topk.shape[1] < self.k_needed:
            raise InputError(f"topk_indices has {topk.shape[1]} columns, need k >= {self.k_needed}")
        topk = topk[:, : self.k_needed].astype(np.int64)
        if topk.size and (topk.min() < -1 or topk.max() >= n_labels):
            raise InputError(f"topk_indices must lie in [-1, {n_labels}) (-1 = no prediction)")
        ranked = np.sort(topk, axis=1)
        if np.any((ranked[:, 1:] == ranked[:, :-1]) & (ranked[:, 1:] >= 0)):
            raise InputError("a row of topk_indices predicts the same label twice")
        if self.inv_prop is not None and self.inv_prop.shape[0] != n_labels:
            raise InputError(f"inv_prop has {self.inv_prop.shape[0]} entries, Y_true has {n_labels} labels")
        return topk, Y

    def _per_row(self, topk: np.ndarray, Y: sp.csr_matrix) -> dict[str, np.ndarray]:
        """Per-row cumulative values at k = 1..k_max, shape ``(B, k_max)`` each, and
        ``"Recall"``, shape ``(B, len(recall_ks))`` (0 for a row without labels)."""
        n, k_max = topk.shape[0], self.k_max
        n_labels = np.int64(Y.shape[1])
        counts = np.diff(Y.indptr)
        rows = np.repeat(np.arange(n, dtype=np.int64), counts)
        true_keys = rows * n_labels + Y.indices  # ascending: canonical CSR
        query = np.arange(n, dtype=np.int64)[:, None] * n_labels + topk
        position = np.minimum(np.searchsorted(true_keys, query), max(len(true_keys) - 1, 0))
        all_hits = (topk >= 0) & (true_keys[position] == query) if len(true_keys) else np.zeros(topk.shape, bool)
        found = np.cumsum(all_hits, axis=1)[:, [k - 1 for k in self.recall_ks]]
        hits, topk = all_hits[:, :k_max], topk[:, :k_max]
        ranks = np.arange(1, k_max + 1)
        discount = 1.0 / np.log2(ranks + 1.0)
        ideal = np.concatenate([[0.0], np.cumsum(discount)])[np.minimum(counts[:, None], ranks)]
        safe_ideal = np.where(ideal > 0, ideal, 1.0)
        out = {
            "P": np.cumsum(hits, axis=1) / ranks,
            "nDCG": np.cumsum(hits * discount, axis=1) / safe_ideal,
            "Recall": found / np.maximum(counts, 1)[:, None],
        }
        if self.inv_prop is not None:
            gain = np.where(hits, self.inv_prop[np.maximum(topk, 0)], 0.0)
            _, best = _top_per_row(Y.indptr, Y.indices.astype(np.int64), self.inv_prop[Y.indices], k_max)
            out["PSP"] = np.cumsum(gain, axis=1) / ranks
            out["PSP_best"] = np.cumsum(best, axis=1) / ranks
            out["PSnDCG"] = np.cumsum(gain * discount, axis=1) / safe_ideal
            out["PSnDCG_best"] = np.cumsum(best * discount, axis=1) / safe_ideal
        return out


def pad_predictions(topk_indices: np.ndarray, k: int) -> np.ndarray:
    """``topk_indices`` widened to ``k`` columns with ``-1`` ("no prediction"), for a model
    with fewer than ``k`` labels: its missing ranks count as misses at every cut-off.

    Example:
        >>> pad_predictions(np.array([[2, 0]]), 4).tolist()
        [[2, 0, -1, -1]]
    """
    missing = k - topk_indices.shape[1]
    if missing > 0:  # the metrics then hold about 8 numbers per (row, rank): bound that before padding
        check_allocation(64 * topk_indices.shape[0] * k, f"the metrics of {topk_indices.shape[0]} rows at cut-off {k}")
    return np.pad(topk_indices, ((0, 0), (0, missing)), constant_values=-1) if missing > 0 else topk_indices


def evaluate(
    topk_indices: np.ndarray,
    Y_true: sp.spmatrix,
    inv_prop: np.ndarray | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    recall_ks: Sequence[int] = (),
) -> dict[str, float]:
    """P@k, nDCG@k, Recall@k and (with ``inv_prop``) PSP@k, PSnDCG@k in percent (Recall over
    the rows with a label, the rest over all rows).

    Args:
        topk_indices: ``(n, k)`` predicted label ids, best first, ``k >= max(ks, recall_ks)``;
            ``-1`` marks "no prediction".
        Y_true: ``(n, L)`` sparse true labels.
        inv_prop: ``(L,)`` inverse propensities from the train labels, or ``None``.
        ks: cut-offs of every metric.
        recall_ks: extra cut-offs of Recall only (e.g. ``(100,)``).

    Returns:
        ``{"P@1": ..., "nDCG@1": ..., "PSP@1": ..., "PSnDCG@1": ..., "PSP@1(raw)": ...,
        "PSnDCG@1(raw)": ..., "Recall@1": ...}`` for every k in ``ks`` (PS keys only with
        ``inv_prop``), and ``"Recall@k"`` for every k in ``recall_ks``.

    Example:
        >>> import scipy.sparse as sp
        >>> Y = sp.csr_matrix([[1, 1, 0], [0, 0, 1]])
        >>> r = evaluate(np.array([[0, 2], [1, 2]]), Y, ks=(1, 2))
        >>> r["P@1"], r["P@2"]
        (50.0, 50.0)
    """
    accumulator = MetricAccumulator(ks=ks, inv_prop=inv_prop, recall_ks=recall_ks)
    accumulator.update(topk_indices, Y_true)
    return accumulator.result()


def label_set_f1(predicted: sp.spmatrix | np.ndarray, Y_true: sp.spmatrix | np.ndarray) -> dict[str, float]:
    """F1 of predicted label sets (any nonzero entry is a predicted label), in percent:
    ``micro-F1`` over all (row, label) pairs and ``example-F1``, the mean over rows of each
    row's F1 (a row with no true and no predicted label counts 100), computed by
    scikit-learn's ``f1_score``; and ``labels per point``, the mean predicted set size.

    Example:
        >>> import scipy.sparse as sp
        >>> r = label_set_f1(sp.csr_matrix([[0.9, 0.0, 0.7], [0.0, 0.0, 0.0]]), sp.csr_matrix([[1, 1, 0], [0, 0, 0]]))
        >>> r["micro-F1"], r["example-F1"], r["labels per point"]
        (50.0, 75.0, 1.0)
    """
    from sklearn.metrics import f1_score

    # Booleans of the nonzeros: no stored zeros, which scikit-learn would count as labels.
    predicted, Y_true = sp.csr_matrix(predicted != 0), sp.csr_matrix(Y_true != 0)
    if predicted.shape != Y_true.shape:
        raise InputError(f"predicted sets {predicted.shape} and true labels {Y_true.shape} differ in shape")
    return {
        "micro-F1": 100 * float(f1_score(Y_true, predicted, average="micro", zero_division=1.0)),
        "example-F1": 100 * float(f1_score(Y_true, predicted, average="samples", zero_division=1.0)),
        "labels per point": float(predicted.nnz / max(predicted.shape[0], 1)),
    }


def evaluate_scores(
    scores: np.ndarray | sp.spmatrix,
    Y_true: sp.spmatrix,
    inv_prop: np.ndarray | None = None,
    ks: Sequence[int] = DEFAULT_KS,
    recall_ks: Sequence[int] = (),
) -> dict[str, float]:
    """:func:`evaluate` on the top ``max(ks, recall_ks)`` of an ``(n, L)`` score matrix (see :func:`top_k`;
    with fewer than ``max(ks)`` labels the missing ranks are misses).

    A sparse matrix ranks only its stored entries: an absent entry is never predicted, not
    a score of 0, so a stored ``-inf`` (or any negative score) ranks above it, and the same
    scores can evaluate differently as a sparse matrix and as a dense array (where the 0
    ranks above the ``-inf``). Store every label that may be predicted, or pass a dense array.
    """
    k = max(_check_ks(tuple(ks) + tuple(recall_ks)))
    return evaluate(
        pad_predictions(top_k(scores, min(k, scores.shape[1])), k), Y_true, inv_prop=inv_prop, ks=ks, recall_ks=recall_ks
    )


# ---------------------------------------------------------------------------- scikit-learn scorers
def _ranking(y_score: np.ndarray | sp.spmatrix | tuple[np.ndarray, np.ndarray], k: int) -> np.ndarray:
    """The top-``k`` label ids per row of a score matrix (dense ``(n, L)`` or sparse, as
    :func:`top_k` reads it) or of ``XMCClassifier.predict_topk``'s ``(indices, scores)``."""
    if isinstance(y_score, tuple):
        if len(y_score) != 2:
            raise InputError("y_score must be a score matrix or predict_topk's (indices, scores)")
        indices = np.asarray(y_score[0])
        if indices.ndim != 2 or indices.shape[1] < k:
            raise InputError(f"predict_topk gave {indices.shape[-1] if indices.ndim else 0} ranks, k = {k} "
                             "needs that many: call predict_topk(X, k) with a larger k")
        return indices[:, :k]
    if not sp.issparse(y_score):
        y_score = np.asarray(y_score, dtype=np.float64)
        if y_score.ndim != 2:
            raise InputError(f"y_score must be an (n, L) score matrix, got shape {y_score.shape}")
    return pad_predictions(top_k(y_score, min(k, y_score.shape[1])), k)


def _ranking_metric(y_true: sp.spmatrix | np.ndarray, y_score: np.ndarray | sp.spmatrix | tuple, k: int, name: str,
                    inv_prop: np.ndarray | None = None) -> float:
    (k,) = _check_ks((k,))
    Y = sp.csr_matrix(y_true, dtype=np.float32)
    indices = _ranking(y_score, k)
    if indices.shape[0] != Y.shape[0]:
        raise InputError(f"y_true has {Y.shape[0]} rows, y_score {indices.shape[0]}")
    return float(evaluate(indices, Y, inv_prop=inv_prop, ks=(k,))[f"{name}@{k}"])


def precision_at_k(y_true: sp.spmatrix | np.ndarray, y_score: np.ndarray | sp.spmatrix | tuple, *, k: int = 5) -> float:
    """P@k in percent, in the form ``sklearn.metrics.make_scorer`` takes.

    Args:
        y_true: ``(n, L)`` 0/1 labels (dense or sparse).
        y_score: an ``(n, L)`` score matrix (``decision_function``, ``predict_proba``) or
            ``predict_topk``'s ``(indices, scores)`` (its default ``k`` is 5; ranks ``-1`` are misses).
        k: the cut-off.

    With ``response_method="decision_function"`` the scorer builds an ``(n, L)`` matrix; with
    ``response_method=["predict_topk"]`` (a list: scikit-learn checks names only in a string)
    it reads the top 5 only, the form for large label spaces (or use :func:`scorer`).

    Example:
        >>> from sklearn.metrics import make_scorer
        >>> p3 = make_scorer(precision_at_k, response_method=["predict_topk"], k=3)
        >>> precision_at_k(np.array([[1, 0, 1]]), np.array([[0.9, 0.5, 0.1]]), k=2)
        50.0
    """
    return _ranking_metric(y_true, y_score, k, "P")


def ndcg_at_k(y_true: sp.spmatrix | np.ndarray, y_score: np.ndarray | sp.spmatrix | tuple, *, k: int = 5) -> float:
    """nDCG@k in percent, in the form ``sklearn.metrics.make_scorer`` takes (arguments as
    :func:`precision_at_k`).

    Example:
        >>> round(ndcg_at_k(np.array([[1, 0, 1]]), np.array([[0.9, 0.5, 0.1]]), k=2), 2)
        61.31
    """
    return _ranking_metric(y_true, y_score, k, "nDCG")


def psp_at_k(y_true: sp.spmatrix | np.ndarray, y_score: np.ndarray | sp.spmatrix | tuple, *, k: int = 5,
             inv_prop: np.ndarray | None = None, A: float = 0.55, B: float = 1.5) -> float:
    """PSP@k in percent (normalised, the repository's convention), in the form
    ``sklearn.metrics.make_scorer`` takes (arguments as :func:`precision_at_k`).

    Args:
        inv_prop: ``(L,)`` inverse propensities of the *training* labels (an estimator's
            ``inv_prop_``); ``None`` computes them from ``y_true`` with ``A``, ``B`` (the
            evaluated rows' own frequencies: a scorer inside cross-validation sees no training
            labels; :func:`scorer` uses the fitted estimator's instead).

    Example:
        >>> psp_at_k(np.array([[1, 0, 1]]), np.array([[0.9, 0.5, 0.1]]), k=1, inv_prop=np.ones(3))
        100.0
    """
    Y = sp.csr_matrix(y_true, dtype=np.float32)
    weights = inverse_propensity(Y, A, B) if inv_prop is None else np.asarray(inv_prop, dtype=np.float64)
    if weights.shape != (Y.shape[1],):
        raise InputError(f"inv_prop must hold one weight per label ({Y.shape[1]}), got shape {weights.shape}")
    return _ranking_metric(Y, y_score, k, "PSP", inv_prop=weights)


class MetricScorer:
    """A scorer ``(estimator, X, y) -> float`` of one holoxmc metric (``"P@k"``, ``"nDCG@k"``,
    ``"PSP@k"``, ``"PSnDCG@k"``), read from the estimator's top-``k`` (``XMCClassifier.score``):
    no ``(n, L)`` matrix, PSP with the fitted estimator's training propensities. Any
    ``scoring=`` of scikit-learn (``cross_validate``, ``GridSearchCV``) takes it.

    Example:
        >>> from sklearn.model_selection import GridSearchCV
        >>> search = GridSearchCV(clf, grid, scoring=scorer("nDCG@5"))  # doctest: +SKIP
    """

    def __init__(self, metric: str):
        self.metric = metric

    def __call__(self, estimator: object, X: object, y: object) -> float:
        return float(estimator.score(X, y, metric=self.metric))  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"scorer({self.metric!r})"


def scorer(metric: str) -> MetricScorer:
    """The :class:`MetricScorer` of ``metric`` (``"P@5"``, ``"nDCG@3"``, ``"PSP@5"``, ...).

    Example:
        >>> scorer("P@3")
        scorer('P@3')
    """
    name, _, k = str(metric).partition("@")
    if name not in ("P", "nDCG", "PSP", "PSnDCG") or not k.isdigit() or int(k) < 1:
        raise InputError(f"metric must be 'P@k', 'nDCG@k', 'PSP@k' or 'PSnDCG@k' with k >= 1, got {metric!r}")
    return MetricScorer(metric)


__all__ += ["precision_at_k", "ndcg_at_k", "psp_at_k", "MetricScorer", "scorer"]

"""Label sets by a confidence threshold: the functions behind ``XMCClassifier.predict_above``
and ``XMCClassifier.tune_threshold`` (each method calls one of them in one line).

Importing it imports neither torch nor scikit-learn (a saved model's :class:`LabelRule` is
read without them); the functions that compute with confidences import torch.

Example:
    >>> labels = predict_above(clf, X_test, 0.5)                 # doctest: +SKIP
    >>> threshold, table = tune_threshold(clf, X_val, Y_val)     # doctest: +SKIP
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from holoxmc.calibration import platt_scaling
from holoxmc.errors import InputError
from holoxmc.metrics import label_set_f1
from holoxmc.validation import check_batch_size, check_Y

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["predict_above", "tune_threshold", "check_relative_threshold", "THRESHOLD_METRICS", "LabelRule",
           "fit_label_rule", "label_sets", "probabilities", "finite_scores", "samples_f1", "SCORE_FLOOR",
           "SCORE_CEILING", "RULE_THRESHOLDS"]

#: The metrics [`tune_threshold`][holoxmc.models.thresholds.tune_threshold] maximises.
THRESHOLD_METRICS = ("micro-F1", "example-F1")
#: The finite floor of every score the estimator returns: ``decision_function`` and
#: ``predict_topk`` give it where a model scores ``-inf`` (a label no training row has, a rank
#: SOLAR's candidates cannot fill). Far below any real score, and its square (1e18) is still
#: a finite float32, so arithmetic on scores stays finite.
SCORE_FLOOR = -1e9
#: The finite ceiling, for ``+inf`` (a label every training row has).
SCORE_CEILING = 1e9


def predict_above(clf: Any, X: Any, threshold: float, *, relative: bool, batch_size: int) -> sp.csr_matrix:
    """Every label of a fitted classifier whose confidence exceeds ``threshold`` (times the
    row's best confidence when ``relative``), as a CSR matrix of those confidences.

    Args:
        clf: a fitted ``XMCClassifier``.
        X: ``(n, D)`` features (or token ids).
        threshold: the cut.
        relative: cut at ``threshold`` times the row's best confidence.
        batch_size: rows scored at once.

    Returns:
        CSR ``(n, L)`` float32.

    Example:
        >>> predict_above(clf, X_test, 0.5, relative=True, batch_size=1024)  # doctest: +SKIP
    """
    from holoxmc.train import labels_above

    clf._check_fitted()
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not math.isfinite(threshold):
        raise InputError(f"threshold must be a finite number, got {threshold!r}")
    check_relative_threshold(float(threshold), relative)
    batch_size = check_batch_size(batch_size)
    X = clf._check_X(X)
    model = clf.model_
    return labels_above(lambda rows: model.confidence_chunks(X[rows]), X.shape[0], float(threshold),
                        clf.n_labels_, relative=bool(relative), batch_size=batch_size)


def tune_threshold(clf: Any, X_val: Any, Y_val: Any, thresholds: Sequence[float], *, relative: bool,
                   metric: str) -> tuple[float, dict[float, dict[str, float]]]:
    """The threshold of ``thresholds`` whose label sets score best by ``metric`` on a
    validation set; the confidences are computed once, at the lowest threshold.

    Args:
        clf: a fitted ``XMCClassifier``.
        X_val, Y_val: a validation set (never the test set).
        thresholds: the candidates.
        relative: as in [`predict_above`][holoxmc.models.thresholds.predict_above].
        metric: one of ``THRESHOLD_METRICS``.

    Returns:
        ``(best threshold, {threshold: label_set_f1 of its sets})``.

    Example:
        >>> tune_threshold(clf, X_val, Y_val, (0.3, 0.5), relative=True, metric="micro-F1")  # doctest: +SKIP
    """
    grid = _threshold_grid(thresholds)
    if metric not in THRESHOLD_METRICS:
        raise InputError(f"metric must be 'micro-F1' or 'example-F1', got {metric!r}")
    for t in grid:
        check_relative_threshold(t, relative)
    X_val = clf._check_X(X_val)
    Y_val = check_Y(Y_val, X_val.shape[0], n_labels=clf.n_labels_)
    widest = clf.predict_above(X_val, min(grid), relative=relative).tocoo()
    best_of_row = np.full(X_val.shape[0], -np.inf, dtype=np.float32)
    np.maximum.at(best_of_row, widest.row, widest.data)
    table = {}
    for t in grid:
        keep = widest.data > (t * best_of_row[widest.row] if relative else t)
        sets = sp.csr_matrix((widest.data[keep], (widest.row[keep], widest.col[keep])), shape=widest.shape)
        table[t] = label_set_f1(sets, Y_val)
    return max(grid, key=lambda t: table[t][metric]), table


def _threshold_grid(thresholds: Sequence[float]) -> list[float]:
    """``thresholds`` as floats: finite numbers, at least one."""
    try:
        grid = [float(t) for t in thresholds if not isinstance(t, (bool, str))]
    except (TypeError, ValueError):
        grid = []
    if not grid or len(grid) != len(thresholds) or not all(math.isfinite(t) for t in grid):
        raise InputError(f"thresholds must be finite numbers, at least one, got {thresholds!r}")
    return grid


def check_relative_threshold(threshold: float, relative: bool) -> None:
    """Refuse a relative threshold outside ``[0, 1)``.

    Args:
        threshold: the cut.
        relative: whether it is a fraction of the row's best confidence.

    Example:
        >>> check_relative_threshold(0.5, True)
    """
    if relative and not 0.0 <= threshold < 1.0:
        raise InputError(f"a relative threshold is a fraction of the row's best confidence: give one in [0, 1) "
                         f"(at 1 no label exceeds its row's best; or relative=False, --absolute), got {threshold}")


# ---------------------------------------------------------------------------- predict's default rule
#: The cuts on the calibrated probability that :func:`fit_label_rule` tries: fine at the low
#: end, where the cut of the best F1 lies when present labels are rare (about half the best
#: F1 for calibrated probabilities, lower where the probabilities are spread).
RULE_THRESHOLDS = (0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.125, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
                   0.6, 0.7, 0.8, 0.9)
#: The cuts relative to each row's most probable label that :func:`fit_label_rule` also tries.
RULE_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: The fixed set sizes (each row's top k) that :func:`fit_label_rule` also tries.
RULE_TOP_K = (1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 100)
#: Labels per validation row :func:`fit_label_rule` weighs at most (the most probable): a
#: larger set is never the best F1 of an extreme multi-label row, and it bounds the memory.
RULE_MAX_SET = 100
#: Validation rows :func:`fit_label_rule` reads at most (a seeded sample past it).
RULE_ROWS = 20_000
#: Row-label confidences :func:`fit_label_rule` computes at most in each of its passes: past
#: ``RULE_ENTRIES / L`` rows (at least :data:`RULE_MIN_ROWS`), a seeded sample is read, so that
#: choosing the rule costs a fit about as much at L = 670K (100 rows) as at L = 4K.
RULE_ENTRIES = 1 << 26
RULE_MIN_ROWS = 100
#: Validation (confidence, label) pairs the Platt fit reads at most (every positive pair is
#: kept; negatives are sampled and weighted up to their number).
RULE_PAIRS = 1_000_000
#: Confidences read at once (rows × labels) while choosing the rule or predicting.
RULE_BLOCK = 1 << 22


@dataclass(frozen=True)
class LabelRule:
    """How :meth:`XMCClassifier.predict` turns a model's confidences into label sets, and
    :meth:`XMCClassifier.predict_proba` into probabilities.

    ``p = sigmoid(a · confidence + b)`` (Platt scaling fitted on validation rows); a row's
    labels are those with ``p >= threshold`` (``relative``: ``p >= threshold ·`` the row's
    largest ``p``, never an empty set), and with ``top1_fallback`` a row that gets none gets
    its most probable label; with ``threshold=None`` they are its ``top_k`` best
    (``predict_topk``). A model saved without a rule (before 0.2) has ``threshold=None,
    top_k=None``: each row gets its top-1 label, and ``p`` is its confidence clipped to
    ``[0, 1]`` (``calibrated=False``).

    Attributes:
        a, b: the Platt map; threshold: the cut on ``p`` (``None``: the top ``top_k``);
        top_k: the set size when there is no cut (``None``: 1);
        relative: whether the cut is a fraction of the row's largest ``p``;
        top1_fallback: whether an empty row gets its top-1 label; calibrated: whether
            ``a, b`` were fitted; rows: the validation rows it was chosen on; f1: their
            samples-F1 (percent) under the rule; source: ``"X_val"``, ``"val_fraction"`` or
            ``"training rows"``.
    """

    a: float = 1.0
    b: float = 0.0
    threshold: float | None = None
    relative: bool = False
    top1_fallback: bool = True
    top_k: int | None = None
    calibrated: bool = False
    rows: int = 0
    f1: float | None = None
    source: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The rule as JSON-ready values (``config.json``'s ``label_rule``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Any, where: str) -> "LabelRule":
        """The rule of ``config.json``'s ``label_rule``, checked.

        Example:
            >>> LabelRule.from_dict({"a": 2.0, "b": -1.0, "threshold": 0.4}, "config.json").threshold
            0.4
        """
        if not isinstance(values, dict) or set(values) - {f.name for f in fields(cls)}:
            raise InputError(f"{where}: 'label_rule' must be an object of {[f.name for f in fields(cls)]}, "
                             f"got {values!r}")
        rule = cls(**values)
        numbers_ok = all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
                         for v in (rule.a, rule.b))
        threshold_ok = rule.threshold is None or (isinstance(rule.threshold, numbers.Real)
                                                  and 0.0 <= float(rule.threshold) <= 1.0)
        top_k_ok = rule.top_k is None or (isinstance(rule.top_k, int) and not isinstance(rule.top_k, bool)
                                          and rule.top_k >= 1)
        flags_ok = isinstance(rule.top1_fallback, bool) and isinstance(rule.relative, bool)
        if not (numbers_ok and threshold_ok and top_k_ok and flags_ok):
            raise InputError(f"{where}: 'label_rule' holds a bad value: {values!r}")
        return rule


def _probabilities(rule: LabelRule, confidences: Tensor) -> Tensor:
    """``p`` of a chunk of confidences under ``rule`` (float32, finite)."""
    import torch

    values = torch.nan_to_num(confidences.float(), nan=0.0, posinf=SCORE_CEILING, neginf=SCORE_FLOOR)
    if not rule.calibrated:
        return values.clamp(0.0, 1.0)
    return torch.sigmoid(values * rule.a + rule.b)


def probability_blocks(model: Any, X: Any, rule: LabelRule, n_labels: int,
                       batch_size: int) -> Iterator[tuple[np.ndarray, Tensor]]:
    """``(rows, (len(rows), L) probabilities)`` of ``X``, a bounded block of rows at a time."""
    import torch

    step = max(1, min(int(batch_size), RULE_BLOCK // max(n_labels, 1)))
    for start in range(0, X.shape[0], step):
        rows = np.arange(start, min(start + step, X.shape[0]))
        block = torch.empty((len(rows), n_labels), dtype=torch.float32)
        for first, chunk in model.confidence_chunks(X[rows]):
            block[:, first:first + chunk.shape[1]] = _probabilities(rule, chunk.cpu())
        yield rows, block


def _cut(block: Tensor, rule: LabelRule) -> tuple[np.ndarray, np.ndarray]:
    """``(row, column)`` of a block's labels under ``rule`` (and each empty row's best)."""
    import torch

    assert rule.threshold is not None
    cut = rule.threshold * block.max(1, keepdim=True).values if rule.relative else rule.threshold
    found = torch.nonzero(block >= cut, as_tuple=True)
    fallback = rule.top1_fallback
    rows, cols = found[0].numpy(), found[1].numpy()
    if fallback:
        empty = np.setdiff1d(np.arange(block.shape[0]), rows)
        if empty.size:
            rows = np.concatenate([rows, empty])
            cols = np.concatenate([cols, block[torch.from_numpy(empty)].argmax(1).numpy()])
    return rows, cols


def label_sets(model: Any, X: Any, rule: LabelRule, n_labels: int, batch_size: int) -> sp.csr_matrix:
    """The rule's label sets of the checked ``X``: CSR ``(n, L)`` int64 0/1, indices sorted."""
    n = X.shape[0]
    if rule.threshold is None:  # each row's top k (saved without a rule: top-1)
        indices, _ = model.predict_topk(X, min(rule.top_k or 1, n_labels), batch_size=batch_size)
        keep = indices >= 0
        rows, cols = np.nonzero(keep)[0], indices[keep]
    else:
        parts = [(block_rows[r], c) for block_rows, block in probability_blocks(model, X, rule, n_labels, batch_size)
                 for r, c in [_cut(block, rule)]]
        rows = np.concatenate([r for r, _ in parts]) if parts else np.zeros(0, np.int64)
        cols = np.concatenate([c for _, c in parts]) if parts else np.zeros(0, np.int64)
    out = sp.csr_matrix((np.ones(len(rows), np.int64), (rows, cols)), shape=(n, n_labels))
    out.sort_indices()
    return out


def probabilities(model: Any, X: Any, rule: LabelRule, n_labels: int, batch_size: int, limit: int) -> np.ndarray:
    """Every label's probability under ``rule`` for every row of the checked ``X``: a dense
    ``(n, L)`` float32 array.

    Raises:
        InputError: ``n · L`` above ``limit`` (before anything is allocated), naming ``predict_topk``.
    """
    n = X.shape[0]
    if n * n_labels > limit:
        raise InputError(f"predict_proba: {n} x {n_labels} probabilities exceed {limit:,} entries; use "
                         f"predict_topk(X, k) (each row's k best labels) or pass fewer rows")
    out = np.empty((n, n_labels), dtype=np.float32)
    for rows, block in probability_blocks(model, X, rule, n_labels, batch_size):
        out[rows] = block.numpy()
    return out


def samples_f1(predicted: sp.csr_matrix, Y: sp.csr_matrix) -> float:
    """scikit-learn's ``f1_score(Y, predicted, average="samples", zero_division=0)`` in
    percent, from row sums (a row with no true and no predicted label scores 0).

    Example:
        >>> samples_f1(sp.csr_matrix([[1, 0], [1, 1]]), sp.csr_matrix([[1, 1], [0, 1]]))
        66.66666666666666
    """
    hits = np.asarray(predicted.multiply(Y).sum(1)).ravel()
    sizes = np.diff(predicted.indptr) + np.diff(Y.indptr)
    return 100.0 * float(np.mean(np.divide(2.0 * hits, sizes, out=np.zeros(len(hits)), where=sizes > 0)))


def _platt(pairs: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[float, float] | None:
    """:func:`platt_scaling` of the (confidence, label, weight) pairs of :func:`_calibration_pairs`."""
    if not pairs:
        return None
    x, y, w = (np.concatenate([p[i] for p in pairs]) for i in range(3))
    return platt_scaling(x, y, w)


def _calibration_pairs(model: Any, X: Any, Y: sp.csr_matrix, n_labels: int, seed: int, batch_size: int
                       ) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], list[tuple[np.ndarray, Any]]]:
    """Every positive (confidence, 1) pair of the validation rows and a uniform sample of the
    negatives, weighted by ``1 / sampling rate`` (at most about :data:`RULE_PAIRS`); and from
    the same pass each block's rows with their :data:`RULE_MAX_SET` highest confidences (a
    ``torch.topk``), so that the cuts need not score the rows again (:func:`_ranked_candidates`)."""
    import torch

    rng = np.random.default_rng([seed, 0xCA1])
    negatives = max(X.shape[0] * n_labels - Y.nnz, 1)
    rate = min(1.0, max(RULE_PAIRS - Y.nnz, RULE_PAIRS // 10) / negatives)
    pairs, tops = [], []
    for start in range(0, X.shape[0], batch_size):
        rows = np.arange(start, min(start + batch_size, X.shape[0]))
        values, truth = _raw_block(model, X[rows], n_labels), Y[rows].toarray() > 0
        take = truth | (rng.random(truth.shape) < rate)
        pairs.append((values[take].astype(np.float64), truth[take].astype(np.int64),
                      np.where(truth, 1.0, 1.0 / rate)[take]))
        tops.append((rows, torch.topk(torch.from_numpy(values), min(RULE_MAX_SET, n_labels), dim=1)))
    return pairs, tops


def _ranked_candidates(tops: list[tuple[np.ndarray, Any]], rule: LabelRule
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, columns, probabilities, ranks)`` of each row's :data:`RULE_MAX_SET` most
    probable labels (best first), and each row's largest probability: what the cuts keep (the
    top-k sets read ``predict_topk``'s ranking, as ``predict`` does). Read from each row's
    highest raw confidences (``tops`` of :func:`_calibration_pairs`) mapped by ``rule``: the
    same labels as ranking the probabilities, as the map never falls (:func:`platt_scaling`;
    among labels whose probabilities tie, the higher confidence ranks first)."""
    rows, cols, values, ranks, best = [], [], [], [], []
    for block_rows, top in tops:
        p = _probabilities(rule, top.values)
        shape = p.shape
        rows.append(np.repeat(block_rows, shape[1]))
        cols.append(top.indices.reshape(-1).numpy())
        values.append(p.reshape(-1).numpy())
        ranks.append(np.tile(np.arange(shape[1]), shape[0]))
        best.append(p[:, 0].numpy())
    return tuple(np.concatenate(parts) for parts in (rows, cols, values, ranks, best))  # type: ignore[return-value]


def _raw_block(model: Any, X_rows: Any, n_labels: int) -> np.ndarray:
    """The model's confidences of a few rows, finite, as a dense float32 array."""
    import torch

    out = np.empty((X_rows.shape[0], n_labels), dtype=np.float32)
    for first, chunk in model.confidence_chunks(X_rows):
        values = torch.nan_to_num(chunk.float().cpu(), nan=0.0, posinf=SCORE_CEILING, neginf=SCORE_FLOOR)
        out[:, first:first + chunk.shape[1]] = values.numpy()
    return out


def fit_label_rule(model: Any, X_val: Any, Y_val: sp.csr_matrix, n_labels: int, *, seed: int, source: str,
                   batch_size: int = 1024) -> LabelRule:
    """The default rule of ``predict``, chosen on validation rows: Platt scaling of the
    model's confidences, then the label sets of the best samples-F1 on those rows among one
    global cut of :data:`RULE_THRESHOLDS` (with or without a top-1 fallback for rows left
    empty), one cut of :data:`RULE_FRACTIONS` of each row's largest probability, and each
    row's top k of :data:`RULE_TOP_K` (ties: the first in that order); where the Platt map is
    flat (scores that carry no sign of the label), the top-k sets only.

    Args:
        model: a fitted model (its ``confidence_chunks``).
        X_val, Y_val: checked validation rows (at most :data:`RULE_ROWS`, and at most
            ``RULE_ENTRIES / L`` but :data:`RULE_MIN_ROWS`, are read: a seeded sample).
        n_labels: L; seed: the sampling seed; source: where the rows came from (recorded).

    Returns:
        the :class:`LabelRule`.
    """
    most = min(RULE_ROWS, max(RULE_MIN_ROWS, RULE_ENTRIES // max(n_labels, 1)))
    if X_val.shape[0] > most:
        keep = np.sort(np.random.default_rng([seed, 0x5E7]).choice(X_val.shape[0], most, replace=False))
        X_val, Y_val = X_val[keep], Y_val[keep]
    Y_val = sp.csr_matrix(Y_val != 0, dtype=np.int64)
    step = max(1, min(int(batch_size), RULE_BLOCK // max(n_labels, 1)))
    pairs, tops = _calibration_pairs(model, X_val, Y_val, n_labels, seed, step)
    platt = _platt(pairs)
    rule = LabelRule(calibrated=False) if platt is None else LabelRule(a=platt[0], b=platt[1], calibrated=True)
    r, c, p, rank, row_best = _ranked_candidates(tops, rule)
    n = X_val.shape[0]
    top_rows, top_cols = r[rank == 0], c[rank == 0]
    candidates: list[tuple[LabelRule, Any]] = []
    if not (rule.calibrated and rule.a == 0.0):  # a flat map cuts every label or none: top k only
        candidates += [(LabelRule(threshold=t, top1_fallback=fallback), p >= t)
                       for t in RULE_THRESHOLDS for fallback in (False, True)]
        candidates += [(LabelRule(threshold=t, relative=True, top1_fallback=False), p >= t * row_best[r])
                       for t in RULE_FRACTIONS]
    sizes = [k for k in RULE_TOP_K if k <= min(n_labels, RULE_MAX_SET)]
    ranked, _ = model.predict_topk(X_val, max(sizes), batch_size=step)  # the ranking predict's top k reads
    top_r = np.repeat(np.arange(n), ranked.shape[1]).reshape(ranked.shape)
    top_rank = np.tile(np.arange(ranked.shape[1]), (n, 1))
    for k in sizes:
        kept = (top_rank < k) & (ranked >= 0)
        candidates.append((LabelRule(threshold=None, top_k=k, top1_fallback=False), (top_r[kept], ranked[kept])))
    scores = []
    for form, kept in candidates:
        rows, cols = kept if isinstance(kept, tuple) else (r[kept], c[kept])
        if form.top1_fallback:
            empty = ~np.isin(top_rows, rows)
            rows, cols = np.concatenate([rows, top_rows[empty]]), np.concatenate([cols, top_cols[empty]])
        sets = sp.csr_matrix((np.ones(len(rows), np.int64), (rows, cols)), shape=(n, n_labels))
        scores.append(samples_f1(sets, Y_val))
    best = int(np.argmax(scores))  # the first best: absolute cuts low to high, relative cuts, then top-k
    form = candidates[best][0]
    return replace(rule, threshold=form.threshold, relative=form.relative, top1_fallback=form.top1_fallback,
                   top_k=form.top_k, rows=n, f1=scores[best], source=source)


def finite_scores(scores: np.ndarray) -> np.ndarray:
    """``scores`` with ``-inf`` / ``+inf`` (and NaN) as :data:`SCORE_FLOOR` / :data:`SCORE_CEILING`
    (NaN as the floor), in place where writable.

    Example:
        >>> finite_scores(np.array([1.0, -np.inf, np.inf], dtype=np.float32)).tolist()
        [1.0, -1000000000.0, 1000000000.0]
    """
    return np.nan_to_num(scores, copy=False, nan=SCORE_FLOOR, posinf=SCORE_CEILING, neginf=SCORE_FLOOR)

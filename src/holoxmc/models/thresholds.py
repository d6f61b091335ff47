"""Label sets by a confidence threshold: the functions behind ``XMCClassifier.predict_above``
and ``XMCClassifier.tune_threshold`` (each method calls one of them in one line).

Example:
    >>> labels = predict_above(clf, X_test, 0.5)                 # doctest: +SKIP
    >>> threshold, table = tune_threshold(clf, X_val, Y_val)     # doctest: +SKIP
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError
from holoxmc.metrics import label_set_f1
from holoxmc.train import labels_above
from holoxmc.validation import check_batch_size, check_Y

__all__ = ["predict_above", "tune_threshold", "check_relative_threshold", "THRESHOLD_METRICS"]

#: The metrics [`tune_threshold`][holoxmc.models.thresholds.tune_threshold] maximises.
THRESHOLD_METRICS = ("micro-F1", "example-F1")


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

"""Platt scaling: the one map from a model's scores to probabilities that ``predict``'s rule
(:mod:`holoxmc.models.thresholds`) and the linear model's calibration of its margins fit.

Imports scikit-learn only when it fits.

Example:
    >>> import numpy as np
    >>> a, b = platt_scaling(np.array([0.0, 1.0, 2.0, 3.0]), np.array([0, 1, 0, 1]), np.ones(4))
    >>> a > 0
    True
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["platt_scaling"]


def platt_scaling(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> tuple[float, float] | None:
    """``(a, b)`` of ``sigmoid(a · x + b)`` fitted to labels ``y`` (0/1) of scores ``x`` with
    weights ``w`` (Platt, 1999), never falling (``a >= 0``); ``None`` where the pairs of
    positive weight and finite values hold one class only.

    The fit reads the scores standardised and the weights over their mean, to a tight
    tolerance, then maps ``(a, b)`` back: on raw confidences spread over a tenth of a unit,
    with a million pairs weighted up to 20, scikit-learn's lbfgs at its defaults stopped early
    at a falling map (``a < 0`` although positives scored higher), without a warning. A map is
    a calibration, not a ranking: where the best fit falls (scores that carry no sign of the
    label, as on a handful of validation rows), the flat map of the weighted positive share
    is returned instead.

    Args:
        x: ``(m,)`` scores; y: ``(m,)`` 0/1 labels; w: ``(m,)`` nonnegative weights.

    Example:
        >>> x = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
        >>> a, b = platt_scaling(x, np.array([0, 0, 1, 0, 1, 1]), np.ones(6))
        >>> a > 0 and round(-b / a, 2)  # a rising map, p = 1/2 where the classes meet
        0.35
        >>> platt_scaling(x, np.array([1, 1, 0, 1, 0, 0]), np.ones(6))  # falling scores: flat, p = 1/2
        (0.0, 0.0)
    """
    from sklearn.linear_model import LogisticRegression

    kept = np.isfinite(x) & np.isfinite(w) & (w > 0)
    x, y, w = x[kept], y[kept], w[kept]
    if x.size == 0 or y.min() == y.max():
        return None
    center, scale = float(x.mean()), float(x.std())
    scale = scale if scale > 0 else 1.0
    fit = LogisticRegression(C=1e6, tol=1e-8, max_iter=1000).fit(((x - center) / scale)[:, None], y,
                                                                  sample_weight=w / w.mean())
    a = float(fit.coef_[0, 0]) / scale
    b = float(fit.intercept_[0]) - a * center
    if not a > 0:  # falling (or flat, or NaN): the flat map
        share = float(np.average(y, weights=w))
        a, b = 0.0, math.log(share / (1.0 - share))
    return (a, b) if math.isfinite(a) and math.isfinite(b) else None

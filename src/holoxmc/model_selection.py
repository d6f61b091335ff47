"""Cross-validation on extreme multi-label data: sparse CSR label matrices and ``groups``.

scikit-learn's ``cross_validate`` refuses a sparse ``Y`` (its own check of the target), so
on XMC-sized label spaces the only way through it is a dense ``(n, L)`` 0/1 array.
:func:`cross_validate` here takes the CSR ``Y`` (or label-id / label-name lists) as it is,
draws the folds with scikit-learn's own splitters (``KFold``, ``GroupKFold`` or any
splitter you pass) and scores each fold with holoxmc's ranking metrics (``"P@k"``,
``"nDCG@k"``, ``"PSP@k"``, ``"PSnDCG@k"``: top-``k`` only, no ``(n, L)`` matrix) or any
scikit-learn scorer name or callable (``"f1_samples"`` reads ``predict``'s CSR label sets).

Example:
    >>> from holoxmc.model_selection import cross_validate
    >>> result = cross_validate(XMCClassifier(head="linear"), X, Y, cv=5,
    ...                         scoring=("P@1", "nDCG@5", "f1_samples"))  # doctest: +SKIP
    >>> result["test_P@1"].mean()                                         # doctest: +SKIP
"""

from __future__ import annotations

import numbers
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.metrics import check_scoring
from sklearn.model_selection import GroupKFold, KFold

from holoxmc.errors import InputError
from holoxmc.metrics import scorer

__all__ = ["cross_validate", "fold_splitter"]

Scoring = str | Callable[..., float] | Sequence[str] | Mapping[str, str | Callable[..., float]]


def fold_splitter(cv: Any, groups: Any, *, shuffle: bool = False, random_state: int | None = None) -> Any:
    """The splitter of ``cv``: an int is ``KFold(cv)`` (``GroupKFold(cv)`` with ``groups``),
    anything with ``split`` is used as it is.

    Example:
        >>> fold_splitter(3, None)
        KFold(n_splits=3, random_state=None, shuffle=False)
        >>> fold_splitter(4, [0, 1, 1])
        GroupKFold(n_splits=4, random_state=None, shuffle=False)
    """
    if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
        if cv < 2:
            raise InputError(f"cv must be at least 2 folds, got {cv}")
        if groups is not None:
            return GroupKFold(int(cv), shuffle=shuffle, random_state=random_state if shuffle else None)
        return KFold(int(cv), shuffle=shuffle, random_state=random_state if shuffle else None)
    if hasattr(cv, "split"):
        return cv
    raise InputError(f"cv must be a number of folds or a scikit-learn splitter, got {cv!r}")


def _scorers(estimator: Any, scoring: Scoring) -> dict[str, Callable[..., float]]:
    """``{name: scorer}``: holoxmc's metric names (:func:`holoxmc.metrics.scorer`), else
    scikit-learn's names and callables."""
    def one(item: str | Callable[..., float]) -> Callable[..., float]:
        if isinstance(item, str) and "@" in item:
            return scorer(item)
        try:
            return check_scoring(estimator, scoring=item)
        except ValueError as exc:
            raise InputError(f"scoring {item!r}: {exc}") from None

    if isinstance(scoring, str) or callable(scoring):
        return {"score": one(scoring)}
    if isinstance(scoring, Mapping):
        return {str(name): one(item) for name, item in scoring.items()}
    if isinstance(scoring, Sequence) and scoring and all(isinstance(item, str) for item in scoring):
        return {item: one(item) for item in scoring}
    raise InputError(f"scoring must be a name, a callable, a list of names or a dict, got {scoring!r}")


def _rows(data: Any, rows: np.ndarray) -> Any:
    """The ``rows`` of a matrix or of a list of label lists."""
    if sp.issparse(data) or isinstance(data, np.ndarray):
        return data[rows]
    return [data[i] for i in rows]


def _label_names(Y: Any) -> tuple[Any, np.ndarray | None]:
    """Label lists as one CSR over every row (each fold then sees the same columns; a fold of
    label names fits on them with ``classes``); a matrix unchanged."""
    from holoxmc.labels import encode_names, holds_names  # the estimator's own reading of names
    from holoxmc.validation import check_Y

    if sp.issparse(Y) or isinstance(Y, np.ndarray):
        return Y, None
    if holds_names(Y):
        return encode_names(Y)
    return check_Y(Y, len(Y), None), None  # label-id lists: one width for every fold


def cross_validate(estimator: Any, X: Any, Y: Any, *, cv: Any = 5, groups: Any = None,
                   scoring: Scoring = "P@1", return_estimator: bool = False, shuffle: bool = False,
                   random_state: int | None = None) -> dict[str, np.ndarray | list[Any]]:
    """Fit a clone of ``estimator`` on each fold's training rows and score it on the rest.

    Args:
        estimator: an unfitted ``XMCClassifier`` (or any estimator of the same protocol).
        X: ``(n, D)`` features (sparse or dense) or token ids.
        Y: ``(n, L)`` labels: a CSR matrix (kept sparse), a dense 0/1 array, label-id lists or
            label-name lists (encoded once over every row, so each fold has every column).
        cv: the number of folds (``KFold``; ``GroupKFold`` when ``groups`` is given) or a
            scikit-learn splitter (``ShuffleSplit(...)``, ``GroupShuffleSplit(...)``, ...).
        groups: ``(n,)`` group of each row: rows of a group are never split between a fold's
            training and test rows.
        scoring: a metric name (``"P@k"``, ``"nDCG@k"``, ``"PSP@k"``, ``"PSnDCG@k"``, or any
            scikit-learn scorer name such as ``"f1_samples"``), a callable ``(estimator, X, y)``,
            a list of names or a ``{name: scorer}`` dict.
        return_estimator: add the fitted estimators under ``"estimator"``.
        shuffle, random_state: shuffle the rows before an int ``cv`` splits them.

    Returns:
        ``{"test_<name>": (folds,), "fit_time": (folds,), "score_time": (folds,)}`` (a single
        scoring is named ``score``, as in scikit-learn).

    Example:
        >>> cross_validate(XMCClassifier(head="linear"), X, Y, cv=3, groups=authors)  # doctest: +SKIP
        {'fit_time': array([...]), 'score_time': array([...]), 'test_score': array([...])}
    """
    n = X.shape[0] if hasattr(X, "shape") else len(X)
    n_labels = Y.shape[0] if hasattr(Y, "shape") else len(Y)
    if n != n_labels:
        raise InputError(f"X has {n} rows but Y has {n_labels}")
    if groups is not None and len(groups) != n:
        raise InputError(f"groups has {len(groups)} entries for {n} rows")
    Y, classes = _label_names(Y)
    scorers = _scorers(estimator, scoring)
    splitter = fold_splitter(cv, groups, shuffle=shuffle, random_state=random_state)
    out: dict[str, list[Any]] = {"fit_time": [], "score_time": []} | {f"test_{name}": [] for name in scorers}
    fitted = []
    for train, test in splitter.split(np.zeros((n, 1)), groups=groups):
        model = clone(estimator)
        started = time.perf_counter()
        model.fit(_rows(X, train), _rows(Y, train), **({} if classes is None else {"classes": classes}))
        out["fit_time"].append(time.perf_counter() - started)
        started = time.perf_counter()
        for name, score in scorers.items():
            out[f"test_{name}"].append(float(score(model, _rows(X, test), _rows(Y, test))))
        out["score_time"].append(time.perf_counter() - started)
        if return_estimator:  # otherwise one fold's model at a time is held
            fitted.append(model)
    result: dict[str, np.ndarray | list[Any]] = {key: np.asarray(values) for key, values in out.items()}
    if return_estimator:
        result["estimator"] = fitted
    return result

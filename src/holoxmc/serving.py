"""Serving a fitted classifier: its top-k predictions and metrics, label names and input
checks, as functions of the fitted state (the estimator's ``predict_topk``, ``evaluate`` and
label helpers call them in one line each), and :func:`load_served`, which reads a saved
linear or re-rank model into a :class:`ServedClassifier` without the estimator.

Nothing here imports torch or scikit-learn: the estimator subclasses scikit-learn's
``BaseEstimator`` and imports torch, about 4 s before a model is read, while a served linear
or re-rank model needs neither (``holoxmc predict`` and ``holoxmc evaluate`` of such a run
start in well under a second, docs/results/speed.md, "CLI start-up"). Every other model, and
what computes with confidences (``predict_above``, ``predict``'s label sets), is the estimator's.

Example:
    >>> clf = load_served("runs/linear")                         # doctest: +SKIP
    >>> indices, scores = clf.predict_topk(X, 5)                 # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.data.shards import is_sharded
from holoxmc.errors import InputError
from holoxmc.labels import encode_names, encode_single, holds_names, is_single_label
from holoxmc.metrics import evaluate as score_topk
from holoxmc.metrics import pad_predictions
from holoxmc.models.thresholds import finite_scores
from holoxmc.persist import read_saved
from holoxmc.settings import DEFAULTS
from holoxmc.validation import check_batch_size, check_fitted, check_input, check_k, check_ks, check_Y

__all__ = ["ServedClassifier", "load_served", "predict_topk", "evaluate", "check_X", "label_matrix", "label_names",
           "with_labels", "array_like"]


def array_like(value: Any) -> bool:
    """A pandas Series or another array-like that is not an array, list or matrix.

    Example:
        >>> array_like([1, 2]), array_like(np.zeros(2))
        (False, False)
    """
    return hasattr(value, "__array__") and not isinstance(value, (np.ndarray, list, tuple)) and not sp.issparse(value)


# ---------------------------------------------------------------------------- the fitted state's functions
# ``clf`` is a fitted XMCClassifier or a ServedClassifier: ``model_``, ``n_features_``,
# ``n_labels_``, ``inv_prop_``, ``classes_``, ``multiclass_``, ``backbone`` and ``head_``.
def check_X(clf: Any, X: Any, *, fitting: bool = False, known: int | None = None) -> sp.csr_matrix | np.ndarray:
    """``X`` as ``clf``'s model reads it (:func:`~holoxmc.validation.check_input`), of ``known``
    features (or vocabulary), by default the fitted model's (any while ``fitting``); the rows
    of a shard store are read batch by batch (network heads).

    Example:
        >>> check_X(clf, [[0.0, 1.0]]).format  # doctest: +SKIP
        'csr'
    """
    if is_sharded(X):
        from holoxmc.models.registry import streaming_heads
        from holoxmc.train.streaming import streamed_input

        return streamed_input(X, getattr(clf, "head_", clf.head), clf.backbone, clf.n_features_, streaming_heads())
    return check_input(X, clf.backbone, clf.n_features_ if known is None and not fitting else known)


def label_names(clf: Any) -> np.ndarray | None:
    """The label names of a model fitted on names (``None``: label ids, or the classes of a 1-D target)."""
    classes = getattr(clf, "classes_", None)
    multiclass = getattr(clf, "multiclass_", False)
    return classes if classes is not None and classes.dtype == object and not multiclass else None


def with_labels(clf: Any, names: np.ndarray | None) -> Any:
    """Set ``clf.classes_`` to the label names, or ``0 .. L-1``; returns ``clf``.

    Raises:
        InputError: names for another number of labels.
    """
    if names is not None and len(names) != clf.n_labels_:
        raise InputError(f"classes has {len(names)} names for {clf.n_labels_} label columns")
    clf.classes_ = np.arange(clf.n_labels_) if names is None else names
    clf.multiclass_ = bool(getattr(clf, "multiclass_", False))
    return clf


def label_matrix(clf: Any, Y: Any) -> Any:
    """``Y`` of label-name lists (or, for a model fitted on one class per row, a 1-D target)
    as the ``(n, L)`` matrix of ``clf.classes_``; any other form unchanged.

    Raises:
        InputError: label names for a model fitted on label ids.
    """
    Y = np.asarray(Y) if array_like(Y) else Y
    if getattr(clf, "multiclass_", False) and is_single_label(Y):
        return encode_single(Y, clf.classes_)[0]
    if not holds_names(Y):
        return Y
    if label_names(clf) is None:
        raise InputError("Y holds label names, and this model was fitted on label ids (its classes_ are 0 .. L-1)")
    return encode_names(Y, clf.classes_)[0]


def predict_topk(clf: Any, X: Any, k: int = 5, *, batch_size: int = 1024,
                 names: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``clf``'s top-``k`` labels per row, best first, and their scores (``XMCClassifier.predict_topk``):
    ranks a model cannot fill hold label ``-1`` (``None`` with ``names``) and score
    :data:`~holoxmc.models.thresholds.SCORE_FLOOR`; scores are finite.

    Shapes:
        X: ``(n, D)`` → indices ``(n, k)`` int64 (object with ``names``), scores ``(n, k)`` float32.
    """
    check_fitted(clf)
    k, batch_size = check_k(k, clf.n_labels_), check_batch_size(batch_size)
    indices, scores = clf.model_.predict_topk(check_X(clf, X), k, batch_size=batch_size)
    scores = finite_scores(scores)
    if not names:
        return indices, scores
    labels = np.full(indices.shape, None, dtype=object)
    filled = indices >= 0
    labels[filled] = clf.classes_[indices[filled]]
    return labels, scores


def evaluate(clf: Any, X: Any, Y: Any, *, ks: Sequence[int] = (1, 2, 3, 4, 5),
             recall_ks: Sequence[int] = ()) -> dict[str, float]:
    """P@k, nDCG@k, Recall@k, PSP@k, PSnDCG@k (percent) of ``clf``'s top-k predictions against
    ``Y`` (``XMCClassifier.evaluate``): every metric read from one top-``max(ks + recall_ks)``
    prediction, ranks past the model's labels counted as misses."""
    check_fitted(clf)
    ks = check_ks(ks)
    recall_ks = check_ks(recall_ks, "recall_ks", empty_ok=True)
    X = check_X(clf, X)
    if is_sharded(X):  # top-k and metrics batch by batch
        from holoxmc.train.streaming import evaluate_streamed

        return evaluate_streamed(clf.model_, X, Y, inv_prop=clf.inv_prop_, ks=ks, n_labels=clf.n_labels_,
                                 recall_ks=recall_ks)
    Y = check_Y(label_matrix(clf, Y), X.shape[0], n_labels=clf.n_labels_)
    k = max((*ks, *recall_ks))
    indices, _ = predict_topk(clf, X, min(k, clf.n_labels_))
    return score_topk(pad_predictions(indices, k), Y, inv_prop=clf.inv_prop_, ks=ks, recall_ks=recall_ks)


# ---------------------------------------------------------------------------- a saved model, served
class ServedClassifier:
    """A saved classifier whose model needs neither torch nor scikit-learn (the linear and
    re-rank models), read by :func:`load_served`: the estimator's fitted attributes, and its
    top-k predictions and metrics (the same functions, so the same answers as
    ``XMCClassifier.load(path)`` gives).

    Attributes:
        head, head_: the model's head; backbone: ``"fc"``; params: every setting as saved;
        model_: the served model; n_features_, n_labels_, n_features_in_: sizes;
        inv_prop_: ``(L,)`` inverse propensities; label_rule_: ``predict``'s rule;
        classes_, multiclass_: the label names (or ``0 .. L-1``); selection_ (chosen by
        ``head="auto"``): the candidates.
    """

    def __init__(self, saved: Any) -> None:
        self.params = saved.params
        self.head = self.head_ = saved.params["head"]
        self.backbone = saved.params["backbone"]
        self.model_ = saved.model
        self.n_features_ = self.n_features_in_ = saved.n_features
        self.n_labels_ = saved.n_labels
        self.inv_prop_ = saved.inv_prop
        self.label_rule_ = saved.label_rule
        self.multiclass_ = saved.multiclass
        if saved.selection is not None:
            self.selection_ = saved.selection
        with_labels(self, saved.names)

    def predict_topk(self, X: Any, k: int = 5, *, batch_size: int = 1024,
                     names: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """:func:`predict_topk` (``XMCClassifier.predict_topk``)."""
        return predict_topk(self, X, k, batch_size=batch_size, names=names)

    def evaluate(self, X: Any, Y: Any, *, ks: Sequence[int] = (1, 2, 3, 4, 5),
                 recall_ks: Sequence[int] = ()) -> dict[str, float]:
        """:func:`evaluate` (``XMCClassifier.evaluate``)."""
        return evaluate(self, X, Y, ks=ks, recall_ks=recall_ks)


def load_served(path: str | Path, *, device: str | None = None) -> ServedClassifier | None:
    """The model folder ``path`` as a :class:`ServedClassifier` when its model loads from
    NumPy arrays on the CPU (the linear and re-rank models), read and checked as
    ``XMCClassifier.load`` reads it (:func:`holoxmc.persist.read_saved`: the same checks, in
    the same order, the same errors); ``None`` for any other model, after reading only its
    ``config.json``: load it with ``XMCClassifier.load``.

    Raises:
        InputError: what ``XMCClassifier.load`` refuses in the folder.

    Example:
        >>> load_served("runs/linear").head_  # doctest: +SKIP
        'linear'
    """
    saved = read_saved(path, sorted(DEFAULTS), DEFAULTS, device=device, arrays_only=True)
    return None if saved is None else ServedClassifier(saved)

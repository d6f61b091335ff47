"""What holoxmc checks at the estimator's boundary, before any work: the features X, the
labels Y (the same rules at every entry point), the fitted state, and which settings apply to a
head or backbone (the settings' own forms are :data:`holoxmc.settings.ESTIMATOR_CONSTRAINTS`,
checked by :func:`holoxmc.constraints.check_params`).

Example:
    >>> check_k(0, n_labels=10)
    Traceback (most recent call last):
    ...
    holoxmc.errors.InputError: k must be an integer in [1, 10], got 0
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import functools

import numpy as np
import scipy.sparse as sp

from holoxmc.constraints import Integer, is_integer, is_real
from holoxmc.errors import InputError
from holoxmc.limits import check_allocation, check_size
from holoxmc.presets import BACKBONE_OPTIONS
from holoxmc.settings import heads_taking

# NotFittedError, made on first use (not_fitted_error), is read through the module's __getattr__.
__all__ = ["not_fitted_error", "check_finite_options", "check_X", "check_Y", "check_fitted", "check_batch_size",
           "check_label_statistics", "check_backbone_settings",
           "NOT_FOR_BACKBONE", "SKLEARN_NAMES", "check_head_settings", "check_fit_data", "check_input", "input_size",
           "check_k", "check_ks", "check_score_metric", "SCORE_FAMILIES"]


@functools.cache
def not_fitted_error() -> type[InputError]:
    """:class:`NotFittedError`, the class, made on first use: scikit-learn's ``NotFittedError``
    and a holoxmc :class:`~holoxmc.errors.InputError` at once (made lazily so that importing
    this module does not import scikit-learn; ``holoxmc.validation.NotFittedError`` is it)."""
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    return type("NotFittedError", (SklearnNotFittedError, InputError), {
        "__module__": __name__,
        "__doc__": "An estimator used before ``fit``: scikit-learn's ``NotFittedError`` and a holoxmc "
                   ":class:`~holoxmc.errors.InputError` (the CLI's one-line error) at once."})


def __getattr__(name: str) -> Any:
    if name == "NotFittedError":
        return not_fitted_error()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_finite_options(options: Mapping[str, Any], name: str = "head_options") -> None:
    """Refuse a NaN or infinite number anywhere in an options dict (lists included).

    Raises:
        InputError: naming the key, e.g. ``head_options['ranking'] must be finite, got nan``.
    """
    for key, value in options.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        for v in values:
            if is_real(v) and not math.isfinite(v):
                raise InputError(f"{name}[{key!r}] must be finite, got {value!r}")


def check_batch_size(batch_size: Any) -> int:
    """A positive integer number of rows per inference batch.

    Raises:
        InputError: anything else (``-1`` and ``0`` included).
    """
    if not Integer(1).accepts(batch_size):
        raise InputError(f"batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)


def check_fitted(estimator: Any, attribute: str = "model_") -> None:
    """Raise :class:`NotFittedError` unless ``estimator`` has ``attribute``."""
    if attribute not in vars(estimator):
        raise not_fitted_error()(f"this {type(estimator).__name__} is not fitted yet; call fit(X, Y) first")


# ---------------------------------------------------------------------------- X
def check_X(X: Any, sparse_features: bool, *, n_features: int | None = None,
            vocab_size: int | None = None) -> sp.csr_matrix | np.ndarray:
    """Sparse float32 CSR features (``sparse_features``), or a 2-D int64 token-id matrix.

    Args:
        X: the input.
        sparse_features: the FC backbone's features; else token ids of a text backbone.
        n_features: the width the features must have (``None``: any).
        vocab_size: token ids must lie below it (``None``: any id up to holoxmc's size bound).

    Raises:
        InputError: a wrong type, shape, non-finite value, negative or too large token id,
            or no rows.
    """
    if X is None:
        raise InputError("X is None")
    X = _features(X, n_features) if sparse_features else _tokens(X, vocab_size)
    if X.shape[0] == 0:
        raise InputError("X has no rows")
    return X


def check_input(X: Any, backbone: str, known: int | None = None) -> sp.csr_matrix | np.ndarray:
    """What a model of ``backbone`` reads: sparse float32 CSR features for ``fc``, a 2-D
    int64 token matrix for the text backbones; of ``known`` features (or vocabulary;
    ``None``: any), by :func:`check_X`.

    Example:
        >>> check_input(np.eye(2), "fc", known=3)
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: X has 2 features, the model expects 3
    """
    if backbone == "fc":
        return check_X(X, True, n_features=known)
    return check_X(X, False, vocab_size=known)


def input_size(X: Any) -> int:
    """The input size a checked ``X`` needs of a model: its features (sparse), else its
    largest token id + 1.

    Example:
        >>> input_size(np.array([[3, 0], [1, 7]])), input_size(sp.csr_matrix((2, 5)))
        (8, 5)
    """
    return int(X.shape[1]) if sp.issparse(X) else int(X.max()) + 1


def _features(X: Any, n_features: int | None) -> sp.csr_matrix:
    dtype = X.dtype if sp.issparse(X) else np.asarray(X).dtype  # any sparse format (DOK and LIL have no .data)
    if np.issubdtype(dtype, np.complexfloating):  # float32 would drop the imaginary part
        raise InputError("X holds complex values; holoxmc reads real features")
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float32)
    else:
        try:
            array = np.asarray(X, dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise InputError(f"X must be a sparse matrix or a 2-D numeric array ({exc})") from exc
        if array.ndim != 2:
            raise InputError(f"X must be 2-D (n_samples, n_features), got shape {array.shape}")
        X = sp.csr_matrix(array)
    if not np.all(np.isfinite(X.data)):
        raise InputError("X contains NaN or infinite values")
    if n_features is not None and X.shape[1] != n_features:
        raise InputError(f"X has {X.shape[1]} features, the model expects {n_features}")
    return X


def _tokens(X: Any, vocab_size: int | None) -> np.ndarray:
    if sp.issparse(X):
        raise InputError("a text backbone takes a 2-D token-id array, not a sparse matrix")
    X = np.asarray(X)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.integer):
        raise InputError(f"X must be a 2-D integer token-id array, got {X.dtype} {X.shape}")
    if X.size and X.min() < 0:
        raise InputError("token ids must be >= 0 (0 = padding)")
    if X.size and vocab_size is not None and X.max() >= vocab_size:
        raise InputError(f"token id {int(X.max())} >= vocabulary size {vocab_size}")
    if X.size:
        check_size("the vocabulary size (largest token id + 1)", int(X.max()) + 1)
    return X.astype(np.int64, copy=False)


# ---------------------------------------------------------------------------- Y
def check_Y(Y: Any, n_rows: int, n_labels: int | None) -> sp.csr_matrix:
    """A binary CSR ``(n_rows, L)`` from any form of labels scikit-learn or holoxmc passes.

    Accepted: a sparse or dense 0/1 matrix (scikit-learn's indicator ndarray, as
    ``cross_val_score`` passes it), or one sequence of label ids per row: integers, or
    integral floats such as ``load_svmlight_file(multilabel=True)``'s ``(2.0, 5.0)``.
    A label-id row names each label once. The same rules hold at every entry point
    (``fit``, ``score``, ``evaluate``, ``tune_threshold`` and the linear and SOLAR fits).

    Args:
        Y: the labels; n_rows: rows of X; n_labels: the model's L (``None`` while fitting:
            the largest id + 1, at most holoxmc's size bound).

    Raises:
        InputError: the row (where known) and what is wrong.

    Example:
        >>> check_Y([(2.0, 0.0), ()], 2, None).toarray().tolist()
        [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]
    """
    if Y is None:
        raise InputError("Y is None")
    if sp.issparse(Y) or (isinstance(Y, np.ndarray) and Y.ndim == 2):
        Y = _indicator(Y, n_labels)
    elif isinstance(Y, Sequence) and not isinstance(Y, (str, bytes)) or isinstance(Y, np.ndarray) and Y.ndim == 1:
        Y = _label_lists(Y, n_labels)
    else:
        raise InputError(f"Y must be a sparse/2-D binary matrix or a list of label-id lists, got {type(Y).__name__}")
    if Y.shape[0] != n_rows:
        raise InputError(f"X has {n_rows} rows but Y has {Y.shape[0]}")
    if Y.shape[1] == 0:
        raise InputError("Y has no label columns")
    return Y if Y.has_sorted_indices else Y.sorted_indices()  # a copy: the caller's Y is never changed


def _indicator(Y: Any, n_labels: int | None) -> sp.csr_matrix:
    try:
        Y = sp.csr_matrix(Y, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InputError(f"Y must be a numeric 0/1 matrix ({exc})") from exc
    if Y.nnz and not np.all(Y.data):  # explicit zeros go, from a copy: the caller's Y and arrays it shares stay
        Y = Y.copy()
        Y.eliminate_zeros()
    if Y.nnz and not np.all(Y.data == 1):
        raise InputError("Y must be binary (0/1 entries)")
    if n_labels is not None and Y.shape[1] != n_labels:
        raise InputError(f"Y has {Y.shape[1]} label columns, the model has {n_labels}")
    return Y


def _label_row(i: int, labels: Any) -> np.ndarray:
    try:
        row = np.asarray(list(labels))
    except TypeError:
        raise InputError(f"Y row {i}: expected a list of label ids, got {labels!r}") from None
    if not row.size:
        return np.zeros(0, np.int64)
    if row.ndim != 1 or row.dtype == bool or not (np.issubdtype(row.dtype, np.integer)
                                                  or np.issubdtype(row.dtype, np.floating)):
        raise InputError(f"Y row {i}: label ids must be integers, got {row.tolist()[:5]}")
    if np.issubdtype(row.dtype, np.floating):
        if not np.all(np.isfinite(row)) or not np.all(row == np.round(row)):
            raise InputError(f"Y row {i}: label ids must be integers, got {row.tolist()[:5]}")
        if row.size and np.abs(row).max() >= 2**53:
            raise InputError(f"Y row {i}: label id {row.max()!r} is not an exact integer")
    return row.astype(np.int64)


def _label_lists(Y: Sequence[Any] | np.ndarray, n_labels: int | None) -> sp.csr_matrix:
    rows = [_label_row(i, labels) for i, labels in enumerate(Y)]
    ids = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    if ids.size and ids.min() < 0:
        raise InputError(f"label id {int(ids.min())} is negative")
    if n_labels is None:
        width = check_size("the label count (largest label id + 1)", int(ids.max()) + 1) if ids.size else 0
    else:
        width = n_labels
    if ids.size and ids.max() >= width:
        raise InputError(f"label id {int(ids.max())} out of range [0, {width})")
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    Y_csr = sp.csr_matrix((np.ones(ids.size, np.float32), ids, indptr), shape=(len(rows), width))
    _check_no_repeats(Y_csr)
    return Y_csr


def _check_no_repeats(Y: sp.csr_matrix) -> None:
    """Refuse a label-id list naming a label twice (sorts each row's ids in place): a 0/1
    indicator row given as a list, such as ``[0, 1, 1]``, reads as label ids."""
    Y.sort_indices()
    repeats = np.flatnonzero(np.diff(Y.indices) == 0)
    repeats = repeats[~np.isin(repeats + 1, Y.indptr)]  # equal ids that end one row and begin the next
    if repeats.size:
        row = int(np.searchsorted(Y.indptr, repeats[0], side="right")) - 1
        raise InputError(f"Y row {row}: label id {int(Y.indices[repeats[0]])} appears twice; a list of label-id "
                         "lists names each label once (give 0/1 indicator rows as a numpy array or a sparse matrix)")


def check_label_statistics(n_labels: int) -> None:
    """Refuse a label count whose per-label statistics (propensities, counts) cannot fit."""
    check_allocation(4 * 8 * n_labels, f"per-label statistics of {n_labels} labels")


#: Per backbone, the estimator settings that configure another backbone: a value other than
#: the default is refused, never ignored (a text backbone's sizes are ``head_options``
#: keywords, :data:`holoxmc.presets.BACKBONE_OPTIONS`).
NOT_FOR_BACKBONE: dict[str, tuple[str, ...]] = {"fc": (), "cnn": ("hidden", "linear_width"),
                                                "lstm": ("hidden", "linear_width")}


def check_backbone_settings(backbone: str, changed: Sequence[str]) -> None:
    """Refuse the settings of ``changed`` (those given other than their defaults) that do not
    apply to ``backbone``.

    Raises:
        InputError: naming them and what configures the backbone instead.

    Example:
        >>> check_backbone_settings("lstm", ["hidden", "lr"])
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: ['hidden'] do not apply to backbone 'lstm' (they configure the fc backbone); \
its sizes are head_options keywords: ['embed_dim', 'fc_size', 'hidden_size', 'max_length']
    """
    refused = [name for name in NOT_FOR_BACKBONE.get(backbone, ()) if name in changed]
    if refused:
        raise InputError(f"{refused} do not apply to backbone {backbone!r} (they configure the fc backbone); "
                         f"its sizes are head_options keywords: {sorted(BACKBONE_OPTIONS.get(backbone, {}))}")


#: scikit-learn's name of a setting -> (holoxmc's name, whether holoxmc's value may stand
#: beside the scikit-learn one). Give one of each pair; a value both agree on passes.
SKLEARN_NAMES: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "n_jobs": ("workers", lambda workers, n_jobs: workers == 1),
    "random_state": ("seed", lambda seed, random_state: seed in (0, random_state)),
}


class HeadFamily(Protocol):
    """What :func:`check_head_settings` reads of a model family (:class:`holoxmc.models.registry.Family`)."""

    @property
    def head(self) -> str: ...

    @property
    def settings(self) -> frozenset[str]: ...

    @property
    def backbones(self) -> tuple[str, ...]: ...

    @property
    def code_dim(self) -> bool: ...


def check_head_settings(params: Mapping[str, Any], defaults: Mapping[str, Any], kind: HeadFamily,
                        specific: Sequence[str]) -> None:
    """Refuse settings that do not apply to the head's family ``kind``: a backbone it does not
    take, a ``specific`` setting (:data:`holoxmc.models.registry.HEAD_SPECIFIC`) changed from
    its default that it or the backbone does not use (the settings table's rows say which heads
    take each, :func:`holoxmc.settings.heads_taking`), and a setting given under both its
    scikit-learn name and holoxmc's (:data:`SKLEARN_NAMES`). Nothing is ever ignored silently.

    Args:
        params: the estimator's ``get_params()``.
        defaults: the estimator's default of each setting.
        kind: the head's family.
        specific: the settings that apply to some heads only.

    Raises:
        InputError: naming the settings and what applies instead.
    """
    check_finite_options(params.get("head_options") or {})
    backbone = params["backbone"]
    if backbone not in kind.backbones:
        raise InputError(f"head {kind.head!r} takes sparse features (backbone "
                         f"{' or '.join(map(repr, kind.backbones))}), not {backbone!r}")
    given = [name for name in specific if params[name] != defaults[name]]
    check_backbone_settings(backbone, given)
    changed = [name for name in given if name not in kind.settings]
    if changed:
        owners = "; ".join(f"{name} applies to head{'s' * (len(heads_taking(name)) > 1)} "
                           f"{', '.join(map(repr, heads_taking(name)))}" for name in changed)
        raise InputError(f"{changed} do not apply to head {kind.head!r}: {owners} (head {kind.head!r} takes "
                         f"{sorted(kind.settings)} besides the settings of every head)")
    for alias, (name, compatible) in SKLEARN_NAMES.items():
        if params[alias] is not None and not compatible(params[name], params[alias]):
            raise InputError(f"{alias} is scikit-learn's name for {name}: give one of them, not "
                             f"{alias}={params[alias]} and {name}={params[name]}")


def check_fit_data(X: Any, Y: Any, X_val: Any, Y_val: Any, backbone: str) -> tuple[Any, ...]:
    """The training data and the optional validation data, checked alike: the inputs of
    ``backbone`` by :func:`check_input` (``X_val`` against X's :func:`input_size`), and Y by
    :func:`check_Y`.

    Returns:
        ``(X, Y, X_val, Y_val)``, the validation pair ``None`` when not given.

    Raises:
        InputError: a bad matrix, or only one of ``X_val`` and ``Y_val``.
    """
    X = check_input(X, backbone)
    Y = check_Y(Y, X.shape[0], n_labels=None)
    if Y.nnz == 0:
        raise InputError(f"Y has no labels at all: none of the {Y.shape[0]} training rows has a label to learn")
    if (X_val is None) != (Y_val is None):
        raise InputError("give both X_val and Y_val, or neither")
    if X_val is not None:
        X_val = check_input(X_val, backbone, known=input_size(X))
        Y_val = check_Y(Y_val, X_val.shape[0], n_labels=int(Y.shape[1]))
    return X, Y, X_val, Y_val


def check_k(k: Any, n_labels: int) -> int:
    """A top-``k`` cut-off: an integer in ``[1, n_labels]``.

    Example:
        >>> check_k(0, 10)
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: k must be an integer in [1, 10], got 0
    """
    if not is_integer(k) or not 1 <= k <= n_labels:
        raise InputError(f"k must be an integer in [1, {n_labels}], got {k!r}")
    return int(k)


#: The largest metric cut-off (``ks``, ``recall_ks``, ``"P@k"``) evaluated: the metrics are read
#: from one ``(rows, max k)`` top-k prediction, padded past the model's labels.
MAX_CUTOFF = 100_000


def check_ks(ks: Any, name: str = "ks", *, empty_ok: bool = False) -> tuple[int, ...]:
    """Metric cut-offs: a sequence (or 1-D array) of positive integers, non-empty unless
    ``empty_ok``.

    Example:
        >>> check_ks([1, 5]), check_ks((), "recall_ks", empty_ok=True)
        ((1, 5), ())
        >>> check_ks(100, "recall_ks")
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: recall_ks must be a list of positive integers, got 100
    """
    listed = isinstance(ks, Sequence) and not isinstance(ks, (str, bytes)) or isinstance(ks, np.ndarray) and ks.ndim == 1
    if not listed or not (len(ks) or empty_ok) or not all(is_integer(k) and k >= 1 for k in ks):
        raise InputError(f"{name} must be a list of positive integers, got {ks!r}")
    too_large = [int(k) for k in ks if k > MAX_CUTOFF]
    if too_large:  # every metric is read from one (rows, max k) prediction: bound it as predict bounds k
        raise InputError(f"{name}: cut-off {too_large[0]} is larger than holoxmc evaluates (at most {MAX_CUTOFF})")
    return tuple(int(k) for k in ks)


#: Metric families ``XMCClassifier.score`` can return (``metric="<family>@<k>"``).
SCORE_FAMILIES = ("P", "nDCG", "PSP", "PSnDCG")


def check_score_metric(metric: Any) -> int:
    """The cut-off ``k`` of a metric name such as ``"P@1"`` or ``"nDCG@5"``.

    Example:
        >>> check_score_metric("nDCG@5")
        5
    """
    match = re.fullmatch(r"(P|nDCG|PSP|PSnDCG)@([1-9][0-9]*)", metric) if isinstance(metric, str) else None
    if match is None:
        raise InputError(f"metric must be one of {list(SCORE_FAMILIES)} at a cut-off, such as 'P@1', got {metric!r}")
    return check_ks((int(match.group(2)),), "metric")[0]

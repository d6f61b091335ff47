"""Label names: ``fit`` on lists of label-name lists (``[["sports", "news"], ["tech"]]``)
or on a ``MultiLabelBinarizer`` output with its ``classes_``; the estimator's ``classes_``
then holds the names, in the column order of every ``(n, L)`` output.

The names are encoded by scikit-learn's ``MultiLabelBinarizer`` (sorted, one column each);
a name the fitted model does not know is an error, never silently dropped.

Example:
    >>> Y, classes = encode_names([["news", "sports"], ["tech"], []])
    >>> Y.toarray().tolist(), classes.tolist()
    ([[1, 1, 0], [0, 0, 1], [0, 0, 0]], ['news', 'sports', 'tech'])
    >>> encode_names([["tech"]], classes)[0].toarray().tolist()
    [[0, 0, 1]]
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError

__all__ = ["holds_names", "encode_names", "check_classes", "names_of", "is_single_label", "encode_single"]


def holds_names(Y: Any) -> bool:
    """Whether ``Y`` is a list of label lists whose labels are strings (its first label
    decides; :func:`encode_names` checks every one).

    Example:
        >>> holds_names([[], ["a"]]), holds_names([[0, 2]]), holds_names(sp.eye(2))
        (True, False, False)
    """
    if sp.issparse(Y) or isinstance(Y, (str, bytes)) or not isinstance(Y, (Sequence, np.ndarray)):
        return False
    if isinstance(Y, np.ndarray) and Y.ndim != 1:
        return False
    for row in Y:
        if isinstance(row, (str, bytes)):
            return True  # a bare name where a list belongs: encode_names says so
        try:
            first = next(iter(row), None)
        except TypeError:
            return False
        if first is not None:
            return isinstance(first, str)
    return False


def check_classes(classes: Any) -> np.ndarray:
    """``classes`` as an object array of distinct strings, at least one.

    Example:
        >>> check_classes(["a", "b"]).tolist()
        ['a', 'b']
    """
    if isinstance(classes, (str, bytes)) or not isinstance(classes, (Sequence, np.ndarray)):
        raise InputError(f"classes must be a list of label names, got {type(classes).__name__}")
    names = list(classes)
    if not names:
        raise InputError("classes holds no label name")
    bad = next((name for name in names if not isinstance(name, str)), None)
    if bad is not None:
        raise InputError(f"classes must be strings (label names), got {bad!r}")
    if len(set(names)) != len(names):
        seen: set[str] = set()
        twice = next(name for name in names if name in seen or seen.add(name))  # type: ignore[func-returns-value]
        raise InputError(f"classes names {twice!r} twice")
    return np.asarray(names, dtype=object)


def encode_names(Y: Sequence[Sequence[str]], classes: Any = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(n, L)`` CSR 0/1 of label-name lists, and the names of its columns.

    Args:
        Y: one list of label names per row (a row may be empty; a name once per row).
        classes: the columns' names (a fitted model's ``classes_``): every name of ``Y`` must
            be one of them; ``None``: the sorted names of ``Y``.

    Raises:
        InputError: a row that is not a list of strings, a name twice in a row, or a name
            outside ``classes`` (the row and the name).
    """
    rows = []
    for i, row in enumerate(Y):
        if isinstance(row, (str, bytes)) or not isinstance(row, (Sequence, np.ndarray, set, frozenset)):
            raise InputError(f"Y row {i}: expected a list of label names, got {row!r}")
        names = list(row)
        bad = next((name for name in names if not isinstance(name, str)), None)
        if bad is not None:
            raise InputError(f"Y row {i}: label names must be strings, got {bad!r}")
        if len(set(names)) != len(names):
            raise InputError(f"Y row {i}: a label name is given twice ({sorted(names)[:5]})")
        rows.append(names)
    if classes is not None:
        classes = check_classes(classes)
        known = set(classes.tolist())
        for i, names in enumerate(rows):
            unknown = next((name for name in names if name not in known), None)
            if unknown is not None:
                raise InputError(f"Y row {i}: label {unknown!r} is not one of the model's {len(known)} labels")
    elif not any(rows):
        raise InputError("Y has no label names")
    from sklearn.preprocessing import MultiLabelBinarizer

    binarizer = MultiLabelBinarizer(classes=None if classes is None else list(classes), sparse_output=True)
    matrix = sp.csr_matrix(binarizer.fit_transform(rows))
    return matrix, np.asarray(binarizer.classes_, dtype=object)


def names_of(classes: np.ndarray, Y: sp.spmatrix) -> list[list[Any]]:
    """The label names (``classes`` entries) of each row of a 0/1 matrix, in column order.

    Example:
        >>> names_of(np.array(["a", "b"], dtype=object), sp.csr_matrix([[0, 1], [1, 1]]))
        [['b'], ['a', 'b']]
    """
    Y = sp.csr_matrix(Y)
    Y.eliminate_zeros()
    Y.sort_indices()
    return [classes[Y.indices[start:stop]].tolist() for start, stop in zip(Y.indptr[:-1], Y.indptr[1:])]


def is_single_label(Y: Any) -> bool:
    """Whether ``Y`` is a 1-D target of one class per row (scikit-learn's binary or
    multiclass ``y``: a 1-D array, or a list of numbers or strings), not a list of label lists.

    Example:
        >>> is_single_label(np.array([0, 2, 1])), is_single_label(["a", "b"]), is_single_label([[0], [1]])
        (True, True, False)
    """
    if sp.issparse(Y) or isinstance(Y, (str, bytes)):
        return False
    if isinstance(Y, np.ndarray):
        if Y.ndim != 1:
            return False
        if Y.dtype != object:
            return True
    elif not isinstance(Y, Sequence):
        return False
    return len(Y) > 0 and all(isinstance(v, (str, numbers.Number, np.generic)) for v in Y)


def encode_single(y: Any, classes: Any = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """The ``(n, C)`` CSR one-hot matrix of a 1-D target and its classes (sorted, as
    scikit-learn's ``LabelEncoder``; or ``classes``, a fitted model's ``classes_``).

    Raises:
        InputError: a continuous or otherwise non-class target ("Unknown label type"), or a
            class outside ``classes``.

    Example:
        >>> Y, classes = encode_single(["b", "a", "b"])
        >>> Y.toarray().tolist(), classes.tolist()
        ([[0, 1], [1, 0], [0, 1]], ['a', 'b'])
    """
    from sklearn.utils.multiclass import type_of_target

    values = np.asarray(y)
    try:
        kind = type_of_target(values)
    except ValueError as exc:
        raise InputError(f"Unknown label type: {exc}") from None
    if kind not in ("binary", "multiclass"):
        raise InputError(f"Unknown label type: {kind} target; give one class per row (binary or multiclass), or "
                         "label lists / an (n, L) 0/1 matrix for multilabel data")
    if classes is None:
        classes = np.unique(values)
    index = {value: i for i, value in enumerate(np.asarray(classes).tolist())}
    codes = np.empty(len(values), np.int64)
    for row, value in enumerate(values.tolist()):
        if value not in index:
            raise InputError(f"y row {row}: class {value!r} is not one of the model's {len(index)} classes")
        codes[row] = index[value]
    ones = np.ones(len(values), np.int64)
    return sp.csr_matrix((ones, (np.arange(len(values)), codes)), shape=(len(values), len(index))), np.asarray(classes)

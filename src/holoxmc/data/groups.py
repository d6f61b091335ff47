"""Groups of rows that every validation split keeps on one side.

Real corpora are grouped: documents of one product family, source package, author or thread
share their wording. A validation split that puts one group on both sides scores the model
on near-copies of its training rows, so it overrates, and every choice made on it (which
model, the re-rank mix weight, the epoch, ``predict``'s cut) is made for data unlike the
test. ``fit(X, Y, groups=...)`` takes the groups; without them, :func:`near_duplicate_groups`
finds rows of near-identical features and groups those.

Example:
    >>> import scipy.sparse as sp, numpy as np
    >>> X = sp.csr_matrix(np.array([[1, 2, 0, 0], [1, 2, 0, 0.01], [0, 0, 3, 1]], np.float32))
    >>> near_duplicate_groups(X, 0.9).tolist()
    [0, 0, 1]
    >>> check_groups(["a", "b", "a"], 3).tolist()
    [0, 1, 0]
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from holoxmc.errors import InputError

__all__ = ["check_groups", "near_duplicate_groups", "GroupSummary", "summarise", "SIGNATURE_FEATURES", "MAX_POSTINGS"]

#: A row's signature: its largest weights, the features two near-duplicates must share.
SIGNATURE_FEATURES = 8
#: A signature feature held by more rows than this proposes no pairs (it is no evidence of a copy).
MAX_POSTINGS = 64
#: Rows whose candidate pairs are found at once (memory: this many rows' signature products).
_ROW_BLOCK = 4096
#: Candidate pairs whose exact cosine is computed at once (memory: two rows of X a pair).
_PAIR_BLOCK = 1 << 16


def check_groups(groups: Any, n_rows: int) -> np.ndarray:
    """``groups`` as ``(n_rows,)`` int64 codes (``0 ..``, in order of first appearance).

    Args:
        groups: one hashable value per row (strings, integers; ``None`` is a group of its own
            per row).

    Raises:
        InputError: not one value per row.

    Example:
        >>> check_groups([None, "x", None, "x"], 4).tolist()
        [0, 1, 2, 1]
    """
    values = list(groups) if not isinstance(groups, np.ndarray) else groups.tolist()
    if len(values) != n_rows or (isinstance(groups, np.ndarray) and groups.ndim != 1):
        raise InputError(f"groups must hold one value per row of X ({n_rows}), got {len(values)}")
    codes: dict[Any, int] = {}
    out = np.empty(n_rows, np.int64)
    for row, value in enumerate(values):
        key = ("row", row) if value is None else ("value", value)
        try:
            out[row] = codes.setdefault(key, len(codes))
        except TypeError:
            raise InputError(f"groups row {row}: {value!r} is not a hashable value") from None
    return out


def near_duplicate_groups(X: Any, cosine: float) -> np.ndarray:
    """Groups of rows whose features are near-identical: rows ``i``, ``j`` are linked when
    ``cos(x_i, x_j) >= cosine``, and a group is a connected set of links (codes ``0 ..`` in
    order of first row); the estimator's ``duplicate_cosine`` setting gives ``cosine``.

    Candidate pairs share half of their :data:`SIGNATURE_FEATURES` largest weights, counted
    over features held by at most :data:`MAX_POSTINGS` signatures (a common feature is no
    evidence of a copy, and would make the pairs quadratic); each candidate's exact cosine
    decides. Cost: at most ``n · SIGNATURE_FEATURES · MAX_POSTINGS`` candidate pairs, found
    :data:`_ROW_BLOCK` rows at a time (memory bounded whatever ``n``), no ``n × n`` matrix. A hand-written pass because no library here finds
    sparse near-duplicates without an ``n × n`` product (scikit-learn's radius neighbours
    are brute force on sparse rows).

    Shapes:
        X: ``(n, D)`` sparse or dense → ``(n,)`` int64.
    """
    X = sp.csr_matrix(X, dtype=np.float32)
    n = X.shape[0]
    if n < 2:
        return np.arange(n, dtype=np.int64)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(1)).ravel())
    X = sp.csr_matrix(sp.diags(np.where(norms > 0, 1.0 / np.where(norms > 0, norms, 1), 0.0)) @ X, dtype=np.float32)
    S = _signatures(X)
    ST = sp.csr_matrix(S.T)
    need = max(1, SIGNATURE_FEATURES // 2)
    sizes = np.diff(S.indptr)
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for lo in range(0, n, _ROW_BLOCK):  # at most _ROW_BLOCK · SIGNATURE_FEATURES · MAX_POSTINGS products a block
        shared = sp.coo_matrix(S[lo:lo + _ROW_BLOCK] @ ST)  # signature features two rows share
        rows, cols = shared.row + lo, shared.col
        keep = (rows < cols) & (shared.data >= np.minimum(need, np.minimum(sizes[rows], sizes[cols])))
        pairs.append(_linked(X, rows[keep], cols[keep], cosine))
    copies, originals = _exact_copies(X)  # copies whose features are all too common for a signature
    pairs.append((copies, originals))
    graph = sp.csr_matrix((np.ones(sum(len(a) for a, _ in pairs), bool),
                           (np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs]))),
                          shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    _, first = np.unique(labels, return_index=True)  # codes in order of each group's first row
    order = np.empty(len(first), np.int64)
    order[np.argsort(first)] = np.arange(len(first))
    return order[labels]


def _linked(X: sp.csr_matrix, rows: np.ndarray, cols: np.ndarray, cosine: float) -> tuple[np.ndarray, np.ndarray]:
    """The candidate pairs ``(rows[i], cols[i])`` of unit rows whose cosine reaches ``cosine``,
    computed :data:`_PAIR_BLOCK` pairs at a time."""
    linked = np.zeros(len(rows), bool)
    for lo in range(0, len(rows), _PAIR_BLOCK):
        a, b = rows[lo:lo + _PAIR_BLOCK], cols[lo:lo + _PAIR_BLOCK]
        linked[lo:lo + len(a)] = np.asarray(X[a].multiply(X[b]).sum(1)).ravel() >= cosine - 1e-6
    return rows[linked], cols[linked]


def _exact_copies(X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, their first identical row)`` for every row with features that repeats an
    earlier one exactly (rows without features are no copies: their cosine is 0)."""
    keys = np.array([hash((X.indices[a:b].tobytes(), X.data[a:b].tobytes()))
                     for a, b in zip(X.indptr[:-1], X.indptr[1:])], dtype=np.int64)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    original = first[inverse]
    repeats = np.flatnonzero((original != np.arange(len(keys))) & (np.diff(X.indptr) > 0))
    return repeats, original[repeats]


def _signatures(X: sp.csr_matrix) -> sp.csr_matrix:
    """``(n, D)`` 0/1: each row's :data:`SIGNATURE_FEATURES` largest weights (ties: the lower
    features), features held by more than :data:`MAX_POSTINGS` rows dropped."""
    n = X.shape[0]
    X.sort_indices()
    lengths = np.diff(X.indptr)
    rows = np.repeat(np.arange(n), lengths)
    # per row (unit rows: |v| <= 1), largest first; a stable sort leaves ties in feature order
    order = np.argsort(rows + 0.5 * (1.0 - np.minimum(np.abs(X.data.astype(np.float64)), 1.0)), kind="stable")
    rank = np.arange(len(order)) - np.repeat(X.indptr[:-1], lengths)
    chosen = order[rank < SIGNATURE_FEATURES]
    S = sp.csr_matrix((np.ones(len(chosen), np.float32), (rows[chosen], X.indices[chosen])), shape=X.shape)
    common = np.flatnonzero(np.bincount(S.indices, minlength=X.shape[1]) > MAX_POSTINGS)
    if len(common):
        S = sp.csr_matrix(S @ sp.diags(np.isin(np.arange(X.shape[1]), common, invert=True).astype(np.float32)))
        S.eliminate_zeros()
    return S


@dataclass(frozen=True)
class GroupSummary:
    """What a fit's validation splits kept apart: ``source`` (``"groups"``: given;
    ``"near-duplicates"``: found; ``"none"``), the group count, and the rows in groups of two
    or more."""

    source: str
    groups: int
    grouped_rows: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(codes: np.ndarray, source: str) -> GroupSummary:
    """The :class:`GroupSummary` of group ``codes``.

    Example:
        >>> summarise(np.array([0, 0, 1, 2]), "groups")
        GroupSummary(source='groups', groups=3, grouped_rows=2)
    """
    sizes = np.bincount(codes) if len(codes) else np.zeros(0, np.int64)
    return GroupSummary(source, int(len(sizes)), int(sizes[sizes > 1].sum()))

"""Balanced label clusters for the clustered retriever (:class:`~holoxmc.models.rerank.matcher.ClusterMatcher`):
recursive spherical 2-means on the labels' PIFA vectors, each split cut at the median so both
halves hold the same number of labels (±1), as PECOS's hierarchical clustering does. Every
level costs a few sparse matrix-vector products over the label vectors, so clustering 670K
labels takes seconds, and the clusters' sizes differ by at most one label.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> P = sp.csr_matrix(np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]], np.float32))
    >>> balanced_clusters(P, 2, seed=0).tolist() in ([0, 0, 1, 1], [1, 1, 0, 0])
    True
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from holoxmc.errors import InputError

__all__ = ["balanced_clusters", "default_clusters", "LABELS_PER_CLUSTER"]

#: Labels per cluster the default cluster count aims at (PECOS's leaf size is 100; one level of
#: small clusters and a wide beam kept more of the labels on the validation rows,
#: docs/results/rerank.md).
LABELS_PER_CLUSTER = 25


def default_clusters(n_labels: int) -> int:
    """The power of two nearest ``n_labels / LABELS_PER_CLUSTER`` (at least 1, at most ``n_labels``).

    Example:
        >>> default_clusters(10_000), default_clusters(100_000), default_clusters(20)
        (512, 4096, 1)
    """
    target = max(1.0, n_labels / LABELS_PER_CLUSTER)
    return min(max(1, n_labels), 2 ** round(math.log2(target)))


def balanced_clusters(P: sp.csr_matrix, n_clusters: int, *, seed: int = 0, iterations: int = 8) -> np.ndarray:
    """``(L,)`` cluster of each row of ``P`` (unit-length label vectors; zero rows allowed).

    Args:
        P: ``(L, D)`` CSR label vectors.
        n_clusters: clusters wanted, in ``1..L``; splits go level by level, so the count is
            reached by splitting only the largest groups of the last level.
        seed: the initial centres of every split.
        iterations: 2-means passes per split.

    Returns:
        int64 cluster ids in ``0..n_clusters-1``; cluster sizes differ by at most one label
        when ``n_clusters`` is a power of two, by at most a factor two otherwise.

    Raises:
        InputError: ``n_clusters`` outside ``1..L``.
    """
    n_labels = P.shape[0]
    if not 1 <= n_clusters <= n_labels:
        raise InputError(f"clusters must be in 1..{n_labels} (the label count), not {n_clusters}")
    P = sp.csr_matrix(P, dtype=np.float32)
    rng = np.random.default_rng(seed)
    groups = [np.arange(n_labels)]
    while len(groups) < n_clusters:
        groups.sort(key=len, reverse=True)  # split the largest first
        splits = min(len(groups), n_clusters - len(groups))
        halves = [half for group in groups[:splits] for half in _split(P, group, rng, iterations)]
        groups = halves + groups[splits:]
    assignment = np.empty(n_labels, np.int64)
    for k, group in enumerate(groups):
        assignment[group] = k
    return assignment


def _split(P: sp.csr_matrix, group: np.ndarray, rng: np.random.Generator,
           iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """Two halves of ``group`` by balanced spherical 2-means (sizes differ by at most one)."""
    rows = P[group]
    half = len(group) // 2
    first, second = rng.choice(len(group), size=2, replace=False)
    centres = np.vstack([rows[first].toarray(), rows[second].toarray()]).astype(np.float32)
    left = np.arange(half)
    for _ in range(iterations):
        gap = np.asarray(rows @ (centres[0] - centres[1])).ravel()
        order = np.argsort(-gap, kind="stable")
        new_left = np.sort(order[:half])
        if np.array_equal(new_left, left):
            break
        left = new_left
        mask = np.zeros(len(group), bool)
        mask[left] = True
        sums = np.vstack([np.asarray(rows[mask].sum(axis=0)), np.asarray(rows[~mask].sum(axis=0))])
        centres = normalize(sums, norm="l2", axis=1).astype(np.float32)
    mask = np.zeros(len(group), bool)
    mask[left] = True
    return group[mask], group[~mask]

"""A clustered label retriever (the matcher of PECOS XR-Linear, one level): labels are grouped
in clusters, each cluster has a sparse linear scorer, and a row's candidate labels are the
members of its ``beam`` best clusters, scored there only — so scoring costs ``n x (C + beam x
cluster size)``, not ``n x L``.

A cluster's score for a unit row ``x`` is ``x · u_k + sigmoid(x · v_k + b_k)`` (``u_k`` the
cluster's PIFA centroid: the L2-normalised mean row of the rows holding one of its labels;
``v_k, b_k`` its linear scorer). The beam is taken among the ``2 x beam`` clusters of best
``x · u_k`` (the clusters the scorers were trained to tell apart). The retriever score of a
candidate label ``l`` of cluster ``k`` is ``x · c_l + cluster_weight * score_k(x)`` (``c_l``
its PIFA centroid); labels outside the beam are not candidates. See :class:`ClusterMatcher`.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> eye = sp.csr_matrix(np.eye(4, dtype=np.float32))
    >>> two = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1]], np.float32))
    >>> m = ClusterMatcher(np.array([0, 0, 1, 1]), two.T, two, np.zeros(2, np.float32), 1, 1.0)
    >>> m.candidates(eye[[2]], eye)[0].tolist()
    [[2, 3]]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["ClusterMatcher"]


class ClusterMatcher:
    """Labels in ``C`` clusters, a sparse linear scorer per cluster, and a beam over clusters.

    Args:
        assignment: ``(L,)`` cluster of each label, in ``0..C-1`` (every cluster non-empty).
        centroids: ``(C, D)`` CSR cluster centroids.
        weights: ``(D, C)`` sparse per-cluster weights.
        bias: ``(C,)`` per-cluster biases.
        beam: clusters whose labels a row takes as candidates.
        cluster_weight: weight of the cluster score in a label's retriever score (``>= 0``).

    Raises:
        InputError: sizes that disagree, an empty cluster or settings out of range.
    """

    def __init__(self, assignment: np.ndarray, centroids: sp.spmatrix, weights: sp.spmatrix, bias: np.ndarray,
                 beam: int, cluster_weight: float) -> None:
        assignment = np.asarray(assignment)
        n_clusters = weights.shape[1]
        if (assignment.ndim != 1 or np.shape(bias) != (n_clusters,) or not len(assignment)
                or centroids.shape != (n_clusters, weights.shape[0])
                or not np.issubdtype(assignment.dtype, np.integer)):
            raise InputError("the matcher's assignment, weights and bias disagree on the sizes")
        if assignment.min() < 0 or assignment.max() >= n_clusters:
            raise InputError(f"the matcher assigns a label to a cluster outside 0..{n_clusters - 1}")
        sizes = np.bincount(assignment, minlength=n_clusters)
        if (sizes == 0).any():
            raise InputError(f"the matcher's cluster {int(np.argmin(sizes))} holds no label")
        if sizes.max() > 2 * sizes.min() + 1:  # a row's candidates number largest cluster x beam
            raise InputError(f"the matcher's clusters are not balanced (sizes {int(sizes.min())} to "
                             f"{int(sizes.max())}); its clusters are balanced splits")
        if not beam >= 1 or not (np.isfinite(cluster_weight) and cluster_weight >= 0):
            raise InputError(f"the matcher needs beam >= 1 and cluster_weight >= 0, not {beam}, {cluster_weight}")
        self.assignment = assignment.astype(np.int64)
        self.n_labels, self.n_clusters = len(assignment), n_clusters
        self.weights = sp.csr_matrix(weights, dtype=np.float32)
        self.centroids_t = sp.csr_matrix(centroids.T, dtype=np.float32)
        self.bias = np.asarray(bias, np.float32)
        self.cluster_weight = float(cluster_weight)
        #: labels sorted by cluster; cluster ``k`` holds ``order[offsets[k]:offsets[k + 1]]``
        self.order = np.argsort(self.assignment, kind="stable")
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        # enough clusters that the beam always holds ``beam x smallest cluster`` candidates
        self.beam = min(int(beam), n_clusters)
        self.width = int(sizes.max()) * self.beam

    def min_beam_for(self, shortlist: int) -> int:
        """The smallest beam whose candidates always number ``shortlist`` or more."""
        smallest = int(np.diff(self.offsets).min())
        return min(self.n_clusters, max(self.beam, -(-shortlist // smallest)))

    def with_beam(self, beam: int) -> "ClusterMatcher":
        """This matcher with another beam (the arrays shared, not copied)."""
        other = object.__new__(ClusterMatcher)
        other.__dict__.update(self.__dict__)
        other.beam = min(int(beam), self.n_clusters)
        other.width = int(np.diff(self.offsets).max()) * other.beam
        return other

    def cluster_scores(self, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """``(cluster scores (n, C), centroid similarities (n, C))`` of unit rows ``X`` (one batch)."""
        similar = np.asarray((X @ self.centroids_t).toarray(), dtype=np.float32)
        margins = np.asarray((X @ self.weights).toarray(), dtype=np.float32) + self.bias
        return similar + (1.0 / (1.0 + np.exp(-margins))).astype(np.float32), similar

    def top_clusters(self, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """``(clusters (n, beam), all cluster scores (n, C))``: each row's beam, the best
        ``beam`` by score among the ``2 x beam`` of best centroid similarity."""
        from holoxmc.sparse import top_columns

        scores, similar = self.cluster_scores(X)
        if self.beam >= self.n_clusters:
            return np.tile(np.arange(self.n_clusters), (X.shape[0], 1)), scores
        near = top_columns(similar, min(self.n_clusters, 2 * self.beam))
        best = top_columns(np.take_along_axis(scores, near, axis=1), self.beam)
        return np.take_along_axis(near, best, axis=1), scores

    def label_scores(self, X: sp.csr_matrix, centroids_t: sp.csr_matrix) -> np.ndarray:
        """``(n, L)`` retriever score of every label, the beam ignored (the dense reference)."""
        S = np.asarray((X @ centroids_t).toarray(), dtype=np.float32)
        return S + self.cluster_weight * self.cluster_scores(X)[0][:, self.assignment]

    def candidates(self, X: sp.csr_matrix, sorted_centroids: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """``(labels (n, width), retriever scores (n, width))``: the members of each row's
        ``beam`` best clusters and their scores; slots past a smaller cluster hold label ``0``
        and score ``-inf``.

        Args:
            X: ``(n, D)`` unit rows (one batch).
            sorted_centroids: ``(L, D)`` CSR label centroids in :attr:`order`.
        """
        n, size = X.shape[0], int(np.diff(self.offsets).max())
        top, clusters = self.top_clusters(X)
        labels = np.zeros((n, self.width), np.int64)
        scores = np.full((n, self.width), -np.inf, np.float32)
        rows_of, slot_of = np.nonzero(np.ones_like(top, dtype=bool))
        picked = top[rows_of, slot_of]
        order = np.argsort(picked, kind="stable")
        bounds = np.searchsorted(picked[order], np.arange(self.n_clusters + 1))
        for k in np.unique(picked):
            chosen = order[bounds[k]:bounds[k + 1]]
            rows, slots = rows_of[chosen], slot_of[chosen]
            a, b = self.offsets[k], self.offsets[k + 1]
            block = np.asarray((X[rows] @ sorted_centroids[a:b].T).toarray(), dtype=np.float32)
            columns = slots[:, None] * size + np.arange(b - a)
            labels[rows[:, None], columns] = self.order[a:b]
            scores[rows[:, None], columns] = block + self.cluster_weight * clusters[rows, k][:, None]
        return labels, scores

    # ------------------------------------------------------------------ storage
    def tensors(self) -> dict[str, Tensor]:
        """Every array of the matcher (names without a prefix; imports torch)."""
        import torch

        from holoxmc.sparse import csr_tensors

        return {"assignment": torch.from_numpy(self.assignment.copy()), **csr_tensors("weights", self.weights),
                **csr_tensors("centroids", sp.csr_matrix(self.centroids_t.T)),
                "bias": torch.from_numpy(self.bias.copy()),
                "settings": torch.tensor([float(self.n_clusters), float(self.beam), self.cluster_weight],
                                         dtype=torch.float64)}

    @classmethod
    def from_tensors(cls, tensors: dict[str, Any], n_features: int, n_labels: int) -> "ClusterMatcher":
        """The matcher :meth:`tensors` wrote (tensors or NumPy arrays), every size and value checked.

        Raises:
            InputError: a missing tensor, or one that does not fit ``(n_features, n_labels)``.
        """
        from holoxmc.sparse import csr_from_tensors

        for name in ("assignment", "bias", "settings"):
            if name not in tensors:
                raise InputError(f"missing tensor 'matcher.{name}'")
        settings = np.asarray(tensors["settings"])
        if settings.shape != (3,) or not np.all(np.isfinite(settings)):
            raise InputError("the stored matcher settings are not three finite numbers")
        n_clusters, beam, cluster_weight = settings.tolist()
        if not (n_clusters == int(n_clusters) and 1 <= n_clusters <= n_labels and beam == int(beam)):
            raise InputError(f"the stored matcher's {n_clusters} clusters do not fit {n_labels} labels")
        weights = csr_from_tensors(tensors, "weights", (n_features, int(n_clusters)))
        centroids = csr_from_tensors(tensors, "centroids", (int(n_clusters), n_features))
        assignment, bias = np.asarray(tensors["assignment"]), np.asarray(tensors["bias"])
        if assignment.shape != (n_labels,) or not np.all(np.isfinite(bias)):
            raise InputError(f"the stored matcher assignment does not fit {n_labels} labels")
        return cls(assignment, centroids, weights, bias, int(beam), float(cluster_weight))

    def parameter_count(self) -> int:
        """Stored weights, biases and assignments."""
        return int(self.weights.nnz) + int(self.centroids_t.nnz) + self.n_clusters + self.n_labels

"""Shortlist and re-rank: a retriever proposes labels, per-label sparse linear scorers
re-score them, and the ranking mixes both scores (the recipe of SLICE / Astec / DeepXML).

Rows are L2-normalised. A row's retriever score of label ``l`` is ``x · c_l`` (``c_l`` the
L2-normalised mean feature row of ``l``'s training positives, PIFA), plus, when the model
holds them, the similarity-weighted label vote of the row's nearest training rows and a
per-label constant; its re-rank score is ``sigmoid(x · w_l + b_l)``; the final score is
``alpha * rerank + (1 - alpha) * retriever`` on the ``shortlist`` best labels by retriever
score (labels off the shortlist are not ranked). With a
:class:`~holoxmc.models.rerank.matcher.ClusterMatcher`, only the labels of a row's best label
clusters are scored by the retriever (no ``rows x L`` product). See :class:`RerankModel`.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> C = sp.csr_matrix(np.eye(3, dtype=np.float32))
    >>> m = RerankModel(C, sp.csr_matrix(np.eye(3, dtype=np.float32)), np.zeros(3, np.float32), 2, 0.5)
    >>> m.predict_topk(sp.csr_matrix(np.array([[0, 1, 0]], np.float32)), 1)[0].tolist()
    [[1]]
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError
from holoxmc.sparse import (cost_chunks, csr_from_tensors, csr_tensors, default_threads, in_threads, index_blocks,
                            l2_rows, top_columns)
from holoxmc.models.rerank.matcher import ClusterMatcher

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["RerankModel", "csr_from_tensors", "csr_tensors", "l2_rows", "top_columns"]


#: Entries of the dense ``(rows, labels)`` / ``(rows, neighbours)`` blocks one scoring batch
#: holds at most (float32: 64 MiB); batches of rows are cut to fit.
BLOCK_ENTRIES = 1 << 24
#: Postings a chunk of rows of the sparse PIFA shortlist reads at most (the sum over its rows'
#: features of their postings): the unit of work handed to a thread. (With scipy's products,
#: before the kernel, it also bounded a chunk's ``rows x L`` product, 32 MiB.)
SPARSE_CHUNK_ENTRIES = 1 << 22


#: Labels per column block of the PIFA index on the sparse shortlist path. The shortlist kernel
#: (:func:`~holoxmc.models.rerank.kernels.product_top`) accumulates a row's scores in an array
#: one block wide: over all of 670K labels (2.7 MB) a row's tens of thousands of scattered
#: updates miss the core's cache more often than over a block of 65,536 (256 KiB). The width
#: was measured with scipy's products, before the kernel: 0.63 against 0.70 s per 1000 rows at
#: L = 670K on two threads (docs/results/rerank.md, "Index blocks and threads").
INDEX_BLOCK_LABELS = 1 << 16


#: Label count up to which a shortlist and its margins come from dense ``rows x L`` products
#: (faster there). Past it, the PIFA shortlist is taken from the sparse product's stored
#: entries and the margins are row-by-row dot products, costs that do not grow with L
#: (docs/results/rerank.md, "Margins" and "Pruned postings").
DENSE_UP_TO = 30_000
#: Dense ``rows x L`` products of at least ``entries`` entries, at ``labels`` labels or more
#: (the retriever's scores, every label's margins), are written by the compiled loop
#: (:func:`~holoxmc.models.rerank.kernels.dense_product`: scipy's sums, without scipy's CSR
#: result and its copy into a dense one; ``benchmarks/dense_cutoff.py --compare products``:
#: 0.62x the default fit at L = 10,000, nothing gained at L <= 1,000); other products by
#: scipy, where the compiled loop's first call in a process (about 0.6 s) costs more than it saves.
COMPILED_PRODUCT = {"entries": 1 << 20, "labels": 4_096}


class RerankModel:
    """A retriever's shortlist, re-scored by per-label sparse linear scorers.

    The retriever score of label ``l`` for a unit-length row ``x`` is
    ``x · c_l + knn_weight * v_l(x) + prior_l``: ``c_l`` the label's PIFA centroid, ``v_l(x)``
    the similarity-weighted vote of the ``knn`` training rows nearest ``x`` by cosine (the
    summed cosine of the neighbours holding ``l`` over the summed cosine of all ``knn``), and
    ``prior_l`` a per-label constant (zero unless given). The ``shortlist`` labels of best
    retriever score are re-scored by ``sigmoid(x · w_l + b_l)``, and the final score is
    ``alpha * rerank + (1 - alpha) * retriever``.

    Args:
        centroids: ``(L, D)`` CSR label centroids.
        weights: ``(D, L)`` sparse per-label weights.
        bias: ``(L,)`` per-label biases.
        shortlist: labels the retriever proposes per row.
        alpha: weight of the re-rank score in the mix, in ``[0, 1]``.
        neighbours, neighbour_labels: ``(N, D)`` unit-length training rows and their ``(N, L)``
            labels (the kNN retriever; ``None`` without it).
        knn, knn_weight: neighbours per row and the weight of their vote (``0``: no kNN).
        prior: ``(L,)`` per-label retriever constants (``None``: zeros).
        matcher: the clustered retriever (``None``: every label is scored by PIFA); with it,
            a row's candidates are the labels of its best clusters and a label's retriever
            score adds its cluster's score (:mod:`holoxmc.models.rerank.matcher`); no kNN with it.
        always: labels on every row's shortlist besides the retriever's own (their retriever
            score as any label's), e.g. the most frequent training labels, whose scorers then
            train against every row (:func:`~holoxmc.models.rerank.fit.training_shortlists`);
            ``None``: none. PIFA without kNN only.

    Attributes:
        fit_seconds: wall seconds of each stage of the fit that made it
            (:func:`~holoxmc.models.rerank.fit.fit_rerank`: ``prepare``, ``pifa_index``,
            ``retriever``, ``training_shortlists``, ``memberships``, ``label_fits``, ``alpha``);
            empty for a model built otherwise or loaded (not saved).

    Raises:
        InputError: arrays whose sizes disagree, or settings out of range.
    """

    #: The rows each label trained on, left by a fit under
    #: :data:`holoxmc.models.rerank.fit.KEEP_FIT_ROWS` (never saved).
    fit_rows: sp.csc_matrix | None = None

    def __init__(self, centroids: sp.csr_matrix, weights: sp.spmatrix, bias: np.ndarray, shortlist: int,
                 alpha: float, *, neighbours: sp.spmatrix | None = None, neighbour_labels: sp.spmatrix | None = None,
                 knn: int = 0, knn_weight: float = 0.0, prior: np.ndarray | None = None,
                 matcher: ClusterMatcher | None = None, always: np.ndarray | None = None) -> None:
        self.n_labels, self.n_features = centroids.shape
        self.fit_seconds: dict[str, float] = {}
        if not 1 <= shortlist or not 0.0 <= alpha <= 1.0 or knn < 0 or not np.isfinite(knn_weight) or knn_weight < 0:
            raise InputError(f"rerank needs shortlist >= 1, alpha in [0, 1], knn >= 0 and knn_weight >= 0, "
                             f"not {shortlist}, {alpha}, {knn}, {knn_weight}")
        if knn and (neighbours is None or neighbour_labels is None or neighbours.shape[1] != self.n_features
                    or neighbour_labels.shape != (neighbours.shape[0], self.n_labels)):
            raise InputError("the kNN retriever needs (N, D) neighbour rows and their (N, L) labels")
        if prior is not None and np.shape(prior) != (self.n_labels,):
            raise InputError(f"the label prior must hold {self.n_labels} values")
        if matcher is not None and (matcher.n_labels != self.n_labels or matcher.weights.shape[0] != self.n_features
                                    or knn):
            raise InputError("the clustered retriever must cover the model's labels and features, without kNN")
        self.always = np.zeros(0, np.int64) if always is None else np.asarray(always, np.int64)
        if self.always.size and (self.always.ndim != 1 or self.always.min() < 0 or self.always.max() >= self.n_labels
                                 or len(np.unique(self.always)) != self.always.size or knn or matcher is not None):
            raise InputError("the labels on every shortlist must be distinct labels of the model, "
                             "with the PIFA retriever and no kNN")
        # (D, L) CSR: the products below are CSR @ CSR, with no conversion per batch
        centroids_t = sp.csr_matrix(centroids.T, dtype=np.float32)
        self._always_index = sp.csr_matrix(centroids_t[:, self.always]) if self.always.size else None
        self.shortlist = min(int(shortlist), self.n_labels)
        self.alpha = float(alpha)
        self.knn, self.knn_weight = (int(knn), float(knn_weight)) if knn else (0, 0.0)
        self.neighbours_t = sp.csr_matrix(neighbours.T, dtype=np.float32) if self.knn and neighbours is not None \
            else None
        self.neighbour_labels = sp.csr_matrix(neighbour_labels, dtype=np.float32) \
            if self.knn and neighbour_labels is not None else None
        self.prior = np.zeros(self.n_labels, np.float32) if prior is None else np.asarray(prior, np.float32)
        # the sparse PIFA shortlist's fixed conditions (the prior and each batch are checked per call)
        self._sparse_retrieval = (matcher is None and not self.knn and self.n_labels > DENSE_UP_TO
                                  and not (centroids_t.data < 0).any())
        # the (D, L) index in column blocks of INDEX_BLOCK_LABELS labels on the sparse path, whole otherwise
        self._index = index_blocks(centroids_t, INDEX_BLOCK_LABELS if self._sparse_retrieval else self.n_labels)
        del centroids_t
        self._postings = sum(np.diff(block.indptr) for block in self._index)  # labels a feature scores
        self._set_scorers(weights, bias)
        self.matcher = None if matcher is None else matcher.with_beam(matcher.min_beam_for(self.shortlist))
        self.sorted_centroids = None if matcher is None else sp.csr_matrix(centroids, dtype=np.float32)[matcher.order]

    def _set_scorers(self, weights: sp.spmatrix, bias: np.ndarray) -> None:
        if weights.shape != (self.n_features, self.n_labels) or np.shape(bias) != (self.n_labels,):
            raise InputError("rerank weights, bias and centroids disagree on the sizes")
        self.bias = np.asarray(bias, dtype=np.float32)
        # (L, D) CSR: a shortlist's margins are row-by-row sparse dot products; the (D, L) CSR
        # of the dense products is kept only where those are used (L <= DENSE_UP_TO)
        self.weight_rows = sp.csr_matrix(weights.T, dtype=np.float32)
        self._weights = sp.csr_matrix(weights, dtype=np.float32) if self.n_labels <= DENSE_UP_TO else None

    def with_scorers(self, weights: sp.spmatrix, bias: np.ndarray, alpha: float) -> "RerankModel":
        """A model with this one's retriever (its arrays shared, not copied) and the given
        ``(D, L)`` per-label weights, ``(L,)`` biases and mix weight.

        Raises:
            InputError: weights or biases whose sizes are not this model's, or ``alpha`` outside ``[0, 1]``.
        """
        if not 0.0 <= alpha <= 1.0:
            raise InputError(f"rerank needs alpha in [0, 1], not {alpha}")
        other = copy.copy(self)
        other.prior = self.prior.copy()  # a per-model array (the index, neighbours and matcher are shared)
        other._set_scorers(weights, bias)
        other.alpha = float(alpha)
        return other

    @property
    def centroids_t(self) -> sp.csr_matrix:
        """The ``(D, L)`` CSR PIFA index (past :data:`INDEX_BLOCK_LABELS` labels on the sparse
        path, a copy joined from its column blocks)."""
        return self._index[0] if len(self._index) == 1 else sp.csr_matrix(sp.hstack(self._index, format="csr"))

    def index_product(self, X: sp.csr_matrix) -> sp.csr_matrix:
        """``X @ centroids_t`` as CSR (``(n, L)``, one batch), computed block by block."""
        return _block_product(X, self._index)

    @property
    def weights(self) -> sp.spmatrix:
        """``(D, L)`` per-label weights (CSR up to :data:`DENSE_UP_TO` labels, a CSC view past it)."""
        return self._weights if self._weights is not None else self.weight_rows.T

    # ------------------------------------------------------------------ scoring
    def batch_rows(self) -> int:
        """Rows per shortlist batch: dense blocks of at most :data:`BLOCK_ENTRIES` entries
        (``rows x L`` with the PIFA retriever, ``rows x (clusters + candidates)`` with the
        clustered one); 1024 where the PIFA shortlist is sparse (its chunks are cut by cost)."""
        if self._sparse_retrieval and not self.prior.any():
            return 1024
        if self.matcher is not None:
            return max(1, min(1024, BLOCK_ENTRIES // max(self.matcher.n_clusters + self.matcher.width, 1)))
        return self.dense_batch_rows()

    def dense_batch_rows(self) -> int:
        """Rows per batch of the dense ``rows x L`` scoring (:meth:`full_scores`)."""
        width = max(self.n_labels, self.neighbours_t.shape[1] if self.neighbours_t is not None else 0, 1)
        return max(1, min(1024, BLOCK_ENTRIES // width))

    def knn_votes(self, X: sp.csr_matrix, exclude: np.ndarray | None = None) -> sp.csr_matrix:
        """``(n, L)`` similarity-weighted label votes of each row's ``knn`` nearest training
        rows (unit rows ``X``, one batch); ``exclude[i]`` is a neighbour row that row ``i`` may
        not pick (itself, when scoring training rows)."""
        assert self.neighbours_t is not None and self.neighbour_labels is not None
        S = np.asarray((X @ self.neighbours_t).toarray(), dtype=np.float32)
        if exclude is not None:
            S[np.arange(S.shape[0]), exclude] = -np.inf
        near = top_columns(S, self.knn)
        sims = np.maximum(np.take_along_axis(S, near, axis=1), 0.0)
        total = sims.sum(axis=1, keepdims=True)
        sims = np.divide(sims, total, out=np.zeros_like(sims), where=total > 0)
        A = sp.csr_matrix((sims.ravel(), near.ravel(), np.arange(0, near.size + 1, near.shape[1])),
                          shape=(S.shape[0], S.shape[1]))
        return sp.csr_matrix(A @ self.neighbour_labels)

    def retriever_scores(self, X: sp.csr_matrix, exclude: np.ndarray | None = None) -> np.ndarray:
        """``(n, L)`` retriever score of every label (unit rows ``X``, one batch; with the
        clustered retriever, labels outside the beam scored by the same formula)."""
        if self.matcher is not None:
            return self.matcher.label_scores(X, self.centroids_t) + self.prior
        S = self._dense_product(X, self._index)
        S += self.prior
        if self.knn:
            votes = self.knn_votes(X, exclude).tocoo()
            np.add.at(S, (votes.row, votes.col), self.knn_weight * votes.data)
        return S

    def shortlists(self, X: sp.csr_matrix, exclude: np.ndarray | None = None, *,
                   threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(labels (n, s), retriever scores (n, s))`` of unit rows ``X`` (one batch), best
        first; the sparse PIFA shortlist's chunks of rows run on ``threads`` threads
        (``None``: :func:`~holoxmc.sparse.default_threads`, torch's thread count where torch is
        loaded, without importing it), the other paths on one. Each thread holds one
        accumulator an index block wide (256 KiB) and its chunk's ``(rows, s)`` results."""
        if self.matcher is not None:
            assert self.sorted_centroids is not None
            candidates, S = self.matcher.candidates(X, self.sorted_centroids)
            S += np.where(np.isfinite(S), self.prior[candidates], 0.0)
            best = top_columns(S, self.shortlist)
            return np.take_along_axis(candidates, best, axis=1), np.take_along_axis(S, best, axis=1)
        if self._sparse_retrieval and not self.prior.any() and not (X.data < 0).any():
            return self._sparse_shortlists(X, default_threads() if threads is None else threads)
        step = self.dense_batch_rows()
        if X.shape[0] > step:  # a batch cut for the sparse path: dense blocks of at most BLOCK_ENTRIES
            parts = [self.shortlists(X[start:start + step], None if exclude is None else exclude[start:start + step])
                     for start in range(0, X.shape[0], step)]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        S = self.retriever_scores(X, exclude)
        labels = top_columns(S, self.shortlist).astype(np.int64)
        return labels, np.take_along_axis(S, labels, axis=1)

    def _sparse_shortlists(self, X: sp.csr_matrix, threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """The PIFA shortlists from the nonzero entries of ``X @ centroids``, never formed
        (:func:`~holoxmc.models.rerank.kernels.product_top`), in chunks of rows whose postings
        sum to at most :data:`SPARSE_CHUNK_ENTRIES`: the same labels and scores as the dense path, up to ties, when
        no feature or centroid value is negative (unstored labels score 0, the least) and the
        prior is zero."""
        n = X.shape[0]
        labels, scores = np.empty((n, self.shortlist), np.int64), np.empty((n, self.shortlist), np.float32)
        cost = np.bincount(np.repeat(np.arange(n), np.diff(X.indptr)), weights=self._postings[X.indices], minlength=n)

        from holoxmc.models.rerank.kernels import product_top  # numba: loaded where the sparse path first runs
        offsets = _block_offsets(self._index)

        def chunk(span: tuple[int, int]) -> None:
            start, stop = span
            labels[start:stop], scores[start:stop] = product_top(X[start:stop], self._index, offsets, self.shortlist)
        in_threads(chunk, list(cost_chunks(cost, SPARSE_CHUNK_ENTRIES)), threads)
        return labels, scores

    def margins(self, X: sp.csr_matrix, labels: np.ndarray, *, threads: int | None = None) -> np.ndarray:
        """``(n, s)`` margins ``x · w_l + b_l`` of the given labels of each row only. Up to
        :data:`DENSE_UP_TO` labels, a dense ``rows x L`` product then a gather; past it, each
        row's dot products with its labels' weight rows (:func:`~holoxmc.models.rerank.kernels.label_margins`,
        a cost that does not grow with L), chunks of rows on ``threads`` threads (``None``:
        :func:`~holoxmc.sparse.default_threads`)."""
        n, s = labels.shape
        if self.n_labels <= DENSE_UP_TO:
            return np.take_along_axis(self._dense_margins(X), labels, axis=1)
        from holoxmc.models.rerank.kernels import label_margins  # numba: loaded where this path first runs
        out = np.empty((n, s), np.float32)
        cost = np.diff(self.weight_rows.indptr)[labels].sum(axis=1) + np.diff(X.indptr)

        def chunk(span: tuple[int, int]) -> None:
            start, stop = span
            out[start:stop] = label_margins(X[start:stop], self.weight_rows, labels[start:stop])
        threads = max(1, default_threads() if threads is None else threads)
        # about four chunks a thread (so a batch spreads over them), none over BLOCK_ENTRIES weights
        limit = min(BLOCK_ENTRIES, max(1 << 16, int(cost.sum()) // (4 * threads) + 1))
        in_threads(chunk, list(cost_chunks(cost, limit)), threads)
        return out + self.bias[labels]

    def rescore(self, X: sp.csr_matrix, labels: np.ndarray) -> np.ndarray:
        """``(n, s)`` re-rank scores ``sigmoid(x · w_l + b_l)`` of the given labels of each row."""
        return (1.0 / (1.0 + np.exp(-self.margins(X, labels)))).astype(np.float32)

    def mix(self, rerank: np.ndarray, retriever: np.ndarray) -> np.ndarray:
        """The final score of re-rank and retriever scores."""
        return (self.alpha * rerank + (1.0 - self.alpha) * retriever).astype(np.float32)

    def full_scores(self, X: Any) -> np.ndarray:
        """``(n, L)`` mixed scores of every label, computed densely (no shortlist): the
        reference the shortlist path must agree with on the labels it scores."""
        X = l2_rows(X)
        step = self.dense_batch_rows()  # bounds the kNN and retriever blocks of one batch
        parts = [self._full_batch(X[start:start + step]) for start in range(0, X.shape[0], step)]
        return np.concatenate(parts) if parts else np.zeros((0, self.n_labels), dtype=np.float32)

    def _full_batch(self, X: sp.csr_matrix) -> np.ndarray:
        retriever = self.retriever_scores(X)
        return self.mix(1.0 / (1.0 + np.exp(-self._dense_margins(X))), retriever)

    def _dense_margins(self, X: sp.csr_matrix) -> np.ndarray:
        """``(n, L)`` margins of every label (one batch), from whichever weight orientation is kept."""
        if self._weights is None:
            return np.asarray((self.weight_rows @ X.T).T.toarray(), dtype=np.float32) + self.bias
        return self._dense_product(X, [self._weights]) + self.bias

    def _dense_product(self, X: sp.csr_matrix, blocks: list[sp.csr_matrix]) -> np.ndarray:
        """``X @`` the ``(D, L)`` matrix of column ``blocks`` as a dense float32 array: the
        compiled loop where :data:`COMPILED_PRODUCT` says, scipy elsewhere (the same float32 sums)."""
        X = sp.csr_matrix(X, dtype=np.float32)
        if self.n_labels < COMPILED_PRODUCT["labels"] or X.shape[0] * self.n_labels < COMPILED_PRODUCT["entries"]:
            return np.asarray(_block_product(X, blocks).toarray(), dtype=np.float32)
        from holoxmc.models.rerank.kernels import dense_product  # numba: loaded where a large product first runs
        return dense_product(X, blocks, _block_offsets(blocks), self.n_labels)

    def scored_shortlists(self, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(labels, re-rank scores, retriever scores)``, each ``(n, s)``, of each row's
        shortlist (unit rows ``X``, one batch), the :attr:`always` labels appended (``s + f``
        wide): one already on a row's list is appended as ``-1`` with scores 0, to be ranked
        last by whoever mixes them (:meth:`shortlist_scores`, the fit's choice of ``alpha``)."""
        labels, retriever = self.shortlists(X)
        if self.always.size:
            assert self._always_index is not None
            extra = np.repeat(self.always[None, :], X.shape[0], axis=0)
            extra_scores = np.asarray((X @ self._always_index).toarray(), np.float32) + self.prior[self.always]
            listed = (extra[:, :, None] == labels[:, None, :]).any(axis=2)
            extra[listed], extra_scores[listed] = -1, 0.0
            labels, retriever = np.hstack([labels, extra]), np.hstack([retriever, extra_scores])
        return labels, self.rescore(X, np.maximum(labels, 0)), retriever

    def shortlist_scores(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(labels (n, s), mixed scores (n, s))`` of each row's shortlist (one batch; with
        :attr:`always` labels, ``s + f`` wide, a repeated label ``-1`` with score ``-inf``)."""
        labels, rerank, retriever = self.scored_shortlists(l2_rows(X))
        mixed = self.mix(rerank, retriever)
        mixed[labels < 0] = -np.inf
        return labels, mixed

    def predict_topk(self, X: Any, k: int, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` labels per row by mixed score; ranks past the shortlist hold ``-1`` / ``-inf``."""
        X = sp.csr_matrix(X, dtype=np.float32)
        n, step = X.shape[0], max(1, min(batch_size, self.batch_rows()))
        indices = np.full((n, k), -1, dtype=np.int64)
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        for start in range(0, n, step):
            labels, mixed = self.shortlist_scores(X[start:start + step])
            order = np.argsort(-mixed, axis=1, kind="stable")[:, :k]
            width = order.shape[1]
            indices[start:start + step, :width] = np.take_along_axis(labels, order, axis=1)
            scores[start:start + step, :width] = np.take_along_axis(mixed, order, axis=1)
        return indices, scores

    def score_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """One chunk of every label's mixed score (off-shortlist labels scored too), a tensor as
        the protocol gives (imports torch; top-k and loading do not)."""
        import torch

        yield 0, torch.from_numpy(self.full_scores(X))

    def confidence_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """The mixed scores (in ``[0, 1]`` without kNN and prior; up to ``1 + knn_weight + max
        prior`` with them)."""
        yield from self.score_chunks(X)

    # ------------------------------------------------------------------ storage
    def tensors(self) -> dict[str, Tensor]:
        """Every array of the model, for ``model.safetensors`` (imports torch)."""
        import torch

        out = csr_tensors("centroids", sp.vstack([sp.csr_matrix(block.T) for block in self._index], format="csr"))
        out.update(csr_tensors("weights", sp.csr_matrix(self.weights)))
        out["bias"] = torch.from_numpy(self.bias.copy())
        out["prior"] = torch.from_numpy(self.prior.copy())
        out["settings"] = torch.tensor([float(self.shortlist), self.alpha, float(self.knn), self.knn_weight],
                                       dtype=torch.float64)
        if self.neighbours_t is not None and self.neighbour_labels is not None:
            out.update(csr_tensors("neighbours", sp.csr_matrix(self.neighbours_t.T)))
            out.update(csr_tensors("neighbour_labels", self.neighbour_labels))
        if self.matcher is not None:
            out.update({f"matcher.{name}": t for name, t in self.matcher.tensors().items()})
        if self.always.size:
            out["always"] = torch.from_numpy(self.always.copy())
        return out

    def save_to(self, directory: Path) -> dict[str, Tensor]:
        """The tensors to store (prefixed ``rerank.``); no files of its own."""
        return {f"rerank.{name}": tensor for name, tensor in self.tensors().items()}

    @classmethod
    def from_tensors(cls, tensors: dict[str, Any], n_features: int, n_labels: int) -> "RerankModel":
        """The model :meth:`tensors` wrote (tensors, or the NumPy arrays ``safetensors.numpy``
        reads: no torch), checked against the sizes the config declares.

        Raises:
            InputError: a missing tensor, or one whose sizes or values do not fit ``(n_features, n_labels)``.
        """
        centroids = csr_from_tensors(tensors, "centroids", (n_labels, n_features))
        weights = csr_from_tensors(tensors, "weights", (n_features, n_labels))
        for name in ("bias", "settings"):
            if name not in tensors:
                raise InputError(f"missing tensor {name!r}")
        bias, settings = np.asarray(tensors["bias"]), np.asarray(tensors["settings"])
        prior = np.asarray(tensors["prior"]) if "prior" in tensors else np.zeros(n_labels, np.float32)
        if (bias.shape != (n_labels,) or prior.shape != (n_labels,) or settings.shape not in ((2,), (4,))
                or not np.all(np.isfinite(bias)) or not np.all(np.isfinite(prior)) or not np.all(np.isfinite(settings))):
            raise InputError(f"the stored rerank bias/prior/settings do not fit {n_labels} labels")
        shortlist, alpha, knn, knn_weight = [*settings.tolist(), 0.0, 0.0][:4]
        if not (shortlist == int(shortlist) and 1 <= shortlist <= max(n_labels, 1)):
            raise InputError(f"the stored shortlist size {shortlist} is not in 1..{n_labels}")
        neighbours = labels = None
        if knn:
            if "neighbours.indptr" not in tensors:
                raise InputError("missing tensor 'neighbours.indptr'")
            pointers = np.asarray(tensors["neighbours.indptr"])
            if pointers.ndim != 1 or pointers.shape[0] < 1:
                raise InputError("the stored neighbours.indptr is not a list of row pointers")
            n_rows = pointers.shape[0] - 1
            if not (knn == int(knn) and 1 <= knn <= max(n_rows, 1)):
                raise InputError(f"the stored neighbour count {knn} is not in 1..{n_rows}")
            neighbours = csr_from_tensors(tensors, "neighbours", (n_rows, n_features))
            labels = csr_from_tensors(tensors, "neighbour_labels", (n_rows, n_labels))
        matcher = None
        if any(name.startswith("matcher.") for name in tensors):
            matcher = ClusterMatcher.from_tensors({name.removeprefix("matcher."): t for name, t in tensors.items()
                                                   if name.startswith("matcher.")}, n_features, n_labels)
        always = np.asarray(tensors["always"]) if "always" in tensors else None
        if always is not None and (always.ndim != 1 or always.dtype.kind not in "iu"):
            raise InputError("the stored always-listed labels are not a list of label ids")
        return cls(centroids, weights, bias, int(shortlist), float(alpha), neighbours=neighbours,
                   neighbour_labels=labels, knn=int(knn), knn_weight=float(knn_weight), prior=prior, matcher=matcher,
                   always=always)

    def parameter_counts(self) -> dict[str, int]:
        """Stored weights, biases, centroid entries and (with kNN) neighbour entries."""
        weights = int(self.weights.nnz) + self.n_labels
        stored = sum(int(block.nnz) for block in self._index) + self.n_labels
        if self.neighbours_t is not None and self.neighbour_labels is not None:
            stored += int(self.neighbours_t.nnz) + int(self.neighbour_labels.nnz)
        if self.matcher is not None:
            stored += self.matcher.parameter_count()
        return {"total": weights + stored, "output_layer": weights}


def _block_product(X: sp.csr_matrix, blocks: list[sp.csr_matrix]) -> sp.csr_matrix:
    """``X @`` the matrix of column ``blocks`` as CSR, by scipy, block by block."""
    if len(blocks) == 1:
        return sp.csr_matrix(X @ blocks[0])
    return sp.csr_matrix(sp.hstack([X @ block for block in blocks], format="csr"))


def _block_offsets(blocks: list[sp.csr_matrix]) -> list[int]:
    """Each column block's first column in the whole matrix."""
    return np.cumsum([0] + [block.shape[1] for block in blocks[:-1]]).tolist()

"""Shortlist and re-rank: a PIFA retriever proposes labels, per-label sparse linear scorers
re-score them, and the ranking mixes both scores (the recipe of SLICE / Astec / DeepXML).

A row's retriever score of label ``l`` is ``x · c_l`` (``c_l`` the L2-normalised mean feature
row of ``l``'s training positives); its re-rank score is ``sigmoid(x · w_l + b_l)``; the final
score is ``alpha * rerank + (1 - alpha) * retriever`` on the ``shortlist`` best labels by
retriever score (labels off the shortlist are not ranked).

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> C = sp.csr_matrix(np.eye(3, dtype=np.float32))
    >>> m = RerankModel(C, sp.csr_matrix(np.eye(3, dtype=np.float32)), np.zeros(3, np.float32), 2, 0.5)
    >>> m.predict_topk(sp.csr_matrix(np.array([[0, 1, 0]], np.float32)), 1)[0].tolist()
    [[1]]
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from holoxmc.errors import InputError

__all__ = ["RerankModel", "csr_from_tensors", "csr_tensors"]


def csr_tensors(prefix: str, M: sp.csr_matrix) -> dict[str, Tensor]:
    """The three arrays of CSR ``M`` as tensors named ``{prefix}.indptr|indices|data``."""
    M = sp.csr_matrix(M, dtype=np.float32)
    return {f"{prefix}.indptr": torch.from_numpy(M.indptr.astype(np.int64)),
            f"{prefix}.indices": torch.from_numpy(M.indices.astype(np.int64)),
            f"{prefix}.data": torch.from_numpy(np.ascontiguousarray(M.data))}


def csr_from_tensors(tensors: dict[str, Tensor], prefix: str, shape: tuple[int, int]) -> sp.csr_matrix:
    """The ``shape`` CSR matrix :func:`csr_tensors` stored; refuses arrays that do not form one.

    Raises:
        InputError: a missing array, or pointers/indices out of ``shape``.
    """
    names = [f"{prefix}.{part}" for part in ("indptr", "indices", "data")]
    missing = [name for name in names if name not in tensors]
    if missing:
        raise InputError(f"missing tensor {missing[0]!r}")
    indptr, indices, data = (tensors[name].numpy() for name in names)
    rows, cols = shape
    if (indptr.ndim != 1 or indices.ndim != 1 or data.ndim != 1 or indptr.shape != (rows + 1,)
            or indptr[0] != 0 or indptr[-1] != len(indices) or len(indices) != len(data)
            or np.any(np.diff(indptr) < 0) or (len(indices) and (indices.min() < 0 or indices.max() >= cols))):
        raise InputError(f"the stored {prefix} do not form a {shape} sparse matrix")
    if not np.all(np.isfinite(data)):
        raise InputError(f"the stored {prefix} hold a value that is not finite")
    return sp.csr_matrix((data.astype(np.float32), indices, indptr), shape=shape)


class RerankModel:
    """PIFA shortlist + per-label sparse linear re-scoring.

    Args:
        centroids: ``(L, D)`` CSR label centroids (the retriever).
        weights: ``(D, L)`` CSR pruned per-label weights.
        bias: ``(L,)`` per-label biases.
        shortlist: labels the retriever proposes per row.
        alpha: weight of the re-rank score in the mix, in ``[0, 1]``.
    """

    def __init__(self, centroids: sp.csr_matrix, weights: sp.csr_matrix, bias: np.ndarray,
                 shortlist: int, alpha: float) -> None:
        self.n_labels, self.n_features = centroids.shape
        if weights.shape != (self.n_features, self.n_labels) or np.shape(bias) != (self.n_labels,):
            raise InputError("rerank weights, bias and centroids disagree on the sizes")
        if not 1 <= shortlist or not 0.0 <= alpha <= 1.0:
            raise InputError(f"rerank needs shortlist >= 1 and alpha in [0, 1], not {shortlist}, {alpha}")
        self.centroids_t = sp.csc_matrix(centroids.T, dtype=np.float32)
        self.weights = sp.csc_matrix(weights, dtype=np.float32)
        self.weights_rows = sp.csr_matrix(weights.T, dtype=np.float32)
        self.bias = np.asarray(bias, dtype=np.float32)
        self.shortlist = min(int(shortlist), self.n_labels)
        self.alpha = float(alpha)

    def shortlists(self, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """``(labels (n, s), retriever scores (n, s))``, best retriever score first."""
        S = np.asarray((X @ self.centroids_t).toarray(), dtype=np.float32)
        s = self.shortlist
        part = np.argpartition(-S, s - 1, axis=1)[:, :s] if s < S.shape[1] else np.tile(np.arange(S.shape[1]),
                                                                                          (S.shape[0], 1))
        order = np.argsort(-np.take_along_axis(S, part, axis=1), axis=1, kind="stable")
        labels = np.take_along_axis(part, order, axis=1)
        return labels.astype(np.int64), np.take_along_axis(S, labels, axis=1)

    def rescore(self, X: sp.csr_matrix, labels: np.ndarray) -> np.ndarray:
        """``(n, s)`` re-rank scores ``sigmoid(x · w_l + b_l)`` of the given labels of each row only."""
        out = np.empty(labels.shape, dtype=np.float32)
        for i in range(X.shape[0]):
            margins = np.asarray(self.weights_rows[labels[i]] @ X[i].T.toarray()).ravel()
            out[i] = margins + self.bias[labels[i]]
        return 1.0 / (1.0 + np.exp(-out))

    def mix(self, rerank: np.ndarray, retriever: np.ndarray) -> np.ndarray:
        """The final score of re-rank and retriever scores."""
        return (self.alpha * rerank + (1.0 - self.alpha) * retriever).astype(np.float32)

    def full_scores(self, X: sp.csr_matrix) -> np.ndarray:
        """``(n, L)`` mixed scores of every label (no shortlist): the reference the shortlist
        path must agree with on the labels it scores."""
        retriever = np.asarray((X @ self.centroids_t).toarray(), dtype=np.float32)
        margins = np.asarray((X @ self.weights).toarray(), dtype=np.float32) + self.bias
        return self.mix(1.0 / (1.0 + np.exp(-margins)), retriever)

    def shortlist_scores(self, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        """``(labels (n, s), mixed scores (n, s))`` of each row's shortlist."""
        labels, retriever = self.shortlists(X)
        return labels, self.mix(self.rescore(X, labels), retriever)

    def predict_topk(self, X: Any, k: int, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` labels per row by mixed score; ranks past the shortlist hold ``-1`` / ``-inf``."""
        X = sp.csr_matrix(X, dtype=np.float32)
        n = X.shape[0]
        indices = np.full((n, k), -1, dtype=np.int64)
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        for start in range(0, n, batch_size):
            labels, mixed = self.shortlist_scores(X[start:start + batch_size])
            order = np.argsort(-mixed, axis=1, kind="stable")[:, :k]
            width = order.shape[1]
            indices[start:start + batch_size, :width] = np.take_along_axis(labels, order, axis=1)
            scores[start:start + batch_size, :width] = np.take_along_axis(mixed, order, axis=1)
        return indices, scores

    def score_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """One chunk of every label's mixed score (off-shortlist labels scored too)."""
        yield 0, torch.from_numpy(self.full_scores(sp.csr_matrix(X, dtype=np.float32)))

    def confidence_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """The mixed scores, which lie in ``[0, 1]`` when retriever scores do (unit rows)."""
        yield from self.score_chunks(X)

    def tensors(self) -> dict[str, Tensor]:
        """Every array of the model, for ``model.safetensors``."""
        out = csr_tensors("centroids", sp.csr_matrix(self.centroids_t.T))
        out.update(csr_tensors("weights", sp.csr_matrix(self.weights)))
        out["bias"] = torch.from_numpy(self.bias.copy())
        out["settings"] = torch.tensor([float(self.shortlist), self.alpha], dtype=torch.float64)
        return out

    def save_to(self, directory: Path) -> dict[str, Tensor]:
        """The tensors to store (prefixed ``rerank.``); no files of its own."""
        return {f"rerank.{name}": tensor for name, tensor in self.tensors().items()}

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor], n_features: int, n_labels: int) -> "RerankModel":
        """The model :meth:`tensors` wrote, checked against the sizes the config declares.

        Raises:
            InputError: a missing tensor, or one whose sizes do not fit ``(n_features, n_labels)``.
        """
        centroids = csr_from_tensors(tensors, "centroids", (n_labels, n_features))
        weights = csr_from_tensors(tensors, "weights", (n_features, n_labels))
        for name in ("bias", "settings"):
            if name not in tensors:
                raise InputError(f"missing tensor {name!r}")
        bias, settings = tensors["bias"].numpy(), tensors["settings"].numpy()
        if bias.shape != (n_labels,) or settings.shape != (2,) or not np.all(np.isfinite(bias)):
            raise InputError(f"the stored rerank bias/settings do not fit {n_labels} labels")
        shortlist, alpha = settings.tolist()
        if not (shortlist == int(shortlist) and 1 <= shortlist <= max(n_labels, 1)):
            raise InputError(f"the stored shortlist size {shortlist} is not in 1..{n_labels}")
        return cls(centroids, weights, bias, int(shortlist), float(alpha))

    def parameter_counts(self) -> dict[str, int]:
        """Stored weights, biases and centroid entries."""
        weights = int(self.weights.nnz) + self.n_labels
        return {"total": weights + int(self.centroids_t.nnz), "output_layer": weights}

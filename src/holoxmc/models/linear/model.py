"""The served linear one-vs-rest model: scores ``x̂ W + b`` (trained by
:func:`holoxmc.models.linear.fit.fit_linear`)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from sklearn.preprocessing import normalize
from torch import Tensor

from holoxmc.data.batch import SparseBatch
from holoxmc.errors import InputError

__all__ = ["LinearModel", "DENSE_SCORING_ENTRIES"]

#: Scoring reads a dense float32 copy of the weights when ``D · L`` is at most this (256 MiB),
#: which is faster than a sparse product (``benchmarks/linear_scoring.py``;
#: docs/tuning.md, "Linear one-vs-rest").
DENSE_SCORING_ENTRIES = 2**26


class LinearModel:
    """A trained linear one-vs-rest model: scores ``x̂ W + b`` with ``x̂`` the (normalised) row.

    Args:
        weights: ``(D, L)`` sparse weights.
        bias: ``(L,)`` biases; ``-inf`` for a label no training row has (it ranks last),
            ``+inf`` for one every training row has.
        normalize_rows: L2-normalise input rows before scoring.
        calibration: ``(a, b)`` of the confidence ``sigmoid(a · margin + b)`` (Platt scaling,
            one pair for all labels, fitted on validation margins by :func:`fit_linear`;
            ``(1, 0)``: the plain sigmoid of the margin).

    Example:
        >>> model = LinearModel(sp.csr_matrix(np.eye(3, dtype=np.float32)), np.zeros(3, np.float32))
        >>> model.predict(sp.csr_matrix([[0.0, 2.0, 1.0]]), k=2)[0].tolist()
        [[1, 2]]
    """

    def __init__(self, weights: sp.spmatrix, bias: np.ndarray, normalize_rows: bool = True,
                 calibration: tuple[float, float] = (1.0, 0.0)) -> None:
        self.weights = sp.csr_matrix(weights, dtype=np.float32)
        self.bias = np.asarray(bias, dtype=np.float32)
        if self.bias.shape != (self.weights.shape[1],):
            raise InputError(f"bias has shape {self.bias.shape}, expected ({self.weights.shape[1]},)")
        self.normalize_rows = bool(normalize_rows)
        self.calibration = (float(calibration[0]), float(calibration[1]))
        self.n_features, self.n_labels = self.weights.shape
        self._table: Tensor | None = None  # the dense weights, built at the first scoring

    @property
    def n_parameters(self) -> int:
        """Stored weights (after pruning) plus one bias per label."""
        return int(self.weights.nnz) + self.n_labels

    def margins(self, X: sp.spmatrix) -> np.ndarray:
        """Every label's SVM margin ``x̂ · w_j + b_j``.

        Shapes:
            X: ``(n, D)`` → ``(n, L)`` float32.
        """
        X = sp.csr_matrix(X, dtype=np.float32)
        if X.shape[1] != self.n_features:
            raise InputError(f"X has {X.shape[1]} features, the model expects {self.n_features}")
        if self.normalize_rows:
            X = normalize(X)
        if self.n_features * self.n_labels > DENSE_SCORING_ENTRIES:
            out = (X @ self.weights).toarray()
        else:  # x̂ W as a weighted sum of the rows of W that x̂ reads, as FCBackbone's input layer
            if self._table is None:
                self._table = torch.from_numpy(self.weights.toarray())
            batch = SparseBatch.from_csr(X)
            out = F.embedding_bag(batch.indices, self._table, batch.offsets, mode="sum",
                                  per_sample_weights=batch.values).numpy()
        out += self.bias
        return out

    def predict_topk(self, X: sp.spmatrix, k: int, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict` (the :class:`~holoxmc.models.base.FittedModel` name)."""
        return self.predict(X, k, batch_size=batch_size)

    def score_chunks(self, X: sp.spmatrix) -> Iterator[tuple[int, Tensor]]:
        """``(0, margins)``: every label's SVM margin, the score :meth:`predict` ranks by."""
        yield 0, torch.from_numpy(self.margins(X))

    def save_to(self, directory: Path) -> dict[str, Tensor]:
        """The tensors to store (prefixed ``linear.``); no files of its own."""
        return {f"linear.{name}": tensor for name, tensor in self.tensors().items()}

    def parameter_counts(self) -> dict[str, int]:
        """Stored weights and biases: all of them the output layer."""
        return {"total": self.n_parameters, "output_layer": self.n_parameters}

    def predict(self, X: sp.spmatrix, k: int = 5, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` labels per row by margin, best first.

        Shapes:
            X: ``(n, D)`` → indices ``(n, k)`` int64, scores ``(n, k)`` float32.
        """
        n = X.shape[0]
        indices = np.empty((n, k), dtype=np.int64)
        scores = np.empty((n, k), dtype=np.float32)
        for start in range(0, n, batch_size):
            rows = slice(start, min(start + batch_size, n))
            top = torch.from_numpy(self.margins(X[rows])).topk(k, dim=1)
            indices[rows], scores[rows] = top.indices.numpy(), top.values.numpy()
        return indices, scores

    def confidence_chunks(self, X: sp.spmatrix) -> Iterator[tuple[int, Tensor]]:
        """``(0, sigmoid(a · margins + b))``: confidences in ``[0, 1]`` with the model's
        ``calibration`` (the form :func:`holoxmc.train.labels_above` reads). Calibrated, an
        absent label's confidence is near 0, so a cut relative to the row's best keeps the
        few labels near it; the plain ``sigmoid(margin)`` leaves absent labels near
        ``sigmoid(-1) ≈ 0.27`` (squared-hinge margins gather at ±1)."""
        a, b = self.calibration
        yield 0, torch.sigmoid(torch.from_numpy(self.margins(X)) * a + b)

    def tensors(self) -> dict[str, Tensor]:
        """The model as safetensors-ready tensors (CSR arrays, biases, calibration)."""
        return {
            "weights.indptr": torch.from_numpy(self.weights.indptr.astype(np.int64)),
            "weights.indices": torch.from_numpy(self.weights.indices.astype(np.int32)),
            "weights.data": torch.from_numpy(self.weights.data),
            "bias": torch.from_numpy(self.bias),
            "calibration": torch.tensor(self.calibration, dtype=torch.float64),
        }

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, Tensor], n_features: int, n_labels: int, normalize_rows: bool
    ) -> "LinearModel":
        """The model :meth:`tensors` wrote; refuses arrays that do not form a
        ``(n_features, n_labels)`` CSR matrix."""
        missing = [name for name in ("weights.indptr", "weights.indices", "weights.data", "bias", "calibration")
                   if name not in tensors]
        if missing:
            raise InputError(f"missing tensor {missing[0]!r}")
        indptr, indices = tensors["weights.indptr"].numpy(), tensors["weights.indices"].numpy()
        data = tensors["weights.data"].numpy()
        if (indptr.shape != (n_features + 1,) or indptr[0] != 0 or indptr[-1] != len(indices)
                or len(indices) != len(data) or np.any(np.diff(indptr) < 0)
                or (len(indices) and (indices.min() < 0 or indices.max() >= n_labels))):
            raise InputError(f"the stored weights do not form a ({n_features}, {n_labels}) sparse matrix")
        calibration = tensors["calibration"].tolist()
        if len(calibration) != 2 or not all(map(math.isfinite, calibration)):
            raise InputError(f"the stored calibration is not two finite numbers: {calibration}")
        weights = sp.csr_matrix((data, indices, indptr), shape=(n_features, n_labels))
        return cls(weights, tensors["bias"].numpy(), normalize_rows, (calibration[0], calibration[1]))

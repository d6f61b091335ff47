"""The served linear one-vs-rest model: scores ``x̂ W + b`` (trained by
:func:`holoxmc.models.linear.fit.fit_linear`).

Loading it and ranking labels need no torch, so that the command line's ``predict`` of a
linear run starts in well under a second (docs/results/speed.md, "CLI start-up"): rows are
normalised and ranked with NumPy (:func:`~holoxmc.sparse.normalize_rows`,
:func:`~holoxmc.sparse.best_columns`), and ``x̂ W`` is torch's ``embedding_bag`` where torch
is loaded, else its sums computed alike with NumPy (:func:`embedding_bag_sums`, the same
float32 values) while they are few (see :meth:`LinearModel.margins`). torch is imported
otherwise only by the :class:`~holoxmc.models.base.FittedModel` methods whose contract is
tensors (:meth:`LinearModel.score_chunks`, :meth:`LinearModel.confidence_chunks`,
:meth:`LinearModel.tensors`).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError
from holoxmc.sparse import normalize_rows as unit_rows
from holoxmc.sparse import best_columns

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["LinearModel", "DENSE_SCORING_ENTRIES", "NUMPY_PRODUCTS", "embedding_bag_sums"]

#: Scoring multiplies the rows by a dense float32 copy of the weights when ``D · L`` is at
#: most this (256 MiB), which is faster than a sparse product (``benchmarks/linear_scoring.py``;
#: docs/tuning.md, "Linear one-vs-rest").
DENSE_SCORING_ENTRIES = 2**26
#: Products (stored input entries × labels) up to which ``x̂ W`` is computed with NumPy
#: (:func:`embedding_bag_sums`) when torch is not loaded; past it torch is imported (about
#: 2.5 s, as long as these sums take for about 2**28 products: 11 ns each, Bibtex's test split).
NUMPY_PRODUCTS = 2**28


def embedding_bag_sums(X: sp.csr_matrix, table: np.ndarray) -> np.ndarray:
    """``X @ table`` as torch's ``embedding_bag(mode="sum", per_sample_weights=...)`` computes
    it on the CPU: each row's float32 sum built in the order the row stores its entries, one
    fused multiply-add (a single rounding) per entry. A float32 product is exact in float64,
    so each step is that product plus the running sum in float64, rounded to float32 once:
    the same values as ``embedding_bag`` (fbgemm's kernel, x86-64), bit for bit on every one
    of the 400k margins of Bibtex's test split, where scipy's product differs in the last
    bits of two thirds of them.
    A loop over the position in the row (its longest row's entries), each step over the
    rows that long: for a few rows, or until torch is loaded.

    Shapes:
        X: ``(n, D)`` float32 CSR, table: ``(D, L)`` float32 → ``(n, L)`` float32.

    Example:
        >>> X = sp.csr_matrix(np.array([[0.5, 0.0, 2.0]], np.float32))
        >>> embedding_bag_sums(X, np.arange(6, dtype=np.float32).reshape(3, 2)).tolist()
        [[8.0, 10.5]]
    """
    n, width = X.shape[0], table.shape[1]
    if not X.nnz:
        return np.zeros((n, width), np.float32)
    counts = np.diff(X.indptr)
    order = np.argsort(-counts, kind="stable")  # longest rows first: step p reads a prefix
    longest_first = -counts[order]
    starts = X.indptr[:-1][order]
    sums = np.zeros((n, width), np.float32)
    for p in range(int(-longest_first[0])):
        m = int(np.searchsorted(longest_first, -p, side="left"))  # the rows with more than p entries
        at = starts[:m] + p
        step = np.multiply(X.data[at, None], table[X.indices[at]], dtype=np.float64)
        step += sums[:m]
        sums[:m] = step  # rounded to float32 once
    out = np.empty_like(sums)
    out[order] = sums
    return out


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
        self._table: np.ndarray | None = None  # the dense weights, built at the first scoring

    @property
    def n_parameters(self) -> int:
        """Stored weights (after pruning) plus one bias per label."""
        return int(self.weights.nnz) + self.n_labels

    def margins(self, X: sp.spmatrix) -> np.ndarray:
        """Every label's SVM margin ``x̂ · w_j + b_j``.

        While ``D · L`` fits :data:`DENSE_SCORING_ENTRIES`, ``x̂ W`` reads a dense float32 copy
        of the weights, a weighted sum of the rows of ``W`` that ``x̂`` reads (as the FC
        backbone's input layer): torch's ``embedding_bag`` where torch is loaded (the
        estimator's process), the fastest (Bibtex's test split on one thread: 3.7 ms, against
        23 ms for scipy's sparse × dense product and 0.31 s for NumPy's :func:`embedding_bag_sums`);
        else :func:`embedding_bag_sums`, the same values without importing torch (about 2.5 s),
        up to :data:`NUMPY_PRODUCTS` products, past which torch is imported. The margins are
        thus the same float32 values whichever computes them (and as holoxmc 0.2.0's).

        Shapes:
            X: ``(n, D)`` → ``(n, L)`` float32.
        """
        X = sp.csr_matrix(X, dtype=np.float32)
        if X.shape[1] != self.n_features:
            raise InputError(f"X has {X.shape[1]} features, the model expects {self.n_features}")
        if self.normalize_rows:
            X = unit_rows(X)
        if self.n_features * self.n_labels > DENSE_SCORING_ENTRIES:
            out = (X @ self.weights).toarray()
        else:
            if self._table is None:
                self._table = self.weights.toarray()
            torch = _torch_for(X.nnz * self.n_labels)
            if torch is None:
                out = embedding_bag_sums(X, self._table)
            else:
                from holoxmc.data.batch import SparseBatch

                batch = SparseBatch.from_csr(X)
                out = torch.nn.functional.embedding_bag(batch.indices, torch.from_numpy(self._table), batch.offsets,
                                                        mode="sum", per_sample_weights=batch.values).numpy()
        out += self.bias
        return out

    def predict_topk(self, X: sp.spmatrix, k: int, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict` (the :class:`~holoxmc.models.base.FittedModel` name)."""
        return self.predict(X, k, batch_size=batch_size)

    def score_chunks(self, X: sp.spmatrix) -> Iterator[tuple[int, Tensor]]:
        """``(0, margins)``: every label's SVM margin, the score :meth:`predict` ranks by (a
        tensor, as the protocol gives: imports torch)."""
        import torch

        yield 0, torch.from_numpy(self.margins(X))

    def save_to(self, directory: Path) -> dict[str, Tensor]:
        """The tensors to store (prefixed ``linear.``); no files of its own."""
        return {f"linear.{name}": tensor for name, tensor in self.tensors().items()}

    def parameter_counts(self) -> dict[str, int]:
        """Stored weights and biases: all of them the output layer."""
        return {"total": self.n_parameters, "output_layer": self.n_parameters}

    def predict(self, X: sp.spmatrix, k: int = 5, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` labels per row by margin, best first (ties: the lower label first,
        :func:`~holoxmc.sparse.best_columns`).

        Shapes:
            X: ``(n, D)`` → indices ``(n, k)`` int64, scores ``(n, k)`` float32.
        """
        n = X.shape[0]
        indices = np.empty((n, k), dtype=np.int64)
        scores = np.empty((n, k), dtype=np.float32)
        _torch_for(sp.csr_matrix(X).nnz * self.n_labels)  # every batch's sums alike: torch now, if ever
        for start in range(0, n, batch_size):
            rows = slice(start, min(start + batch_size, n))
            margins = self.margins(X[rows])
            top = best_columns(margins, k)
            indices[rows], scores[rows] = top, np.take_along_axis(margins, top, axis=1)
        return indices, scores

    def confidence_chunks(self, X: sp.spmatrix) -> Iterator[tuple[int, Tensor]]:
        """``(0, sigmoid(a · margins + b))``: confidences in ``[0, 1]`` with the model's
        ``calibration`` (the form :func:`holoxmc.train.labels_above` reads). Calibrated, an
        absent label's confidence is near 0, so a cut relative to the row's best keeps the
        few labels near it; the plain ``sigmoid(margin)`` leaves absent labels near
        ``sigmoid(-1) ≈ 0.27`` (squared-hinge margins gather at ±1). Tensors: imports torch."""
        import torch

        a, b = self.calibration
        yield 0, torch.sigmoid(torch.from_numpy(self.margins(X)) * a + b)

    def tensors(self) -> dict[str, Tensor]:
        """The model as safetensors-ready tensors (CSR arrays, biases, calibration)."""
        import torch

        return {
            "weights.indptr": torch.from_numpy(self.weights.indptr.astype(np.int64)),
            "weights.indices": torch.from_numpy(self.weights.indices.astype(np.int32)),
            "weights.data": torch.from_numpy(self.weights.data),
            "bias": torch.from_numpy(self.bias),
            "calibration": torch.tensor(self.calibration, dtype=torch.float64),
        }

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, Any], n_features: int, n_labels: int, normalize_rows: bool
    ) -> "LinearModel":
        """The model :meth:`tensors` wrote (tensors, or the NumPy arrays ``safetensors.numpy``
        reads: no torch); refuses arrays that do not form a ``(n_features, n_labels)`` CSR matrix."""
        missing = [name for name in ("weights.indptr", "weights.indices", "weights.data", "bias", "calibration")
                   if name not in tensors]
        if missing:
            raise InputError(f"missing tensor {missing[0]!r}")
        indptr, indices = np.asarray(tensors["weights.indptr"]), np.asarray(tensors["weights.indices"])
        data = np.asarray(tensors["weights.data"])
        if (indptr.shape != (n_features + 1,) or indptr[0] != 0 or indptr[-1] != len(indices)
                or len(indices) != len(data) or np.any(np.diff(indptr) < 0)
                or (len(indices) and (indices.min() < 0 or indices.max() >= n_labels))):
            raise InputError(f"the stored weights do not form a ({n_features}, {n_labels}) sparse matrix")
        calibration = np.asarray(tensors["calibration"]).tolist()
        if len(calibration) != 2 or not all(map(math.isfinite, calibration)):
            raise InputError(f"the stored calibration is not two finite numbers: {calibration}")
        weights = sp.csr_matrix((data, indices, indptr), shape=(n_features, n_labels))
        return cls(weights, np.asarray(tensors["bias"]), normalize_rows, (calibration[0], calibration[1]))


def _torch_for(products: int) -> Any:
    """torch where it is loaded, or imported now when ``products`` (stored entries × labels)
    exceed :data:`NUMPY_PRODUCTS`; else ``None`` (the sums are NumPy's)."""
    torch = sys.modules.get("torch")
    if torch is None and products > NUMPY_PRODUCTS:
        import torch
    return torch

"""Batched top-k prediction and evaluation of any network with a ``topk(x, k)`` method.

Every row is scored (no dropped last batch), so metrics cover the full set.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from holoxmc.data.batch import SparseBatch, input_batch
from holoxmc.metrics import MetricAccumulator, pad_predictions

__all__ = ["TopKModel", "predict_topk", "evaluate_topk"]


class TopKModel(Protocol):
    """What inference needs from a network (``holoxmc.backbones.Network`` satisfies it)."""

    def topk(self, x: SparseBatch | Tensor, k: int) -> tuple[Tensor, Tensor]: ...

    def eval(self) -> "TopKModel": ...

    def train(self, mode: bool = True) -> "TopKModel": ...


def predict_topk(
    network: TopKModel,
    X: sp.csr_matrix | np.ndarray,
    k: int = 5,
    *,
    batch_size: int = 1024,
    device: torch.device | str = "cpu",
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` labels of every row of ``X``, best first, in eval mode without gradients.

    Args:
        network: a model with ``topk(x, k) -> (scores, indices)``.
        X: CSR features or a token-id matrix, one row per point.
        k: number of labels to return per point.
        batch_size: rows scored at once.
        device: where the network lives; batches are moved there.

    Shapes:
        X: ``(n, D)`` → indices ``(n, k)`` int64, scores ``(n, k)`` float32.

    Example:
        >>> indices, scores = predict_topk(network, X_test, k=5)  # doctest: +SKIP
    """
    n = X.shape[0]
    indices = np.empty((n, k), dtype=np.int64)
    scores = np.empty((n, k), dtype=np.float32)
    for rows, batch_scores, batch_indices in _iter_topk(network, X, k, batch_size, device):
        indices[rows] = batch_indices
        scores[rows] = batch_scores
    return indices, scores


def evaluate_topk(
    network: TopKModel,
    X: sp.csr_matrix | np.ndarray,
    Y: sp.csr_matrix,
    *,
    inv_prop: np.ndarray | None = None,
    ks: tuple[int, ...] = (1, 2, 3, 4, 5),
    batch_size: int = 1024,
    device: torch.device | str = "cpu",
) -> dict[str, float]:
    """P@k, nDCG@k (and PSP@k, PSnDCG@k when ``inv_prop`` is given) over every row, in percent.

    Args:
        network: a model with ``topk``.
        X: inputs, ``(n, D)``; Y: binary CSR labels, ``(n, L)``.
        inv_prop: inverse propensities ``(L,)`` from the TRAIN labels, or None.
        ks: cut-offs.
        batch_size, device: as in :func:`predict_topk`.

    Example:
        >>> evaluate_topk(network, X_val, Y_val, ks=(1,))["P@1"]  # doctest: +SKIP
        63.1
    """
    accumulator = MetricAccumulator(ks=ks, inv_prop=inv_prop)
    k = max(ks)
    for rows, _, batch_indices in _iter_topk(network, X, k, batch_size, device):
        accumulator.update(pad_predictions(batch_indices, k), Y[rows])  # a model with fewer than k labels
    return accumulator.result()


def _iter_topk(
    network: TopKModel,
    X: sp.csr_matrix | np.ndarray,
    k: int,
    batch_size: int,
    device: torch.device | str,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(rows, scores, indices)`` for consecutive batches covering every row of ``X``."""
    was_training = bool(getattr(network, "training", False))
    network.eval()
    try:
        with torch.no_grad():
            for start in range(0, X.shape[0], batch_size):
                rows = np.arange(start, min(start + batch_size, X.shape[0]))
                scores, indices = network.topk(input_batch(X, rows).to(device), k)
                yield rows, scores.float().cpu().numpy(), indices.cpu().numpy()
    finally:
        network.train(was_training)

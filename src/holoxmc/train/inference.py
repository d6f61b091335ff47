"""Batched prediction (top-k, or every label above a confidence threshold) and evaluation
of a network or an ensemble.

Every row is scored (no dropped last batch), so metrics cover the full set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

from holoxmc.data.batch import SparseBatch, input_batch
from holoxmc.heads.decoding import above_fraction_of_best, above_threshold
from holoxmc.metrics import MetricAccumulator, pad_predictions

__all__ = ["InferenceModel", "predict_topk", "predict_above", "labels_above", "evaluate_topk"]


class InferenceModel(Protocol):
    """What inference needs from a network (``holoxmc.backbones.Network`` and ``Ensemble``
    satisfy it)."""

    def topk(self, x: SparseBatch | Tensor, k: int) -> tuple[Tensor, Tensor]: ...

    def confidence_chunks(self, x: SparseBatch | Tensor) -> Iterator[tuple[int, Tensor]]: ...

    def eval(self) -> "InferenceModel": ...

    def train(self, mode: bool = True) -> "InferenceModel": ...


def predict_topk(
    network: InferenceModel,
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
        k: number of labels to return per point; ranks a model cannot fill (``k`` above its
            label count, or SOLAR's candidates) hold label ``-1`` and score ``-inf``.
        batch_size: rows scored at once.
        device: where the network lives; batches are moved there.

    Shapes:
        X: ``(n, D)`` → indices ``(n, k)`` int64, scores ``(n, k)`` float32.

    Example:
        >>> indices, scores = predict_topk(network, X_test, k=5)  # doctest: +SKIP
    """
    n = X.shape[0]
    indices = np.full((n, k), -1, dtype=np.int64)
    scores = np.full((n, k), -np.inf, dtype=np.float32)
    for rows, batch_scores, batch_indices in _iter_topk(network, X, k, batch_size, device):
        width = batch_indices.shape[1]  # below k when the model has fewer labels
        indices[rows, :width] = batch_indices
        scores[rows, :width] = batch_scores
    return indices, scores


def predict_above(
    network: InferenceModel,
    X: sp.csr_matrix | np.ndarray,
    threshold: float,
    n_labels: int,
    *,
    relative: bool = False,
    batch_size: int = 1024,
    device: torch.device | str = "cpu",
) -> sp.csr_matrix:
    """Every label whose confidence (``network.confidence_chunks``) exceeds ``threshold``,
    or with ``relative`` ``threshold`` times its row's best confidence, for every row of
    ``X``, in eval mode without gradients (:func:`labels_above` over the network).

    Shapes:
        X: ``(n, D)`` → CSR ``(n, n_labels)`` of the confidences kept, column indices sorted.
    """
    with _evaluating(network):
        return labels_above(lambda rows: network.confidence_chunks(input_batch(X, rows).to(device)), X.shape[0],
                            threshold, n_labels, relative=relative, batch_size=batch_size)


def labels_above(
    confidences: Callable[[np.ndarray], Iterable[tuple[int, Tensor]]],
    n_rows: int,
    threshold: float,
    n_labels: int,
    *,
    relative: bool = False,
    batch_size: int = 1024,
) -> sp.csr_matrix:
    """Every label whose confidence exceeds ``threshold`` (or with ``relative``, ``threshold``
    times its row's best confidence), batch by batch; a row may get none.

    Args:
        confidences: ``rows -> (start, (len(rows), n))`` label chunks of those rows'
            confidences, read once per batch.
        n_rows: rows in all; threshold, n_labels, relative, batch_size: as named.

    Shapes:
        → CSR ``(n_rows, n_labels)`` of the confidences kept, column indices sorted.
    """
    cut_batch = above_fraction_of_best if relative else above_threshold
    parts = []
    for start in range(0, n_rows, batch_size):
        rows = np.arange(start, min(start + batch_size, n_rows))
        parts.append(cut_batch(confidences(rows), threshold, n_labels))
    return sp.vstack(parts, format="csr") if parts else sp.csr_matrix((0, n_labels), dtype=np.float32)


def evaluate_topk(
    network: InferenceModel,
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
    network: InferenceModel,
    X: sp.csr_matrix | np.ndarray,
    k: int,
    batch_size: int,
    device: torch.device | str,
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Yield ``(rows, scores, indices)`` for consecutive batches covering every row of ``X``."""
    with _evaluating(network):
        for start in range(0, X.shape[0], batch_size):
            rows = np.arange(start, min(start + batch_size, X.shape[0]))
            scores, indices = network.topk(input_batch(X, rows).to(device), k)
            yield rows, scores.float().cpu().numpy(), indices.cpu().numpy()


@contextmanager
def _evaluating(network: InferenceModel) -> Iterator[None]:
    """Eval mode without gradients inside; the network's own mode again after."""
    was_training = bool(getattr(network, "training", False))
    network.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        network.train(was_training)

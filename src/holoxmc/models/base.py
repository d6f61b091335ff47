"""The protocol every served model satisfies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from torch import Tensor

__all__ = ["FittedModel"]


@runtime_checkable
class FittedModel(Protocol):
    """A trained extreme multi-label model, as the estimator serves it.

    ``X`` is what the model reads: a float32 CSR matrix of features, or a token-id matrix
    for the text backbones, already checked by :mod:`holoxmc.validation`.

    Example:
        >>> from holoxmc.models.linear import LinearModel
        >>> import numpy as np, scipy.sparse as sp
        >>> isinstance(LinearModel(sp.eye(3, format="csr"), np.zeros(3)), FittedModel)
        True
    """

    n_labels: int

    def predict_topk(self, X: Any, k: int, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """``(indices (n, k) int64, scores (n, k) float32)``, best first; ranks a model
        cannot fill hold label ``-1`` and score ``-inf``."""
        ...

    def confidence_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """``(start, (n, m) confidences)`` label chunks covering every label: what a
        threshold cuts into label sets."""
        ...

    def score_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """``(start, (n, m) scores)`` label chunks of the scores the model ranks by."""
        ...

    def save_to(self, directory: Path) -> dict[str, Tensor]:
        """Write the files of the model's own layout into ``directory`` (if any) and return
        the tensors the estimator stores in ``model.safetensors``."""
        ...

    def parameter_counts(self) -> dict[str, int]:
        """``{"total": ..., "output_layer": ...}`` trainable (or stored) parameters."""
        ...

"""The protocol every served model satisfies, and the frozen settings a family fits and loads from.

Importing it imports no torch (the protocol's tensors are annotations; :func:`dense_scores`
imports torch when called), so that the linear and re-rank models load without it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from holoxmc.errors import InputError

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["FittedModel", "FitSettings", "dense_scores"]


@dataclass(frozen=True)
class FitSettings:
    """An estimator's settings as a model family reads them, resolved and frozen: what the
    registry's ``plan``, ``fit`` and ``load`` receive instead of the estimator itself
    (``XMCClassifier.fit_settings()`` builds it).

    Attributes:
        head, backbone, dim, linear_width, n_models, device, ray_address, val_fraction, refit:
            the estimator's settings of those names.
        hidden, dropout: the head's (and backbone's) default where the estimator leaves ``None``.
        head_options: a read-only copy of ``head_options`` (empty when none).
        train: the trainer's settings (a :class:`~holoxmc.train.TrainConfig`; ``None`` for a
            family that trains no network, as the linear and re-rank models).
        seed: ``random_state`` when given, else ``seed``.
        workers: local processes (``n_jobs`` when given, ``-1``: one per core, else ``workers``);
        n_jobs: the scikit-learn name's own value (``None`` when not given).

    Example:
        >>> from holoxmc.estimator import XMCClassifier
        >>> settings = XMCClassifier(head="hrr", n_jobs=2).fit_settings()
        >>> settings.workers, settings.hidden, settings.head_options
        (2, (512, 512), mappingproxy({}))
    """

    head: str
    backbone: str
    dim: int
    hidden: tuple[int, ...] | None
    dropout: float | None
    linear_width: int
    head_options: Mapping[str, Any]
    train: Any
    device: str
    n_models: int
    seed: int
    workers: int
    n_jobs: int | None
    ray_address: str | None
    val_fraction: float
    refit: bool


@runtime_checkable
class FittedModel(Protocol):
    """A trained extreme multi-label model, as the estimator serves it.

    ``X`` is what the model reads: a float32 CSR matrix of features, or a token-id matrix
    for the text backbones, already checked by :mod:`holoxmc.validation`.

    Example:
        >>> from holoxmc.models.linear.model import LinearModel
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


def dense_scores(model: FittedModel, X: Any, n_labels: int, batch_size: int, limit: int) -> np.ndarray:
    """Every label's score for every row of the checked ``X``, from ``model``'s score chunks,
    ``batch_size`` rows at a time, as an ``(n, n_labels)`` float32 array.

    Raises:
        InputError: ``n · n_labels`` above ``limit`` entries (before anything is allocated).

    Example:
        >>> from holoxmc.models.linear.model import LinearModel
        >>> import scipy.sparse as sp
        >>> model = LinearModel(sp.eye(3, format="csr"), np.zeros(3))
        >>> X = sp.eye(2, 3, format="csr", dtype=np.float32)
        >>> dense_scores(model, X, 3, batch_size=1, limit=100)
        array([[1., 0., 0.],
               [0., 1., 0.]], dtype=float32)
        >>> dense_scores(model, X, 3, batch_size=1, limit=5)
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: 2 x 3 scores exceed 5 entries; use predict(X, k) or pass fewer rows
    """
    import torch

    n = X.shape[0]
    if n * n_labels > limit:
        raise InputError(f"{n} x {n_labels} scores exceed {limit:,} entries; use predict(X, k) or pass fewer rows")
    out = np.empty((n, n_labels), dtype=np.float32)
    for start in range(0, n, batch_size):
        rows = np.arange(start, min(start + batch_size, n))
        out[rows] = torch.cat([scores for _, scores in model.score_chunks(X[rows])], 1).float().cpu().numpy()
    return out

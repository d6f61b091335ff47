"""A text network fused with TF-IDF (the ``xr`` head; CLI models ``xr-cnn`` and ``xr-lstm``):
XR-Transformer's recipe (Zhang et al., NeurIPS 2021, PECOS) on holoxmc's text backbones.

Two stages, both from the token ids a text backbone reads:

1. the text network (a CNN or LSTM backbone with the HRR head) trains as ``hrr-cnn`` or
   ``hrr-lstm`` does, its epoch chosen on the validation rows;
2. every row becomes ``[TF-IDF of its tokens, w · L2-normalised backbone output]`` (the
   backbone's pooled text embedding), and a linear one-vs-rest model
   (:func:`holoxmc.models.linear.fit.fit_linear`) trains on those features: validated on the same
   rows as the network, then refit on every row.

The model's scores are the linear model's margins on the fused features. The TF-IDF weights
come from the token ids (:func:`holoxmc.data.text.fit_token_idf`, fitted on every row given
to ``fit``, the validation rows included; no label is read): the same words and weights as the TF-IDF features of a raw-text set, with no second input.

Example:
    >>> import numpy as np, scipy.sparse as sp
    >>> from holoxmc.estimator import XMCClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.integers(2, 30, size=(120, 8))
    >>> Y = sp.csr_matrix((X[:, :1] % 4 == np.arange(4)).astype(np.float32))
    >>> clf = XMCClassifier(head="xr", backbone="cnn", epochs=1, progress=False,
    ...                     head_options={"embed_dim": 8, "n_filters": 4, "bottleneck": 8, "dim": 16, "min_df": 1})
    >>> clf.fit(X, Y).predict_topk(X[:2], k=2)[0].shape
    (2, 2)
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize
from torch import Tensor

from holoxmc.backbones.network import Ensemble, Network
from holoxmc.data.batch import input_batch
from holoxmc.data.text import fit_token_idf, token_tfidf
from holoxmc.errors import InputError
from holoxmc.limits import check_allocation
from holoxmc.models.linear.model import LinearModel
from holoxmc.models.network.model import MemberData, NetworkModel, NetworkPlan, fit_networks, load_network, report_fields
from holoxmc.train import FitResult
from holoxmc.models.linear.fit import DEFAULT_C_GRID, LinearConfig, fit_linear
from holoxmc.train.trainer import split_validation

__all__ = ["FusionPlan", "FusionModel", "FUSION_OPTIONS", "NETWORK_HEAD", "fit_fusion", "load_fusion",
           "fusion_report"]

#: The head of the text network of stage 1.
NETWORK_HEAD = "hrr"
#: ``head_options`` keywords of the fusion itself (the rest configure the network):
#: ``C`` the linear model's, ``embedding_weight`` the weight ``w`` of the text embedding beside
#: the TF-IDF row (both unit length; 0.5 by default, chosen on Debtags' validation rows over 1:
#: docs/results/text-models.md), ``min_df`` the fewest training rows a word is in to count.
FUSION_OPTIONS = ("C", "embedding_weight", "min_df")
#: Rows embedded at a time.
EMBED_BATCH = 1024


@dataclass(frozen=True)
class FusionPlan(NetworkPlan):
    """A :class:`~holoxmc.models.network.model.NetworkPlan` (the text network) and the fusion's
    settings (:data:`FUSION_OPTIONS`)."""

    linear: LinearConfig = field(default_factory=lambda: LinearConfig(C=DEFAULT_C_GRID[0]))
    embedding_weight: float = 0.5
    min_df: int = 2

    def __post_init__(self) -> None:
        weight = self.embedding_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (math.isfinite(weight) and weight >= 0):
            raise InputError(f"embedding_weight must be a non-negative finite number, got {weight!r}")
        if isinstance(self.min_df, bool) or not isinstance(self.min_df, int) or self.min_df < 1:
            raise InputError(f"min_df must be a positive integer, got {self.min_df!r}")
        if self.build.get("backbone") == "fc":
            raise InputError("the xr head reads token ids: backbone 'cnn' or 'lstm', not 'fc'")


class FusionModel(NetworkModel):
    """A trained text network, the TF-IDF weights of its tokens and the linear model on both.

    Args:
        network: the trained text :class:`~holoxmc.backbones.Network`.
        n_labels: L.
        device: where the network lives.
        idf: ``(vocab_size,)`` inverse document frequencies of the token ids.
        linear: the linear model over ``vocab_size + out_features`` fused features.
        embedding_weight: ``w``, the text embedding's weight.
    """

    def __init__(self, network: Network | Ensemble, n_labels: int, device: str, *, idf: np.ndarray,
                 linear: LinearModel, embedding_weight: float) -> None:
        super().__init__(network, n_labels, device)
        self.idf = np.asarray(idf, dtype=np.float32)
        self.linear = linear
        self.embedding_weight = float(embedding_weight)

    @property
    def width(self) -> int:
        """The text embedding's width (the backbone's ``out_features``)."""
        return int(getattr(self.members[0].backbone, "out_features"))

    @torch.no_grad()
    def embeddings(self, X: np.ndarray) -> np.ndarray:
        """``(n, out_features)`` L2-normalised backbone outputs of the token rows ``X``."""
        backbone = self.members[0].backbone
        parts = [backbone(input_batch(X, np.arange(start, min(start + EMBED_BATCH, X.shape[0]))).to(self.device))
                 .float().cpu().numpy() for start in range(0, X.shape[0], EMBED_BATCH)]
        out = np.concatenate(parts) if parts else np.zeros((0, self.width), np.float32)
        return normalize(out)

    def features(self, X: np.ndarray) -> sp.csr_matrix:
        """``[TF-IDF of the tokens, w · embedding]`` of every row of ``X``, float32 CSR."""
        dense = sp.csr_matrix(self.embedding_weight * self.embeddings(X), dtype=np.float32)
        return sp.hstack([token_tfidf(X, self.idf), dense], format="csr", dtype=np.float32)

    def predict_topk(self, X: Any, k: int, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` labels by the linear model's margin on the fused features, best first."""
        parts = [self.linear.predict(self.features(X[start:start + batch_size]), k, batch_size=batch_size)
                 for start in range(0, X.shape[0], batch_size)]
        if not parts:
            return np.zeros((0, k), np.int64), np.zeros((0, k), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def score_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """``(0, margins)`` of every label on the fused features."""
        yield from self.linear.score_chunks(self.features(X))

    def confidence_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """The linear model's calibrated confidences on the fused features."""
        yield from self.linear.confidence_chunks(self.features(X))

    def save_to(self, directory: Path) -> dict[str, Tensor]:
        """The network's weights (``network.``), the idf (``fusion.idf``) and the linear model (``linear.``)."""
        return super().save_to(directory) | {"fusion.idf": torch.from_numpy(self.idf)} | self.linear.save_to(directory)

    def parameter_counts(self) -> dict[str, int]:
        """The network's parameters, the idf weights and the linear model's stored weights;
        the output layer is the linear model."""
        network = super().parameter_counts()["total"]
        return {"total": network + len(self.idf) + self.linear.n_parameters, "output_layer": self.linear.n_parameters}


#: Bytes a fused feature entry may take while the linear stage trains (float32 features,
#: liblinear's float64 copy and the index arrays).
FUSED_ENTRY_BYTES = 24


def check_fused_size(plan: FusionPlan, n_rows: int, n_tokens: int) -> None:
    """Refuse, before the network trains, a fit whose fused features (``n_rows`` texts of at
    most ``n_tokens`` words, beside the text embedding) could not fit in memory.

    Raises:
        InputError: more bytes than the machine has.
    """
    width = int(plan.build.get("bottleneck") or plan.build.get("fc_size") or 0)
    check_allocation(n_rows * (n_tokens + width) * FUSED_ENTRY_BYTES, "the xr head's fused features")


def fit_fusion(plan: FusionPlan, seed: int, X: np.ndarray, Y: sp.csr_matrix, X_val: np.ndarray | None,
               Y_val: sp.csr_matrix | None, *, val_fraction: float, run_dir: str | Path | None = None,
               resume: bool = False, workers: int = 1,
               groups: np.ndarray | None = None) -> tuple[FusionModel, list[FitResult]]:
    """Train the text network, then the linear model on the fused features.

    Without ``(X_val, Y_val)``, ``val_fraction`` of the rows (the trainer's split of ``seed``)
    validate both stages; the linear model is then refit on every row.

    Returns:
        ``(model, [the network's FitResult])``: its history holds the network's epochs, then
        one record per linear fit (``"stage": "linear"``, with ``"val"`` on the validation rows).
    """
    check_fused_size(plan, X.shape[0] + (0 if X_val is None else X_val.shape[0]), X.shape[1])
    if X_val is not None and X_val.shape[1] != X.shape[1]:
        raise InputError(f"the validation texts are {X_val.shape[1]} tokens wide, the training texts {X.shape[1]}: "
                         "encode both with one tokenizer")
    if X_val is None and val_fraction > 0:
        rows, held = split_validation(X.shape[0], val_fraction, seed, groups)
        if len(held):  # as the trainer: too few rows to hold any out trains on every row
            X, Y, X_val, Y_val = X[rows], Y[rows], X[held], Y[held]
    served, results = fit_networks(plan, [seed], MemberData(plan, X, Y, X_val, Y_val, resume), run_dir=run_dir,
                                   workers=1, ray_address=None)
    n_tokens = int(plan.build["vocab_size"])
    every_row = X if X_val is None else np.concatenate([X, X_val])
    model = FusionModel(served.network, served.n_labels, served.device, idf=fit_token_idf(every_row, n_tokens,
                        min_df=plan.min_df), linear=LinearModel(sp.csr_matrix((1, 1)), np.zeros(1)),
                        embedding_weight=plan.embedding_weight)
    start = time.perf_counter()
    features_val = None if X_val is None else model.features(X_val)
    model.linear, fits = fit_linear(model.features(X), Y, plan.linear, features_val, Y_val,
                                    val_fraction=val_fraction, refit=True, workers=workers)
    features_seconds = time.perf_counter() - start - sum(fit["seconds"] for fit in fits)
    stages = [{"stage": "linear", **fit} for fit in fits] + [{"stage": "features", "seconds": features_seconds}]
    return model, [replace(results[0], history=results[0].history + stages)]


def fusion_report(results: list[FitResult]) -> dict[str, Any]:
    """The network's epochs (:func:`~holoxmc.models.network.model.report_fields`) and, under
    ``fits``, the linear stage's records."""
    epochs = [record for record in results[0].history if "stage" not in record]
    return report_fields([replace(results[0], history=epochs)]) \
        | {"fits": [record for record in results[0].history if "stage" in record]}


def load_fusion(config: dict[str, Any], tensors: dict[str, Tensor], n_labels: int, plan: FusionPlan,
                where: Path) -> FusionModel:
    """The model :meth:`FusionModel.save_to` wrote, with ``plan`` the saved settings' plan.

    Raises:
        InputError: a missing or misshapen tensor, weights that do not match ``config``.
    """
    network = load_network(config, {k: v for k, v in tensors.items() if k.startswith("network.")}, n_labels,
                           plan.device, where)
    n_tokens = int(plan.build["vocab_size"])
    idf = tensors.get("fusion.idf")
    if idf is None or tuple(idf.shape) != (n_tokens,) or bool((idf < 0).any()):
        raise InputError(f"{where}: tensor 'fusion.idf' must hold {n_tokens} non-negative weights")
    width = n_tokens + int(getattr(network.members[0].backbone, "out_features"))
    linear = {name.removeprefix("linear."): value for name, value in tensors.items() if name.startswith("linear.")}
    try:
        model = LinearModel.from_tensors(linear, width, n_labels, plan.linear.normalize_rows)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return FusionModel(network.network, n_labels, plan.device, idf=idf.numpy(), linear=model,
                       embedding_weight=plan.embedding_weight)

"""The dense output layer: one logit per label, trained with binary cross-entropy.

This is the baseline the HRR paper compares against (its "FC" output layer) and the
per-chunk output of SOLAR models.

Example:
    >>> import torch
    >>> from holoxmc.data.batch import LabelBatch
    >>> head = DenseHead(8, 5)
    >>> out = head(torch.randn(2, 8))
    >>> labels = LabelBatch.from_csr(sp.csr_matrix([[0, 1, 0, 0, 1], [0, 0, 0, 0, 0]]))
    >>> head.loss(out, labels).ndim, head.topk(out, 3)[1].shape
    (0, torch.Size([2, 3]))
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from holoxmc.codes.hrr import Stream, local_generator
from holoxmc.data.batch import LabelBatch
from holoxmc.errors import InputError

__all__ = ["DenseHead", "reset_linear_"]


def reset_linear_(layer: nn.Module, generator: torch.Generator) -> None:
    """Re-draw a layer's ``weight`` and ``bias`` from U(-1/√fan_in, 1/√fan_in) with a
    local generator (PyTorch's default ``nn.Linear``/``nn.Conv1d`` distribution, made
    reproducible without the global RNG). ``fan_in`` is ``weight[0].numel()``."""
    weight, bias = layer.get_parameter("weight"), getattr(layer, "bias", None)
    bound = 1.0 / math.sqrt(weight[0].numel())
    with torch.no_grad():
        nn.init.uniform_(weight, -bound, bound, generator=generator)
        if bias is not None:
            nn.init.uniform_(bias, -bound, bound, generator=generator)


class DenseHead(nn.Module):
    """``L`` logits from a linear layer, BCE-with-logits loss, top-k by logit.

    Args:
        in_features: width of the backbone output.
        n_labels: number of labels L (the output width).
        seed: seed of the weight initialisation (local generator).
        prior_bias: :meth:`start_from_labels` sets the biases to the training labels' log-odds
            (otherwise it does nothing). The mean BCE over ``L`` labels then starts near its
            priors' value; with biases near 0 the first steps instead pull every logit toward
            its prior through the backbone, which a backbone whose output varies little across
            rows at initialisation (the attention-pooled LSTM) answers by emitting one constant
            vector for every input, and does not leave (docs/results/text-models.md, "The
            dense-head LSTM").

    Shapes:
        forward: ``(B, in_features)`` → ``(B, L)`` logits.
    """

    def __init__(self, in_features: int, n_labels: int, *, seed: int = 0, prior_bias: bool = False) -> None:
        super().__init__()
        if in_features < 1 or n_labels < 1:
            raise InputError(f"need in_features, n_labels >= 1; got {in_features}, {n_labels}")
        self.in_features = int(in_features)
        self.n_labels = int(n_labels)
        self.linear = nn.Linear(self.in_features, self.n_labels)
        reset_linear_(self.linear, local_generator(seed, Stream.HEAD_INIT))
        self.prior_bias = bool(prior_bias)

    def start_from_labels(self, Y: sp.spmatrix) -> None:
        """With ``prior_bias``, set each label's bias to the log-odds of its smoothed share of
        the rows of ``Y`` ``(n, L)``, ``(n_l + 0.5) / (n + 1)``, before training.

        Example:
            >>> head = DenseHead(4, 2, prior_bias=True)
            >>> head.start_from_labels(sp.csr_matrix([[1, 0], [1, 0], [1, 1]]))
            >>> [round(b, 2) for b in head.linear.bias.tolist()]
            [1.95, -0.51]
        """
        if not self.prior_bias:
            return
        if Y.shape[1] != self.n_labels:
            raise InputError(f"labels have {Y.shape[1]} columns, the head {self.n_labels}")
        if hasattr(Y, "column_counts"):  # rows of a shard store, counted shard by shard
            counts = np.asarray(Y.column_counts(), dtype=np.float64)
        else:
            counts = np.asarray((sp.csr_matrix(Y) != 0).sum(axis=0), dtype=np.float64).ravel()
        share = (counts + 0.5) / (Y.shape[0] + 1.0)
        with torch.no_grad():
            self.linear.bias.copy_(torch.as_tensor(np.log(share / (1.0 - share)), dtype=self.linear.bias.dtype))

    def forward(self, h: Tensor) -> Tensor:
        return self.linear(h)

    def loss(self, out: Tensor, labels: LabelBatch) -> Tensor:
        """Mean over the batch and the L labels of the binary cross-entropy.

        The multi-hot target is built per batch: it is no larger than ``out``.
        """
        return F.binary_cross_entropy_with_logits(out, labels.to_dense(out.dtype))

    def scores(self, out: Tensor) -> Tensor:
        """Score of every label: the logits themselves, ``(B, L)``."""
        return out

    def score_chunks(self, h: Tensor) -> Iterator[tuple[int, Tensor]]:
        """The logits of the backbone output ``h`` as one label chunk, ``(0, (B, L))``."""
        return iter([(0, self(h))])

    def confidence_chunks(self, h: Tensor) -> Iterator[tuple[int, Tensor]]:
        """The labels' probabilities ``sigmoid(logit)`` for the backbone output ``h``, as one
        chunk ``(0, (B, L))``; 0.5 is the cut BCE training aims at."""
        return iter([(0, torch.sigmoid(self(h)))])

    def topk(self, out: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """The ``k`` largest logits per row, best first: ``(scores (B, k), indices (B, k))``."""
        scores, indices = torch.topk(out, min(k, self.n_labels), dim=-1)
        return scores, indices

"""Fully-connected backbone over sparse bag-of-words features (the HRR paper's FC model).

The first layer is an ``nn.EmbeddingBag(mode="sum")`` weighted by the feature values,
which computes ``X W + b`` straight from the CSR row without densifying it, so ``D`` may be
10^6 with memory proportional to the non-zeros of a batch. An optional linear path (a
second such table, no activation) is concatenated to the last hidden layer, so the output
layer sees a linear model of the input beside the deep features ("wide and deep").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from holoxmc.backbones.dropout import Dropout
from holoxmc.codes.hrr import Stream, local_generator
from holoxmc.data.batch import SparseBatch
from holoxmc.errors import InputError
from holoxmc.heads.dense import reset_linear_

__all__ = ["FCBackbone"]


class FCBackbone(nn.Module):
    """Sparse input → ``len(hidden)`` fully-connected ReLU layers, optionally beside a
    linear path of the input.

    Args:
        n_features: input dimension D.
        hidden: widths of the hidden layers (the paper: two layers of 512).
        dropout: dropout probability after every hidden activation.
        linear_width: width of the linear path ``x W_lin`` (a ``(D, linear_width)`` table,
            no bias, activation or dropout) concatenated to the last hidden layer; 0 for
            none. Its weights come from their own random stream, so the other weights
            are those of the same seed without it.
        seed: seed of the weight initialisation (local generator).

    Shapes:
        forward: :class:`SparseBatch` of ``B`` rows → ``(B, hidden[-1] + linear_width)``.

    Example:
        >>> import scipy.sparse as sp
        >>> net = FCBackbone(1_000_000, hidden=(32, 16))
        >>> x = SparseBatch.from_csr(sp.random(4, 1_000_000, density=1e-5, format="csr", random_state=0))
        >>> net(x).shape
        torch.Size([4, 16])
        >>> FCBackbone(1_000_000, hidden=(32, 16), linear_width=8)(x).shape
        torch.Size([4, 24])
    """

    def __init__(
        self,
        n_features: int,
        hidden: Sequence[int] = (512, 512),
        *,
        dropout: float = 0.0,
        linear_width: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        hidden = tuple(int(width) for width in hidden)
        if n_features < 1 or not hidden or min(hidden) < 1:
            raise InputError(f"need n_features >= 1 and positive hidden widths; got {n_features}, {hidden}")
        if isinstance(linear_width, bool) or int(linear_width) != linear_width or linear_width < 0:
            raise InputError(f"linear_width must be a non-negative integer, got {linear_width!r}")
        self.n_features = int(n_features)
        self.linear_width = int(linear_width)
        self.out_features = hidden[-1] + self.linear_width
        self.input_layer = nn.EmbeddingBag(self.n_features, hidden[0], mode="sum")
        self.input_bias = nn.Parameter(torch.zeros(hidden[0]))
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(hidden[:-1], hidden[1:]))
        self.activation = nn.ReLU()
        self.dropout = Dropout(dropout)
        if self.linear_width:
            self.linear_path = nn.EmbeddingBag(self.n_features, self.linear_width, mode="sum")
        self.reset_parameters(local_generator(seed, Stream.FC_INIT), local_generator(seed, Stream.LINEAR_PATH))

    def reset_parameters(self, generator: torch.Generator, linear_generator: torch.Generator) -> None:
        """Draw every weight from U(-1/√fan_in, 1/√fan_in), as ``nn.Linear`` does, the
        linear path's from ``linear_generator``."""
        bound = self.n_features**-0.5
        with torch.no_grad():
            nn.init.uniform_(self.input_layer.weight, -bound, bound, generator=generator)
            nn.init.uniform_(self.input_bias, -bound, bound, generator=generator)
        for layer in self.layers:
            reset_linear_(layer, generator)
        if self.linear_width:
            with torch.no_grad():
                nn.init.uniform_(self.linear_path.weight, -bound, bound, generator=linear_generator)

    def forward(self, x: SparseBatch) -> Tensor:
        weights = x.values.to(self.input_bias.dtype)
        h = self.input_layer(x.indices, x.offsets, per_sample_weights=weights)
        if not (self.training or torch.is_grad_enabled()):  # inference: the same values, in place
            h = h.add_(self.input_bias).relu_()
            for layer in self.layers:
                h = layer(h).relu_()
        else:
            h = self.dropout(self.activation(h + self.input_bias))
            for layer in self.layers:
                h = self.dropout(self.activation(layer(h)))
        if self.linear_width:
            h = torch.cat([h, self.linear_path(x.indices, x.offsets, per_sample_weights=weights)], dim=1)
        return h

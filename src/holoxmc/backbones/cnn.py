"""XML-CNN backbone (Liu et al., "Deep Learning for Extreme Multi-label Text
Classification", SIGIR 2017): word embeddings, 1-D convolutions of several widths, dynamic
max-pooling (each feature map is split into ``pooling_chunks`` pieces and max-pooled per
piece, keeping coarse position), then a fully-connected bottleneck layer."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from holoxmc.backbones.dropout import Dropout
from holoxmc.backbones.tokens import PAD, copy_word_vectors_
from holoxmc.codes.hrr import Stream, local_generator
from holoxmc.errors import InputError
from holoxmc.heads.dense import reset_linear_

__all__ = ["XMLCNNBackbone", "PAD"]


class XMLCNNBackbone(nn.Module):
    """Token ids → convolution + dynamic max-pooling → bottleneck vector.

    Args:
        vocab_size: number of token ids, PAD (= 0) included.
        embed_dim: word-embedding width.
        filter_sizes: convolution widths (one bank of ``n_filters`` per width).
        n_filters: feature maps per width.
        pooling_chunks: pieces each feature map is max-pooled over (dynamic max-pooling).
        bottleneck: width of the hidden layer and of the output.
        dropout: dropout on the embeddings and after the bottleneck.
        max_length: the width every row is cut or padded to, so that the dynamic max-pooling
            chunks of a row do not depend on the batch it is in (``None``: the input's width).
        seed: seed of the weight initialisation (local generator).

    Shapes:
        forward: ``LongTensor (B, T)`` padded with 0 → ``(B, bottleneck)``.

    Example:
        >>> net = XMLCNNBackbone(100, embed_dim=16, n_filters=4, bottleneck=8)
        >>> net(torch.randint(1, 100, (3, 20))).shape
        torch.Size([3, 8])
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        embed_dim: int = 300,
        filter_sizes: Sequence[int] = (2, 4, 8),
        n_filters: int = 32,
        pooling_chunks: int = 8,
        bottleneck: int = 512,
        dropout: float = 0.5,
        max_length: int | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if max_length is not None and max_length < 1:
            raise InputError(f"max_length must be a positive integer or None, got {max_length}")
        self.max_length = max_length
        filter_sizes = tuple(int(width) for width in filter_sizes)
        if vocab_size < 2 or not filter_sizes or min(filter_sizes) < 1:
            raise InputError(f"need vocab_size >= 2 and positive filter sizes; got {vocab_size}, {filter_sizes}")
        self.min_length = max(filter_sizes)
        self.pooling_chunks = int(pooling_chunks)
        self.out_features = int(bottleneck)
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=PAD)
        self.convolutions = nn.ModuleList(nn.Conv1d(embed_dim, n_filters, width) for width in filter_sizes)
        self.bottleneck = nn.Linear(len(filter_sizes) * n_filters * self.pooling_chunks, self.out_features)
        self.dropout = Dropout(dropout)
        self.reset_parameters(local_generator(seed, Stream.CNN_INIT))

    def reset_parameters(self, generator: torch.Generator) -> None:
        """Embeddings from N(0, 1) (PAD row zero); layers from U(±1/√fan_in)."""
        with torch.no_grad():
            nn.init.normal_(self.embedding.weight, generator=generator)
            self.embedding.weight[PAD].zero_()
        for layer in [*self.convolutions, self.bottleneck]:
            reset_linear_(layer, generator)

    def load_word_vectors(self, ids: Tensor, vectors: Tensor) -> None:
        """Initialise the embedding rows ``ids`` with pre-trained ``vectors`` ``(n, embed_dim)``."""
        copy_word_vectors_(self.embedding, ids, vectors)

    def forward(self, tokens: Tensor) -> Tensor:
        width = max(self.min_length, tokens.shape[1] if self.max_length is None else self.max_length)
        tokens = F.pad(tokens[:, :width], (0, max(0, width - tokens.shape[1])), value=PAD)
        embedded = self.dropout(self.embedding(tokens)).transpose(1, 2)  # (B, E, T)
        pooled = [
            F.adaptive_max_pool1d(F.relu(convolution(embedded)), self.pooling_chunks).flatten(1)
            for convolution in self.convolutions
        ]
        return self.dropout(F.relu(self.bottleneck(torch.cat(pooled, dim=1))))

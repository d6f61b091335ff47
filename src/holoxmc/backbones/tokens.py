"""What the text backbones (CNN, LSTM) share: the padding id, the cut of a batch to the
positions it reads, and pre-trained word vectors copied into an embedding table."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from holoxmc.errors import InputError

__all__ = ["PAD", "clip_tokens", "copy_word_vectors_"]

#: The padding token id (row 0 of every embedding table, kept at zero).
PAD = 0


def clip_tokens(tokens: Tensor, max_length: int | None) -> Tensor:
    """The first ``max_length`` positions of a ``(B, T)`` batch of token ids (all when
    ``None``), less the trailing positions that are padding in every row (at least one
    position stays): a batch of short texts costs its longest text, not the padded width.

    Example:
        >>> clip_tokens(torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0]]), None).tolist()
        [[5, 6], [7, 0]]
        >>> clip_tokens(torch.tensor([[5, 6, 7, 0]]), 2).tolist()
        [[5, 6]]
    """
    if max_length is not None:
        tokens = tokens[:, :max_length]
    filled = (tokens != PAD).any(0).nonzero()
    return tokens[:, : int(filled[-1]) + 1 if filled.numel() else 1]


def copy_word_vectors_(embedding: nn.Embedding, ids: Tensor, vectors: Tensor) -> None:
    """Overwrite the rows ``ids`` of ``embedding`` with ``vectors`` (``(n, embed_dim)``).

    Raises:
        InputError: a width other than the table's, an id outside it, or the padding id.

    Example:
        >>> table = nn.Embedding(5, 2, padding_idx=PAD)
        >>> copy_word_vectors_(table, torch.tensor([3]), torch.tensor([[1.0, 2.0]]))
        >>> table.weight[3].tolist()
        [1.0, 2.0]
    """
    rows, width = embedding.weight.shape
    if vectors.ndim != 2 or vectors.shape != (ids.numel(), width):
        raise InputError(f"word vectors of shape {tuple(vectors.shape)} for {ids.numel()} ids; the embedding "
                         f"table is {width} wide (embed_dim)")
    if ids.numel() and (int(ids.min()) <= PAD or int(ids.max()) >= rows):
        raise InputError(f"word-vector ids must lie in [1, {rows}), got {int(ids.min())}..{int(ids.max())}")
    with torch.no_grad():
        embedding.weight[ids.long()] = vectors.to(embedding.weight)

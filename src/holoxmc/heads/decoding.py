"""Decoding label scores that arrive in chunks, so that no ``(B, L)`` matrix is needed:
the top k per row, or every label above a threshold.

Example:
    >>> import torch
    >>> chunks = [(0, torch.tensor([[0.1, 0.9]])), (2, torch.tensor([[0.5, 0.7]]))]
    >>> running_topk(chunks, 2)[1].tolist()
    [[1, 3]]
    >>> above_threshold(chunks, 0.6, n_labels=4).indices.tolist()
    [1, 3]
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

__all__ = ["running_topk", "above_threshold"]


def running_topk(chunks: Iterable[tuple[int, Tensor]], k: int) -> tuple[Tensor, Tensor]:
    """The ``k`` best labels per row over ``(start, scores)`` label chunks, merged as they come.

    Args:
        chunks: ``(start, scores)`` pairs, ``scores`` of shape ``(B, n)`` covering labels
            ``[start, start + n)``.
        k: labels to keep per row (fewer when there are fewer labels).

    Shapes:
        → scores ``(B, k)``, label indices ``(B, k)`` int64, best first.
    """
    best: tuple[Tensor, Tensor] | None = None
    for start, chunk_scores in chunks:
        scores, indices = torch.topk(chunk_scores, min(k, chunk_scores.shape[1]), dim=1)
        indices = indices + start
        if best is not None:
            scores = torch.cat([best[0], scores], 1)
            indices = torch.cat([best[1], indices], 1)
            scores, order = torch.topk(scores, min(k, scores.shape[1]), dim=1)
            indices = indices.gather(1, order)
        best = scores, indices
    if best is None:
        raise ValueError("running_topk needs at least one chunk of scores")
    return best


def above_threshold(chunks: Iterable[tuple[int, Tensor]], threshold: float | Tensor, n_labels: int) -> sp.csr_matrix:
    """Every label whose score exceeds ``threshold`` (one for all rows, or one per row),
    over ``(start, scores)`` label chunks, as a CPU CSR matrix of those scores (column
    indices sorted).

    Shapes:
        chunks: ``(B, n)`` scores covering labels ``[start, start + n)``; threshold: a float
        or ``(B, 1)`` → CSR ``(B, n_labels)``.
    """
    rows, cols, values = [np.empty(0, np.int64)], [np.empty(0, np.int64)], [np.empty(0, np.float32)]
    n_rows = 0
    for start, scores in chunks:
        n_rows = scores.shape[0]
        r, c = torch.nonzero(scores > threshold, as_tuple=True)
        rows.append(r.cpu().numpy())
        cols.append((c + start).cpu().numpy())
        values.append(scores[r, c].detach().float().cpu().numpy())
    found = sp.csr_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))),
                          shape=(n_rows, n_labels))
    found.sort_indices()
    return found

"""Decoding label scores that arrive in chunks, so that no ``(B, L)`` matrix is needed:
the top k per row, or every label above a threshold.

Example:
    >>> import torch
    >>> chunks = [(0, torch.tensor([[0.1, 0.9]])), (2, torch.tensor([[0.5, 0.7]]))]
    >>> running_topk(chunks, 2)[1].tolist()
    [[1, 3]]
    >>> above_threshold(chunks, 0.6, n_labels=4).indices.tolist()
    [1, 3]
    >>> above_fraction_of_best(chunks, 0.75, n_labels=4).indices.tolist()  # > 0.75 * 0.9
    [1, 3]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

__all__ = ["running_topk", "above_threshold", "above_fraction_of_best"]


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


def above_threshold(chunks: Iterable[tuple[int, Tensor]], threshold: float, n_labels: int) -> sp.csr_matrix:
    """Every label whose score exceeds ``threshold``, over ``(start, scores)`` label chunks,
    as a CPU CSR matrix of those scores (column indices sorted).

    Shapes:
        chunks: ``(B, n)`` scores covering labels ``[start, start + n)`` → CSR ``(B, n_labels)``.
    """
    rows, cols, values, n_rows = _entries_above(chunks, lambda scores: threshold)
    return _csr(values, rows, cols, (n_rows, n_labels))


def above_fraction_of_best(chunks: Iterable[tuple[int, Tensor]], fraction: float, n_labels: int) -> sp.csr_matrix:
    """Every label whose score exceeds ``fraction`` times its row's best score, in one pass
    over ``(start, scores)`` label chunks: a chunk keeps the labels above ``fraction`` times
    the row's best so far (a cut that only rises, so no label of the final set is lost), and
    the kept ones are cut again at the row's final best. With ``fraction < 1`` every row
    whose best score is positive keeps at least its best label; a row whose best score is
    at most 0 (an HRR cosine can be) keeps none.

    Shapes:
        chunks: ``(B, n)`` scores covering labels ``[start, start + n)`` → CSR ``(B, n_labels)``.
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"fraction must lie in [0, 1) (at 1 no label exceeds its row's best), got {fraction}")
    best: Tensor | None = None  # each row's best score so far, (B, 1)

    def cut(scores: Tensor) -> Tensor:
        nonlocal best
        chunk_best = scores.detach().amax(1, keepdim=True)
        best = chunk_best if best is None else torch.maximum(best, chunk_best)
        return fraction * best

    rows, cols, values, n_rows = _entries_above(chunks, cut)
    final_cut = np.empty(0, np.float32) if best is None else (fraction * best).float().cpu().numpy()[:, 0]
    keep = values > final_cut[rows]
    return _csr(values[keep], rows[keep], cols[keep], (n_rows, n_labels))


def _entries_above(
    chunks: Iterable[tuple[int, Tensor]], cut: Callable[[Tensor], float | Tensor]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """``(rows, columns, float32 values, n_rows)`` of the scores above ``cut(scores)`` (a
    float, or ``(B, 1)``), chunk by chunk."""
    rows, cols, values = [np.empty(0, np.int64)], [np.empty(0, np.int64)], [np.empty(0, np.float32)]
    n_rows = 0
    for start, scores in chunks:
        n_rows = scores.shape[0]
        r, c = torch.nonzero(scores > cut(scores), as_tuple=True)
        rows.append(r.cpu().numpy())
        cols.append((c + start).cpu().numpy())
        values.append(scores[r, c].detach().float().cpu().numpy())
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(values), n_rows


def _csr(values: np.ndarray, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """A CSR matrix of ``(value, row, column)`` entries, column indices sorted."""
    found = sp.csr_matrix((values, (rows, cols)), shape=shape)
    found.sort_indices()
    return found

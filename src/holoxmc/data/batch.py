"""Mini-batches handed from the data layer to models: CSR rows → torch, never densified.

Two input kinds exist: sparse feature rows (``scipy.sparse`` CSR, consumed by
``nn.EmbeddingBag`` in the FC backbone) and padded token-id sequences (a 2-D integer
array, consumed by text backbones). Labels always travel as a :class:`LabelBatch`,
a ragged list of label indices, so no L-wide vector is ever built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor

__all__ = ["SparseBatch", "LabelBatch", "input_batch", "label_batch"]


@dataclass
class SparseBatch:
    """Rows of a sparse feature matrix in ``nn.EmbeddingBag`` form.

    Shapes:
        indices: ``(nnz,)`` int64 feature ids; offsets: ``(B,)`` int64 start of each row
        in ``indices``; values: ``(nnz,)`` float weights (``per_sample_weights``).
    """

    indices: Tensor
    offsets: Tensor
    values: Tensor
    n_features: int

    def __len__(self) -> int:
        return int(self.offsets.shape[0])

    def to(self, device: torch.device | str) -> "SparseBatch":
        return SparseBatch(
            self.indices.to(device), self.offsets.to(device), self.values.to(device), self.n_features
        )

    @classmethod
    def from_csr(cls, X: sp.csr_matrix) -> "SparseBatch":
        X = sp.csr_matrix(X)
        return cls(
            indices=torch.from_numpy(X.indices.astype(np.int64)),
            offsets=torch.from_numpy(X.indptr[:-1].astype(np.int64)),
            values=torch.from_numpy(X.data.astype(np.float32)),
            n_features=X.shape[1],
        )


@dataclass
class LabelBatch:
    """The present labels of a batch as a ragged array (CSR without values).

    Shapes:
        indices: ``(n_pos,)`` int64 label ids; indptr: ``(B + 1,)`` int64.

    Example:
        >>> import scipy.sparse as sp, numpy as np
        >>> y = LabelBatch.from_csr(sp.csr_matrix(np.array([[0, 1, 1], [0, 0, 0]])))
        >>> y.row_ids().tolist(), y.indices.tolist()
        ([0, 0], [1, 2])
    """

    indices: Tensor
    indptr: Tensor
    n_labels: int

    def __len__(self) -> int:
        return int(self.indptr.shape[0]) - 1

    def to(self, device: torch.device | str) -> "LabelBatch":
        return LabelBatch(self.indices.to(device), self.indptr.to(device), self.n_labels)

    def counts(self) -> Tensor:
        """Number of present labels per row, ``(B,)``."""
        return self.indptr[1:] - self.indptr[:-1]

    def row_ids(self) -> Tensor:
        """Row of every entry of ``indices``, ``(n_pos,)``."""
        rows = torch.arange(len(self), device=self.indices.device)
        # output_size: the entry count is known, so a GPU need not report it back (no sync)
        return torch.repeat_interleave(rows, self.counts(), output_size=self.indices.shape[0])

    def to_dense(self, dtype: torch.dtype = torch.float32) -> Tensor:
        """Multi-hot ``(B, n_labels)`` matrix; only for small label spaces (dense head, tests)."""
        out = torch.zeros(len(self), self.n_labels, dtype=dtype, device=self.indices.device)
        # index_fill_ with a number: no host value to copy to a GPU, so no synchronisation
        out.view(-1).index_fill_(0, self.row_ids() * self.n_labels + self.indices, 1)
        return out

    @classmethod
    def from_csr(cls, Y: sp.csr_matrix) -> "LabelBatch":
        Y = sp.csr_matrix(Y)
        return cls(
            indices=torch.from_numpy(Y.indices.astype(np.int64)),
            indptr=torch.from_numpy(Y.indptr.astype(np.int64)),
            n_labels=Y.shape[1],
        )


def input_batch(X: Any, rows: np.ndarray) -> SparseBatch | Tensor:
    """Select ``rows`` of a model input: CSR features → :class:`SparseBatch`,
    token-id matrix → ``LongTensor (B, T)``; rows of a shard store
    (:class:`~holoxmc.data.shards.ShardedRows`) come back as CSR and are batched alike."""
    part = X[rows]
    if sp.issparse(part):
        return SparseBatch.from_csr(part)
    return torch.from_numpy(np.ascontiguousarray(part).astype(np.int64))


def label_batch(Y: Any, rows: np.ndarray) -> LabelBatch:
    """Select ``rows`` of a binary label matrix as a :class:`LabelBatch`."""
    return LabelBatch.from_csr(Y[rows])

"""SOLAR's seeded random codes: sparse label codes, their inverted index and per-chunk
input feature hashing (Medini et al., ICLR 2021, §3).

Every label gets one bucket in each of K chunks of B buckets (a K-sparse, K·B-wide binary
vector). Chunk k is trained as an independent B-way multi-label model; inference looks the
top buckets of every chunk up in the chunk's inverted index (bucket → labels). All codes are
regenerated from ``seed`` alone, so only the seed must be kept — the index is still saved with
a model so serving never re-derives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.utils import murmurhash3_32
from torch import Tensor

from holoxmc.errors import InputError
from holoxmc.seeding import chunk_seed  # its one home; re-exported here

__all__ = ["SolarLabelCode", "InvertedIndex", "FeatureHash", "chunk_seed"]

CodeMethod = Literal["balanced", "murmur"]


def _check_positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class InvertedIndex:
    """Per-chunk bucket → labels lists in CSR form, all chunks in two arrays.

    Because every label sits in exactly one bucket of each chunk, row k of ``labels`` is a
    permutation of ``0..L-1`` grouped by bucket, and ``indptr[k]`` delimits the buckets.

    Shapes:
        indptr: ``(K, B + 1)`` int64; labels: ``(K, L)`` int32.

    Example:
        >>> index = SolarLabelCode(10, n_chunks=2, n_buckets=3, seed=0).inverted_index()
        >>> sorted(index.bucket(0, 0).tolist() + index.bucket(0, 1).tolist() + index.bucket(0, 2).tolist())
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """

    indptr: np.ndarray
    labels: np.ndarray

    @property
    def n_chunks(self) -> int:
        return int(self.indptr.shape[0])

    @property
    def n_buckets(self) -> int:
        return int(self.indptr.shape[1]) - 1

    @property
    def n_labels(self) -> int:
        return int(self.labels.shape[1])

    def bucket(self, chunk: int, bucket: int) -> np.ndarray:
        """The labels of one bucket of one chunk."""
        start, stop = self.indptr[chunk, bucket], self.indptr[chunk, bucket + 1]
        return self.labels[chunk, start:stop]

    def chunk_csr(self, chunk: int) -> sp.csr_matrix:
        """Chunk ``chunk`` as a binary ``(B, L)`` CSR matrix (bucket rows, label columns)."""
        data = np.ones(self.n_labels, dtype=np.float32)
        return sp.csr_matrix(
            (data, self.labels[chunk], self.indptr[chunk]), shape=(self.n_buckets, self.n_labels)
        )

    def padded(self) -> Tensor:
        """Buckets as a dense ``(K, B, S)`` int64 table, S = the largest bucket; padding is the
        sentinel ``L`` (one past the last label). Used for vectorised candidate look-ups."""
        sizes = np.diff(self.indptr, axis=1)  # (K, B)
        width = int(sizes.max()) if sizes.size else 0
        table = np.full((self.n_chunks, self.n_buckets, width), self.n_labels, dtype=np.int64)
        for k in range(self.n_chunks):  # K iterations; each is one vectorised scatter
            bucket_of_slot = np.repeat(np.arange(self.n_buckets), sizes[k])
            slot_in_bucket = np.arange(self.n_labels) - self.indptr[k, bucket_of_slot]
            table[k, bucket_of_slot, slot_in_bucket] = self.labels[k]
        return torch.from_numpy(table)

    def tensors(self) -> dict[str, Tensor]:
        """The index as named tensors for safetensors."""
        return {
            "index_indptr": torch.from_numpy(np.ascontiguousarray(self.indptr, dtype=np.int64)),
            "index_labels": torch.from_numpy(np.ascontiguousarray(self.labels, dtype=np.int32)),
        }

    @classmethod
    def from_tensors(cls, tensors: dict[str, Tensor]) -> "InvertedIndex":
        return cls(
            indptr=tensors["index_indptr"].numpy().astype(np.int64),
            labels=tensors["index_labels"].numpy().astype(np.int32),
        )


class SolarLabelCode:
    """K-sparse random label codes: label l sits in bucket ``buckets[k, l]`` of chunk k.

    Args:
        n_labels: L, the number of labels.
        n_chunks: K, the number of independent chunks (non-zeros per label code).
        n_buckets: B, buckets per chunk.
        seed: regenerates the codes exactly.
        method: ``"balanced"`` (default: a seeded permutation per chunk dealt round-robin, so
            every bucket holds ⌊L/B⌋ or ⌈L/B⌉ labels) or ``"murmur"`` (the paper's
            ``murmurhash3_32(label, seed_k) mod B``; loads vary like balls in bins).

    Shapes:
        buckets: ``(K, L)`` int32.

    Example:
        >>> code = SolarLabelCode(1000, n_chunks=4, n_buckets=100, seed=1)
        >>> code.buckets.shape, int(code.bucket_loads().min()), int(code.bucket_loads().max())
        ((4, 1000), 10, 10)
    """

    def __init__(
        self,
        n_labels: int,
        n_chunks: int = 16,
        n_buckets: int = 1000,
        seed: int = 0,
        method: CodeMethod = "balanced",
    ) -> None:
        self.n_labels = _check_positive("n_labels", n_labels)
        self.n_chunks = _check_positive("n_chunks", n_chunks)
        self.n_buckets = _check_positive("n_buckets", n_buckets)
        if method not in ("balanced", "murmur"):
            raise InputError(f"method must be 'balanced' or 'murmur', got {method!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise InputError(f"seed must be an integer, got {seed!r}")
        self.seed = int(seed)
        self.method: CodeMethod = method
        self.buckets = np.stack([self._chunk_buckets(k) for k in range(self.n_chunks)])

    def _chunk_buckets(self, chunk: int) -> np.ndarray:
        seed = chunk_seed(self.seed, chunk, "labels")
        if self.method == "balanced":
            order = np.random.default_rng(seed).permutation(self.n_labels)
            buckets = np.empty(self.n_labels, dtype=np.int32)
            buckets[order] = np.arange(self.n_labels, dtype=np.int64) % self.n_buckets
            return buckets
        hashes = murmurhash3_32(np.arange(self.n_labels, dtype=np.int32), seed=seed, positive=True)
        return (np.asarray(hashes, dtype=np.int64) % self.n_buckets).astype(np.int32)

    def bucket_loads(self) -> np.ndarray:
        """Labels per bucket, ``(K, B)`` int64."""
        return np.stack([np.bincount(row, minlength=self.n_buckets) for row in self.buckets])

    def overlap(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Number of chunks in which labels ``a[i]`` and ``b[i]`` share a bucket (the dot product
        of their binary codes; K/B expected for distinct random labels)."""
        return (self.buckets[:, np.asarray(a)] == self.buckets[:, np.asarray(b)]).sum(axis=0)

    def inverted_index(self) -> InvertedIndex:
        """Bucket → labels for every chunk (see :class:`InvertedIndex`)."""
        order = np.argsort(self.buckets, axis=1, kind="stable").astype(np.int32)
        counts = self.bucket_loads()
        indptr = np.zeros((self.n_chunks, self.n_buckets + 1), dtype=np.int64)
        np.cumsum(counts, axis=1, out=indptr[:, 1:])
        return InvertedIndex(indptr=indptr, labels=order)

    def config(self) -> dict:
        """JSON-ready parameters that regenerate this code."""
        return {
            "n_labels": self.n_labels,
            "n_chunks": self.n_chunks,
            "n_buckets": self.n_buckets,
            "seed": self.seed,
            "method": self.method,
        }


class FeatureHash:
    """Seeded signed feature hashing of CSR columns, one instance per chunk.

    Column j goes to ``|h(j)| mod n_hashed`` with sign ``+1`` if ``h(j) >= 0`` else ``-1``
    (``alternate_sign``), where ``h = murmurhash3_32(·, seed)`` — scikit-learn's
    ``FeatureHasher`` scheme applied to integer column ids. Colliding columns are summed.

    Args:
        n_features: D, columns of the input.
        n_hashed: columns after hashing.
        seed: chunk-specific seed, so chunks see different collisions.
        alternate_sign: flip signs by the hash to keep collisions unbiased.

    Example:
        >>> import scipy.sparse as sp
        >>> X = sp.csr_matrix(np.eye(3, 6, dtype=np.float32))
        >>> FeatureHash(6, 4, seed=0).transform(X).shape
        (3, 4)
    """

    def __init__(self, n_features: int, n_hashed: int, seed: int, alternate_sign: bool = True):
        self.n_features = _check_positive("n_features", n_features)
        self.n_hashed = _check_positive("n_hashed", n_hashed)
        self.seed = int(seed)
        self.alternate_sign = bool(alternate_sign)
        hashes = np.asarray(
            murmurhash3_32(np.arange(self.n_features, dtype=np.int32), seed=self.seed), np.int64
        )
        self.column = np.abs(hashes) % self.n_hashed
        self.sign = np.where(hashes >= 0, 1.0, -1.0).astype(np.float32)
        if not self.alternate_sign:
            self.sign[:] = 1.0

    def matrix(self) -> sp.csr_matrix:
        """The ``(D, n_hashed)`` hashing matrix H (one ±1 per row): hashed X = X @ H."""
        return sp.csr_matrix(
            (self.sign, self.column, np.arange(self.n_features + 1)),
            shape=(self.n_features, self.n_hashed),
        )

    def transform(self, X: sp.spmatrix) -> sp.csr_matrix:
        """Hash the columns of ``X`` (``(n, D)`` → ``(n, n_hashed)`` float32 CSR, sorted)."""
        if X.shape[1] != self.n_features:
            raise InputError(f"X has {X.shape[1]} features, the hash expects {self.n_features}")
        out = (sp.csr_matrix(X, dtype=np.float32) @ self.matrix()).tocsr()
        out.sort_indices()
        return out.astype(np.float32)

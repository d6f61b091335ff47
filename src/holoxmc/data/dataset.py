"""The in-memory form every reader returns: CSR features, binary CSR labels, optional text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError

if TYPE_CHECKING:
    from holoxmc.data.text import TextEncoder

__all__ = ["Dataset", "DatasetStats", "holdout_split"]


@dataclass(frozen=True)
class DatasetStats:
    """Summary counts of a dataset, as the Extreme Classification Repository reports them."""

    points: int
    features: int
    labels: int
    labels_per_point: float
    points_per_label: float

    def as_dict(self) -> dict[str, float]:
        return {
            "points": self.points,
            "features": self.features,
            "labels": self.labels,
            "labels_per_point": self.labels_per_point,
            "points_per_label": self.points_per_label,
        }


@dataclass
class Dataset:
    """One split of a multi-label dataset.

    Attributes:
        X: ``(n, n_features)`` CSR float32 features (TF-IDF for text sets).
        Y: ``(n, n_labels)`` CSR float32, values 1, sorted indices. A stored value other
            than 0 or 1, or a position stored twice, is an :class:`InputError`; stored zeros
            are not labels and are dropped.
        name: dataset name (registry name or file stem).
        texts: raw texts, one per row, for text datasets.
        label_names: names of the ``n_labels`` columns of ``Y``, when known.
        tokens: ``(n, max_length)`` int32 padded token ids (``0`` = padding) for text
            backbones, when requested (``load(..., features="tokens")``).
        encoder: for text sets, the :class:`~holoxmc.data.text.TextEncoder` fitted on the
            training texts that made ``X``, ``tokens`` and ``Y``; encode new texts with it.
        groups: each row's group (a JSON-lines set's ``group`` field; ``None`` where a row
            names none), for ``fit(..., groups=...)``; ``None``: the file names no groups.

    Example:
        >>> import scipy.sparse as sp
        >>> d = Dataset(sp.csr_matrix((2, 3)), sp.csr_matrix([[1, 0], [1, 1]]), "toy")
        >>> len(d), d.n_features, d.n_labels
        (2, 3, 2)
    """

    X: sp.csr_matrix
    Y: sp.csr_matrix
    name: str
    texts: list[str] | None = None
    label_names: list[str] | None = None
    tokens: np.ndarray | None = None
    encoder: TextEncoder | None = None
    groups: list[str | int | None] | None = None

    def __post_init__(self) -> None:
        if not sp.issparse(self.X) or not sp.issparse(self.Y):
            raise InputError("Dataset.X and Dataset.Y must be scipy sparse matrices")
        self.X = sp.csr_matrix(self.X, dtype=np.float32)
        self.Y = _binary_labels(self.Y)
        n = self.X.shape[0]
        if self.Y.shape[0] != n:
            raise InputError(f"X has {n} rows but Y has {self.Y.shape[0]}")
        if self.texts is not None and len(self.texts) != n:
            raise InputError(f"{len(self.texts)} texts for {n} rows")
        if self.label_names is not None and len(self.label_names) != self.Y.shape[1]:
            raise InputError(f"{len(self.label_names)} label names for {self.Y.shape[1]} labels")
        if self.tokens is not None and (self.tokens.ndim != 2 or self.tokens.shape[0] != n):
            raise InputError(f"tokens must have shape (n={n}, max_length), got {self.tokens.shape}")

    def __len__(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def n_labels(self) -> int:
        return self.Y.shape[1]

    @property
    def inputs(self) -> sp.csr_matrix | np.ndarray:
        """What a model consumes: ``tokens`` when present, else ``X`` (see ``batch.input_batch``)."""
        return self.tokens if self.tokens is not None else self.X

    def inputs_for(self, backbone: str) -> sp.csr_matrix | np.ndarray:
        """What a model of ``backbone`` consumes: ``X`` for ``"fc"``, else the token ids.

        Raises:
            InputError: a text backbone and a set without raw text.
        """
        if backbone == "fc":
            return self.X
        if self.tokens is None:
            raise InputError(f"{self.name} has no raw text (token ids), which backbone {backbone!r} needs")
        return self.tokens

    def stats(self) -> DatasetStats:
        """Points, features, labels, average labels per point and points per label."""
        n_positive = self.Y.nnz
        return DatasetStats(
            points=len(self),
            features=self.n_features,
            labels=self.n_labels,
            labels_per_point=n_positive / len(self) if len(self) else 0.0,
            points_per_label=n_positive / self.n_labels if self.n_labels else 0.0,
        )


def _binary_labels(Y: sp.spmatrix) -> sp.csr_matrix:
    """``Y`` as canonical CSR float32 with stored values 1 (stored zeros dropped); any other
    value, or a position stored twice, is an :class:`InputError`. The caller's arrays are
    never modified."""
    Y = sp.csr_matrix(Y, dtype=np.float32)
    if Y.has_canonical_format and np.all(Y.data == 1):
        return Y
    Y = Y.copy()
    if not Y.has_sorted_indices:
        Y.sort_indices()
    rows = np.repeat(np.arange(Y.shape[0]), np.diff(Y.indptr))
    repeated = np.flatnonzero((Y.indices[1:] == Y.indices[:-1]) & (rows[1:] == rows[:-1]))
    if repeated.size:
        raise InputError(f"Y stores row {rows[repeated[0]]}, label {Y.indices[repeated[0]]} twice")
    bad = np.flatnonzero((Y.data != 0) & (Y.data != 1))
    if bad.size:
        raise InputError(f"Y must hold 0/1 label values, found {Y.data[bad[0]]:g} at row {rows[bad[0]]}, "
                         f"label {Y.indices[bad[0]]}")
    Y.eliminate_zeros()
    return Y


def holdout_split(dataset: Dataset, fraction: float, seed: int) -> tuple[Dataset, Dataset]:
    """``(train, test)``: a seeded random share ``fraction`` of ``dataset``'s rows held out
    as a test split, the rest kept for training (rows in their file order in both).

    Args:
        dataset: a bag-of-words split (raw-text sets fit their encoder on the training rows,
            so they are split as files, not here).
        fraction: share of the rows held out, in (0, 1); at least one row on each side.
        seed: the split's seed (:func:`holoxmc.seeding.holdout_generator`).

    Raises:
        InputError: a fraction outside (0, 1), a split that leaves a side empty, or raw texts.

    Example:
        >>> import scipy.sparse as sp
        >>> d = Dataset(sp.random(10, 4, density=0.5, format="csr"), sp.eye(10, 3, format="csr"), "toy")
        >>> [len(part) for part in holdout_split(d, 0.2, seed=0)]
        [8, 2]
    """
    from holoxmc.seeding import holdout_generator

    if not 0.0 < fraction < 1.0:
        raise InputError(f"the test fraction must be in (0, 1), got {fraction}")
    if dataset.encoder is not None:
        raise InputError(f"{dataset.name}: raw texts are split by file: give the test texts with --test FILE.jsonl")
    n_test = int(round(fraction * len(dataset)))
    if not 0 < n_test < len(dataset):
        raise InputError(f"{dataset.name}: a test fraction of {fraction} of {len(dataset)} rows leaves "
                         f"{n_test} test rows and {len(dataset) - n_test} training rows; both need at least one")
    test_rows = np.sort(holdout_generator(seed).permutation(len(dataset))[:n_test])
    keep = np.ones(len(dataset), dtype=bool)
    keep[test_rows] = False
    return tuple(Dataset(dataset.X[rows], dataset.Y[rows], dataset.name)  # type: ignore[return-value]
                 for rows in (np.flatnonzero(keep), test_rows))

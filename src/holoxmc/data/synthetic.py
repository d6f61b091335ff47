"""A seeded synthetic XMC generator whose label statistics look like the real sets.

Model (all choices fixed by ``seed``):

* **Label frequencies** are Zipf-like: the label of popularity rank ``r`` (1-based) is
  drawn with probability ``∝ r^-zipf_exponent``; ranks are mapped to label ids by a seeded
  permutation, so frequent labels are not simply the small ids.
* **Labels per point**: ``1 + Poisson(labels_per_point - 1)`` distinct labels, drawn by
  popularity without replacement (over-sample, keep the first distinct draws).
* **Features depend on the labels**: every label owns ``signature_size`` feature ids
  (``murmurhash3_32(label * signature_size + j, seed) mod D``); a point carries each
  signature feature of each of its labels with probability ``signature_keep``, plus
  ``noise_features`` uniform random features. Values are ``log1p(count)``, rows
  L2-normalised, as TF-IDF rows are.

Points are produced in chunks of ``CHUNK_ROWS`` with per-chunk seeds, so memory stays
``O(chunk + L)`` (no dense matrix) for ``L`` in the millions and ``N`` in the millions; the
result does not depend on anything but the arguments.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.data.dataset import Dataset
from holoxmc.errors import InputError
from holoxmc.limits import check_allocation, check_size

__all__ = ["make_synthetic", "SYNTHETIC_PRESETS", "CHUNK_ROWS"]

CHUNK_ROWS = 65_536

#: Named argument sets for :func:`make_synthetic`. ``"demo"`` is the default of
#: ``load("synthetic")`` and ``make demo``: an FC network trains on it in seconds. A preset's
#: ``n_test`` applies only with its own ``n_points``: ``load("synthetic", preset=...,
#: n_points=N)`` makes ``N // 5`` test points unless ``n_test`` is given too.
SYNTHETIC_PRESETS: dict[str, dict[str, float]] = {
    "demo": dict(n_points=10_000, n_test=2_000, n_labels=1_500, n_features=5_000, labels_per_point=4.0),
    # Amazon-670K: N 490,449 / 153,025, D 135,909, L 670,091, 5.45 labels/pt, 3.99 pts/label.
    "amazon-670k-like": dict(
        n_points=490_449, n_test=153_025, n_labels=670_091, n_features=135_909, labels_per_point=5.45
    ),
}

_TRAIN, _TEST = 0, 1


def make_synthetic(
    n_points: int = 10_000,
    n_labels: int = 1_500,
    n_features: int = 5_000,
    *,
    n_test: int | None = None,
    labels_per_point: float = 4.0,
    zipf_exponent: float = 1.0,
    signature_size: int = 10,
    signature_keep: float = 0.5,
    noise_features: int = 10,
    seed: int = 0,
    name: str = "synthetic",
) -> tuple[Dataset, Dataset]:
    """Generate a train and a test split from the same label and feature model.

    Args:
        n_points: training points; ``n_test`` test points (default ``n_points // 5``).
        n_labels, n_features: ``L`` and ``D``.
        labels_per_point: mean labels per point (at least 1 each).
        zipf_exponent: skew of label popularity (0 = uniform).
        signature_size, signature_keep: label-specific features and the chance each
            appears in a point carrying that label.
        noise_features: label-independent random features per point.
        seed: everything is a function of the arguments and this seed.

    The counts and ``seed`` must be integers, the other numbers finite (booleans are
    neither); counts must be at most ``limits.MAX_SIZE``, ``seed`` below ``2**32`` and
    the data must fit this machine's memory (an estimate is checked before anything is
    drawn); anything else is an :class:`InputError`.

    Returns:
        ``(train, test)`` :class:`Dataset` pair with equal ``n_features``/``n_labels``.

    Example:
        >>> train, test = make_synthetic(200, 30, 100, seed=1)
        >>> len(train), len(test), train.n_labels, train.n_features
        (200, 40, 30, 100)
    """
    _check_types(
        integers={"n_points": n_points, "n_labels": n_labels, "n_features": n_features, "signature_size": signature_size,
                  "noise_features": noise_features, "seed": seed, **({} if n_test is None else {"n_test": n_test})},
        reals={"labels_per_point": labels_per_point, "zipf_exponent": zipf_exponent, "signature_keep": signature_keep},
    )
    if n_test is None:
        n_test = n_points // 5
    for size_name, value, minimum in (("n_points", n_points, 1), ("n_labels", n_labels, 1), ("n_features", n_features, 1),
                                      ("signature_size", signature_size, 1), ("n_test", n_test, 0),
                                      ("noise_features", noise_features, 0)):
        check_size(size_name, value, minimum=minimum)
    if not 1.0 <= labels_per_point <= n_labels:
        raise InputError(f"labels_per_point must lie in [1, n_labels={n_labels}], got {labels_per_point}")
    if not 0 <= seed < 2**32:
        raise InputError(f"seed must lie in [0, 2**32), got {seed}")
    if not 0.0 <= signature_keep <= 1.0 or zipf_exponent < 0:
        raise InputError("signature_keep must lie in [0, 1] and zipf_exponent be >= 0")
    check_allocation(_bytes_needed(n_points + n_test, n_labels, labels_per_point, signature_size, noise_features),
                     "make_synthetic")
    model = _LabelModel(n_labels, n_features, zipf_exponent, signature_size, seed)
    splits = []
    for split_id, size in ((_TRAIN, n_points), (_TEST, n_test)):
        chunks = [
            model.sample(
                np.random.default_rng([seed, split_id, chunk]),
                min(CHUNK_ROWS, size - start),
                labels_per_point,
                signature_keep,
                noise_features,
            )
            for chunk, start in enumerate(range(0, size, CHUNK_ROWS))
        ]
        X = sp.vstack([c[0] for c in chunks], format="csr") if chunks else sp.csr_matrix((0, n_features))
        Y = sp.vstack([c[1] for c in chunks], format="csr") if chunks else sp.csr_matrix((0, n_labels))
        splits.append(Dataset(X.astype(np.float32), Y.astype(np.float32), name))
    return splits[0], splits[1]


def _bytes_needed(n_rows: int, n_labels: int, labels_per_point: float, signature_size: int, noise: int) -> int:
    """An upper estimate of the memory :func:`make_synthetic` uses: the label model (16 bytes
    per label), one chunk's working arrays (about 48 bytes per drawn label, signature and
    noise entry) and the result (8 bytes per stored value of ``X`` and ``Y``)."""
    per_row = 2 * labels_per_point + 2 + labels_per_point * signature_size + noise
    chunk = min(CHUNK_ROWS, n_rows)
    stored = n_rows * (labels_per_point * (signature_size + 1) + noise)
    return int(16 * n_labels + 48 * chunk * per_row + 8 * stored)


def _check_types(integers: dict[str, Any], reals: dict[str, Any]) -> None:
    """:class:`InputError` unless ``integers`` are integers and ``reals`` finite numbers."""
    for name, value in integers.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InputError(f"{name} must be an integer, got {value!r}")
    for name, value in reals.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise InputError(f"{name} must be a finite number, got {value!r}")


class _LabelModel:
    """Label popularity (Zipf CDF over a seeded permutation) and hashed label signatures."""

    def __init__(self, n_labels: int, n_features: int, zipf_exponent: float, signature_size: int, seed: int):
        self.n_labels, self.n_features, self.signature_size, self.seed = n_labels, n_features, signature_size, seed
        popularity = np.arange(1, n_labels + 1, dtype=np.float64) ** -zipf_exponent
        self.cdf = np.cumsum(popularity)
        self.cdf /= self.cdf[-1]
        self.label_of_rank = np.random.default_rng([seed, 2]).permutation(n_labels)

    def sample(
        self, rng: np.random.Generator, size: int, labels_per_point: float, keep: float, noise: int
    ) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        from sklearn.preprocessing import normalize
        from sklearn.utils import murmurhash3_32

        counts = np.minimum(1 + rng.poisson(labels_per_point - 1.0, size), self.n_labels)
        rows, labels = self._distinct_labels(rng, counts)
        Y = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, labels)), shape=(size, self.n_labels))
        Y.sort_indices()
        # label signatures: hashed (label, j) -> feature, each kept with probability `keep`
        sig_rows = np.repeat(rows, self.signature_size)
        keys = (np.repeat(labels, self.signature_size) * self.signature_size + np.tile(
            np.arange(self.signature_size), len(labels)
        )) % (2**31 - 1)
        sig_features = murmurhash3_32(keys.astype(np.int32), seed=self.seed, positive=True) % self.n_features
        kept = rng.random(len(sig_rows)) < keep
        noise_rows = np.repeat(np.arange(size), noise)
        noise_features = rng.integers(0, self.n_features, len(noise_rows))
        feature_rows = np.concatenate([sig_rows[kept], noise_rows])
        features = np.concatenate([sig_features[kept].astype(np.int64), noise_features])
        X = sp.csr_matrix(
            (np.ones(len(features), np.float32), (feature_rows, features)), shape=(size, self.n_features)
        )
        X.sum_duplicates()
        X.data = np.log1p(X.data)
        return normalize(X).astype(np.float32), Y

    def _distinct_labels(self, rng: np.random.Generator, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``counts[i]`` distinct popularity-drawn labels for row ``i`` (fewer only if the
        over-sampled draws of a row hold fewer distinct labels)."""
        draws = 2 * counts + 2
        draw_rows = np.repeat(np.arange(len(counts)), draws)
        ranks = np.minimum(np.searchsorted(self.cdf, rng.random(len(draw_rows)), side="right"), self.n_labels - 1)
        labels = self.label_of_rank[ranks]
        _, first = np.unique(draw_rows * np.int64(self.n_labels) + labels, return_index=True)
        first.sort()  # distinct draws in draw order, rows stay grouped
        rows, labels = draw_rows[first], labels[first]
        rank_in_row = np.arange(len(rows)) - np.searchsorted(rows, rows, side="left")
        keep = rank_in_row < counts[rows]
        return rows[keep], labels[keep]

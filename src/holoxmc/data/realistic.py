"""A seeded XMC generator shaped like real bag-of-words XMC data, for "unseen data" benchmarks.

:func:`~holoxmc.data.make_synthetic` gives every label features of its own, which tree
libraries then solve almost perfectly. Real sets are harder, and this generator models why
(all choices fixed by ``seed``):

* **Power-law label frequencies**: label of popularity rank ``r`` is drawn with probability
  ``∝ r^-zipf_exponent`` (ranks mapped to ids by a seeded permutation), so most labels have
  a handful of training points and some never occur in training at all.
* **Topics**: labels are spread over ``n_topics`` topics; a point's first label is drawn by
  popularity, its further labels come from the same topic with probability
  ``topic_cohesion`` (by popularity within the topic), else from all labels.
* **Shared vocabulary**: each topic owns ``topic_words`` words shared by all its labels; a
  label has only ``label_words`` words of its own, drawn like ordinary words (they also
  occur as background words and as other labels' words).
* **Partial evidence**: a point is a document of ``1 + Poisson(doc_length - 1)`` tokens. A
  token is background noise with probability ``noise``: a Zipf-distributed word
  (exponent ``word_exponent``) that does not depend on the labels. Otherwise it is evidence
  for one of the point's labels (picked uniformly): one of the label's own words with
  probability ``evidence_share``, else one of its topic's words. A point so shows a small
  random subset of its labels' words.
* **TF-IDF rows**: sublinear term frequency ``1 + log(count)`` times the smoothed inverse
  document frequency of the *training* split (``log((1 + N) / (1 + df)) + 1``, applied to
  both splits), rows L2-normalised.

Points are drawn in chunks of :data:`~holoxmc.data.synthetic.CHUNK_ROWS` with per-chunk
seeds, vectorised; memory is linear in the output (``n_points + n_test`` rows of about
``doc_length`` nonzeros) plus ``O(n_labels + n_features)``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.data.dataset import Dataset
from holoxmc.data.synthetic import CHUNK_ROWS
from holoxmc.errors import InputError
from holoxmc.limits import check_allocation, check_size

__all__ = ["make_realistic", "RealisticConfig", "REALISTIC_PRESETS"]

#: bytes of output (float32 value + int32 index) and of transient per-token work per nonzero
_BYTES_PER_TOKEN = 64

#: Registry names of :func:`make_realistic` sets (``holoxmc.data.load(name, split)``): the
#: shapes of Amazon-670K (N, test N, D and labels per point of the published set) and of an
#: Amazon-3M-like set at L = 3,000,000, and two smaller steps of the scaling study at the same
#: points-per-label ratio. ``zipf_exponent`` 0.7 gives Amazon-670K's label tail at its size:
#: about 16% of the labels never occur in training and about 70% have 1-5 training points
#: (1.2, the default, leaves most of 670K labels unseen). ``noise`` 0.6 (the default 0.93 is far
#: harder) is calibrated on held-out training rows so that the tree libraries score P@1 in the
#: 40-60 of real sets of this size (docs/results/panel.md, "Calibration"). Other knobs:
#: :class:`RealisticConfig`'s.
REALISTIC_PRESETS: dict[str, dict[str, Any]] = {
    "realistic-10k": {"n_points": 7_300, "n_test": 2_300, "n_labels": 10_000, "n_features": 20_000,
                      "labels_per_point": 5.45, "zipf_exponent": 0.7, "noise": 0.6},
    "realistic-100k": {"n_points": 73_000, "n_test": 23_000, "n_labels": 100_000, "n_features": 60_000,
                       "labels_per_point": 5.45, "zipf_exponent": 0.7, "noise": 0.6},
    "realistic-670k": {"n_points": 490_449, "n_test": 153_025, "n_labels": 670_091, "n_features": 135_909,
                       "labels_per_point": 5.45, "zipf_exponent": 0.7, "noise": 0.6},
    "realistic-3m": {"n_points": 1_717_899, "n_test": 742_507, "n_labels": 3_000_000, "n_features": 337_067,
                     "labels_per_point": 36.04, "zipf_exponent": 0.7, "noise": 0.6},
}


@dataclass(frozen=True)
class RealisticConfig:
    """The knobs of :func:`make_realistic` (see its docstring), validated together."""

    labels_per_point: float = 4.0
    zipf_exponent: float = 1.2
    n_topics: int | None = None
    topic_words: int = 40
    label_words: int = 3
    topic_cohesion: float = 0.7
    doc_length: float = 60.0
    noise: float = 0.93
    evidence_share: float = 0.3
    word_exponent: float = 1.0

    def topics(self, n_labels: int) -> int:
        """The topic count: ``n_topics``, or ``ceil(n_labels / 20)`` by default."""
        return self.n_topics if self.n_topics is not None else max(1, math.ceil(n_labels / 20))


def make_realistic(
    n_points: int = 10_000,
    n_labels: int = 1_000,
    n_features: int = 5_000,
    *,
    n_test: int | None = None,
    seed: int = 0,
    name: str = "realistic",
    **knobs: Any,
) -> tuple[Dataset, Dataset]:
    """Generate a train and a test split from one topic model of labels and words.

    Args:
        n_points: training points; ``n_test`` test points (default ``n_points // 5``).
        n_labels, n_features: ``L`` and ``D`` (the vocabulary size).
        seed: everything is a function of the arguments and this seed.
        name: the datasets' name.
        **knobs: :class:`RealisticConfig` fields:
            ``labels_per_point`` (mean, at least 1; default 4),
            ``zipf_exponent`` (label popularity skew, default 1.2),
            ``n_topics`` (default ``ceil(L / 20)``),
            ``topic_words`` (words a topic's labels share, default 40),
            ``label_words`` (words of a label's own, default 3),
            ``topic_cohesion`` (chance a further label is from the first label's topic, 0.7),
            ``doc_length`` (mean tokens per point, default 60),
            ``noise`` (share of tokens that are label-independent background words, 0.93),
            ``evidence_share`` (share of evidence tokens drawn from a label's own words
            rather than its topic's, 0.3),
            ``word_exponent`` (Zipf exponent of the background words, 1.0).

    Returns:
        ``(train, test)`` :class:`Dataset` pair with equal ``n_features``/``n_labels``;
        float32 TF-IDF rows of unit L2 norm (a row without tokens stays empty).

    Raises:
        InputError: a size or knob of the wrong type or out of range, an unknown knob, or
            an output larger than this machine's memory.

    Example:
        >>> train, test = make_realistic(300, 50, 400, seed=1)
        >>> len(train), len(test), train.n_labels, train.n_features
        (300, 60, 50, 400)
    """
    n_points, n_labels, n_features, n_test, seed = _check_sizes(n_points, n_labels, n_features, n_test, seed)
    config = _check_knobs(knobs, n_labels)
    check_allocation(int((n_points + n_test) * (config.doc_length + config.labels_per_point) * _BYTES_PER_TOKEN),
                     f"make_realistic({n_points} + {n_test} points)")
    model = _TopicModel(n_labels, n_features, config, seed)
    counts = [_sample_split(model, seed, split, size) for split, size in enumerate((n_points, n_test))]
    idf = _idf(counts[0][0])
    return _as_dataset(*counts[0], idf, name), _as_dataset(*counts[1], idf, name)


def _check_sizes(n_points: Any, n_labels: Any, n_features: Any, n_test: Any, seed: Any) -> tuple[int, ...]:
    """The sizes as ints once each is an integer in range (:class:`InputError` otherwise)."""
    n_points = check_size("n_points", n_points)
    n_test = n_points // 5 if n_test is None else check_size("n_test", n_test, minimum=0)
    return (n_points, check_size("n_labels", n_labels), check_size("n_features", n_features), n_test,
            check_size("seed", seed, minimum=0, limit=2**63 - 1))


def _check_knobs(knobs: dict[str, Any], n_labels: int) -> RealisticConfig:
    """The validated :class:`RealisticConfig` of ``knobs``."""
    fields = RealisticConfig.__dataclass_fields__
    unknown = sorted(set(knobs) - set(fields))
    if unknown:
        raise InputError(f"unknown make_realistic argument(s) {', '.join(unknown)} (known: {', '.join(fields)})")
    for key in ("n_topics", "topic_words", "label_words"):
        if key in knobs and not (key == "n_topics" and knobs[key] is None):
            check_size(key, knobs[key], minimum=0 if key == "label_words" else 1, limit=n_labels if key == "n_topics"
                       else 1_000_000)
    for key, value in knobs.items():
        if key not in ("n_topics", "topic_words", "label_words") and (
                isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value)):
            raise InputError(f"{key} must be a finite number, got {value!r}")
    config = RealisticConfig(**knobs)
    if not 1.0 <= config.labels_per_point <= n_labels:
        raise InputError(f"labels_per_point must lie in [1, n_labels={n_labels}], got {config.labels_per_point}")
    if not 1.0 <= config.doc_length <= 100_000:
        raise InputError(f"doc_length must lie in [1, 100000], got {config.doc_length}")
    for key in ("topic_cohesion", "noise", "evidence_share"):
        if not 0.0 <= getattr(config, key) <= 1.0:
            raise InputError(f"{key} must lie in [0, 1], got {getattr(config, key)}")
    if config.label_words == 0 and config.evidence_share > 0:
        raise InputError("evidence_share must be 0 when label_words is 0")
    if config.zipf_exponent < 0 or config.word_exponent < 0:
        raise InputError("zipf_exponent and word_exponent must be >= 0")
    return config


def _zipf_cdf(n: int, exponent: float) -> np.ndarray:
    """Cumulative probabilities of ranks ``1..n`` under ``p(r) ∝ r^-exponent``."""
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -exponent)
    return cdf / cdf[-1]


def _draw(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices drawn from ``cdf`` with uniforms ``u``."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)


class _TopicModel:
    """Label popularity, topics, their shared words, labels' own words and background words."""

    def __init__(self, n_labels: int, n_features: int, config: RealisticConfig, seed: int):
        rng = np.random.default_rng([seed, 2])
        self.n_labels, self.n_features, self.config = n_labels, n_features, config
        self.label_cdf = _zipf_cdf(n_labels, config.zipf_exponent)
        self.label_of_rank = rng.permutation(n_labels)
        self.word_cdf = _zipf_cdf(n_features, config.word_exponent)
        self.word_of_rank = rng.permutation(n_features)
        n_topics = config.topics(n_labels)
        self.topic_of_label = rng.integers(0, n_topics, n_labels)
        self.topic_of_label[rng.permutation(n_labels)[:n_topics]] = np.arange(n_topics)  # no empty topic
        # words shared by a topic's labels: uniform over the vocabulary (rare and common words alike)
        self.topic_word = rng.integers(0, n_features, (n_topics, config.topic_words))
        # a label's own words are drawn like background words, so they also occur without it
        self.label_word = self.word_of_rank[_draw(self.word_cdf, rng.random((n_labels, config.label_words)))]
        # within-topic popularity: ranks grouped by the topic of their label
        weight = np.diff(self.label_cdf, prepend=0.0)
        topic_of_rank = self.topic_of_label[self.label_of_rank]
        self.rank_by_topic = np.argsort(topic_of_rank, kind="stable")
        self.topic_cum = np.concatenate([[0.0], np.cumsum(weight[self.rank_by_topic])])
        ends = np.searchsorted(topic_of_rank[self.rank_by_topic], np.arange(n_topics + 1), side="left")
        self.topic_lo, self.topic_hi = ends[:-1], ends[1:]

    def labels(self, rng: np.random.Generator, size: int) -> sp.csr_matrix:
        """``size`` rows of ``1 + Poisson(labels_per_point - 1)`` distinct labels (fewer only
        where the over-sampled draws of a row hold fewer distinct labels)."""
        counts = np.minimum(1 + rng.poisson(self.config.labels_per_point - 1.0, size), self.n_labels)
        draws = 2 * counts + 2
        starts = np.concatenate([[0], np.cumsum(draws)[:-1]])
        rows = np.repeat(np.arange(size), draws)
        ranks = _draw(self.label_cdf, rng.random(len(rows)))
        topic = self.topic_of_label[self.label_of_rank[ranks[starts]]][rows]  # the first label's topic
        same = rng.random(len(rows)) < self.config.topic_cohesion
        same[starts] = False
        lo, hi = self.topic_cum[self.topic_lo[topic[same]]], self.topic_cum[self.topic_hi[topic[same]]]
        position = np.searchsorted(self.topic_cum, lo + rng.random(int(same.sum())) * (hi - lo), side="right") - 1
        position = np.clip(position, self.topic_lo[topic[same]], self.topic_hi[topic[same]] - 1)
        ranks[same] = self.rank_by_topic[position]
        labels = self.label_of_rank[ranks]
        _, first = np.unique(rows * np.int64(self.n_labels) + labels, return_index=True)
        first.sort()  # distinct draws in draw order, rows stay grouped
        rows, labels = rows[first], labels[first]
        keep = np.arange(len(rows)) - np.searchsorted(rows, rows, side="left") < counts[rows]
        Y = sp.csr_matrix((np.ones(int(keep.sum()), np.float32), (rows[keep], labels[keep])),
                          shape=(size, self.n_labels))
        Y.sort_indices()
        return Y

    def words(self, rng: np.random.Generator, Y: sp.csr_matrix) -> sp.csr_matrix:
        """Token counts of each row of ``Y``: background words and partial label evidence."""
        size, config = Y.shape[0], self.config
        lengths = 1 + rng.poisson(config.doc_length - 1.0, size)
        rows = np.repeat(np.arange(size), lengths)
        per_row = np.diff(Y.indptr)[rows]
        is_evidence = (rng.random(len(rows)) >= config.noise) & (per_row > 0)
        words = np.empty(len(rows), np.int64)
        words[~is_evidence] = self.word_of_rank[_draw(self.word_cdf, rng.random(len(rows) - int(is_evidence.sum())))]
        evidence = np.flatnonzero(is_evidence)
        pick = Y.indptr[rows[evidence]] + (rng.random(len(evidence)) * per_row[evidence]).astype(np.int64)
        label = Y.indices[pick]
        own = rng.random(len(evidence)) < config.evidence_share
        words[evidence[own]] = self.label_word[label[own], rng.integers(0, max(config.label_words, 1), int(own.sum()))]
        topical = evidence[~own]
        words[topical] = self.topic_word[self.topic_of_label[label[~own]],
                                         rng.integers(0, config.topic_words, len(topical))]
        X = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, words)), shape=(size, self.n_features))
        X.sum_duplicates()
        return X


def _sample_split(model: _TopicModel, seed: int, split: int, size: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Token counts and labels of one split, drawn chunk by chunk with per-chunk seeds."""
    Xs, Ys = [], []
    for chunk, start in enumerate(range(0, size, CHUNK_ROWS)):
        rng = np.random.default_rng([seed, split, chunk])
        Y = model.labels(rng, min(CHUNK_ROWS, size - start))
        Xs.append(model.words(rng, Y))
        Ys.append(Y)
    if not Xs:
        return sp.csr_matrix((0, model.n_features), dtype=np.float32), sp.csr_matrix((0, model.n_labels),
                                                                                      dtype=np.float32)
    return sp.vstack(Xs, format="csr"), sp.vstack(Ys, format="csr")


def _idf(counts: sp.csr_matrix) -> np.ndarray:
    """Smoothed inverse document frequency of the training counts."""
    df = np.bincount(counts.indices, minlength=counts.shape[1])
    return (np.log((1.0 + counts.shape[0]) / (1.0 + df)) + 1.0).astype(np.float32)


def _as_dataset(counts: sp.csr_matrix, Y: sp.csr_matrix, idf: np.ndarray, name: str) -> Dataset:
    """Sublinear-tf times ``idf``, rows L2-normalised, as a :class:`Dataset`."""
    X = counts.astype(np.float32, copy=True)
    X.data = (1.0 + np.log(X.data)) * idf[X.indices]
    row = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    X.data /= np.sqrt(np.bincount(row, X.data.astype(np.float64) ** 2, minlength=X.shape[0]))[row].astype(np.float32)
    return Dataset(X, Y.astype(np.float32), name)

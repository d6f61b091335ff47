"""Sizes holoxmc accepts from data it did not make: one bound for a count a file or a model
folder claims, and a check of an allocation against the machine's memory.

A file's header, a label id or a saved ``config.json`` can claim any size; nothing is
allocated from such a claim before it passes these checks, so a hostile or corrupt input
gives one :class:`~holoxmc.errors.InputError` instead of exhausting the machine.

Example:
    >>> check_size("n_labels", 159)
    159
    >>> check_size("n_labels", 10**12)
    Traceback (most recent call last):
    ...
    holoxmc.errors.InputError: n_labels 1000000000000 is larger than holoxmc accepts (at most 2147483647)
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from holoxmc.errors import InputError
from holoxmc.presets import HEAD_DEFAULTS, RERANK_BUDGETS, RERANK_SHORTLIST, fc_candidate_runs
from holoxmc.settings import DEFAULTS

__all__ = ["MAX_SIZE", "check_size", "physical_memory_bytes", "address_space_left", "check_allocation",
           "FEATURE_BYTES", "check_feature_memory", "SOLAR_HASH_ABOVE", "check_fit_memory", "FIT_SECONDS",
           "FIT_BYTES", "LABEL_BYTES_EXPONENT", "ANNOUNCE_SECONDS", "FitEstimate", "estimate_fit", "rerank_shortlists"]

#: The largest row, feature or label count (and so index + 1) accepted anywhere: indices are
#: int32 in scipy's CSR matrices and in the label codes.
MAX_SIZE = 2**31 - 1


def check_size(name: str, value: Any, *, where: str | None = None, limit: int = MAX_SIZE, minimum: int = 1) -> int:
    """``value`` as an ``int`` once it is an integer in ``[minimum, limit]``.

    Args:
        name: what the value counts, for the message (``"n_labels"``, ``"declared D"``).
        value: the claimed size (an int; a bool, float, NaN or string is refused).
        where: the file (and line) it came from, prefixed to the message.
        limit: the largest accepted value.
        minimum: the smallest accepted value.

    Raises:
        InputError: naming ``where``, ``name`` and the bound.
    """
    prefix = f"{where}: " if where else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{prefix}{name} must be an integer, got {value!r}")
    value = int(value)
    if value < minimum:
        raise InputError(f"{prefix}{name} must be at least {minimum}, got {value}")
    if value > limit:
        raise InputError(f"{prefix}{name} {value} is larger than holoxmc accepts (at most {limit})")
    return value


def physical_memory_bytes() -> int:
    """This machine's physical memory in bytes (``sysconf``; 2**40 where it cannot tell)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return 2**40


def address_space_left() -> int | None:
    """The bytes this process may still map under its address-space limit (``ulimit -v``,
    ``RLIMIT_AS``, less what it maps already); ``None`` when there is no such limit."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as f:
            mapped = int(f.read().split()[0]) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ImportError, AttributeError, OSError, ValueError):
        return None
    return max(soft - mapped, 0)


def check_allocation(n_bytes: int, what: str, *, where: str | None = None) -> None:
    """Refuse to allocate ``n_bytes`` for ``what`` when that exceeds the physical memory, or
    what is left of this process's address-space limit (``ulimit -v``) where one is set.

    Raises:
        InputError: the allocation could never succeed on this machine (or in this process).
    """
    available, limited = physical_memory_bytes(), address_space_left()
    prefix = f"{where}: " if where else ""
    if n_bytes > available:
        raise InputError(f"{prefix}{what} would need {n_bytes / 2**30:.1f} GiB, more than this machine's "
                         f"{available / 2**30:.1f} GiB of memory")
    if limited is not None and n_bytes > limited:
        raise InputError(f"{prefix}{what} would need {n_bytes / 2**30:.1f} GiB, more than the "
                         f"{limited / 2**30:.1f} GiB this process may still use (ulimit -v)")


#: Bytes per input feature (column of X) that training allocates at least, per family: the
#: growth of the peak resident memory of a 3-row fit at D = 4M and 16M features (linear 24,
#: re-rank 37; the linear model's per-label float64 weights and liblinear's copy, the
#: re-rank model's transposed feature-label products) and, for SOLAR, per chunk, its feature
#: hash (an int64 column and a float32 sign per feature, and the hashing matrix's index).
FEATURE_BYTES = {"linear": 24, "rerank": 37, "solar_chunk": 24}


def check_feature_memory(head: str, n_features: int, *, n_chunks: int = 8, workers: int = 1, hashed: bool = True,
                         where: str | None = None) -> None:
    """Refuse, before training, a feature count ``D`` (a data file's header can claim any)
    whose per-feature memory of model ``head`` cannot fit: ``linear`` and ``rerank``
    (``auto`` trains ``rerank`` first), ``solar`` when it hashes its input (``D`` above
    ``2**17`` by default). The networks (``dense``, ``hrr``, SOLAR's chunks) are checked by
    their own weight sizes.

    Raises:
        InputError: ``"<what> would need N GiB, more than ..."``.

    Example:
        >>> check_feature_memory("linear", 2**31 - 1, workers=64)
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: training linear on 2147483647 features would need 3072.0 GiB, ...
    """
    per_feature = {"linear": FEATURE_BYTES["linear"] * max(workers, 1), "rerank": FEATURE_BYTES["rerank"],
                   "auto": FEATURE_BYTES["rerank"],
                   "solar": FEATURE_BYTES["solar_chunk"] * n_chunks if hashed else 0}.get(head, 0)
    check_allocation(per_feature * n_features, f"training {head} on {n_features} features", where=where)


#: SOLAR hashes its input above this many features unless ``feature_dim`` says otherwise
#: (:class:`~holoxmc.models.solar.config.SolarConfig`).
SOLAR_HASH_ABOVE = 2**17


def check_fit_memory(params: Mapping[str, Any], n_features: int, *, where: str | None = None) -> None:
    """:func:`check_feature_memory` for the ``XMCClassifier`` keywords ``params`` (its
    ``get_params()``, or the ``holoxmc train`` call's): what ``fit`` and the command line both
    run before any training.

    Raises:
        InputError: ``"<what> would need N GiB, more than ..."``.

    Example:
        >>> check_fit_memory({"head": "linear", "n_jobs": 64}, 2**31 - 1)
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: training linear on 2147483647 features would need 3072.0 GiB, ...
    """
    head_options = params.get("head_options") or {}
    n_jobs = params.get("n_jobs")
    workers = int(params.get("workers") or 1) if n_jobs is None else int(os.cpu_count() or 1) if n_jobs == -1 \
        else int(n_jobs)
    check_feature_memory(str(params.get("head", "auto")), n_features, n_chunks=int(head_options.get("n_chunks") or 8),
                         workers=workers, hashed=head_options.get("feature_dim") is not None
                         or n_features > SOLAR_HASH_ABOVE, where=where)


# ---------------------------------------------------------------------------- the default fit's cost
#: Seconds per unit of each term of :func:`estimate_fit`'s time model (how they were
#: calibrated: :func:`estimate_fit`). ``retrieval``: a training or validation row scored
#: against one label by the PIFA retriever's dense product (up to 30,000 labels);
#: ``retrieval_postings``: one posting its sparse shortlist reads past that (set from the
#: compiled shortlist's time in ``benchmarks/shortlist_speed.py`` at L = 670K, two threads;
#: not fitted; docs/results/speed.md); ``label_fits``: a stored feature of a row in one
#: label's problem; ``per_label``: a label's own fit; ``rule``: one entry (row x label) of
#: the confidences that ``predict``'s rule reads, ``rule_pairs`` one of those its calibration fits
#: on (at most ``_RULE_PAIRS``); ``fc_epoch``: a row x (its features +
#: hidden width + L) of one FC epoch; ``fixed``: what every re-rank fit costs.
FIT_SECONDS: dict[str, float] = {"fixed": 0.17, "retrieval": 1.9e-8, "retrieval_postings": 1.1e-8,
                                 "label_fits": 3.8e-8, "per_label": 5.1e-6, "rule": 4.5e-8, "rule_pairs": 1.0e-6,
                                 "fc_epoch": 5.6e-8}
#: Bytes of the peak resident memory: ``base`` (the interpreter, NumPy, SciPy and torch
#: loaded) and ``labels`` x L ** :data:`LABEL_BYTES_EXPONENT` (the retriever's index, the
#: weights and the scoring blocks, bounded in size, grow slower than L), both fitted; and, set
#: from the arrays' types, ``nnz`` per stored entry of X (its float32 values and int32 indices
#: in a few copies), ``shortlist`` per training-shortlist entry (its int32 label, the
#: memberships' index and flag) and ``fc_param`` per FC parameter when that candidate runs
#: (float32 weights, gradients and Adam's two moments).
FIT_BYTES: dict[str, float] = {"base": 2.8e8, "labels": 1.8e7, "nnz": 40.0, "shortlist": 24.0, "fc_param": 16.0}
#: The exponent of L in the memory model (fitted with ``FIT_BYTES["labels"]``).
LABEL_BYTES_EXPONENT = 0.34
#: Fits expected to take longer than this many seconds are announced before they start.
ANNOUNCE_SECONDS = 30.0


@dataclass(frozen=True)
class FitEstimate:
    """What :func:`estimate_fit` expects of a fit.

    Attributes:
        seconds: the expected wall seconds: the re-rank model alone where ``head="auto"``
            does not train its FC candidate, else the FC network trained within the budget and
            winning (its finishing epoch on every row on top), as it led every recorded
            selection where it trains (:func:`holoxmc.presets.fc_candidate_runs`).
        peak_bytes: the process's peak resident memory.
    """

    seconds: float
    peak_bytes: float

    def summary(self) -> str:
        """One line for the command line.

        Example:
            >>> FitEstimate(95.0, 1.5 * 2**30).summary()
            'about 1.6 min, peak memory about 1.5 GiB'
        """
        return f"about {_duration(self.seconds)}, peak memory about {self.peak_bytes / 2**30:.1f} GiB"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min" if seconds < 5400 \
        else f"{seconds / 3600:.1f} h"


def estimate_fit(rows: int, features: int, nnz: int, labels: int, label_nnz: int, *,
                 head: str = "auto") -> FitEstimate | None:
    """The fit time and peak memory expected of model ``head`` from the shape of the training
    data alone: ``auto`` (the library default: the re-rank candidate on the rows less the
    validation share, the FC candidate while the time budget lasts where it trains, the winner
    finished on every row: :func:`_finish_seconds`, or a network's one epoch more) and
    ``rerank``; ``None`` for other models.

    The time is a sum of terms, each a count of work units times a coefficient of
    :data:`FIT_SECONDS`: the retriever's rows x labels scored (the labels a row's features
    post to past 30,000 labels), the label problems' stored features (rows x the training
    shortlist, plus positives and random negatives), a cost per label, the confidences that
    ``predict``'s rule reads, and FC epochs (only where ``head="auto"`` trains that candidate:
    :func:`holoxmc.auto.skipped_by_rule`). The time coefficients were fitted (non-negative least
    squares on relative error, one stage at a time) to the stage seconds that
    ``benchmarks/fit_profile.py`` measured on four variants of the realistic generator at L = 1K
    to 30K on this project's 2-core machine, quiet; the memory ones (:data:`FIT_BYTES`) on the
    same variants on a busier day. Held out, the estimate was 0.98x Bibtex's measured fit,
    0.85x Delicious' (the FC network winning, as it did), 1.14x an L = 100K variant's, 0.87x
    at 100K labels and 73,000 rows, and 0.64x at two L = 670K variants (docs/results/speed.md).
    Machines, load and the data's difficulty (the solver's iterations) move the real time: it
    is an order of magnitude, not a promise.

    Args:
        rows, features: ``n`` and ``D`` of the training rows; nnz: X's stored entries.
        labels, label_nnz: ``L`` and Y's stored entries.
        head: the model trained.

    Returns:
        The :class:`FitEstimate`, or ``None`` for a model it has no model of.

    Example:
        >>> small = estimate_fit(5_000, 2_000, 300_000, 160, 12_000)
        >>> large = estimate_fit(50_000, 2_000, 3_000_000, 160, 120_000)
        >>> 0 < small.seconds < large.seconds and 0 < small.peak_bytes < large.peak_bytes
        True
        >>> estimate_fit(10, 5, 20, 3, 10, head="solar") is None
        True
    """
    model = _MODELS.get(head)
    return None if model is None or rows < 1 or labels < 1 else model(_Shape(rows, features, nnz, labels, label_nnz))


def _rerank_estimate(shape: _Shape) -> FitEstimate:
    """One re-rank fit on every row, then ``predict``'s rule on them."""
    seconds = _rerank_seconds(shape, shape.rows, 0) + _rule_seconds(shape.rows, shape.labels)
    return FitEstimate(seconds, _peak_bytes(shape, fc=False))


def _auto_estimate(shape: _Shape) -> FitEstimate:
    """``head="auto"``: the re-rank candidate, the FC candidate within the budget, the winner on every row."""
    rows, labels = shape.rows, shape.labels
    held = max(1, int(round(rows * DEFAULTS["val_fraction"])))
    fit_rows = max(rows - held, 1)
    candidate = _rerank_seconds(shape, fit_rows, min(held, _ALPHA_ROWS)) + _rule_seconds(held, labels)
    budget, epochs = float(DEFAULTS["time_budget"]), int(HEAD_DEFAULTS["dense"]["epochs"])
    finish = _finish_seconds(shape, held)
    if not fc_candidate_runs(shape.label_nnz, shape.rows) or 2 * candidate > budget:  # FC does not start
        return FitEstimate(candidate + finish, _peak_bytes(shape, fc=False))
    epoch = _fc_epoch_seconds(shape, fit_rows)
    trained = min(float(epochs), max(budget - candidate, 0.0) / epoch + 1.0)  # it stops past the budget
    network = candidate + trained * epoch + _rule_seconds(held, labels) + _fc_epoch_seconds(shape, rows)  # + 1 epoch
    return FitEstimate(network, _peak_bytes(shape, fc=True))


@dataclass(frozen=True)
class _Shape:
    rows: int
    features: int
    nnz: int
    labels: int
    label_nnz: int


#: The models :func:`estimate_fit` has a model of: ``head -> estimate of a shape``.
_MODELS: dict[str, Callable[[_Shape], FitEstimate]] = {"auto": _auto_estimate, "rerank": _rerank_estimate}
#: Validation rows that choose the re-rank mix weight at most
#: (:data:`holoxmc.models.rerank.fit.ALPHA_ROWS`), and the label count past which its
#: retriever reads each feature's postings, not every label
#: (:data:`holoxmc.models.rerank.model.DENSE_UP_TO`): ``tests/test_fit_estimate.py`` checks
#: these copies (this module imports no model).
_ALPHA_ROWS, _DENSE_UP_TO, _POSTINGS, _NEGATIVES = 10_000, 30_000, 1_000, 30
#: ``predict``'s rule reads at most this many rows and row x label entries (its floor:
#: ``_RULE_MIN_ROWS``) and calibrates on about ``_RULE_PAIRS`` of them:
#: :mod:`holoxmc.models.thresholds`' ``RULE_ROWS``, ``RULE_ENTRIES``, ``RULE_MIN_ROWS``, ``RULE_PAIRS``.
_RULE_ROWS, _RULE_ENTRIES, _RULE_MIN_ROWS, _RULE_PAIRS = 20_000, 1 << 26, 100, 1_000_000


def rerank_shortlists(rows: int, labels: int, label_nnz: int) -> tuple[int, int]:
    """``(shortlist, train_shortlist)`` the re-rank fit resolves for this shape: the rules of
    :func:`holoxmc.models.rerank.fit.shortlist_rule` and ``train_shortlist_rule`` from the same
    constants (:data:`holoxmc.presets.RERANK_SHORTLIST`, ``RERANK_BUDGETS``).

    Example:
        >>> rerank_shortlists(490_449, 670_091, 2_673_000)
        (88, 88)
    """
    wanted = math.ceil(RERANK_SHORTLIST["per_row"] * label_nnz / max(rows, 1))
    shortlist = int(min(labels, RERANK_SHORTLIST["cap"], max(RERANK_SHORTLIST["floor"], wanted)))
    return shortlist, int(max(1, min(shortlist, RERANK_BUDGETS["train_entries"] // max(1, rows))))


def _finish_seconds(shape: _Shape, held: int) -> float:
    """A re-rank winner finished on every row (:func:`holoxmc.models.rerank.fit.absorb_rows`):
    the held rows retrieved, and the labels with a held positive (the share ``1 - (1 - f) **
    positives a label`` of them, ``f`` the held share) trained again on every row. Derived
    from :func:`_rerank_seconds`' terms, not fitted on its own."""
    share = held / shape.rows
    _, train_shortlist = rerank_shortlists(shape.rows, shape.labels, shape.label_nnz)
    per_row = shape.nnz / shape.rows
    retrained = 1.0 - (1.0 - share) ** (shape.label_nnz / shape.labels)
    problems = (shape.rows * train_shortlist + shape.label_nnz + _NEGATIVES * shape.labels) * retrained
    c = FIT_SECONDS
    return (c["fixed"] + _retrieval_seconds(shape, held) + c["label_fits"] * per_row * problems
            + c["per_label"] * shape.labels * retrained)


def _retrieval_seconds(shape: _Shape, rows: int) -> float:
    """The PIFA retriever's shortlists of ``rows`` rows: each row against every label (the
    dense product, up to ``_DENSE_UP_TO`` labels) or the postings of its features."""
    if shape.labels <= _DENSE_UP_TO:
        return FIT_SECONDS["retrieval"] * rows * shape.labels
    return FIT_SECONDS["retrieval_postings"] * rows * min(shape.labels, _POSTINGS * shape.nnz / shape.rows)


def _rerank_seconds(shape: _Shape, rows: int, alpha_rows: int) -> float:
    """One re-rank fit on ``rows`` of the data's rows (its entries in proportion), the mix
    weight chosen on ``alpha_rows`` validation rows."""
    share = rows / shape.rows
    _, train_shortlist = rerank_shortlists(rows, shape.labels, int(shape.label_nnz * share))
    per_row = shape.nnz / shape.rows
    problems = rows * train_shortlist + shape.label_nnz * share + _NEGATIVES * shape.labels
    c = FIT_SECONDS
    return (c["fixed"] + _retrieval_seconds(shape, rows + alpha_rows) + c["label_fits"] * per_row * problems
            + c["per_label"] * shape.labels)


def _rule_seconds(rows: int, labels: int) -> float:
    """``predict``'s rule chosen on ``rows`` rows (at most what it reads)."""
    entries = min(rows, _RULE_ROWS, max(_RULE_MIN_ROWS, _RULE_ENTRIES // labels)) * labels
    return FIT_SECONDS["rule"] * entries + FIT_SECONDS["rule_pairs"] * min(entries, _RULE_PAIRS)


def _fc_width() -> int:
    return int(HEAD_DEFAULTS["dense"]["hidden"][0])


def _fc_epoch_seconds(shape: _Shape, rows: int) -> float:
    return FIT_SECONDS["fc_epoch"] * rows * (shape.nnz / shape.rows + _fc_width() + shape.labels)


def _peak_bytes(shape: _Shape, *, fc: bool) -> float:
    _, train_shortlist = rerank_shortlists(shape.rows, shape.labels, shape.label_nnz)
    width = _fc_width()
    params = (shape.features * width + width * width + width * shape.labels) if fc else 0
    b = FIT_BYTES
    return (b["base"] + b["labels"] * shape.labels ** LABEL_BYTES_EXPONENT + b["nnz"] * shape.nnz
            + b["shortlist"] * shape.rows * train_shortlist + b["fc_param"] * params)

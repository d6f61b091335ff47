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

import numbers
import os
from collections.abc import Mapping
from typing import Any

from holoxmc.errors import InputError

__all__ = ["MAX_SIZE", "check_size", "physical_memory_bytes", "address_space_left", "check_allocation",
           "FEATURE_BYTES", "check_feature_memory", "SOLAR_HASH_ABOVE", "check_fit_memory"]

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

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
from typing import Any

from holoxmc.errors import InputError

__all__ = ["MAX_SIZE", "check_size", "physical_memory_bytes", "check_allocation"]

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


def check_allocation(n_bytes: int, what: str, *, where: str | None = None) -> None:
    """Refuse to allocate ``n_bytes`` for ``what`` when that exceeds the physical memory.

    Raises:
        InputError: the allocation could never succeed on this machine.
    """
    available = physical_memory_bytes()
    if n_bytes > available:
        prefix = f"{where}: " if where else ""
        raise InputError(f"{prefix}{what} would need {n_bytes / 2**30:.1f} GiB, more than this machine's "
                         f"{available / 2**30:.1f} GiB of memory")

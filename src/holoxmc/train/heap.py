"""Keep freed CPU memory in the process while a model trains.

Each training step allocates tensors as large as the biggest weights (their gradients) and
frees them at its end. glibc's ``malloc`` serves blocks above 32 MiB with a fresh ``mmap``
and returns them with ``munmap``, so every step touches new pages: the kernel zeroes them
one page fault at a time, and threads wait on each other's faults. With an FC network on
Debtags (a 19,749 × 2,048 input table, dense Adam, 2 threads) an epoch took 23.0 s this
way and 10.8 s inside this block (``python benchmarks/heap_reuse.py``). Inside :func:`reuse_freed_memory` large blocks come
from the heap and stay there when freed, so the next step finds them mapped; on leaving,
mmap is allowed again and the free memory is returned to the system.

Leaving cannot give back glibc's *dynamic* thresholds: any ``mallopt`` switches them off for
the rest of the process, and the fixed defaults (mmap above 128 KiB, trim above 128 KiB)
would then page-fault through every score buffer a prediction allocates after ``fit``
(up to 11,700 faults per top-5 pass of HRR-FC over the Delicious test split, measured).
So the block leaves the thresholds where glibc's own adjustment ends up in a process that
has freed a large block: blocks up to 32 MiB come from the heap, blocks above it from
``mmap``, and the heap is trimmed once more than 64 MiB of it is free.

Opt-in (``TrainConfig.reuse_memory=True`` or ``HOLOXMC_REUSE_FREED_MEMORY=1``): the change is
process-wide, outlives the block (the thresholds above), and reaches every other library in
the process; ``docs/allocator.md`` compares it with glibc's default and with jemalloc and
tcmalloc preloaded.

Only on Linux with glibc, and only when the user has not set glibc's malloc variables
(``MALLOC_MMAP_MAX_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_MMAP_THRESHOLD_``, ``GLIBC_TUNABLES``);
elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from holoxmc.errors import InputError

__all__ = ["ENV_VAR", "requested_by_environment", "reuse_freed_memory"]

#: The environment variable that turns the setting on where the caller leaves it open
#: (``TrainConfig.reuse_memory=None``, the default): ``1`` on; ``0``, empty or unset off.
ENV_VAR = "HOLOXMC_REUSE_FREED_MEMORY"
_ON = ("1", "true", "yes", "on")
_OFF = ("", "0", "false", "no", "off")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_DEFAULT_MMAP_MAX = 65536  # glibc's default, restored on leaving
# glibc's DEFAULT_MMAP_THRESHOLD_MAX (32 MiB on 64-bit) and the trim threshold its dynamic
# adjustment pairs with it (twice that): where the thresholds are left on leaving.
_GROWN_MMAP_THRESHOLD = 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)
_GROWN_TRIM_THRESHOLD = 2 * _GROWN_MMAP_THRESHOLD
_USER_SETTINGS = ("MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")

_lock = threading.Lock()
_depth = 0


def _glibc() -> ctypes.CDLL | None:
    """The process's C library when it is glibc and the user left its malloc settings alone."""
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _USER_SETTINGS):
        return None
    libc = ctypes.CDLL(None)
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None


def requested_by_environment(environ: Mapping[str, str] | None = None) -> bool:
    """Whether :data:`ENV_VAR` asks for the setting.

    Args:
        environ: the environment to read; ``None`` reads ``os.environ``.

    Returns:
        ``True`` for ``1`` (or ``true``, ``yes``, ``on``), ``False`` for ``0`` (``false``,
        ``no``, ``off``), an empty value or none.

    Raises:
        InputError: the variable holds anything else.

    Example:
        >>> requested_by_environment({ENV_VAR: "1"}), requested_by_environment({})
        (True, False)
    """
    value = (os.environ if environ is None else environ).get(ENV_VAR, "")
    if value.strip().lower() in _ON:
        return True
    if value.strip().lower() in _OFF:
        return False
    raise InputError(f"{ENV_VAR} must be 1 (on) or 0 (off), got {value!r}")


@contextmanager
def reuse_freed_memory(enabled: bool | None = None) -> Iterator[bool]:
    """Within the block, freed large CPU blocks stay mapped for the next allocation.

    Off unless asked for: the setting is process-wide and leaves glibc's thresholds fixed
    for the rest of the process (module docstring).

    Args:
        enabled: ``True`` applies it, ``False`` leaves the allocator as it is (the block
            does nothing), ``None`` lets :data:`ENV_VAR` decide.

    Raises:
        InputError: ``enabled`` is not a bool or None, or :data:`ENV_VAR` is malformed.

    Yields whether the setting applies here (enabled, glibc, no user malloc settings).
    When the outermost block ends, mmap is allowed again for blocks above 32 MiB, smaller
    ones keep coming from the heap (module docstring), and free memory goes back to the
    system. Results do not depend on it: only where memory comes from changes.

    Example:
        >>> with reuse_freed_memory(True) as applied:
        ...     pass  # train here
    """
    global _depth
    if enabled is None:
        enabled = requested_by_environment()
    elif not isinstance(enabled, bool):
        raise InputError(f"reuse_memory must be True, False or None, got {enabled!r}")
    libc = _glibc() if enabled else None
    if libc is None:
        yield False
        return
    with _lock:
        if _depth == 0:
            libc.mallopt(_M_MMAP_MAX, 0)
            libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1))
        _depth += 1
    try:
        yield True
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                libc.mallopt(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
                libc.mallopt(_M_MMAP_THRESHOLD, _GROWN_MMAP_THRESHOLD)
                libc.mallopt(_M_TRIM_THRESHOLD, _GROWN_TRIM_THRESHOLD)
                libc.malloc_trim(ctypes.c_size_t(0))

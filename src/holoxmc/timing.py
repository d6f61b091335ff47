"""Wall seconds of a fit's stages: a :class:`Stopwatch` that a fit laps after each stage, and
:func:`recording`, which collects the stopwatches every fit inside it finished (``head="auto"``
fits several models, and only the winner is kept).

Example:
    >>> with recording() as fits:
    ...     watch = Stopwatch("toy")
    ...     watch.lap("load")
    ...     laps = watch.done()
    >>> sorted(laps), [name for name, _ in fits]
    (['load'], ['toy'])
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["Stopwatch", "recording"]

_RECORDED: ContextVar[list[tuple[str, dict[str, float]]] | None] = ContextVar("holoxmc_stage_seconds", default=None)


class Stopwatch:
    """Seconds per stage of one fit: :meth:`lap` ends a stage (the time since the last lap,
    or since the start), :meth:`done` returns them and hands them to :func:`recording`.

    Args:
        name: what is timed (``"rerank"``), as :func:`recording` lists it.

    Example:
        >>> watch = Stopwatch("toy")
        >>> watch.lap("a"); watch.lap("a")
        >>> list(watch.done()), watch.seconds["a"] >= 0
        (['a'], True)
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        """End ``stage`` now (a stage lapped twice adds up)."""
        now = time.perf_counter()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - self._last
        self._last = now

    def done(self) -> dict[str, float]:
        """The stages' seconds, also appended to the innermost :func:`recording` if one is open."""
        recorded = _RECORDED.get()
        if recorded is not None:
            recorded.append((self.name, dict(self.seconds)))
        return dict(self.seconds)


@contextmanager
def recording() -> Iterator[list[tuple[str, dict[str, float]]]]:
    """Collect ``(name, stage seconds)`` of every :class:`Stopwatch` done inside the block, in
    order (this thread or task only: a context variable)."""
    fits: list[tuple[str, dict[str, float]]] = []
    token = _RECORDED.set(fits)
    try:
        yield fits
    finally:
        _RECORDED.reset(token)

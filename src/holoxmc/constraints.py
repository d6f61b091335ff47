"""The allowed forms of a setting, and the check that refuses a value that has none of them.
Standard library only: the command line's parser is built from the settings table
(:mod:`holoxmc.settings`) without importing numpy or torch.

Example:
    >>> check_params({"epochs": 0}, {"epochs": [Integer(1), None]})
    Traceback (most recent call last):
    ...
    holoxmc.errors.InputError: epochs must be a positive integer or None, got 0
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from holoxmc.errors import InputError

__all__ = ["Constraint", "Integer", "Real", "Options", "Instance", "RealPair", "IntegerSequence", "check_params",
           "is_integer", "is_real"]


class Constraint(Protocol):
    """One allowed form of a setting: ``accepts(value)`` and a phrase for the message."""

    @property
    def description(self) -> str: ...

    def accepts(self, value: Any) -> bool: ...


def is_integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _bound_phrase(low: float | None, high: float | None, closed: str) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>=' if closed in ('left', 'both') else '>'} {low}")
    if high is not None:
        parts.append(f"{'<=' if closed in ('right', 'both') else '<'} {high}")
    return " and ".join(parts)


@dataclass(frozen=True)
class Integer:
    """An integer (not a bool) in ``[low, high]``."""

    low: int | None = None
    high: int | None = None

    @property
    def description(self) -> str:
        if self.low == 0 and self.high is None:
            return "a non-negative integer"
        if self.low == 1 and self.high is None:
            return "a positive integer"
        if self.low is not None and self.low == self.high:
            return str(self.low)
        return f"an integer {_bound_phrase(self.low, self.high, 'both')}".rstrip()

    def accepts(self, value: Any) -> bool:
        return is_integer(value) and (self.low is None or value >= self.low) and \
            (self.high is None or value <= self.high)


@dataclass(frozen=True)
class Real:
    """A finite real number (not a bool, never NaN or infinite) between ``low`` and ``high``,
    ``closed`` one of ``"both"``, ``"left"``, ``"right"``, ``"neither"``."""

    low: float | None = None
    high: float | None = None
    closed: str = "both"

    @property
    def description(self) -> str:
        return f"a finite number {_bound_phrase(self.low, self.high, self.closed)}".rstrip()

    def accepts(self, value: Any) -> bool:
        if not is_real(value) or not math.isfinite(value):
            return False
        left = self.low is None or value > self.low or (value == self.low and self.closed in ("left", "both"))
        right = self.high is None or value < self.high or (value == self.high and self.closed in ("right", "both"))
        return left and right


@dataclass(frozen=True)
class Options:
    """One of the given values."""

    values: tuple[Any, ...]

    @property
    def description(self) -> str:
        return f"one of {list(self.values)}"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (str, bool)) and any(value == v and type(value) is type(v) for v in self.values)


@dataclass(frozen=True)
class Instance:
    """An instance of ``kind``."""

    kind: type
    name: str

    @property
    def description(self) -> str:
        return self.name

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.kind) and not (self.kind is not bool and isinstance(value, bool))


@dataclass(frozen=True)
class RealPair:
    """Two finite numbers, such as the propensity ``(A, B)``."""

    description: str = "two finite numbers (A, B)"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (tuple, list)) and len(value) == 2 and \
            all(is_real(v) and math.isfinite(v) for v in value)


@dataclass(frozen=True)
class IntegerSequence:
    """A non-empty sequence of positive integers, such as hidden widths."""

    description: str = "a non-empty sequence of positive integers"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, (tuple, list)) and len(value) > 0 and all(Integer(1).accepts(v) for v in value)


def check_params(params: Mapping[str, Any], constraints: Mapping[str, Sequence[Constraint | None]],
                 labels: Mapping[str, str] | None = None) -> None:
    """Refuse the first setting of ``params`` that meets none of its constraints (``None``
    in a list: the value ``None`` is allowed).

    Raises:
        InputError: ``"<name> must be <what>, got <value>"``.
    """
    for name, allowed in constraints.items():
        value = params[name]
        if any(c is None and value is None or c is not None and c.accepts(value) for c in allowed):
            continue
        what = " or ".join("None" if c is None else c.description for c in allowed)
        raise InputError(f"{(labels or {}).get(name, name)} must be {what}, got {value!r}")

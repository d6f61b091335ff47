"""The one error family holoxmc raises on bad input; the CLI turns it into exit code 2."""

from __future__ import annotations

import dataclasses
import numbers
import os
from typing import Any

__all__ = ["HoloxmcError", "DataFormatError", "InputError", "TrainingDiverged", "check_number_types"]


class HoloxmcError(Exception):
    """Base class of every error holoxmc raises for bad input or bad configuration."""


class InputError(HoloxmcError, ValueError):
    """Invalid argument at an API boundary (shape mismatch, label out of range, ...)."""


class TrainingDiverged(HoloxmcError):
    """The training loss became NaN or infinite: no model is kept (the CLI exits with code 2)."""


class DataFormatError(HoloxmcError, ValueError):
    """A malformed data file: names the file, the 1-based line (when known) and the fault.

    Example:
        >>> str(DataFormatError("train.txt", 3, "feature index 9 >= declared D=5"))
        'train.txt:3: feature index 9 >= declared D=5'
    """

    def __init__(self, path: str | os.PathLike | None, line: int | None, message: str):
        self.path = None if path is None else os.fspath(path)
        self.line = line
        self.message = message
        where = self.path or "<input>"
        if line is not None:
            where = f"{where}:{line}"
        super().__init__(f"{where}: {message}")


_NUMBER_TYPES = {"int": numbers.Integral, "float": numbers.Real}


def check_number_types(config: Any) -> None:
    """Raise :class:`InputError` for a field of the dataclass ``config`` annotated ``int``
    or ``float`` (optionally ``| None``) that holds another type, e.g. ``"64"`` or ``2.5``
    for an ``int``; booleans are not numbers here.

    Example:
        >>> @dataclasses.dataclass
        ... class Settings:
        ...     epochs: int = 1
        >>> check_number_types(Settings(epochs="3"))
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: epochs must be an int, got '3'
    """
    for field in dataclasses.fields(config):
        annotation = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
        kind, _, optional = annotation.partition(" | ")
        value = getattr(config, field.name)
        if kind not in _NUMBER_TYPES or (value is None and optional == "None"):
            continue
        if isinstance(value, bool) or not isinstance(value, _NUMBER_TYPES[kind]):
            raise InputError(f"{field.name} must be {'an int' if kind == 'int' else 'a number'}"
                             f"{' or None' if optional == 'None' else ''}, got {value!r}")

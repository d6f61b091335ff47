"""The one error family holoxmc raises on bad input; the CLI turns it into exit code 2."""

from __future__ import annotations

import os

__all__ = ["HoloxmcError", "DataFormatError", "InputError"]


class HoloxmcError(Exception):
    """Base class of every error holoxmc raises for bad input or bad configuration."""


class InputError(HoloxmcError, ValueError):
    """Invalid argument at an API boundary (shape mismatch, label out of range, ...)."""


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

"""The linear one-vs-rest model's settings (:class:`LinearConfig`), apart from its training
(:mod:`holoxmc.models.linear.fit`, which imports scikit-learn and torch) so that a saved
model's ``head_options`` are checked, and the model loaded, without either.

Example:
    >>> LinearConfig(C=0.5).normalize_rows
    True
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any

from holoxmc.errors import InputError, check_number_types
from holoxmc.settings import LINEAR_C_GRID, option_default

__all__ = ["LinearConfig", "DEFAULT_C_GRID", "DEFAULT_PRUNE", "finite_number"]

#: C values tried when ``LinearConfig.C`` is ``None`` (declared with the setting ``C``).
DEFAULT_C_GRID = LINEAR_C_GRID
#: Default ``LinearConfig.prune`` (chosen with the grid, as above).
DEFAULT_PRUNE = 0.05


@dataclass(frozen=True)
class LinearConfig:
    """Everything that defines a linear one-vs-rest model.

    Args:
        C: inverse regularisation strength of every label's SVM; ``None`` chooses it from
            ``C_grid`` by validation P@1 (ties: the first in grid order).
        C_grid: the C values ``C=None`` tries (the default tries one, :data:`DEFAULT_C_GRID`).
        normalize_rows: L2-normalise every input row, in training and inference.
        prune: weights of magnitude below this are dropped after training (0 keeps all).
        max_iter, tol: liblinear's iteration limit and stopping tolerance per label.
        label_block: labels per training job (the unit of parallelism).
        seed: seed of liblinear's coordinate order and of the carved validation split.
    """

    C: float | None = option_default("linear", "C")
    C_grid: tuple[float, ...] = DEFAULT_C_GRID
    normalize_rows: bool = True
    prune: float = DEFAULT_PRUNE
    max_iter: int = 1000
    tol: float = 1e-4
    label_block: int = 256
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.C_grid, (tuple, list)) or not self.C_grid:
            raise InputError(f"C_grid must be a non-empty list of positive numbers, got {self.C_grid!r}")
        object.__setattr__(self, "C_grid", tuple(self.C_grid))
        check_number_types(self)
        for value in (self.C, *self.C_grid):
            if value is not None and not (finite_number(value) and value > 0):
                raise InputError(f"C must be a positive finite number, got {value!r}")
        if not isinstance(self.normalize_rows, bool):
            raise InputError(f"normalize_rows must be true or false, got {self.normalize_rows!r}")
        if not (math.isfinite(self.prune) and self.prune >= 0):
            raise InputError(f"prune must be a non-negative finite number, got {self.prune!r}")
        if not (math.isfinite(self.tol) and self.tol > 0):
            raise InputError(f"tol must be a positive finite number, got {self.tol!r}")
        for name in ("max_iter", "label_block"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be a positive integer, got {getattr(self, name)!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"C_grid": list(self.C_grid)}


def finite_number(value: Any) -> bool:
    """A finite real number (not a boolean).

    Example:
        >>> finite_number(0.5), finite_number(True), finite_number(float("inf"))
        (True, False, False)
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)

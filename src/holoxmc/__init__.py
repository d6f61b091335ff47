"""holoxmc: extreme multi-label classification with HRR and SOLAR label codes.

The estimator and the data loader are also reachable from the package root
(``from holoxmc import XMCClassifier, load``); they are imported on first use, so that
``import holoxmc`` stays light.
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import TYPE_CHECKING, Any

from holoxmc.errors import DataFormatError, HoloxmcError, InputError

# Idle OpenMP threads (torch's intra-op pool) wait asleep rather than spinning: on a machine
# whose cores other processes keep busy, spinning made network training ten times slower
# (docs/results/speed.md, "Thread waiting"). Read once, when torch loads; a value the user
# set is kept.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

if TYPE_CHECKING:  # what type checkers see of the lazy names below
    from holoxmc import hrr
    from holoxmc.data import load
    from holoxmc.estimator import XMCClassifier

__version__ = "0.2.0"
__all__ = ["hrr", "XMCClassifier", "load", "HoloxmcError", "DataFormatError", "InputError", "__version__"]

_LAZY = {"XMCClassifier": "holoxmc.estimator", "load": "holoxmc.data"}


def __getattr__(name: str) -> Any:
    if name == "hrr":  # a module of torch code: imported on first use, like the names above
        return import_module("holoxmc.hrr")
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'holoxmc' has no attribute {name!r}")

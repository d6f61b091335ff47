"""holoxmc: extreme multi-label classification with HRR and SOLAR label codes."""

from holoxmc import hrr
from holoxmc.errors import DataFormatError, HoloxmcError, InputError

__version__ = "0.1.0"
__all__ = ["hrr", "HoloxmcError", "DataFormatError", "InputError", "__version__"]

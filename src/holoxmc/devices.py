"""Device names checked at the boundary: a device that cannot be used is one clear
:class:`~holoxmc.errors.InputError`, not a traceback from deep inside torch."""

from __future__ import annotations

import torch

from holoxmc.errors import InputError

__all__ = ["check_device"]


#: Device types that hold a model's weights, besides ``cpu`` and ``cuda``, where torch finds one:
#: type -> whether this machine has it.
_OTHER_DEVICES = {
    "mps": lambda: bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
    "xpu": lambda: bool(getattr(torch, "xpu", None) and torch.xpu.is_available()),
}


def check_device(device: str | torch.device) -> torch.device:
    """``torch.device(device)``, after checking that it exists on this machine and can hold a
    trained model: ``cpu``, ``cuda`` (``cuda:N``), or ``mps`` / ``xpu`` where torch has one.
    A type torch parses but that holds no data (``meta``) or that this machine lacks
    (``xla``, ``hpu``, ...) is refused.

    Example:
        >>> check_device("cpu")
        device(type='cpu')
        >>> check_device("gpu")
        Traceback (most recent call last):
        holoxmc.errors.InputError: device 'gpu' is not a device name (cpu, cuda, cuda:1, ...)
        >>> check_device("meta")
        Traceback (most recent call last):
        holoxmc.errors.InputError: device 'meta' cannot hold a trained model (it stores no values); use cpu or cuda
    """
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"device {str(device)!r} is not a device name (cpu, cuda, cuda:1, ...)") from None
    if parsed.type == "meta":
        raise InputError(f"device {str(device)!r} cannot hold a trained model (it stores no values); use cpu or cuda")
    if parsed.type not in ("cpu", "cuda") and not _OTHER_DEVICES.get(parsed.type, lambda: False)():
        raise InputError(f"device {str(device)!r}: torch {torch.__version__} has no {parsed.type} device here that "
                         "can hold a trained model; use cpu or cuda")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"device {str(device)!r}: CUDA is not available here (torch {torch.__version__})")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise InputError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return parsed

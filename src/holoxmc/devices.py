"""Device names checked at the boundary: a device that cannot be used is one clear
:class:`~holoxmc.errors.InputError`, not a traceback from deep inside torch."""

from __future__ import annotations

import torch

from holoxmc.errors import InputError

__all__ = ["check_device"]


def check_device(device: str | torch.device) -> torch.device:
    """``torch.device(device)``, after checking that it exists on this machine.

    Example:
        >>> check_device("cpu")
        device(type='cpu')
        >>> check_device("gpu")
        Traceback (most recent call last):
        holoxmc.errors.InputError: device 'gpu' is not a device name (cpu, cuda, cuda:1, ...)
    """
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"device {str(device)!r} is not a device name (cpu, cuda, cuda:1, ...)") from None
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"device {str(device)!r}: CUDA is not available here (torch {torch.__version__})")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise InputError(f"device {str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return parsed

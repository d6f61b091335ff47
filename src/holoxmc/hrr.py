"""Holographic Reduced Representations: the algebra (HRR paper, section 3).

Every verb works over the last dimension and broadcasts over the leading ones, is
differentiable, runs on any device and keeps the input dtype (float32 or float64).
Binding is circular convolution computed with real FFTs (``torch.fft.rfft``/``irfft``),
which do half the work of complex FFTs.

Notation: ``F`` is the discrete Fourier transform over the last dimension.

Example:
    >>> import torch
    >>> from holoxmc import hrr
    >>> g = torch.Generator().manual_seed(0)
    >>> a, b = hrr.random(2, 512, generator=g)
    >>> s = hrr.bind(a, b)
    >>> bool(hrr.cosine(hrr.unbind(s, b), a) > 0.99)
    True
"""

from __future__ import annotations

import secrets

import torch
from torch import Tensor

__all__ = [
    "bind",
    "unbind",
    "inverse",
    "approx_inverse",
    "projection",
    "random",
    "cosine",
    "projection_eps",
]


def _rfft(x: Tensor) -> Tensor:
    return torch.fft.rfft(x, dim=-1)


def _irfft(f: Tensor, d: int) -> Tensor:
    return torch.fft.irfft(f, n=d, dim=-1)


def bind(a: Tensor, b: Tensor) -> Tensor:
    """Bind two HRRs by circular convolution, ``a ⊗ b = F⁻¹(F(a) ⊙ F(b))`` (eq. 1).

    Commutative, associative and distributive over addition.

    Args:
        a: HRR vectors.
        b: HRR vectors, broadcastable against ``a``; same last dimension.

    Shapes:
        a: ``(*, d)``, b: ``(*, d)`` → ``(*, d)`` (broadcast leading dimensions).

    Example:
        >>> a = torch.tensor([1.0, 2.0, 3.0]); b = torch.tensor([1.0, 0.0, 0.0])
        >>> bind(a, b)  # b is the identity element
        tensor([1., 2., 3.])
    """
    _check_same_dim(a, b)
    d = a.shape[-1]
    return _irfft(_rfft(a) * _rfft(b), d)


def unbind(s: Tensor, b: Tensor) -> Tensor:
    """Query ``s`` with ``b``: bind with the approximate inverse, ``s ⊗ b*``.

    Computed as ``F⁻¹(F(s) ⊙ conj(F(b)))`` because ``F(b*) = conj(F(b))`` for real ``b``:
    no extra roll/flip and no division.

    Args:
        s: statement vectors, e.g. ``bind(a, b)`` or a sum of bound pairs.
        b: the key to unbind, broadcastable against ``s``.

    Shapes:
        s: ``(*, d)``, b: ``(*, d)`` → ``(*, d)``.

    Example:
        >>> g = torch.Generator().manual_seed(1)
        >>> a, b = random(2, 256, generator=g)
        >>> bool(cosine(unbind(bind(a, b), b), a) > 0.99)
        True
    """
    _check_same_dim(s, b)
    d = s.shape[-1]
    return _irfft(_rfft(s) * torch.conj(_rfft(b)), d)


def inverse(a: Tensor) -> Tensor:
    """Exact inverse ``a† = F⁻¹(1 / F(a))`` (eq. 2), so that ``a ⊗ a†`` is the identity.

    Numerically unstable where ``F(a)`` has coefficients near zero (that is the paper's
    point); after :func:`projection` it equals :func:`approx_inverse`.

    Shapes:
        a: ``(*, d)`` → ``(*, d)``.

    Example:
        >>> a = projection(torch.tensor([0.3, -1.0, 0.5, 2.0]))
        >>> torch.allclose(inverse(a), approx_inverse(a), atol=1e-6)
        True
    """
    return _irfft(torch.reciprocal(_rfft(a)), a.shape[-1])


def approx_inverse(a: Tensor) -> Tensor:
    """Plate's approximate inverse, the involution ``a* = [a_1, a_d, a_{d-1}, …, a_2]``.

    O(d), numerically stable; ``F(a*) = conj(F(a))``.

    Shapes:
        a: ``(*, d)`` → ``(*, d)``.

    Example:
        >>> approx_inverse(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        tensor([1., 4., 3., 2.])
    """
    return torch.roll(torch.flip(a, dims=(-1,)), shifts=1, dims=-1)


def projection_eps(dtype: torch.dtype) -> float:
    """The ε below which a Fourier coefficient counts as zero in :func:`projection`.

    ``torch.finfo(dtype).eps`` (1.19e-7 for float32, 2.22e-16 for float64).
    """
    return float(torch.finfo(dtype).eps)


def projection(x: Tensor, eps: float | None = None) -> Tensor:
    """Complex unit-magnitude projection ``π(x) = F⁻¹(F(x) / |F(x)|)`` (eq. 3).

    After it every Fourier coefficient has magnitude 1, so :func:`approx_inverse` equals
    :func:`inverse` and retrieval from bound sums stays stable (HRR paper, Fig. 1).

    Safety: a coefficient with ``|F(x)_j| <= eps`` has no defined phase; it is mapped to
    ``1 + 0i`` (the phase of the binding identity) with zero gradient. Hence π never returns
    NaN/inf: ``π(0)`` is the identity vector ``[1, 0, …, 0]``, and gradients are bounded by
    ``|upstream| / eps``. ``eps`` defaults to :func:`projection_eps` of ``x.dtype``.

    Args:
        x: real vectors.
        eps: threshold on coefficient magnitude; default machine epsilon of ``x.dtype``.

    Shapes:
        x: ``(*, d)`` → ``(*, d)``.

    Example:
        >>> p = projection(torch.tensor([0.5, -2.0, 1.0, 0.25]))
        >>> torch.allclose(torch.fft.rfft(p).abs(), torch.ones(3))
        True
    """
    if eps is None:
        eps = projection_eps(x.dtype)
    f = _rfft(x)
    magnitude = f.abs()
    keep = magnitude > eps
    # Divide only by magnitudes above eps; elsewhere the phase is fixed to 1 (zero gradient).
    unit = torch.where(keep, f / torch.where(keep, magnitude, 1.0), 1.0)
    return _irfft(unit, x.shape[-1])


def random(
    n: int,
    d: int,
    *,
    projected: bool = True,
    generator: torch.Generator | int | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> Tensor:
    """Draw ``n`` HRR vectors with i.i.d. entries from N(0, 1/d), optionally projected.

    Uses a local generator only, never the global RNG. Vectors are drawn on the CPU and
    moved to ``device``, so a seed gives the same vectors on every device.

    Args:
        n: number of vectors.
        d: dimension.
        projected: apply :func:`projection` (the paper's improved initialisation).
        generator: a CPU ``torch.Generator``, an integer seed, or ``None`` for a fresh
            seed from the OS.
        dtype: float32 or float64.
        device: where the result lives.

    Shapes:
        → ``(n, d)``.

    Example:
        >>> random(3, 8, generator=0).shape
        torch.Size([3, 8])
    """
    if not isinstance(generator, torch.Generator):
        seed = secrets.randbits(63) if generator is None else int(generator)
        generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=generator, dtype=torch.float64) / d**0.5
    x = x.to(dtype)
    if projected:
        x = projection(x)
    return x.to(device) if device is not None else x


def cosine(a: Tensor, b: Tensor, eps: float = 1e-8) -> Tensor:
    """Cosine similarity over the last dimension, broadcasting leading ones.

    Shapes:
        a: ``(*, d)``, b: ``(*, d)`` → ``(*)``.

    Example:
        >>> float(cosine(torch.tensor([1.0, 0.0]), torch.tensor([2.0, 0.0])))
        1.0
    """
    _check_same_dim(a, b)
    a, b = torch.broadcast_tensors(a, b)
    return torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=eps)


def _check_same_dim(a: Tensor, b: Tensor) -> None:
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"HRR dimensions differ: {a.shape[-1]} vs {b.shape[-1]}")

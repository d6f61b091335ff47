"""Vector symbolic architectures compared in the HRR paper's appendix D (experiment-only).

The core algebra lives in :mod:`holoxmc.hrr`; this module adds the two alternatives the
paper measures HRRs against, only so that the capacity experiment can run them:

* **MAP-C**, continuous Multiply-Add-Permute (R. Gayler, "Multiplicative binding,
  representation operators & analogy", 1998; the continuous variant as specified by
  K. Schlegel, P. Neubert and P. Protzel, "A comparison of vector symbolic architectures",
  Artificial Intelligence Review 55, 2022): entries drawn uniformly from [-1, 1], binding and
  unbinding are the element-wise product, bundling is the element-wise sum *clipped* to
  [-1, 1] (the clipping the HRR paper objects to, App. D).
* **VTB**, Vector-derived Transformation Binding (J. Gosmann and C. Eliasmith, Neural
  Computation 31(5), 2019): for ``d = d'²`` the vector ``y`` defines the block-diagonal
  matrix ``V_y = d^{1/4} · diag(Y', …, Y')`` with ``Y'`` the row-major ``d' × d'`` reshape of
  ``y``; ``bind(x, y) = V_y x`` and ``unbind(s, y) = V_yᵀ s``. Vectors are uniform on the
  unit sphere. Computed as batched ``d' × d'`` matrix products, never as a dense ``d × d``
  Kronecker matrix.

:data:`VSAS` puts these and the two HRR variants behind one small interface, :class:`VSA`.

Example:
    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> x, y = vtb_random(2, 256, generator=g)
    >>> s = vtb_bind(x, y)
    >>> bool(torch.nn.functional.cosine_similarity(vtb_unbind(s, y), x, dim=-1) > 0.6)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

from holoxmc import hrr
from holoxmc.errors import InputError

__all__ = [
    "VSA",
    "VSAS",
    "map_c_random",
    "map_c_bind",
    "map_c_unbind",
    "map_c_bundle",
    "vtb_random",
    "vtb_bind",
    "vtb_unbind",
    "vtb_side",
]


def map_c_random(n: int, d: int, *, generator: torch.Generator) -> Tensor:
    """Draw ``n`` MAP-C vectors with entries i.i.d. uniform on [-1, 1].

    Shapes:
        → ``(n, d)``, float32.

    Example:
        >>> v = map_c_random(4, 8, generator=torch.Generator().manual_seed(0))
        >>> bool(v.abs().max() <= 1)
        True
    """
    return torch.rand(n, d, generator=generator) * 2 - 1


def map_c_bind(x: Tensor, y: Tensor) -> Tensor:
    """MAP-C binding: the element-wise product ``x ⊙ y``.

    Shapes:
        x: ``(*, d)``, y: ``(*, d)`` → ``(*, d)`` (broadcast).

    Example:
        >>> map_c_bind(torch.tensor([0.5, -1.0]), torch.tensor([1.0, 0.5]))
        tensor([ 0.5000, -0.5000])
    """
    return x * y


def map_c_unbind(s: Tensor, y: Tensor) -> Tensor:
    """MAP-C unbinding: binding again with ``y`` (exact for entries ±1, approximate otherwise).

    Shapes:
        s: ``(*, d)``, y: ``(*, d)`` → ``(*, d)``.

    Example:
        >>> map_c_unbind(torch.tensor([0.5, -0.5]), torch.tensor([1.0, -1.0]))
        tensor([0.5000, 0.5000])
    """
    return s * y


def map_c_bundle(bound: Tensor, dim: int = -2) -> Tensor:
    """MAP-C bundling: sum over ``dim``, then clip every entry to [-1, 1].

    Shapes:
        bound: ``(*, n, d)`` → ``(*, d)`` for the default ``dim=-2``.

    Example:
        >>> map_c_bundle(torch.tensor([[0.8, -0.2], [0.7, -0.1]]))
        tensor([ 1.0000, -0.3000])
    """
    return bound.sum(dim=dim).clamp(-1.0, 1.0)


def vtb_side(d: int) -> int:
    """The block side ``d'`` of VTB, ``d = d'²``; raises :class:`InputError` otherwise.

    Example:
        >>> vtb_side(400)
        20
    """
    side = math.isqrt(d)
    if side * side != d:
        raise InputError(f"VTB needs a perfect-square dimension, got d={d}")
    return side


def vtb_random(n: int, d: int, *, generator: torch.Generator) -> Tensor:
    """Draw ``n`` VTB vectors uniformly on the unit sphere (normalised Gaussians).

    Shapes:
        → ``(n, d)``, float32; ``d`` must be a perfect square.

    Example:
        >>> v = vtb_random(3, 16, generator=torch.Generator().manual_seed(0))
        >>> torch.allclose(v.norm(dim=-1), torch.ones(3))
        True
    """
    vtb_side(d)
    v = torch.randn(n, d, generator=generator)
    return v / v.norm(dim=-1, keepdim=True)


def _vtb_blocks(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """Reshape ``x`` into its ``d'`` blocks (rows) and ``y`` into ``d^{1/4} · Y'``."""
    if x.shape[-1] != y.shape[-1]:
        raise InputError(f"VTB dimensions differ: {x.shape[-1]} vs {y.shape[-1]}")
    d = x.shape[-1]
    side = vtb_side(d)
    blocks = x.reshape(*x.shape[:-1], side, side)
    matrix = y.reshape(*y.shape[:-1], side, side) * d**0.25
    return blocks, matrix


def vtb_bind(x: Tensor, y: Tensor) -> Tensor:
    """VTB binding ``V_y x``: every ``d'``-block ``x_k`` of ``x`` becomes ``d^{1/4} Y' x_k``.

    Not commutative: ``y`` is the transformation, ``x`` the bound item.

    Shapes:
        x: ``(*, d)``, y: ``(*, d)`` → ``(*, d)`` (broadcast leading dimensions).

    Example:
        >>> identity = torch.eye(2).flatten() / 4**0.25  # V_y = I for this y
        >>> x = torch.tensor([1.0, 2.0, 3.0, 4.0])
        >>> torch.allclose(vtb_bind(x, identity), x)
        True
    """
    blocks, matrix = _vtb_blocks(x, y)
    out = blocks @ matrix.transpose(-1, -2)  # row k = (Y' x_k)ᵀ
    return out.reshape(out.shape[:-2] + (x.shape[-1],))


def vtb_unbind(s: Tensor, y: Tensor) -> Tensor:
    """VTB unbinding ``V_yᵀ s``, the approximate inverse of :func:`vtb_bind` (Gosmann 2019).

    Shapes:
        s: ``(*, d)``, y: ``(*, d)`` → ``(*, d)``.

    Example:
        >>> g = torch.Generator().manual_seed(1)
        >>> x, y = vtb_random(2, 1024, generator=g)
        >>> bool(torch.nn.functional.cosine_similarity(vtb_unbind(vtb_bind(x, y), y), x, dim=-1) > 0.6)
        True
    """
    blocks, matrix = _vtb_blocks(s, y)
    out = blocks @ matrix  # row k = (Y'ᵀ s_k)ᵀ
    return out.reshape(out.shape[:-2] + (s.shape[-1],))


def _hrr_random(projected: bool) -> Callable[..., Tensor]:
    def draw(n: int, d: int, *, generator: torch.Generator) -> Tensor:
        return hrr.random(n, d, projected=projected, generator=generator)

    return draw


def _hrr_unbind_exact(s: Tensor, y: Tensor) -> Tensor:
    return hrr.bind(s, hrr.inverse(y))


def _sum_bundle(bound: Tensor, dim: int = -2) -> Tensor:
    return bound.sum(dim=dim)


@dataclass(frozen=True)
class VSA:
    """One vector symbolic architecture: how to draw vectors, bind, unbind and bundle.

    Attributes:
        name: key in :data:`VSAS` and in the experiment's JSON.
        label: human-readable name for plots and tables.
        random: ``random(n, d, generator=g) -> (n, d)`` float32 vectors.
        bind: ``bind(x, y) -> (*, d)``.
        unbind: ``unbind(s, y) -> (*, d)``, recovers ``x`` from ``bind(x, y)`` (approximately).
        bundle: ``bundle(bound, dim=-2)`` superposes bound pairs into one statement vector.
        needs_square_dim: VTB only works for ``d = d'²``.
    """

    name: str
    label: str
    random: Callable[..., Tensor]
    bind: Callable[[Tensor, Tensor], Tensor]
    unbind: Callable[[Tensor, Tensor], Tensor]
    bundle: Callable[..., Tensor] = _sum_bundle
    needs_square_dim: bool = False


#: The architectures of App. D. ``hrr`` is the paper's naive HRR: N(0, 1/d) vectors queried
#: with the exact inverse ``y†`` of eq. 2 (its numerical instability is the point);
#: ``hrr_approx_inverse`` is the same vectors queried with Plate's approximate inverse ``y*``
#: (reported too, since the paper's wording allows either reading); ``hrr_projected`` draws
#: π(N(0, 1/d)) vectors, for which both inverses coincide.
VSAS: dict[str, VSA] = {
    vsa.name: vsa
    for vsa in (
        VSA("hrr", "HRR (naive, exact inverse)", _hrr_random(False), hrr.bind, _hrr_unbind_exact),
        VSA("hrr_approx_inverse", "HRR (naive, approx. inverse)", _hrr_random(False), hrr.bind, hrr.unbind),
        VSA("hrr_projected", "HRR (projected π)", _hrr_random(True), hrr.bind, hrr.unbind),
        VSA("map_c", "MAP-C (clipped)", map_c_random, map_c_bind, map_c_unbind, map_c_bundle),
        VSA("vtb", "VTB", vtb_random, vtb_bind, vtb_unbind, needs_square_dim=True),
    )
}

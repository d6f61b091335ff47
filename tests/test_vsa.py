"""MAP-C and VTB (experiment-only VSAs) and the common VSA interface used by the capacity
experiment."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from holoxmc import hrr
from holoxmc.errors import InputError
from holoxmc.experiments.vsa import (
    VSAS,
    map_c_bind,
    map_c_bundle,
    map_c_random,
    map_c_unbind,
    vtb_bind,
    vtb_random,
    vtb_side,
    vtb_unbind,
)


def _dense_vtb_matrix(y: torch.Tensor) -> torch.Tensor:
    """Gosmann & Eliasmith's V_y = d^{1/4} · kron(I_{d'}, Y') built as a dense matrix."""
    d = y.shape[-1]
    side = math.isqrt(d)
    return d**0.25 * torch.kron(torch.eye(side, dtype=y.dtype), y.reshape(side, side))


@settings(max_examples=20, deadline=None)
@given(side=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
def test_vtb_bind_and_unbind_match_dense_block_diagonal_matrix(side: int, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    x, y, s = torch.randn(3, side * side, generator=g, dtype=torch.float64)
    matrix = _dense_vtb_matrix(y)
    torch.testing.assert_close(vtb_bind(x, y), matrix @ x)
    torch.testing.assert_close(vtb_unbind(s, y), matrix.T @ s)


def test_vtb_broadcasts_over_leading_dimensions() -> None:
    g = torch.Generator().manual_seed(0)
    x = vtb_random(5, 64, generator=g)
    y = vtb_random(3, 64, generator=g)
    pairwise = vtb_bind(x[:, None, :], y[None, :, :])
    assert pairwise.shape == (5, 3, 64)
    torch.testing.assert_close(pairwise[4, 2], vtb_bind(x[4], y[2]))
    torch.testing.assert_close(vtb_unbind(pairwise, y[None])[1, 0], vtb_unbind(pairwise[1, 0], y[0]))


def test_vtb_unbinding_recovers_the_bound_vector_not_a_stranger() -> None:
    g = torch.Generator().manual_seed(1)
    x, y, stranger = (vtb_random(64, 1024, generator=g) for _ in range(3))
    recovered = vtb_unbind(vtb_bind(x, y), y)
    own = torch.nn.functional.cosine_similarity(recovered, x, dim=-1)
    other = torch.nn.functional.cosine_similarity(recovered, stranger, dim=-1)
    # V_yᵀV_y ≈ I plus noise: cosine concentrates near 1/sqrt(2) for Gaussian blocks.
    assert own.min() > 0.6
    assert other.abs().max() < 0.2


def test_vtb_random_is_unit_norm_and_needs_square_dimension() -> None:
    v = vtb_random(7, 49, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(v.norm(dim=-1), torch.ones(7))
    assert vtb_side(49) == 7
    with pytest.raises(InputError, match="perfect-square"):
        vtb_random(1, 50, generator=torch.Generator().manual_seed(0))
    with pytest.raises(InputError, match="differ"):
        vtb_bind(torch.zeros(16), torch.zeros(9))


def test_map_c_bind_is_self_inverse_for_bipolar_keys() -> None:
    g = torch.Generator().manual_seed(2)
    x = map_c_random(10, 32, generator=g)
    key = torch.where(torch.rand(10, 32, generator=g) < 0.5, -1.0, 1.0)
    torch.testing.assert_close(map_c_unbind(map_c_bind(x, key), key), x)
    assert x.min() >= -1 and x.max() <= 1 and x.min() < -0.5 and x.max() > 0.5


def test_map_c_bundle_clips_the_sum_to_unit_interval() -> None:
    g = torch.Generator().manual_seed(3)
    bound = map_c_random(50, 128, generator=g)
    bundled = map_c_bundle(bound)
    torch.testing.assert_close(bundled, bound.sum(0).clamp(-1, 1))
    assert bundled.abs().max() == 1.0  # a sum of 50 such terms saturates somewhere


@pytest.mark.parametrize("name", sorted(VSAS))
def test_every_vsa_retrieves_a_single_bound_pair(name: str) -> None:
    vsa = VSAS[name]
    g = torch.Generator().manual_seed(4)
    x, y, stranger = (vsa.random(32, 256, generator=g) for _ in range(3))
    assert x.shape == (32, 256) and x.dtype == torch.float32
    statement = vsa.bundle(vsa.bind(x, y).unsqueeze(-2), dim=-2)
    recovered = vsa.unbind(statement, y)
    own = torch.nn.functional.cosine_similarity(recovered, x, dim=-1)
    other = torch.nn.functional.cosine_similarity(recovered, stranger, dim=-1)
    assert bool((own > other).all())


def test_hrr_variants_differ_only_where_the_paper_says() -> None:
    g = torch.Generator().manual_seed(5)
    s, y = torch.randn(2, 8, 128, generator=g)
    naive_exact, naive_approx = VSAS["hrr"], VSAS["hrr_approx_inverse"]
    torch.testing.assert_close(naive_exact.unbind(s, y), hrr.bind(s, hrr.inverse(y)))
    torch.testing.assert_close(naive_approx.unbind(s, y), hrr.unbind(s, y))
    projected_y = hrr.projection(y)
    # After π the exact and approximate inverse coincide (HRR paper, §3.1).
    torch.testing.assert_close(
        naive_exact.unbind(s, projected_y), VSAS["hrr_projected"].unbind(s, projected_y),
        atol=1e-5, rtol=1e-4,
    )

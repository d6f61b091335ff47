"""Properties of the HRR algebra (HRR paper §3) against float64 NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from holoxmc import hrr

finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False, width=64)


@st.composite
def vectors(draw, count: int, min_d: int = 1, max_d: int = 64):
    d = draw(st.integers(min_d, max_d))
    return [torch.from_numpy(draw(arrays(np.float64, d, elements=finite))) for _ in range(count)]


def np_circular_convolution(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Definition of circular convolution, O(d^2): (a ⊗ b)_j = Σ_k a_k b_{(j-k) mod d}."""
    d = a.shape[-1]
    idx = (np.arange(d)[:, None] - np.arange(d)[None, :]) % d
    return (a[..., None, :] * b[..., idx]).sum(-1)


def np_projection(x: np.ndarray) -> np.ndarray:
    f = np.fft.fft(x)
    return np.real(np.fft.ifft(f / np.abs(f)))


def close(x: torch.Tensor, y: torch.Tensor, scale: torch.Tensor | float = 1.0) -> bool:
    tol = 1e-9 * (1.0 + float(torch.as_tensor(scale)))
    return torch.allclose(x, y, rtol=0, atol=tol)


@settings(max_examples=60, deadline=None)
@given(vectors(2))
def test_bind_is_commutative(v):
    a, b = v
    assert close(hrr.bind(a, b), hrr.bind(b, a), a.norm() * b.norm())


@settings(max_examples=60, deadline=None)
@given(vectors(3))
def test_bind_is_associative(v):
    a, b, c = v
    left = hrr.bind(hrr.bind(a, b), c)
    right = hrr.bind(a, hrr.bind(b, c))
    assert close(left, right, a.norm() * b.norm() * c.norm() * len(a))


@settings(max_examples=60, deadline=None)
@given(vectors(3))
def test_bind_distributes_over_addition(v):
    a, b, c = v
    left = hrr.bind(a, b + c)
    right = hrr.bind(a, b) + hrr.bind(a, c)
    assert close(left, right, a.norm() * (b.norm() + c.norm()))


@settings(max_examples=60, deadline=None)
@given(vectors(2))
def test_bind_matches_numpy_definition(v):
    a, b = v
    expected = np_circular_convolution(a.numpy(), b.numpy())
    assert close(hrr.bind(a, b), torch.from_numpy(expected), a.norm() * b.norm() * len(a))


@settings(max_examples=60, deadline=None)
@given(vectors(2))
def test_unbind_is_bind_with_approx_inverse(v):
    s, b = v
    expected = hrr.bind(s, hrr.approx_inverse(b))
    assert close(hrr.unbind(s, b), expected, s.norm() * b.norm())


def test_approx_inverse_is_the_involution():
    a = torch.arange(1.0, 6.0)
    assert hrr.approx_inverse(a).tolist() == [1.0, 5.0, 4.0, 3.0, 2.0]
    assert torch.equal(hrr.approx_inverse(hrr.approx_inverse(a)), a)


@settings(max_examples=80, deadline=None)
@given(vectors(1, min_d=2))
def test_projection_has_unit_fourier_magnitude(v):
    (x,) = v
    magnitude = torch.fft.fft(hrr.projection(x)).abs()
    assert torch.allclose(magnitude, torch.ones_like(magnitude), atol=1e-9)


@settings(max_examples=80, deadline=None)
@given(vectors(1, min_d=2))
def test_after_projection_approx_inverse_equals_exact_inverse(v):
    (x,) = v
    p = hrr.projection(x)
    exact, approx = hrr.inverse(p), hrr.approx_inverse(p)
    assert (exact - approx).norm() <= 1e-5 * exact.norm()


@pytest.mark.parametrize("d", [7, 64, 257])
def test_projection_matches_numpy_reference(d):
    x = torch.randn(5, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64)
    expected = torch.from_numpy(np_projection(x.numpy()))
    assert torch.allclose(hrr.projection(x), expected, atol=1e-12)


@pytest.mark.parametrize("d", [8, 63])
def test_ops_match_numpy_fft_reference(d):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(2, 4, d, generator=g, dtype=torch.float64)
    fa, fb = np.fft.fft(a.numpy()), np.fft.fft(b.numpy())
    refs = {
        "bind": (hrr.bind(a, b), np.real(np.fft.ifft(fa * fb))),
        "unbind": (hrr.unbind(a, b), np.real(np.fft.ifft(fa * np.conj(fb)))),
        "inverse": (hrr.inverse(a), np.real(np.fft.ifft(1.0 / fa))),
    }
    for name, (got, want) in refs.items():
        assert torch.allclose(got, torch.from_numpy(want), atol=1e-9), name
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    assert torch.allclose(hrr.cosine(a, b), cos, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(256, 2048), st.integers(0, 2**31 - 1))
def test_unbinding_retrieves_the_bound_vector(d, seed):
    a, b = hrr.random(2, d, generator=seed)
    assert float(hrr.cosine(hrr.unbind(hrr.bind(a, b), b), a)) > 0.99


def test_projected_random_vectors_have_unit_norm():
    x = hrr.random(16, 400, generator=3, dtype=torch.float64)
    assert torch.allclose(x.norm(dim=-1), torch.ones(16, dtype=torch.float64), atol=1e-12)


@pytest.mark.parametrize(
    "name, op, arity",
    [
        ("bind", hrr.bind, 2),
        ("unbind", hrr.unbind, 2),
        ("inverse", hrr.inverse, 1),
        ("approx_inverse", hrr.approx_inverse, 1),
        ("projection", hrr.projection, 1),
        ("cosine", hrr.cosine, 2),
    ],
)
@pytest.mark.parametrize("d", [6, 9])
def test_gradcheck_float64(name, op, arity, d):
    g = torch.Generator().manual_seed(d)
    inputs = tuple(
        torch.randn(3, d, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(arity)
    )
    assert torch.autograd.gradcheck(op, inputs), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ops_keep_dtype_and_broadcast(dtype):
    a = hrr.random(4, 32, generator=0, dtype=dtype)
    b = hrr.random(1, 32, generator=1, dtype=dtype)
    for out in (hrr.bind(a[:, None], b), hrr.unbind(a[:, None], b), hrr.projection(a[:, None])):
        assert out.dtype == dtype
    assert hrr.bind(a[:, None, :], b).shape == (4, 1, 32)
    assert hrr.cosine(a[:, None, :], a[None, :, :]).shape == (4, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "make",
    [
        lambda d, t: torch.zeros(d, dtype=t),  # zero vector
        lambda d, t: torch.ones(d, dtype=t),  # every coefficient but DC is zero
        lambda d, t: torch.tensor([1.0, -1.0] * (d // 2), dtype=t),  # only Nyquist non-zero
        lambda d, t: torch.full((d,), 1e-30, dtype=t),  # float32 underflow territory
        lambda d, t: torch.randn(d, generator=torch.Generator().manual_seed(0), dtype=t) * 1e-38,
    ],
)
def test_projection_is_finite_with_finite_gradient_at_degenerate_inputs(dtype, make):
    x = make(16, dtype).requires_grad_(True)
    y = hrr.projection(x)
    assert torch.isfinite(y).all()
    magnitude = torch.fft.rfft(y.detach()).abs()
    assert torch.allclose(magnitude, torch.ones_like(magnitude), atol=1e-5)
    (y * torch.arange(16, dtype=dtype)).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_projection_of_zero_is_the_binding_identity():
    e = hrr.projection(torch.zeros(8))
    a = torch.randn(8, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(hrr.bind(a, e), a, atol=1e-6)


def test_random_uses_a_local_generator_only():
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = hrr.random(3, 64, generator=7)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(first, hrr.random(3, 64, generator=torch.Generator().manual_seed(7)))
    assert not torch.equal(first, hrr.random(3, 64, generator=8))


def test_random_unprojected_has_variance_one_over_d():
    x = hrr.random(2000, 100, projected=False, generator=0, dtype=torch.float64)
    assert abs(float(x.var()) * 100 - 1.0) < 0.02


def test_mismatched_dimensions_are_rejected():
    with pytest.raises(ValueError, match="dimensions differ"):
        hrr.bind(torch.zeros(4), torch.zeros(5))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_matches_cpu():
    a, b = hrr.random(2, 256, generator=0, dtype=torch.float64)
    ca, cb = a.cuda(), b.cuda()
    assert torch.allclose(hrr.bind(ca, cb).cpu(), hrr.bind(a, b), atol=1e-12)
    assert torch.allclose(hrr.projection(ca).cpu(), hrr.projection(a), atol=1e-12)
    assert torch.allclose(hrr.random(2, 256, generator=0, device="cuda").cpu(), hrr.random(2, 256, generator=0))

"""The CPU dropout mask drawn from 16-bit lanes of random words."""

from __future__ import annotations

import pytest
import torch

from holoxmc.backbones.dropout import Dropout, dropout_mask
from holoxmc.errors import InputError


@pytest.mark.parametrize("p", [0.5, 0.1, 0.3, 0.9])
def test_mask_keeps_each_lane_with_probability_one_minus_p_and_has_mean_one(p):
    """Each of the four 16-bit lanes of a word is kept with probability 1 − p (the top lane
    holds the word's sign bit, which ``random_()`` without bounds never sets)."""
    n = 400_000
    mask = dropout_mask((n,), p, generator=torch.Generator().manual_seed(0))
    kept = mask > 0
    assert set(mask.unique().tolist()) <= {0.0, float(mask.max())}
    tolerance = 5 * (p * (1 - p) / (n / 4)) ** 0.5
    for lane in range(4):
        assert abs(float(kept[lane::4].double().mean()) - (1 - p)) < tolerance, lane
    # The scale is that of p rounded to 2^-16, so E[mask] = 1 exactly: kept_fraction · scale.
    levels = round((1 - p) * 2**16)
    assert float(mask.max()) == pytest.approx(2**16 / levels, rel=1e-6)
    assert abs(float(mask.double().mean()) - 1.0) < tolerance / (1 - p)


def test_mask_of_one_half_is_exact_and_neighbouring_lanes_are_independent():
    mask = dropout_mask((100_000, 4), 0.5, generator=torch.Generator().manual_seed(1))
    assert set(mask.unique().tolist()) == {0.0, 2.0}
    kept = (mask > 0).double()
    correlation = torch.corrcoef(kept.T)
    off_diagonal = correlation[~torch.eye(4, dtype=torch.bool)]
    assert off_diagonal.abs().max() < 0.02


def test_mask_shapes_dtypes_and_seeding():
    generator = torch.Generator().manual_seed(3)
    first = dropout_mask((3, 5, 7), 0.5, dtype=torch.float64, generator=generator)
    assert first.shape == (3, 5, 7) and first.dtype == torch.float64
    again = dropout_mask((3, 5, 7), 0.5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    assert torch.equal(first, again)
    assert dropout_mask((0, 4), 0.5).shape == (0, 4)


def test_dropout_module_scales_kept_activations_and_passes_the_gradient_through_the_mask():
    layer = Dropout(0.5)
    x = torch.randn(64, 512, requires_grad=True)
    torch.manual_seed(0)
    y = layer(x)
    torch.manual_seed(0)
    assert torch.equal(y, layer(x)), "the mask comes from the global generator, seeded"
    kept = y != 0
    assert torch.allclose(y[kept], 2 * x[kept])
    y.sum().backward()
    assert torch.equal(x.grad, kept.float() * 2)


def test_dropout_is_the_identity_in_eval_mode_and_at_p_zero_and_then_draws_nothing():
    x = torch.randn(8, 4)
    state = torch.get_rng_state()
    assert Dropout(0.0)(x) is x
    assert Dropout(0.5).eval()(x) is x
    assert torch.equal(torch.get_rng_state(), state)
    assert "p=0.5" in repr(Dropout(0.5))


@pytest.mark.parametrize("p", [-0.1, 1.0, 1.5])
def test_dropout_refuses_probabilities_outside_zero_one(p):
    with pytest.raises(InputError, match="dropout"):
        Dropout(p)
    with pytest.raises(InputError, match="dropout"):
        dropout_mask((4,), p)

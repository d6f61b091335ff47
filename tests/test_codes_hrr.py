"""Dense HRR label codes: seeded, chunked, projected, with orthogonal roles."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from holoxmc import hrr
from holoxmc.codes.hrr import DRAW_BLOCK, HRRLabelCode, Stream, local_generator
from holoxmc.errors import InputError


@settings(max_examples=15, deadline=None)
@given(
    n_labels=st.integers(1, 300),
    chunk_size=st.integers(1, 128),
    dim=st.sampled_from([16, 33, 64]),
    seed=st.integers(0, 2**40),
    circulant=st.booleans(),
)
def test_chunks_concatenate_to_the_materialized_code(n_labels, chunk_size, dim, seed, circulant):
    code = HRRLabelCode(n_labels, dim, seed=seed, chunk_size=chunk_size, circulant=circulant)
    pieces = list(code.chunks())
    assert [start for start, _ in pieces] == list(range(0, n_labels, chunk_size))
    cached = HRRLabelCode(n_labels, dim, seed=seed, chunk_size=chunk_size, circulant=circulant).materialize()
    assert cached.shape == (n_labels, dim)
    assert torch.equal(torch.cat([vectors for _, vectors in pieces]), cached)


def test_any_chunk_regenerates_bit_identically_alone():
    code = HRRLabelCode(5000, 64, seed=11, chunk_size=512)
    later = code.chunk(7)
    fresh = HRRLabelCode(5000, 64, seed=11, chunk_size=512)
    assert torch.equal(fresh.chunk(7), later)  # made without chunks 0..6
    assert torch.equal(fresh.present, code.present) and torch.equal(fresh.missing, code.missing)
    other_seed = HRRLabelCode(5000, 64, seed=12, chunk_size=512)
    assert not torch.allclose(other_seed.chunk(7), later)


def test_chunk_size_does_not_change_the_code():
    """``chunk_size`` (the head's ``label_chunk``, a decoding-memory setting) must not change
    any label's vector, in any order of access, across draw blocks (the spectra are drawn
    bit-identically; an inverse FFT over another number of rows may move the last bits)."""
    n_labels = 2 * DRAW_BLOCK + 300
    reference = HRRLabelCode(n_labels, 8, seed=3, chunk_size=DRAW_BLOCK).full()
    labels = torch.tensor([n_labels - 1, 5, DRAW_BLOCK - 1, DRAW_BLOCK, 5, 2 * DRAW_BLOCK + 7, 40])
    for chunk_size in (300, 1000, DRAW_BLOCK + 1, 3 * DRAW_BLOCK):
        code = HRRLabelCode(n_labels, 8, seed=3, chunk_size=chunk_size)
        gathered = code.gather(labels)
        assert torch.allclose(gathered, reference[labels], atol=1e-6)
        last = code.n_chunks - 1
        assert torch.allclose(code.chunk(last), reference[code.chunk_bounds(last)[0]:], atol=1e-6)
        assert torch.allclose(code.chunk(0), reference[:chunk_size], atol=1e-6)  # backwards, after the last
        full = code.full()
        assert torch.allclose(full, reference, atol=1e-6)
        assert torch.equal(gathered, full[labels])  # within one code, gathers equal its chunks exactly


def test_circulant_code_is_groups_of_orthonormal_shifts_regenerated_from_the_seed():
    n_labels, dim = 1000, 64
    code = HRRLabelCode(n_labels, dim, seed=4, chunk_size=100, circulant=True)
    assert code.n_groups == 16 and code.group_spectra.shape == (16, dim // 2 + 1)
    full = code.full().double()
    bases = torch.fft.irfft(code.group_spectra.to(torch.complex128), n=dim)
    for label in (0, 1, 63, 64, 130, 999):
        group, shift = divmod(label, dim)
        assert torch.allclose(full[label], torch.roll(bases[group], shift), atol=1e-6)
    gram = full @ full.T
    assert torch.allclose(gram[:dim, :dim], torch.eye(dim, dtype=torch.float64), atol=1e-5)  # a group
    across = gram[:dim, dim : 2 * dim].abs()
    assert 0.05 < across.max() < 0.7 and across.mean() < 3 / dim**0.5  # another group: random overlaps
    assert torch.allclose(hrr.projection(full), full, atol=1e-5)  # every vector unitary, as π makes them
    fresh = HRRLabelCode(n_labels, dim, seed=4, chunk_size=100, circulant=True)
    assert torch.equal(fresh.chunk(7), code.chunk(7)) and torch.equal(fresh.present, code.present)
    labels = torch.tensor([999, 0, 64, 450, 63, 450])
    assert torch.equal(fresh.gather(labels), code.materialize()[labels])  # rolled rows, no chunk made
    spectral = torch.fft.irfft(fresh._chunk_spectrum(7), n=dim)  # the spectra the head's keys come from
    assert torch.allclose(spectral, code.chunk(7), atol=1e-6)
    random_code = HRRLabelCode(n_labels, dim, seed=4, chunk_size=100)
    assert not torch.allclose(random_code.chunk(0), code.chunk(0)) and random_code.group_spectra is None


def test_bound_chunks_equal_binding_the_chunk():
    code = HRRLabelCode(300, 48, seed=2, chunk_size=128)
    roles = torch.stack([code.present, code.missing])
    for cached in (False, True):
        for j in range(code.n_chunks):
            bound = code.bound_chunk(j, roles)
            assert bound.shape == (code.chunk(j).shape[0], 2, 48)
            assert torch.allclose(bound, hrr.bind(roles, code.chunk(j).unsqueeze(1)), atol=1e-6)
        code.materialize()


def test_gather_regenerates_only_what_it_needs_and_matches_cache():
    code = HRRLabelCode(1000, 32, seed=5, chunk_size=100)
    labels = torch.tensor([999, 0, 450, 451, 0, 105])
    regenerated = code.gather(labels)
    full = code.materialize()
    assert code.is_materialized
    assert torch.equal(regenerated, full[labels])
    assert torch.equal(code.gather(labels), regenerated)


def test_vectors_are_projected_unit_norm_and_nearly_orthogonal():
    code = HRRLabelCode(400, 256, seed=0)
    vectors = code.full()
    spectrum = torch.fft.rfft(vectors.double(), dim=-1).abs()
    assert torch.allclose(spectrum, torch.ones_like(spectrum), atol=1e-5)
    assert torch.allclose(vectors.norm(dim=-1), torch.ones(400), atol=1e-5)
    gram = vectors @ vectors.T - torch.eye(400)
    assert gram.abs().max() < 6 / 256**0.5  # random unit vectors: |cos| ~ 1/sqrt(d)


@pytest.mark.parametrize("dim", [64, 65])
def test_label_vectors_are_distributed_like_projected_gaussians(dim):
    """Fourier-domain draws match hrr.projection of N(0, I/d') draws in distribution."""
    n = 4000
    direct = HRRLabelCode(n, dim, seed=0, chunk_size=1000).full().double()
    reference = hrr.random(n, dim, generator=1, dtype=torch.float64)
    # π keeps only phases: unit magnitudes everywhere, a sign at DC
    for vectors in (direct, reference):
        spectrum = torch.fft.rfft(vectors)
        assert torch.allclose(spectrum.abs(), torch.ones_like(spectrum.abs()), atol=1e-5)
        dc_sign = spectrum[:, 0].real.sign()
        assert abs(float(dc_sign.mean())) < 0.1  # symmetric: +1 and -1 equally likely
    # entries: mean 0, variance 1/d'; phases uniform (mean cos ≈ 0 away from DC)
    for statistic in (lambda v: v.mean(), lambda v: v.var() * dim,
                      lambda v: torch.cos(torch.angle(torch.fft.rfft(v)[:, 1:dim // 2])).mean()):
        assert abs(float(statistic(direct)) - float(statistic(reference))) < 0.03
    # pairwise similarity of distinct labels has the same spread, ~1/sqrt(d')
    def similarity_spread(v):
        return float((v[: n // 2] * v[n // 2 :]).sum(1).std())
    assert abs(similarity_spread(direct) - similarity_spread(reference)) < 0.15 * dim**-0.5


@pytest.mark.parametrize("dim", [16, 400, 1001])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_present_and_missing_roles_are_orthogonal_after_projection(dim, seed):
    code = HRRLabelCode(10, dim, seed=seed)
    assert code.pm_residual < 1e-6
    raw_residual = abs(float(code.present.double() @ code.missing_raw.double()))
    assert raw_residual < 1e-6  # m was orthogonalised against p before its projection
    for role in (code.present, code.missing):
        assert torch.allclose(torch.fft.rfft(role.double()).abs(), torch.ones(dim // 2 + 1, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(hrr.projection(code.missing_raw.double()).float(), code.missing, atol=1e-6)


def test_float64_code_draws_the_same_vectors():
    code32 = HRRLabelCode(30, 24, seed=9)
    code64 = HRRLabelCode(30, 24, seed=9, dtype=torch.float64)
    assert code64.full().dtype == torch.float64
    assert torch.allclose(code64.full().float(), code32.full(), atol=1e-6)
    assert code64.nbytes == 2 * code32.nbytes == 30 * 24 * 8


def test_local_generators_are_independent_streams():
    a = torch.rand(4, generator=local_generator(0, 0, 1))
    b = torch.rand(4, generator=local_generator(0, 0, 2))
    c = torch.rand(4, generator=local_generator(1, 0, 1))
    assert not torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(a, torch.rand(4, generator=local_generator(0, 0, 1)))


def test_every_use_of_the_seed_has_its_own_stream_but_the_documented_pair():
    names_of: dict[int, set[str]] = {}
    for name, stream in Stream.__members__.items():
        names_of.setdefault(int(stream), set()).add(name)
    shared = {value: names for value, names in names_of.items() if len(names) > 1}
    assert shared == {3: {"FC_INIT", "CIRCULANT_BASE"}}


def test_invalid_arguments_raise_input_errors():
    with pytest.raises(InputError):
        HRRLabelCode(0, 16)
    with pytest.raises(InputError):
        HRRLabelCode(10, 16, chunk_size=4).chunk(3)

"""SOLAR label codes, inverted index and per-chunk feature hashing."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.utils import murmurhash3_32

from holoxmc.models.solar.codes import FeatureHash, SolarLabelCode, chunk_seed
from holoxmc.errors import InputError


@settings(max_examples=25, deadline=None)
@given(
    n_labels=st.integers(1, 3000),
    n_buckets=st.integers(1, 200),
    n_chunks=st.integers(1, 4),
    seed=st.integers(0, 2**31 - 1),
)
def test_balanced_loads_differ_by_at_most_one(n_labels, n_buckets, n_chunks, seed):
    code = SolarLabelCode(n_labels, n_chunks=n_chunks, n_buckets=n_buckets, seed=seed)
    loads = code.bucket_loads()
    assert loads.shape == (n_chunks, n_buckets)
    assert (loads.sum(axis=1) == n_labels).all()
    assert loads.min() == n_labels // n_buckets
    assert loads.max() == -(-n_labels // n_buckets)


def test_murmur_codes_follow_murmurhash_and_spread_like_random_bins():
    L, B, K = 20_000, 200, 3
    code = SolarLabelCode(L, n_chunks=K, n_buckets=B, seed=7, method="murmur")
    for k in range(K):
        seed = chunk_seed(7, k, "labels")
        for label in (0, 1, 12_345, L - 1):
            assert code.buckets[k, label] == murmurhash3_32(label, seed=seed, positive=True) % B
    loads = code.bucket_loads()
    # balls in bins: mean L/B = 100, standard deviation about 10; balanced would be exactly 100.
    assert loads.mean() == pytest.approx(L / B)
    assert 5 < loads.std() < 15
    balanced = SolarLabelCode(L, n_chunks=K, n_buckets=B, seed=7).bucket_loads()
    assert balanced.max() - balanced.min() == 0 < loads.max() - loads.min()


@pytest.mark.parametrize("method", ["balanced", "murmur"])
def test_mean_pairwise_overlap_matches_k_over_b(method):
    L, K, B = 5_000, 16, 50
    code = SolarLabelCode(L, n_chunks=K, n_buckets=B, seed=3, method=method)
    rng = np.random.default_rng(0)
    a = rng.integers(0, L, 40_000)
    b = (a + rng.integers(1, L, a.size)) % L  # distinct pairs
    overlap = code.overlap(a, b)
    expected = K / B if method == "murmur" else K * (L / B - 1) / (L - 1)
    standard_error = np.sqrt(K / B * (1 - 1 / B) / a.size)
    assert abs(overlap.mean() - expected) < 5 * standard_error
    assert (code.overlap(a, a) == K).all()


def test_codes_regenerate_from_seed_and_chunks_differ():
    first = SolarLabelCode(1000, n_chunks=4, n_buckets=30, seed=11)
    again = SolarLabelCode(1000, n_chunks=4, n_buckets=30, seed=11)
    other = SolarLabelCode(1000, n_chunks=4, n_buckets=30, seed=12)
    np.testing.assert_array_equal(first.buckets, again.buckets)
    assert first.buckets.dtype == np.int32
    assert (first.buckets != other.buckets).mean() > 0.9
    assert (first.buckets[0] != first.buckets[1]).mean() > 0.9
    assert SolarLabelCode(**first.config()).buckets.tobytes() == first.buckets.tobytes()


@pytest.mark.parametrize("method", ["balanced", "murmur"])
def test_inverted_index_lists_every_label_under_its_bucket(method):
    code = SolarLabelCode(503, n_chunks=3, n_buckets=17, seed=5, method=method)
    index = code.inverted_index()
    table = index.padded().numpy()
    for k in range(3):
        csr = index.chunk_csr(k)
        assert csr.shape == (17, 503)
        rows, cols = csr.nonzero()
        np.testing.assert_array_equal(code.buckets[k, cols], rows)
        assert sorted(cols.tolist()) == list(range(503))
        for b in range(17):
            listed = index.bucket(k, b)
            np.testing.assert_array_equal(np.sort(listed), np.flatnonzero(code.buckets[k] == b))
            padded = table[k, b]
            np.testing.assert_array_equal(np.sort(padded[padded < 503]), np.sort(listed))
    restored = type(index).from_tensors(index.tensors())
    np.testing.assert_array_equal(restored.labels, index.labels)
    np.testing.assert_array_equal(restored.indptr, index.indptr)


@pytest.mark.parametrize(
    "kwargs",
    [dict(n_labels=0), dict(n_labels=5, n_buckets=0), dict(n_labels=5, n_chunks=-1),
     dict(n_labels=5, method="random"), dict(n_labels=5, seed=1.5)],
)
def test_invalid_code_parameters_raise_input_error(kwargs):
    with pytest.raises(InputError):
        SolarLabelCode(**kwargs)


def test_feature_hash_matches_a_per_column_reference():
    X = sp.random(30, 200, density=0.1, format="csr", dtype=np.float32, random_state=1)
    hasher = FeatureHash(200, 16, seed=99)
    reference = np.zeros((30, 16), dtype=np.float64)
    dense = X.toarray()
    for j in range(200):
        h = murmurhash3_32(j, seed=99)
        reference[:, abs(h) % 16] += (1.0 if h >= 0 else -1.0) * dense[:, j]
    out = hasher.transform(X)
    assert out.dtype == np.float32 and out.has_sorted_indices
    np.testing.assert_allclose(out.toarray(), reference, rtol=1e-5, atol=1e-6)
    unsigned = FeatureHash(200, 16, seed=99, alternate_sign=False).transform(X).toarray()
    np.testing.assert_allclose(unsigned.sum(1), dense.sum(1), rtol=1e-5)


def test_feature_hash_seeds_give_different_collisions():
    a, b = FeatureHash(10_000, 1_000, seed=chunk_seed(0, 0, "features")), FeatureHash(
        10_000, 1_000, seed=chunk_seed(0, 1, "features")
    )
    assert (a.column != b.column).mean() > 0.99
    # pairs colliding in chunk 0 almost never collide in chunk 1
    first, second = np.arange(0, 10_000, 2), np.arange(1, 10_000, 2)
    both = (a.column[first] == a.column[second]) & (b.column[first] == b.column[second])
    assert both.sum() <= 2
    with pytest.raises(InputError):
        a.transform(sp.csr_matrix((2, 5), dtype=np.float32))

"""SOLAR chunk head (per-batch bucket targets) and inverted-index decoding against a
per-point reference written with plain Python loops."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from holoxmc.models.solar.codes import SolarLabelCode
from holoxmc.data.batch import LabelBatch
from holoxmc.errors import InputError
from holoxmc.models.solar.head import SolarChunkHead, bucket_label_batch, solar_decode


def _random_labels(n: int, n_labels: int, density: float, seed: int) -> sp.csr_matrix:
    Y = sp.random(n, n_labels, density=density, format="csr", random_state=seed, dtype=np.float32)
    Y.data[:] = 1
    return Y


def test_bucket_targets_are_the_or_of_label_buckets():
    code = SolarLabelCode(40, n_chunks=1, n_buckets=7, seed=0)
    Y = _random_labels(25, 40, 0.15, seed=1)
    batch = bucket_label_batch(LabelBatch.from_csr(Y), torch.from_numpy(code.buckets[0]).long(), 7)
    onehot = np.zeros((40, 7))
    onehot[np.arange(40), code.buckets[0]] = 1
    expected = (Y.toarray() @ onehot) > 0
    assert batch.n_labels == 7
    np.testing.assert_array_equal(batch.to_dense().numpy() > 0, expected)
    assert batch.indices.numel() == expected.sum()  # no duplicates


def test_chunk_head_loss_is_bce_over_bucket_targets():
    code = SolarLabelCode(40, n_chunks=2, n_buckets=7, seed=0)
    head = SolarChunkHead(6, torch.from_numpy(code.buckets[1]), n_buckets=7, seed=3)
    Y = _random_labels(9, 40, 0.1, seed=2)
    out = head(torch.randn(9, 6, generator=torch.Generator().manual_seed(0)))
    assert out.shape == (9, 7)
    onehot = np.zeros((40, 7), dtype=np.float32)
    onehot[np.arange(40), code.buckets[1]] = 1
    target = torch.from_numpy(((Y.toarray() @ onehot) > 0).astype(np.float32))
    expected = F.binary_cross_entropy_with_logits(out, target)
    torch.testing.assert_close(head.loss(out, LabelBatch.from_csr(Y)), expected)
    assert head.topk(out, 3)[1].shape == (9, 3)
    assert "bucket_of_label" not in head.state_dict()  # regenerated from the seed, not stored
    with pytest.raises(InputError):
        head.loss(out, LabelBatch.from_csr(_random_labels(9, 41, 0.1, seed=2)))


def _reference_decode(logits, buckets, k, m, min_freq, scoring):
    n, K, B = logits.shape
    f = {"prob": lambda z: 1 / (1 + np.exp(-z)), "logprob": lambda z: -np.log1p(np.exp(-z)), "logit": lambda z: z}[
        scoring
    ]
    rows = []
    for i in range(n):
        hits = Counter()
        for c in range(K):
            for b in np.argsort(-logits[i, c])[:m]:
                hits.update(np.flatnonzero(buckets[c] == b).tolist())
        counts = sorted(hits.values(), reverse=True)
        threshold = max(1, min(min_freq, counts[min(k, len(counts)) - 1]))
        kept = [label for label, h in hits.items() if h >= threshold]
        # the ranking key: hit count capped at min_freq (the labels that pass it first), then score
        scores = {label: (min(hits[label], min_freq), sum(f(logits[i, c, buckets[c, label]]) for c in range(K)))
                  for label in kept}
        rows.append(scores)
    return rows


@pytest.mark.parametrize("scoring", ["prob", "logprob", "logit"])
@pytest.mark.parametrize("min_freq,m", [(1, 1), (2, 2), (3, 2), (4, 3)])
@pytest.mark.parametrize("chunk_major", [False, True], ids=["contiguous", "transposed-view"])
def test_decode_matches_per_point_reference(scoring, min_freq, m, chunk_major):
    L, K, B, n, k = 60, 4, 9, 12, 5
    code = SolarLabelCode(L, n_chunks=K, n_buckets=B, seed=min_freq * 10 + m)
    logits = torch.randn(n, K, B, generator=torch.Generator().manual_seed(m), dtype=torch.float64)
    if chunk_major:  # the layout SolarModel.chunk_logits returns: a (K, n, B) tensor seen as (n, K, B)
        logits = logits.transpose(0, 1).contiguous().transpose(0, 1)
    scores, labels, candidates = solar_decode(
        logits, code.inverted_index().padded(), torch.from_numpy(code.buckets).long(), k,
        top_buckets=m, min_freq=min_freq, scoring=scoring,
    )
    reference = _reference_decode(logits.numpy(), code.buckets, k, m, min_freq, scoring)
    assert scores.shape == labels.shape == (n, k)
    for i, kept in enumerate(reference):
        assert int(candidates[i]) == len(kept)
        best = sorted(kept.values(), reverse=True)[:k]
        np.testing.assert_allclose(scores[i, : len(best)].numpy(), [score for _, score in best], rtol=1e-12)
        for label, score in zip(labels[i].tolist(), scores[i].tolist()):
            if label >= 0:
                assert kept[label][1] == pytest.approx(score, rel=1e-12)
        assert len(set(labels[i].tolist()) - {-1}) == min(k, len(kept))


def test_decode_relaxes_min_freq_to_keep_k_candidates():
    code = SolarLabelCode(100, n_chunks=4, n_buckets=20, seed=0)
    logits = torch.randn(8, 4, 20, generator=torch.Generator().manual_seed(0))
    index, buckets = code.inverted_index().padded(), torch.from_numpy(code.buckets).long()
    _, labels, candidates = solar_decode(logits, index, buckets, 5, top_buckets=1, min_freq=4)
    # with one bucket per chunk almost no label is hit 4 times; relaxing still gives 5 labels
    assert (labels >= 0).all() and (candidates >= 5).all()
    _, _, loose = solar_decode(logits, index, buckets, 5, top_buckets=1, min_freq=1)
    assert (loose >= candidates).all()


def test_decode_pads_when_fewer_than_k_labels_exist_and_validates():
    code = SolarLabelCode(3, n_chunks=2, n_buckets=3, seed=0)
    index, buckets = code.inverted_index().padded(), torch.from_numpy(code.buckets).long()
    logits = torch.randn(2, 2, 3, generator=torch.Generator().manual_seed(0))
    scores, labels, candidates = solar_decode(logits, index, buckets, 5, top_buckets=3)
    assert labels[:, :3].sort(1).values.tolist() == [[0, 1, 2], [0, 1, 2]]
    assert (labels[:, 3:] == -1).all() and torch.isinf(scores[:, 3:]).all()
    assert candidates.tolist() == [3, 3]
    scores, labels, candidates = solar_decode(logits[:0], index, buckets, 5)  # no points
    assert scores.shape == labels.shape == (0, 5) and candidates.shape == (0,)
    assert labels.dtype == torch.int64 and scores.dtype == logits.dtype
    with pytest.raises(InputError):
        solar_decode(logits, index, buckets, 5, scoring="max")
    with pytest.raises(InputError):
        solar_decode(logits[:, :1], index, buckets, 5)

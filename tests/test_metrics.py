"""Metrics: hand-computed cases, agreement with napkinXC, exact streaming, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from holoxmc.errors import InputError
from holoxmc.metrics import (
    MetricAccumulator,
    evaluate,
    evaluate_scores,
    inverse_propensity,
    label_set_f1,
    pad_predictions,
    propensity_preset,
    top_k,
)

# 3 rows: two labels, one label, no label (must still count).
Y_HAND = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]], dtype=np.float32))
TOPK_HAND = np.array([[0, 2, 1], [3, 2, 0], [1, 0, 2]])  # hits: [1,0,1], [0,1,0], [0,0,0]
W_HAND = np.array([2.0, 4.0, 8.0, 1.0])
LOG3 = math.log2(3)


def test_precision_and_ndcg_by_hand():
    r = evaluate(TOPK_HAND, Y_HAND, ks=(1, 2, 3))
    assert r["P@1"] == pytest.approx(100 * 1 / 3)
    assert r["P@2"] == pytest.approx(100 * (1 / 2 + 1 / 2 + 0) / 3)
    assert r["P@3"] == pytest.approx(100 * (2 / 3 + 1 / 3 + 0) / 3)
    ideal_two = 1 + 1 / LOG3
    assert r["nDCG@1"] == pytest.approx(100 * 1 / 3)
    assert r["nDCG@2"] == pytest.approx(100 * (1 / ideal_two + (1 / LOG3) / 1) / 3)
    assert r["nDCG@3"] == pytest.approx(100 * ((1 + 1 / 2) / ideal_two + 1 / LOG3) / 3)
    assert not any(key.startswith("PS") for key in r)  # no propensities, no PS metrics


def test_propensity_scored_by_hand():
    r = evaluate(TOPK_HAND, Y_HAND, inv_prop=W_HAND, ks=(1, 2))
    # raw (HRR eq. 9): mean over rows of 1/k * sum of hit weights
    assert r["PSP@1(raw)"] == pytest.approx(100 * (2 + 0 + 0) / 3)
    assert r["PSP@2(raw)"] == pytest.approx(100 * ((2 + 0) / 2 + (0 + 8) / 2 + 0) / 3)
    # normalised: divided by the best achievable (row 0: {4, 2}, row 1: {8}, row 2: {})
    assert r["PSP@1"] == pytest.approx(100 * 2 / (4 + 8))
    assert r["PSP@2"] == pytest.approx(100 * ((2 + 0) / 2 + 8 / 2) / ((4 + 2) / 2 + 8 / 2))
    ideal_two = 1 + 1 / LOG3
    gain = 2 / ideal_two + (8 / LOG3) / 1
    best = (4 + 2 / LOG3) / ideal_two + 8 / 1
    assert r["PSnDCG@2"] == pytest.approx(100 * gain / best)
    assert r["PSnDCG@2(raw)"] == pytest.approx(100 * gain / 3)


def test_precision_divides_by_k_even_for_short_rows():
    Y = sp.csr_matrix(np.array([[1, 0, 0, 0, 0, 0]]))
    r = evaluate(np.array([[0, 1, 2, 3, 4]]), Y)
    assert r["P@5"] == pytest.approx(20.0)
    assert r["nDCG@5"] == pytest.approx(100.0)  # ideal DCG uses min(k, 1) hit


def test_missing_predictions_marked_minus_one_score_zero():
    Y = sp.csr_matrix(np.array([[0, 1, 0]]))
    r = evaluate(np.array([[1, -1]]), Y, ks=(1, 2))
    assert r["P@1"] == 100.0 and r["P@2"] == 50.0


def test_fewer_labels_than_k_count_the_missing_ranks_as_misses():
    Y = sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 0]]))
    scores = np.array([[0.9, 0.1, 0.5], [0.2, 0.7, 0.1]])
    by_scores = evaluate_scores(scores, Y)  # L = 3 < 5
    assert pad_predictions(top_k(scores, 3), 5).tolist() == [[0, 2, 1, -1, -1], [1, 0, 2, -1, -1]]
    assert by_scores == evaluate(pad_predictions(top_k(scores, 3), 5), Y)
    assert by_scores["P@1"] == 100.0 and by_scores["P@3"] == pytest.approx(50.0) and by_scores["P@5"] == pytest.approx(30.0)
    with pytest.raises(InputError, match="need k >= 5"):  # an explicit top-3 is still not taken for a top-5
        evaluate(top_k(scores, 3), Y)


def test_inverse_propensity_formula():
    Y = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 0], [1, 0, 0], [1, 0, 0]]))
    A, B = 0.55, 1.5
    C = (math.log(4) - 1) * (B + 1) ** A
    expected = [1 + C * (n + B) ** -A for n in (4, 1, 0)]
    np.testing.assert_allclose(inverse_propensity(Y), expected, rtol=1e-12)


@pytest.mark.parametrize("names, preset", [
    (["Amazon-670K", "amazon-670k", "amazon670k", "AMAZON_670K", "Amazon-3M", "amazon3m"], (0.6, 2.6)),
    (["WikiLSHTC-325K", "wikilshtc325k", "Wikipedia-500K", "wiki-500k", "wikipedia_500k"], (0.5, 0.4)),
    (["AmazonCat-13K", "amazoncat-13k", "Wiki10-31K", "wiki10-31k", "eurlex-4k", "bibtex", "amazon", "wiki",
      "amazon-670k-like", "/data/Amazon-670K"], (0.55, 1.5)),
])
def test_propensity_presets_go_to_the_sets_of_jain_et_al_by_exact_name(names, preset):
    """Amazon-670K/-3M and WikiLSHTC-325K/Wikipedia-500K only, as in the XML repository and
    napkinXC: a prefix such as "amazon" or "wiki" (AmazonCat-13K, Wiki10-31K) takes the default."""
    assert {name: propensity_preset(name) for name in names} == {name: preset for name in names}


def _random_instance(seed: int, n: int = 120, n_labels: int = 30, k: int = 5):
    rng = np.random.default_rng(seed)
    Y = sp.random(n, n_labels, density=0.08, random_state=rng, format="csr", dtype=np.float32)
    Y.data[:] = 1
    Y_train = sp.random(400, n_labels, density=0.1, random_state=rng, format="csr", dtype=np.float32)
    Y_train.data[:] = 1
    topk = np.argsort(-rng.random((n, n_labels)), axis=1)[:, :k]
    return Y, Y_train, topk


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_agrees_with_napkinxc(seed):
    nm = pytest.importorskip("napkinxc.metrics", reason="napkinxc (test extra) not installed")
    Y, Y_train, topk = _random_instance(seed)
    w = inverse_propensity(Y_train)
    np.testing.assert_allclose(w, nm.Jain_et_al_inverse_propensity(Y_train.astype(np.float64)), rtol=1e-12)
    r = evaluate(topk, Y, inv_prop=w)
    pred = topk.tolist()
    reference = {
        "P": nm.precision_at_k(Y, pred, k=5),
        "nDCG": nm.ndcg_at_k(Y, pred, k=5),
        "PSP": nm.psprecision_at_k(Y, pred, w, k=5),
        "PSP(raw)": nm.psprecision_at_k(Y, pred, w, k=5, normalize=False),
        "PSnDCG": nm.psndcg_at_k(Y, pred, w, k=5),
        "PSnDCG(raw)": nm.psndcg_at_k(Y, pred, w, k=5, normalize=False),
    }
    for name, values in reference.items():
        base, _, raw = name.partition("(")
        for k in range(1, 6):
            key = f"{base}@{k}" + (f"({raw}" if raw else "")
            assert r[key] == pytest.approx(100 * values[k - 1], rel=1e-10), key


def test_streaming_equals_full_set_exactly():
    Y, Y_train, topk = _random_instance(5, n=257)
    w = inverse_propensity(Y_train)
    full = evaluate(topk, Y, inv_prop=w)
    for bounds in ([0, 1, 100, 101, 257], [0, 128, 257], list(range(0, 257, 16)) + [257]):
        accumulator = MetricAccumulator(inv_prop=w)
        for start, stop in zip(bounds[:-1], bounds[1:]):
            accumulator.update(topk[start:stop], Y[start:stop])
        assert accumulator.n_rows == 257
        assert accumulator.result() == full  # bit-for-bit


def test_scores_path_matches_topk_path():
    rng = np.random.default_rng(3)
    Y, Y_train, _ = _random_instance(3)
    scores = rng.random(Y.shape)
    w = inverse_propensity(Y_train)
    expected = evaluate(np.argsort(-scores, axis=1)[:, :5], Y, inv_prop=w)
    assert evaluate_scores(scores, Y, inv_prop=w) == expected
    assert evaluate_scores(sp.csr_matrix(scores), Y, inv_prop=w) == expected


def test_sparse_scores_rank_only_their_stored_entries_as_evaluate_scores_documents():
    """A stored -inf ranks above an absent entry (never predicted); dense, the 0 ranks above it."""
    scores, Y = np.array([[-np.inf, 0.0]]), sp.csr_matrix([[0, 1]])
    assert evaluate_scores(scores, Y, ks=(1,))["P@1"] == 100.0
    assert evaluate_scores(sp.csr_matrix(scores), Y, ks=(1,))["P@1"] == 0.0
    assert "stored ``-inf``" in evaluate_scores.__doc__


def test_top_k_sparse_pads_rows_with_few_scores():
    S = sp.csr_matrix(np.array([[0.0, 0.3, 0.9], [0.0, 0.0, 0.0]]))
    assert top_k(S, 2).tolist() == [[2, 1], [-1, -1]]
    assert top_k(np.array([[0.2, 0.2, 0.5]]), 3).tolist() == [[2, 0, 1]]
    with pytest.raises(InputError, match="NaN"):
        top_k(np.array([[np.nan, 1.0]]), 1)


@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 40)),
              elements=st.sampled_from([0.0, 0.5, 1.0, -np.inf])),
       st.integers(1, 40))
def test_top_k_ranks_ties_by_label_index_dense_and_sparse_alike(scores, k):
    k = min(k, scores.shape[1])
    by_score_then_index = np.lexsort((np.broadcast_to(np.arange(scores.shape[1]), scores.shape), -scores), axis=1)
    assert top_k(scores, k).tolist() == by_score_then_index[:, :k].tolist()
    finite = np.where(np.isfinite(scores), scores + 1.0, 0.0)  # sparse: zeros are absent, never predicted
    expected = [[int(j) for j in row if finite[i, j] != 0][:k] for i, row in enumerate(by_score_then_index)]
    assert [[int(j) for j in row if j >= 0] for row in top_k(sp.csr_matrix(finite), k)] == expected


@pytest.mark.parametrize(
    "topk, message",
    [
        (np.array([[0, 0], [1, 2]]), "same label twice"),
        (np.array([[0, 9], [1, 2]]), "must lie in"),
        (np.array([[0, 1]]), "rows"),
        (np.array([[0], [1]]), "need k >= 2"),
        (np.array([[0.0, 1.0], [1.0, 2.0]]), "integer"),
    ],
)
def test_invalid_predictions_rejected(topk, message):
    Y = sp.csr_matrix(np.eye(2, 3))
    with pytest.raises(InputError, match=message):
        evaluate(topk, Y, ks=(1, 2))


def test_inv_prop_length_must_match():
    with pytest.raises(InputError, match="inv_prop"):
        evaluate(np.array([[0]]), sp.csr_matrix(np.eye(1, 3)), inv_prop=np.ones(2), ks=(1,))


def test_label_set_f1_counts_nonzeros_only_and_scores_empty_rows_as_scikit_learn_does():
    rng = np.random.default_rng(3)
    Y = sp.csr_matrix(rng.random((60, 25)) < 0.1, dtype=np.float32)
    confidences = sp.csr_matrix(rng.random((60, 25)) * (rng.random((60, 25)) < 0.1), dtype=np.float32)
    for matrix in (confidences, Y):  # row 5: no label on either side, its entries kept as stored zeros
        matrix.data[matrix.indptr[5] : matrix.indptr[6]] = 0.0
    assert confidences.nnz > (confidences != 0).nnz and Y.nnz > (Y != 0).nnz
    predicted, truth = (confidences != 0).toarray(), (Y != 0).toarray()
    hits, n_predicted, n_true = (predicted & truth).sum(1), predicted.sum(1), truth.sum(1)
    per_row = np.where(n_predicted + n_true > 0, 2 * hits / np.maximum(n_predicted + n_true, 1), 1.0)
    result = label_set_f1(confidences, Y)
    assert result["micro-F1"] == pytest.approx(100 * 2 * hits.sum() / (n_predicted.sum() + n_true.sum()))
    assert result["example-F1"] == pytest.approx(100 * per_row.mean())
    assert result["labels per point"] == pytest.approx(n_predicted.mean())
    with pytest.raises(InputError, match="differ in shape"):
        label_set_f1(confidences[:, :20], Y)


def _recall_brute_force(topk: np.ndarray, Y: sp.csr_matrix, k: int) -> float:
    values = []
    for i in range(Y.shape[0]):
        true = set(Y[i].indices.tolist())
        if true:
            values.append(len(true & {int(label) for label in topk[i, :k] if label >= 0}) / len(true))
    return 100.0 * float(np.mean(values)) if values else 0.0


def test_recall_at_k_matches_brute_force_over_labelled_rows() -> None:
    rng = np.random.default_rng(3)
    n, L = 40, 150
    Y = sp.random(n, L, density=0.04, random_state=4, format="csr")
    Y.data[:] = 1.0
    Y = sp.csr_matrix(Y.toarray() * (np.arange(n) % 5 != 0)[:, None])  # some rows without labels
    topk = np.stack([rng.permutation(L)[:120] for _ in range(n)])
    topk[0, 50:] = -1  # "no prediction" is a miss
    result = evaluate(topk, Y, ks=(1, 3, 5), recall_ks=(100,))
    for k in (1, 3, 5, 100):
        assert result[f"Recall@{k}"] == pytest.approx(_recall_brute_force(topk, Y, k))
    assert "Recall@100" in result and "P@100" not in result
    acc = MetricAccumulator(ks=(1, 3, 5), recall_ks=(100,))
    for start in range(0, n, 7):  # streaming equals the whole set bit for bit
        acc.update(topk[start : start + 7], Y[start : start + 7])
    assert acc.result() == result


def test_recall_needs_enough_predicted_columns() -> None:
    Y = sp.csr_matrix(np.eye(3))
    with pytest.raises(InputError, match="need k >= 100"):
        evaluate(np.zeros((3, 5), dtype=int), Y, recall_ks=(100,))


def test_metrics_table_shows_recall() -> None:
    from holoxmc.cli.report import metrics_table

    Y = sp.csr_matrix(np.eye(120)[:4])
    topk = np.tile(np.arange(120), (4, 1))
    table = metrics_table(evaluate(topk, Y, recall_ks=(100,)))
    assert "Recall" in table.splitlines()[0]
    assert table.splitlines()[-1] == "Recall@100: 100.00"

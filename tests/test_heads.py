"""Output heads: the HRR loss against a naive O(L) reference, chunked decoding against the
full score matrix, gradients, and learning a small separable problem."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc import hrr
from holoxmc.backbones import FCBackbone, Network
from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.errors import InputError
from holoxmc.heads import OutputHead
from holoxmc.heads.decoding import above_fraction_of_best
from holoxmc.heads.dense import DenseHead
from holoxmc.heads.hrr import HRRHead
from holoxmc.models.solar.head import SolarChunkHead

N_LABELS = 37
LABEL_ROWS = [[0, 5, 36], [], [7], [1, 2, 3, 4, 30], [], [36]]


def labels_of(rows: list[list[int]], n_labels: int = N_LABELS) -> LabelBatch:
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.array([i for r in rows for i in r], dtype=np.int64)
    Y = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(len(rows), n_labels))
    return LabelBatch.from_csr(Y)


def naive_hrr_loss(
    head: HRRHead, out: torch.Tensor, rows: list[list[int]], drawn: torch.Tensor | None = None
) -> torch.Tensor:
    """Eqs. 6–7 (or the authors' abs variant), plus ``head.ranking`` times the ranking
    softmax of the logits τcos (+ b with a label bias), example by example over the full
    code: exact over every label, or, given the ``drawn`` labels, with the partition
    function |Y|·e^{mean logit} + (L − |Y|)/S Σ_drawn e^logit."""
    p, m = head.roles()
    codes = torch.cat([vectors for _, vectors in head.label_chunks()])
    total = out.new_zeros(())
    for b, present in enumerate(rows):
        if not present:
            continue
        c = codes[present]
        cos_p = hrr.cosine(hrr.unbind(out[b], p), c)
        if head.loss_kind == "cosine":
            total = total + (1 - cos_p).sum() + hrr.cosine(hrr.unbind(out[b], m), c.sum(0))
        else:
            cos_m = hrr.cosine(hrr.unbind(out[b], m), c)
            total = total + (1 - cos_p.abs()).sum() + cos_m.abs().sum()
        if head.ranking:
            def logits(labels):
                cos = hrr.cosine(hrr.unbind(out[b], p), codes[labels])
                logit = head.ranking_scale * (cos.abs() if head.loss_kind == "abs" else cos)
                return logit if head.label_bias is None else logit + head.label_bias[labels]

            mean_positive = logits(torch.tensor(present)).mean()
            if drawn is None:
                log_partition = torch.logsumexp(logits(torch.arange(head.n_labels)), 0)
            else:
                absent_share = (head.n_labels - len(present)) / len(drawn)
                log_partition = torch.log(len(present) * mean_positive.exp() + absent_share * logits(drawn).exp().sum())
            total = total + head.ranking * (log_partition - mean_positive)
    return total / len(rows)


HEAD_VARIANTS = [
    dict(),
    dict(loss="abs"),
    dict(cache_codes=False, label_chunk=8),
    dict(learn_pm=True),
    dict(learn_labels=True, label_chunk=10),
    dict(learn_pm=True, learn_labels=True, loss="abs"),
    dict(ranking=0.5),
    dict(ranking=1.0, ranking_scale=4.0, loss="abs", cache_codes=False, label_chunk=8),
    dict(ranking=2.0, learn_pm=True, learn_labels=True),
    dict(ranking=1.0, label_bias=True),
    dict(ranking=1.0, label_bias=True, learn_pm=True, cache_codes=False, label_chunk=8),
    dict(code="circulant"),
    dict(code="circulant", loss="abs", learn_pm=True),
    dict(code="circulant", ranking=1.0, label_bias=True, label_chunk=16),
    dict(code="circulant", ranking=1.0, learn_pm=True, cache_codes=False, label_chunk=8),
]


def randomise_label_bias(head: HRRHead, seed: int) -> HRRHead:
    """Give a ``label_bias`` head non-zero biases (they start at 0, where tests see nothing)."""
    if head.label_bias is not None:
        with torch.no_grad():
            head.label_bias.copy_(torch.randn(head.n_labels, generator=torch.Generator().manual_seed(seed)))
    return head


@pytest.mark.parametrize("options", HEAD_VARIANTS, ids=str)
def test_hrr_loss_matches_naive_reference(options):
    head = randomise_label_bias(HRRHead(12, N_LABELS, dim=64, seed=4, **options), 0)
    out = head(torch.randn(len(LABEL_ROWS), 12, generator=torch.Generator().manual_seed(0)))
    fast = head.loss(out, labels_of(LABEL_ROWS))
    reference = naive_hrr_loss(head, out, LABEL_ROWS)
    assert fast.ndim == 0
    assert torch.allclose(fast, reference, atol=1e-5), (fast, reference)


@pytest.mark.parametrize("options", HEAD_VARIANTS, ids=str)
def test_gradients_match_reference_and_stay_finite_with_empty_rows(options):
    head = randomise_label_bias(HRRHead(12, N_LABELS, dim=32, seed=1, **options), 1)
    h = torch.randn(len(LABEL_ROWS), 12, generator=torch.Generator().manual_seed(1))
    head.loss(head(h), labels_of(LABEL_ROWS)).backward()
    fast_grads = {name: p.grad.clone() for name, p in head.named_parameters()}
    head.zero_grad()
    naive_hrr_loss(head, head(h), LABEL_ROWS).backward()
    for name, p in head.named_parameters():
        assert torch.isfinite(fast_grads[name]).all(), name
        assert torch.allclose(fast_grads[name], p.grad, atol=1e-5), name


@pytest.mark.parametrize("options", [dict(dim=32), dict(dim=32, label_bias=True),
                                     dict(dim=32, code="circulant", label_bias=True),
                                     dict(dim=15, code="circulant", label_bias=True)], ids=str)
def test_fused_exact_ranking_loss_equals_the_autograd_path_even_for_a_zero_output_row(options):
    """The prebound cosine head with the exact ranking term runs one autograd node with a
    written-out gradient; the general path (``F.normalize``, ``_ranking_loss``) is its
    autograd reference, including ``F.normalize``'s clamp for an all-zero output row."""
    from torch.nn import functional as F

    head = randomise_label_bias(HRRHead(12, N_LABELS, seed=12, ranking=1.0, **options), 12)
    labels = labels_of(LABEL_ROWS)
    out = torch.randn(len(LABEL_ROWS), head.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(12))
    out[3] = 0.0
    head.to(torch.float64)
    grads = []
    for fused in (True, False):
        x = out.clone().requires_grad_(True)
        head.zero_grad()
        if fused:
            loss = head.loss(x, labels)
        else:
            unit = F.normalize(x, dim=-1, eps=1e-8)
            sum_p, sum_m = head._present_key_sums(labels, x.dtype)
            row_scores = (unit * sum_p).sum(-1)
            j_negative = ((unit * sum_m).sum(-1) / sum_m.norm(dim=-1).clamp_min(1e-8)).sum()
            total = labels.indices.shape[0] - row_scores.sum() + j_negative
            loss = (total + head.ranking * head._ranking_loss(unit, labels, row_scores)) / len(x)
        loss.backward()
        bias_grad = None if head.label_bias is None else head.label_bias.grad.clone()
        grads.append((loss.detach(), x.grad, bias_grad))
    (fused_loss, fused_out, fused_bias), (loss, out_grad, bias_grad) = grads
    assert torch.allclose(fused_loss, loss, atol=1e-12)
    assert torch.allclose(fused_out, out_grad, atol=1e-9)
    assert fused_out[3].abs().max() > 0  # the clamped row gets F.normalize's gradient, g / eps
    if bias_grad is not None:
        assert torch.allclose(fused_bias, bias_grad, atol=1e-12)


def test_fused_exact_ranking_loss_refuses_a_second_backward():
    """Its backward reuses the saved softmax in place: a second pass would be wrong, so it fails."""
    head = HRRHead(12, N_LABELS, dim=32, seed=12, ranking=1.0)
    x = torch.randn(len(LABEL_ROWS), head.dim, generator=torch.Generator().manual_seed(12), requires_grad=True)
    loss = head.loss(x, labels_of(LABEL_ROWS))
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="one backward pass"):
        loss.backward()


@pytest.mark.parametrize("options", [dict(), dict(learn_pm=True), dict(cache_codes=False, label_chunk=8),
                                     dict(label_bias=True), dict(code="circulant", label_bias=True)], ids=str)
def test_ranking_term_over_sampled_candidates_matches_reference(options):
    """With L > ranking_candidates the softmax runs over the batch's present labels plus
    uniformly drawn ones, drawn from the torch RNG (seeded here as the trainer does)."""
    head = randomise_label_bias(HRRHead(12, N_LABELS, dim=64, seed=2, ranking=1.5, ranking_candidates=6, **options), 2)
    out = head(torch.randn(len(LABEL_ROWS), 12, generator=torch.Generator().manual_seed(3)))
    torch.manual_seed(7)
    drawn = torch.randint(N_LABELS, (6,))
    torch.manual_seed(7)
    fast = head.loss(out, labels_of(LABEL_ROWS))
    reference = naive_hrr_loss(head, out, LABEL_ROWS, drawn)
    assert torch.allclose(fast, reference, atol=1e-5), (fast, reference)


def test_sampled_ranking_term_estimates_the_exact_one():
    """Averaged over draws, the sampled term stays close to the exact one (it estimates the
    absent labels' mass without bias and the present labels' mass from their mean score)."""
    out = torch.randn(len(LABEL_ROWS), 12, generator=torch.Generator().manual_seed(5))
    labels = labels_of(LABEL_ROWS)
    plain = HRRHead(12, N_LABELS, dim=64, seed=3)
    exact = HRRHead(12, N_LABELS, dim=64, seed=3, ranking=1.0, ranking_scale=4.0)
    sampled = HRRHead(12, N_LABELS, dim=64, seed=3, ranking=1.0, ranking_scale=4.0, ranking_candidates=8)
    with torch.no_grad():
        base = plain.loss(plain(out), labels)
        exact_term = exact.loss(exact(out), labels) - base
        torch.manual_seed(0)
        sampled_term = torch.stack([sampled.loss(sampled(out), labels) - base for _ in range(400)]).mean()
    assert exact_term > 0.5
    assert abs(float(sampled_term - exact_term)) < 0.05 * float(exact_term), (sampled_term, exact_term)


def test_ranking_term_pushes_absent_labels_down():
    """A gradient step on J_r alone lowers the best absent label's score relative to the
    present one (J_p + J_n never look at absent labels)."""
    head = HRRHead(12, N_LABELS, dim=64, seed=5, ranking=1.0)
    h = torch.randn(1, 12, generator=torch.Generator().manual_seed(4))
    labels = labels_of([[3]])
    plain = HRRHead(12, N_LABELS, dim=64, seed=5)

    @torch.no_grad()
    def margin(model: HRRHead) -> float:
        scores = model.scores(model(h))[0] / model(h).norm()
        return float(scores[3] - torch.cat([scores[:3], scores[4:]]).max())

    for model in (head, plain):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(20):
            optimizer.zero_grad()
            model.loss(model(h), labels).backward()
            optimizer.step()
    assert margin(head) > margin(plain) > 0


def test_label_bias_learns_the_label_prior_and_decoding_ranks_by_the_ranking_logits():
    """Only J_r trains the bias: with identical inputs, frequent labels get the larger
    biases, and decoding (top-k, scores, folded or not) ranks by τ·cos(p* ⊗ ŝ, c) + b."""
    head = HRRHead(12, N_LABELS, dim=64, seed=6, ranking=1.0, label_bias=True)
    h = torch.randn(1, 12, generator=torch.Generator().manual_seed(6)).expand(8, 12)
    labels = labels_of([[2]] * 6 + [[9]] * 2)  # label 2 three times as frequent as 9
    optimizer = torch.optim.SGD([head.label_bias], lr=0.5)
    for _ in range(20):
        optimizer.zero_grad()
        head.loss(head(h), labels).backward()
        optimizer.step()
    bias = head.label_bias.detach()
    assert bias[2] > bias[9] > bias[torch.arange(N_LABELS) != 2].max() - 1e-6
    assert bias[2] > bias.median() + 1.0

    out = head(torch.randn(9, 12, generator=torch.Generator().manual_seed(7)))
    cos = hrr.cosine(hrr.unbind(out, head.roles()[0]).unsqueeze(1), head.label_vectors(torch.arange(N_LABELS)))
    logits = head.ranking_scale * cos + bias
    with torch.no_grad():
        assert torch.allclose(head.scores(out), logits, atol=1e-5)
        scores, indices = head.topk(out, 5)
        assert torch.equal(indices, torch.topk(logits, 5).indices)
        assert not head._folding_pays()  # the cosine needs ‖ŝ‖: never folded
        hidden = torch.randn(3, 12, generator=torch.Generator().manual_seed(8))
        assert torch.equal(head.topk_hidden(hidden, 5)[1], head.topk(head(hidden), 5)[1])


def test_all_empty_batch_and_zero_output_give_zero_loss_and_finite_gradients():
    head = HRRHead(4, N_LABELS, dim=16, learn_pm=True, learn_labels=True)
    out = torch.zeros(3, 16, requires_grad=True)
    loss = head.loss(out, labels_of([[], [], []]))
    loss.backward()
    assert loss.item() == 0.0
    assert torch.isfinite(out.grad).all() and torch.isfinite(head.labels_raw.grad).all()
    loss = head.loss(out, labels_of([[1], [], [2, 3]]))
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(out.grad).all()


def test_learned_label_gradients_flow_through_projection_to_present_rows_only():
    head = HRRHead(8, N_LABELS, dim=32, learn_labels=True)
    out = head(torch.randn(len(LABEL_ROWS), 8, generator=torch.Generator().manual_seed(2)))
    head.loss(out, labels_of(LABEL_ROWS)).backward()
    grad_norm = head.labels_raw.grad.norm(dim=1)
    present = sorted({i for r in LABEL_ROWS for i in r})
    absent = sorted(set(range(N_LABELS)) - set(present))
    assert (grad_norm[present] > 0).all() and (grad_norm[absent] == 0).all()
    # π makes the code invariant to the scale of a raw vector: its gradient is orthogonal to it.
    raw = head.labels_raw.detach()[present]
    radial = (head.labels_raw.grad[present] * raw).sum(1)
    assert radial.abs().max() < 1e-5 * grad_norm[present].max()


@pytest.mark.parametrize("options", [dict(), dict(loss="abs"), dict(cache_codes=False, label_chunk=5),
                                     dict(learn_labels=True, label_chunk=6)], ids=str)
@pytest.mark.parametrize("k", [1, 5, 37])
def test_chunked_topk_equals_full_matrix_topk(options, k):
    head = HRRHead(10, N_LABELS, dim=48, seed=3, **options)
    out = head(torch.randn(9, 10, generator=torch.Generator().manual_seed(3)))
    p = head.roles()[0]
    codes = torch.cat([vectors for _, vectors in head.label_chunks()])
    full = hrr.unbind(out, p) @ codes.T  # the paper's c_i · (p* ⊗ ŝ)
    if head.loss_kind == "abs":
        full = full.abs()
    expected_scores, expected_indices = torch.topk(full, k, dim=1)
    scores, indices = head.topk(out, k)
    assert indices.dtype == torch.int64 and indices.shape == (9, k)
    assert torch.equal(indices, expected_indices)
    assert torch.allclose(scores, expected_scores, atol=1e-5)
    assert torch.allclose(head.scores(out), full, atol=1e-5)


@pytest.mark.parametrize("make_head", [
    lambda: DenseHead(10, N_LABELS, seed=1),
    lambda: HRRHead(10, N_LABELS, dim=48, seed=1, cache_codes=False, label_chunk=8),
    lambda: HRRHead(10, N_LABELS, dim=48, seed=1, code="circulant"),
    lambda: SolarChunkHead(10, torch.arange(N_LABELS) % 7, n_buckets=7, seed=1),
], ids=["dense", "hrr-chunked", "hrr-circulant", "solar-chunk"])
def test_every_head_keeps_the_output_head_contract(make_head):
    """``score_chunks(h)`` covers, chunk by chunk, the ``scores(head(h))`` that ``topk``
    ranks by, and ``confidence_chunks(h)`` the same labels: what ``Network``, ``Ensemble``
    and batched inference rely on."""
    head: OutputHead = make_head()
    h = torch.randn(5, 10, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = head.scores(head(h))
        chunks = list(head.score_chunks(h))
        top_scores, top_ids = head.topk(head(h), 4)
    assert [start for start, _ in chunks] == list(np.cumsum([0] + [c.shape[1] for _, c in chunks[:-1]]))
    assert torch.allclose(torch.cat([c for _, c in chunks], 1), full, atol=1e-5)
    assert torch.allclose(top_scores, full.gather(1, top_ids), atol=1e-5)
    assert torch.equal(top_ids, torch.topk(full, 4, dim=1).indices)
    with torch.no_grad():
        confidences = list(head.confidence_chunks(h))
    assert [(s, c.shape) for s, c in confidences] == [(s, c.shape) for s, c in chunks]
    assert all(c.abs().max() <= 1 + 1e-6 for _, c in confidences)  # cosines or probabilities


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.5, 0.9, 0.999])
def test_one_pass_fraction_of_best_cut_equals_cutting_the_full_matrix(fraction):
    scores = torch.randn(7, 50, generator=torch.Generator().manual_seed(4))
    scores[2] = -scores[2].abs() - 0.1  # a row whose best score is negative: nothing clears the cut
    scores[3, 45] = 9.0  # a row whose best arrives in the last chunk
    chunks = [(start, scores[:, start : start + 8]) for start in range(0, 50, 8)]
    found = above_fraction_of_best(chunks, fraction, n_labels=50)
    expected = scores > fraction * scores.amax(1, keepdim=True)
    assert found.has_sorted_indices and found.shape == (7, 50)
    assert torch.equal(torch.from_numpy(found.toarray() != 0), expected)
    assert np.array_equal(found.data, scores[expected].numpy())  # row-major, as CSR stores them
    assert found.getrow(2).nnz == 0
    assert all(found.getrow(row).nnz >= 1 for row in (0, 1, 3, 4, 5, 6))  # each keeps its best
    for bad in (1.0, 1.5):  # at 1 no label would exceed its row's best
        with pytest.raises(ValueError, match="fraction"):
            above_fraction_of_best(chunks, bad, n_labels=50)


@pytest.mark.parametrize("loss", ["cosine", "abs"])
def test_folded_decoding_equals_two_step_decoding_and_follows_weight_updates(loss):
    head = HRRHead(16, N_LABELS, dim=64, loss=loss)
    assert head._folding_pays()  # 37·16 < 64·(16 + 37)
    h = torch.randn(11, 16, generator=torch.Generator().manual_seed(5))
    optimizer = torch.optim.SGD(head.parameters(), lr=0.5)
    for _ in range(2):
        with torch.no_grad():
            folded_scores, folded_indices = head.topk_hidden(h, 6)
            scores, indices = head.topk(head(h), 6)
        assert torch.equal(folded_indices, indices)
        assert torch.allclose(folded_scores, scores, atol=1e-5)
        optimizer.zero_grad()
        head.loss(head(h), labels_of([[i % N_LABELS] for i in range(11)])).backward()
        optimizer.step()  # the folded cache must notice the new weights
    wide = HRRHead(512, 200_000, dim=64, label_chunk=200_000, cache_codes=False)
    assert not wide._folding_pays()


@pytest.mark.parametrize("options", [dict(), dict(loss="abs", label_chunk=40), dict(learn_pm=True, cache_codes=False),
                                     dict(ranking=1.0, label_bias=True, label_chunk=33)], ids=str)
def test_circulant_decoding_by_fft_equals_the_product_with_every_label_vector(options):
    """dim = 16 < L = 37: three groups of shifts, the last one short, decoded chunk by chunk
    (one or two groups per chunk) by unbinding, against the explicit ``(L, dim)`` keys."""
    head = randomise_label_bias(HRRHead(10, N_LABELS, dim=16, seed=8, code="circulant", **options), 8)
    out = head(torch.randn(9, 10, generator=torch.Generator().manual_seed(9)))
    codes = torch.cat([vectors for _, vectors in head.label_chunks()])
    assert codes.shape == (N_LABELS, 16)
    assert torch.allclose(codes[16 + 3], torch.roll(codes[16], 3), atol=1e-6)  # label 19: group 1 shifted by 3
    query = hrr.unbind(out, head.roles()[0])
    if head.label_bias is None:
        full = query @ codes.T
    else:
        full = head.ranking_scale * hrr.cosine(query.unsqueeze(1), codes) + head.label_bias
    full = full.abs() if head.loss_kind == "abs" else full
    with torch.no_grad():
        assert torch.allclose(head.scores(out), full, atol=1e-5)
        scores, indices = head.topk(out, 5)
        assert torch.equal(indices, torch.topk(full, 5).indices)
        assert torch.allclose(scores, torch.topk(full, 5).values, atol=1e-5)
        cos = hrr.cosine(query.unsqueeze(1), codes)
        above = torch.from_numpy(head.threshold(out, 0.2).toarray())
        assert torch.equal(above != 0, (cos.abs() if head.loss_kind == "abs" else cos) > 0.2)
        head.to(torch.float64)  # the group spectra convert like every other buffer
        assert torch.allclose(head.scores(out.double()), full.double(), atol=1e-5)


@pytest.mark.parametrize("dim", [16, 15], ids=["even dim", "odd dim"])
@pytest.mark.parametrize("n_scores", [45, 40, 13], ids=["whole groups", "last group short", "inside group 0"])
def test_circulant_shift_scores_have_the_circular_convolution_as_their_gradient(n_scores, dim):
    """``_ShiftScores`` writes its backward out (one rfft of the score gradient, one
    irfft): gradcheck it in float64 against finite differences of ``query · roll(key_g, s)``."""
    from holoxmc.heads.hrr import _ShiftScores

    generator = torch.Generator().manual_seed(11)
    keys = torch.randn(3, dim, dtype=torch.float64, generator=generator)
    key_spectra = torch.fft.rfft(keys, dim=-1)
    query = torch.randn(4, dim, dtype=torch.float64, generator=generator, requires_grad=True)

    def shift_scores(q: torch.Tensor) -> torch.Tensor:
        return _ShiftScores.apply(q, torch.fft.rfft(q.detach(), dim=-1), key_spectra, n_scores)

    explicit = torch.cat([torch.stack([torch.roll(key, s) for s in range(dim)]) for key in keys])[:n_scores]
    assert torch.allclose(shift_scores(query), query @ explicit.T, atol=1e-12)
    assert torch.autograd.gradcheck(shift_scores, (query,))


def test_circulant_code_folds_only_below_dim_labels_and_refuses_learned_labels():
    narrow = HRRHead(16, N_LABELS, dim=64, code="circulant")  # L < d': the folded product is cheaper
    assert narrow._folding_pays()
    h = torch.randn(5, 16, generator=torch.Generator().manual_seed(10))
    with torch.no_grad():
        assert torch.equal(narrow.topk_hidden(h, 4)[1], narrow.topk(narrow(h), 4)[1])
    assert not HRRHead(16, N_LABELS, dim=32, code="circulant")._folding_pays()  # FFT decoding is cheaper
    with pytest.raises(InputError, match="circulant"):
        HRRHead(4, 10, code="circulant", learn_labels=True)
    with pytest.raises(InputError, match="code"):
        HRRHead(4, 10, code="hadamard")


def test_threshold_returns_exactly_the_labels_above_it():
    dim, rows = 256, [[3, 9], [20], [], [1, 30]]
    head = HRRHead(6, N_LABELS, dim=dim, label_chunk=7)
    # Outputs equal to the targets p ⊗ Σc: present labels score ≈ 1/√|Y^p| ≥ 0.7, others ≈ 0 ± 1/√d'.
    p = head.roles()[0]
    target = torch.stack([hrr.bind(p, head.label_vectors(torch.tensor(r, dtype=torch.long)).sum(0))
                          if r else torch.zeros(dim) for r in rows])
    predicted = head.threshold(target, 0.5)
    assert sp.isspmatrix_csr(predicted) and predicted.shape == (4, N_LABELS)
    dense = torch.from_numpy(predicted.toarray())
    assert torch.equal(dense > 0, labels_of(rows).to_dense() > 0)
    full = hrr.cosine(hrr.unbind(target, p).unsqueeze(1), head.label_vectors(torch.arange(N_LABELS)).unsqueeze(0))
    assert torch.allclose(dense[dense > 0], full[full > 0.5], atol=1e-6)


def test_dense_head_loss_is_bce_against_the_multi_hot_target():
    head = DenseHead(5, N_LABELS, seed=2)
    out = head(torch.randn(len(LABEL_ROWS), 5, generator=torch.Generator().manual_seed(4)))
    labels = labels_of(LABEL_ROWS)
    target = labels.to_dense()
    expected = -(target * torch.log(torch.sigmoid(out)) + (1 - target) * torch.log(1 - torch.sigmoid(out))).mean()
    assert torch.allclose(head.loss(out, labels), expected, atol=1e-6)
    scores, indices = head.topk(out, 3)
    assert torch.equal(indices, torch.topk(out, 3).indices) and torch.equal(scores, torch.topk(out, 3).values)


def test_same_seed_same_head_and_state_dict_holds_no_regenerable_code():
    a, b = HRRHead(7, 5000, dim=40, seed=9), HRRHead(7, 5000, dim=40, seed=9)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert set(a.state_dict()) == {"linear.weight", "linear.bias"}
    learned = HRRHead(7, 50, dim=40, learn_pm=True, learn_labels=True)
    assert set(learned.state_dict()) == {"linear.weight", "linear.bias", "roles_raw", "labels_raw"}
    assert not torch.equal(HRRHead(7, 50, dim=40, seed=1).linear.weight, HRRHead(7, 50, dim=40, seed=2).linear.weight)


def test_learned_vectors_start_at_the_code_with_entries_of_order_one():
    head = HRRHead(4, 50, dim=64, learn_pm=True, learn_labels=True, seed=6)
    fixed = HRRHead(4, 50, dim=64, seed=6)
    assert torch.allclose(head.label_vectors(torch.arange(50)), fixed.code.full(), atol=1e-5)
    assert torch.allclose(head.roles(), fixed.roles(), atol=1e-5)
    for raw in (head.labels_raw, head.roles_raw):
        assert abs(float(raw.detach().std()) - 1.0) < 0.15  # Adam's ≈ lr steps stay small against it


def test_invalid_head_options_raise():
    with pytest.raises(InputError):
        HRRHead(4, 10, loss="mse")
    for bad in (dict(ranking=-1.0), dict(ranking_scale=0.0), dict(ranking_candidates=0),
                dict(label_bias=True), dict(label_bias=True, ranking=1.0, loss="abs")):
        with pytest.raises(InputError, match="ranking"):
            HRRHead(4, 10, **bad)
    with pytest.raises(InputError):
        DenseHead(0, 10)


def separable_problem(n: int, n_labels: int, n_features: int, seed: int):
    """Each label owns 5 features; an example shows the features of its 1–3 labels plus noise."""
    owned = np.random.default_rng(12345).permutation(n_features)[: 5 * n_labels].reshape(n_labels, 5)
    rng = np.random.default_rng(seed)
    label_rows, feature_rows = [], []
    for _ in range(n):
        labels = rng.choice(n_labels, size=rng.integers(1, 4), replace=False)
        features = np.concatenate([owned[labels].ravel(), rng.choice(n_features, 3)])
        label_rows.append(sorted(labels.tolist()))
        feature_rows.append(features)
    indptr = np.cumsum([0] + [len(f) for f in feature_rows])
    X = sp.csr_matrix((np.ones(indptr[-1], np.float32), np.concatenate(feature_rows), indptr), shape=(n, n_features))
    X.sum_duplicates()
    return X, label_rows


@pytest.fixture
def one_thread():
    """Tiny matrices run faster on one thread, and a shared machine stalls two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("head_name", ["dense", "hrr"])
def test_fc_with_either_head_learns_a_separable_problem(head_name, one_thread):
    n_labels, n_features = 30, 400
    X, rows = separable_problem(600, n_labels, n_features, seed=0)
    X_test, rows_test = separable_problem(200, n_labels, n_features, seed=1)
    backbone = FCBackbone(n_features, hidden=(64,), seed=0)
    head = DenseHead(64, n_labels) if head_name == "dense" else HRRHead(64, n_labels, dim=128)
    network = Network(backbone, head)
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-2)
    batch_rng = np.random.default_rng(0)
    for _ in range(200):
        batch = batch_rng.choice(len(rows), 64, replace=False)
        loss = network.loss(SparseBatch.from_csr(X[batch]), labels_of([rows[i] for i in batch], n_labels))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    network.eval()
    with torch.no_grad():
        _, top1 = network.topk(SparseBatch.from_csr(X_test), 1)
    precision_at_1 = np.mean([int(top1[i, 0]) in rows_test[i] for i in range(len(rows_test))])
    assert precision_at_1 > 0.9

"""SOLAR's sampled-bucket losses (an unbiased estimate of the full B-wide BCE, and a softmax
whose partition sum is estimated on the same buckets), trained with sparse updates of the
output rows they read, and the output bias started at the bucket priors' log-odds."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
import torch
import torch.nn.functional as F

from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.errors import InputError
from holoxmc.metrics import evaluate
from holoxmc.models.solar.codes import SolarLabelCode
from holoxmc.models.solar.config import LATER_FIELDS, chunk_network, normalized_rows
from holoxmc.models.solar.fit import SolarConfig, SolarModel, fit_solar, prepare_chunk_network
from holoxmc.models.solar.head import OutputRows, SolarChunkHead, sampled_columns
from holoxmc.train.optim import CatchUpAdam
from holoxmc.train.trainer import TrainConfig


def _labels(n: int, n_labels: int, density: float, seed: int) -> sp.csr_matrix:
    Y = sp.random(n, n_labels, density=density, format="csr", random_state=seed, dtype=np.float32)
    Y.data[:] = 1
    return Y


def _head(loss: str, negatives: int = 4, n_labels: int = 60, n_buckets: int = 20) -> SolarChunkHead:
    code = SolarLabelCode(n_labels, n_chunks=1, n_buckets=n_buckets, seed=0)
    return SolarChunkHead(6, torch.from_numpy(code.buckets[0]), n_buckets, seed=3, loss=loss, negatives=negatives)


def test_sampled_columns_hold_the_positives_and_weight_the_drawn_rest():
    positives = torch.tensor([7, 2, 7, 11])
    columns, weights = sampled_columns(positives, 50, 10, torch.Generator().manual_seed(1))
    assert torch.equal(columns, torch.unique(columns)) and set(positives.tolist()) <= set(columns.tolist())
    assert 10 <= len(columns) <= 13
    chosen = dict(zip(columns.tolist(), weights.tolist()))
    assert all(chosen[b] == 1.0 for b in (2, 7, 11))
    assert sorted(w for b, w in chosen.items() if b not in (2, 7, 11)) == [5.0] * (len(columns) - 3)
    every, ones = sampled_columns(positives, 50, 50)
    assert torch.equal(every, torch.arange(50)) and torch.equal(ones, torch.ones(50))


def test_sampled_loss_is_an_unbiased_estimate_of_the_full_loss():
    full, sampled = _head("full"), _head("sampled", negatives=4)
    sampled.load_state_dict(full.state_dict())  # the same weights in both layers
    h = torch.randn(12, 6, generator=torch.Generator().manual_seed(0))
    labels = LabelBatch.from_csr(_labels(12, 60, 0.03, seed=2))
    exact = full.loss(full(h), labels).detach()
    torch.manual_seed(0)
    estimates = torch.stack([sampled.sampled_loss(h, labels).detach() for _ in range(1000)])
    standard_error = estimates.std() / 1000**0.5
    assert abs(float(estimates.mean() - exact)) < 5 * float(standard_error)
    assert float(estimates.std()) > 0  # it does sample
    everything = _head("sampled", negatives=20)
    everything.load_state_dict(full.state_dict())
    torch.testing.assert_close(everything.sampled_loss(h, labels), exact)  # negatives >= B: the full loss


def test_sampled_head_keeps_the_full_heads_weights_names_and_outputs():
    full, sampled = _head("full"), _head("sampled")
    assert isinstance(sampled.dense.linear, OutputRows)
    state = full.state_dict()
    assert {k: v.shape for k, v in sampled.state_dict().items()} == {k: v.shape for k, v in state.items()}
    assert all(torch.equal(sampled.state_dict()[k], v) for k, v in state.items())  # same seed, same start
    h = torch.randn(3, 6)
    torch.testing.assert_close(sampled(h), full(h))


def test_sampled_loss_reads_only_the_scored_rows_of_the_output_table():
    head = _head("sampled", negatives=3, n_buckets=20)
    head.dense.linear.sparse = True
    h = torch.randn(5, 6)
    labels = LabelBatch.from_csr(_labels(5, 60, 0.02, seed=4))
    torch.manual_seed(0)
    head.sampled_loss(h, labels).backward()
    grad = head.dense.linear.weight.grad
    assert grad.is_sparse and len(torch.unique(grad.coalesce().indices())) < 20


def test_bias_starts_at_the_bucket_priors_log_odds():
    code = SolarLabelCode(30, n_chunks=1, n_buckets=6, seed=0)
    Y = _labels(40, 30, 0.08, seed=5)
    head = SolarChunkHead(4, torch.from_numpy(code.buckets[0]), 6, prior_bias=True)
    head.start_from_labels(Y)
    in_bucket = np.zeros((40, 6), bool)
    for i, j in zip(*Y.nonzero()):
        in_bucket[i, code.buckets[0][j]] = True
    share = (in_bucket.sum(0) + 0.5) / (40 + 1)
    np.testing.assert_allclose(head.dense.linear.bias.detach().numpy(), np.log(share / (1 - share)), rtol=1e-5)
    untouched = SolarChunkHead(4, torch.from_numpy(code.buckets[0]), 6)  # prior_bias off: the seed's biases stay
    before = untouched.dense.linear.bias.detach().clone()
    untouched.start_from_labels(Y)
    assert torch.equal(untouched.dense.linear.bias, before)


def test_fit_starts_the_chunks_from_the_priors_and_resolves_sparse_updates():
    config = SolarConfig(n_chunks=1, n_buckets=6, hidden=(8,), loss="sampled", negatives=2, prior_bias=True,
                         train=TrainConfig(sparse_updates="auto")).resolved(30, 20_000)
    code = config.label_code(30)
    network = chunk_network(config, 20_000, code.buckets[0], 0)
    X = sp.random(64, 20_000, density=5e-4, format="csr", random_state=0, dtype=np.float32)
    Y = _labels(64, 30, 0.08, seed=6)
    train_config = prepare_chunk_network(network, config, X, Y, config.train)
    assert train_config.sparse_updates is True  # 20,000 input rows, each batch reads few of them
    assert float(network.head.dense.linear.bias.max()) < 0  # every bucket's prior is below 1/2


def _learnable_data(n: int = 480, n_features: int = 90, n_labels: int = 30, seed: int = 0):
    """Each label owns 3 features; a point's features are its labels' features plus noise."""
    rng = np.random.default_rng(seed)
    Y = np.zeros((n, n_labels), np.float32)
    for i in range(n):
        Y[i, rng.choice(n_labels, rng.integers(1, 4), replace=False)] = 1
    owner = np.arange(n_features) % n_labels
    X = Y[:, owner] * rng.uniform(0.5, 1.0, (n, n_features)) + (rng.random((n, n_features)) < 0.03)
    return sp.csr_matrix(X.astype(np.float32)), sp.csr_matrix(Y)


def test_softmax_loss_over_every_bucket_is_the_softmax_cross_entropy():
    head = _head("softmax", negatives=20)
    h = torch.randn(12, 6, generator=torch.Generator().manual_seed(0))
    Y = _labels(12, 60, 0.03, seed=2)
    Y[0] = 0  # a row without labels adds nothing
    Y.eliminate_zeros()
    logits = F.linear(h, head.dense.linear.weight, head.dense.linear.bias)
    target = torch.zeros(12, 20)
    for row, label in zip(*Y.nonzero()):
        target[row, head.bucket_of_label[label]] = 1.0
    expected = (-(target * F.log_softmax(logits, 1)).sum(1) / target.sum(1).clamp(min=1)).mean()
    torch.testing.assert_close(head.softmax_loss(h, LabelBatch.from_csr(Y)), expected)
    sampled = _head("softmax", negatives=3)
    torch.manual_seed(0)
    assert float(sampled.softmax_loss(h, LabelBatch.from_csr(Y))) != pytest.approx(float(expected))  # it samples


def test_row_softmax_over_every_bucket_is_the_softmax_cross_entropy():
    rows, every = _head("row-softmax", negatives=20), _head("softmax", negatives=20)
    rows.load_state_dict(every.state_dict())
    h = torch.randn(12, 6, generator=torch.Generator().manual_seed(0))
    Y = _labels(12, 60, 0.05, seed=2)
    Y[0] = 0  # a row without labels adds nothing
    Y.eliminate_zeros()
    torch.testing.assert_close(rows.row_softmax_loss(h, LabelBatch.from_csr(Y)),
                               every.softmax_loss(h, LabelBatch.from_csr(Y)))


def test_row_softmax_estimates_each_rows_partition_sum_without_bias():
    """exp(loss_r + mean own logit) is the row's estimated partition sum Z_r: its mean over
    draws is the full sum over the B buckets; the drawn rows' gradient reaches only the
    drawn and own rows of the table."""
    head = _head("row-softmax", negatives=4)
    h = torch.randn(1, 6, generator=torch.Generator().manual_seed(0))
    Y = sp.csr_matrix(([1.0, 1.0], ([0, 0], [3, 17])), shape=(1, 60))
    labels = LabelBatch.from_csr(Y)
    logits = F.linear(h, head.dense.linear.weight, head.dense.linear.bias)[0].detach()
    own = head.bucket_of_label[torch.tensor([3, 17])].unique()
    exact = float(torch.logsumexp(logits, 0))
    torch.manual_seed(0)
    shift = float(logits[own].mean())
    z = torch.tensor([float(torch.exp(head.row_softmax_loss(h, labels).detach() + shift)) for _ in range(1500)],
                     dtype=torch.float64)
    assert abs(float(z.mean()) - np.exp(exact)) < 5 * float(z.std()) / 1500**0.5
    assert float(z.std()) > 0  # it does sample
    # the fit's draw: with replacement from the buckets' shares (skewed here), corrected by log(c / (S q))
    skewed = sp.csr_matrix(([1.0] * 30, (np.arange(30), [3] * 20 + list(range(10, 20)))), shape=(30, 60))
    head.count_buckets(skewed)
    assert head.bucket_share is not None and float(head.bucket_share.max()) > 5 * float(head.bucket_share.min())
    torch.manual_seed(1)
    z = torch.tensor([float(torch.exp(head.row_softmax_loss(h, labels).detach() + shift)) for _ in range(1500)],
                     dtype=torch.float64)
    assert abs(float(z.mean()) - np.exp(exact)) < 5 * float(z.std()) / 1500**0.5


@pytest.mark.parametrize("loss, sparse_updates", [("sampled", True), ("sampled", False), ("softmax", True),
                                                  ("row-softmax", True), ("row-softmax", False)])
def test_sampled_loss_trains_decodes_and_reloads(tmp_path, loss, sparse_updates):
    X, Y = _learnable_data()
    config = SolarConfig(n_chunks=3, n_buckets=15, hidden=(16,), top_buckets=3, min_freq=2, feature_dim=64, seed=5,
                         loss=loss, negatives=4, prior_bias=True,
                         train=TrainConfig(epochs=5, batch_size=32, lr=3e-2, val_fraction=0.2, progress=False,
                                           sparse_updates=sparse_updates))
    model = fit_solar(X, Y, config, tmp_path / "run")
    network = model.networks[0]
    assert isinstance(network.head.dense.linear, OutputRows)
    indices, _, _ = model.predict(X, k=5)
    popular = np.argsort(-np.asarray(Y.sum(0)).ravel())[:5]
    assert evaluate(indices, Y)["P@1"] > evaluate(np.tile(popular, (480, 1)), Y)["P@1"] + 40
    saved = json.loads((tmp_path / "run" / "solar.json").read_text())["config"]
    assert (saved["loss"], saved["negatives"], saved["prior_bias"]) == (loss, 4, True)
    assert np.array_equal(SolarModel.load(tmp_path / "run").predict(X, k=5)[0], indices)
    if loss in ("softmax", "row-softmax"):  # it decodes the chunks' softmax probabilities
        raw = model._stacked_chunks()(normalized_rows(X[:7]))
        torch.testing.assert_close(torch.sigmoid(model.chunk_logits(X[:7])), torch.softmax(raw, dim=-1))


def test_the_sampled_output_rows_train_with_catch_up_adam(tmp_path):
    """With sparse updates both tables (input and output rows) get row-sparse gradients."""
    config = SolarConfig(n_chunks=1, n_buckets=10, hidden=(8,), loss="sampled", negatives=2,
                         train=TrainConfig(sparse_updates=True)).resolved(30, 50)
    network = chunk_network(config, 50, config.label_code(30).buckets[0], 0)
    from holoxmc.train.optim import build_optimizers, sparse_update_tables, watching
    tables = sparse_update_tables(network, True)
    assert network.head.dense.linear in tables
    optimizers = build_optimizers(network, tables, lr=0.1, weight_decay=0.0, device=torch.device("cpu"))
    assert isinstance(optimizers[1], CatchUpAdam)
    x = SparseBatch.from_csr(sp.random(4, 50, density=0.1, format="csr", random_state=0, dtype=np.float32))
    with watching(optimizers, network):
        network.loss(x, LabelBatch.from_csr(_labels(4, 30, 0.1, seed=1))).backward()
        for optimizer in optimizers:
            optimizer.step()
    assert network.head.dense.linear.weight.grad.is_sparse


@pytest.mark.parametrize("loss", ["softmax", "row-softmax"])
def test_the_sampled_losses_read_the_output_rows_through_the_tables_call(loss):
    """Sparse updates catch rows up in a forward pre-hook of the table: every row a sampled
    loss reads (each row's positive buckets, the drawn ones) must pass through its call."""
    head = _head(loss, negatives=3, n_buckets=20)
    head.dense.linear.sparse = True
    seen: list[torch.Tensor] = []
    head.dense.linear.register_forward_pre_hook(lambda module, args: seen.append(args[0]))
    labels = LabelBatch.from_csr(_labels(5, 60, 0.05, seed=4))
    torch.manual_seed(0)
    head.training_loss(torch.randn(5, 6), labels).backward()
    read = torch.unique(head.dense.linear.weight.grad.coalesce().indices())
    positives = torch.unique(head.bucket_of_label[labels.indices])
    assert len(seen) == 1 and set(positives.tolist()) <= set(seen[0].tolist())
    assert set(read.tolist()) <= set(seen[0].tolist())


def test_new_settings_are_recorded_as_before_they_existed_and_checked():
    """A config at the settings' earlier values writes no new key, so older folders keep their
    fingerprints; an older folder's config (no such key) reads back at those values."""
    plain = SolarConfig(prior_bias=False, loss="full").to_dict()  # the settings as older folders trained
    assert not set(LATER_FIELDS) & set(plain)
    assert SolarConfig.from_dict(plain).loss == "full" and SolarConfig.from_dict(plain).prior_bias is False
    assert SolarConfig().to_dict()["prior_bias"] is True  # the default now: recorded, as it differs from that
    # loss="auto" (the default) is resolved with B: a saved model records the loss its chunks trained with
    assert SolarConfig().resolved(n_labels=3_998, n_features=10).loss == "full"  # B = 1,999
    assert SolarConfig().resolved(n_labels=4_000, n_features=10).loss == "softmax"  # B = 2,000
    assert "loss" not in SolarConfig().resolved(n_labels=100, n_features=10).to_dict()  # small sets: as before
    assert SolarConfig(loss="sampled").to_dict()["loss"] == "sampled"
    with pytest.raises(InputError, match="loss"):
        SolarConfig(loss="hinge")
    with pytest.raises(InputError, match="negatives"):
        SolarConfig(negatives=0)


def test_full_loss_head_is_unchanged():
    code = SolarLabelCode(40, n_chunks=2, n_buckets=7, seed=0)
    head = SolarChunkHead(6, torch.from_numpy(code.buckets[1]), n_buckets=7, seed=3)
    Y = _labels(9, 40, 0.1, seed=2)
    out = head(torch.randn(9, 6, generator=torch.Generator().manual_seed(0)))
    onehot = np.zeros((40, 7), dtype=np.float32)
    onehot[np.arange(40), code.buckets[1]] = 1
    target = torch.from_numpy(((Y.toarray() @ onehot) > 0).astype(np.float32))
    torch.testing.assert_close(head.loss(out, LabelBatch.from_csr(Y)), F.binary_cross_entropy_with_logits(out, target))
    assert type(head.dense.linear) is torch.nn.Linear

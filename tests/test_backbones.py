"""Backbones and the network factory: shapes, no densification, seeded initialisation,
JSON round trip of the configuration."""

from __future__ import annotations

import json
import numpy as np
import pytest
import scipy.sparse as sp
import torch
from torch.profiler import ProfilerActivity, profile

from holoxmc.backbones import AttentionLSTMBackbone, FCBackbone, Network, XMLCNNBackbone, build_network
from holoxmc.data.batch import LabelBatch, SparseBatch, input_batch
from holoxmc.errors import InputError
from holoxmc.train import TrainConfig, Trainer


def sparse_rows(n: int, n_features: int, nnz_per_row: int, seed: int = 0) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    cols = np.concatenate([rng.choice(n_features, nnz_per_row, replace=False) for _ in range(n)])
    indptr = np.arange(0, n * nnz_per_row + 1, nnz_per_row)
    return sp.csr_matrix((rng.random(len(cols)).astype(np.float32), cols, indptr), shape=(n, n_features))


def test_fc_first_layer_equals_the_dense_product():
    X = sparse_rows(5, 300, 7)
    net = FCBackbone(300, hidden=(16, 8), seed=1)
    batch = SparseBatch.from_csr(X)
    bag = net.input_layer(batch.indices, batch.offsets, per_sample_weights=batch.values) + net.input_bias
    dense = torch.from_numpy(X.toarray()) @ net.input_layer.weight + net.input_bias
    assert torch.allclose(bag, dense, atol=1e-6)
    expected = torch.relu(net.layers[0](torch.relu(dense)))
    assert torch.allclose(net(batch), expected, atol=1e-6)
    assert net.out_features == 8


def test_fc_linear_path_is_the_input_product_beside_unchanged_hidden_features():
    X = sparse_rows(5, 300, 7)
    batch = SparseBatch.from_csr(X)
    plain, wide = FCBackbone(300, hidden=(16, 8), seed=1), FCBackbone(300, hidden=(16, 8), linear_width=6, seed=1)
    assert wide.out_features == 14
    for name, weight in plain.state_dict().items():  # its own stream: the other weights are the seed's
        assert torch.equal(weight, wide.state_dict()[name]), name
    out = wide(batch)
    assert torch.allclose(out[:, :8], plain(batch), atol=1e-6)
    linear = torch.from_numpy(X.toarray()) @ wide.linear_path.weight
    assert torch.allclose(out[:, 8:], linear, atol=1e-6)
    assert torch.allclose(wide(SparseBatch.from_csr(-2 * X))[:, 8:], -2 * linear, atol=1e-5)  # no activation
    assert not torch.equal(wide.linear_path.weight, FCBackbone(300, hidden=(16, 8), linear_width=6, seed=2).linear_path.weight)


@pytest.mark.parametrize("width", [-1, 2.5, True])
def test_fc_bad_linear_width_is_an_input_error(width):
    with pytest.raises(InputError, match="linear_width"):
        FCBackbone(300, hidden=(16,), linear_width=width)


def test_fc_handles_a_million_features_without_densifying():
    n_features = 1_000_000
    X = sparse_rows(64, n_features, 50)
    net = FCBackbone(n_features, hidden=(32, 32))
    batch = input_batch(X, np.arange(64))
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        out = net(batch)
    allocated = sum(max(event.self_cpu_memory_usage, 0) for event in profiler.key_averages())
    assert out.shape == (64, 32)
    # A dense (64, 10^6) float32 batch alone would take 256 MB; the forward allocates KBs.
    assert allocated < 1_000_000
    out.sum().backward()
    touched = net.input_layer.weight.grad.abs().sum(1) > 0
    assert 0 < int(touched.sum()) <= 64 * 50


def test_fc_dropout_only_in_training():
    batch = SparseBatch.from_csr(sparse_rows(8, 100, 5))
    net = FCBackbone(100, hidden=(64,), dropout=0.5)
    net.eval()
    assert torch.equal(net(batch), net(batch))
    net.train()
    assert not torch.equal(net(batch), net(batch))  # 8 × 64 dropout draws: equal masks are impossible in practice


@pytest.mark.parametrize("linear_width", [0, 6])
def test_fc_inference_path_computes_what_the_autograd_path_computes(linear_width):
    """Without autograd in eval mode the backbone adds the bias and applies ReLU in place:
    the same operations in the same order, so bit for bit the same features."""
    batch = SparseBatch.from_csr(sparse_rows(9, 300, 7))
    net = FCBackbone(300, hidden=(16, 12, 8), dropout=0.5, linear_width=linear_width, seed=3).eval()
    with_autograd = net(batch)
    with torch.no_grad():
        assert torch.equal(net(batch), with_autograd.detach())
        net.train()  # dropout under no_grad in training mode still drops
        assert not torch.equal(net(batch), with_autograd.detach())


@pytest.mark.parametrize("length", [1, 3, 50])
def test_xml_cnn_output_shape_for_short_and_long_texts(length):
    net = XMLCNNBackbone(500, embed_dim=16, filter_sizes=(2, 4, 8), n_filters=5, pooling_chunks=4, bottleneck=24)
    tokens = torch.randint(1, 500, (6, length), generator=torch.Generator().manual_seed(0))
    tokens[0] = 0  # an all-PAD row
    out = net.eval()(tokens)
    assert out.shape == (6, 24) and torch.isfinite(out).all()
    assert net.embedding.weight[0].abs().sum() == 0


def test_attention_lstm_ignores_padding():
    net = AttentionLSTMBackbone(200, embed_dim=8, hidden_size=6, fc_size=10).eval()
    tokens = torch.tensor([[5, 9, 13, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6]])
    out = net(tokens)
    assert out.shape == (3, 10) and torch.isfinite(out).all()
    assert torch.allclose(net(tokens[:1, :3]), out[:1], atol=1e-6)  # trailing PAD changes nothing
    assert torch.allclose(net(tokens[:, :6]), out, atol=1e-6)
    left = torch.tensor([[0, 0, 0, 5, 9, 13], [0, 0, 0, 6, 9, 13]])  # left-padded rows are read too
    assert not torch.allclose(*net(left))


@pytest.mark.parametrize("backbone,size_key", [("fc", "n_features"), ("cnn", "vocab_size"), ("lstm", "vocab_size")])
@pytest.mark.parametrize("head", ["dense", "hrr"])
def test_build_network_round_trips_through_json(backbone, size_key, head):
    options = {"fc": {"hidden": (16, 16), "dropout": 0.1},
               "cnn": {"embed_dim": 8, "n_filters": 3, "bottleneck": 12},
               "lstm": {"embed_dim": 8, "hidden_size": 4, "fc_size": 12}}[backbone]
    if head == "hrr":
        options = {**options, "dim": 24, "loss": "abs", "learn_pm": True}
    net = build_network(backbone, head, n_labels=40, **{size_key: 300}, seed=3, **options)
    config = json.loads(json.dumps(net.config))
    rebuilt = build_network(**config)
    assert rebuilt.config == config
    for (name, a), (_, b) in zip(net.state_dict().items(), rebuilt.state_dict().items()):
        assert torch.equal(a, b), name
    x = input_batch(sparse_rows(4, 300, 6), np.arange(4)) if backbone == "fc" else torch.randint(1, 300, (4, 9))
    net.eval()
    out = net(x)
    assert out.shape == (4, 40 if head == "dense" else 24)
    scores, indices = net.topk(x, 5)
    assert scores.shape == indices.shape == (4, 5)
    labels = LabelBatch.from_csr(sp.csr_matrix(np.eye(4, 40, dtype=np.float32)))
    loss = net.loss(x, labels)
    loss.backward()
    assert loss.ndim == 0 and torch.isfinite(loss)


def test_seed_changes_initialisation():
    a = build_network("fc", "dense", n_features=50, n_labels=5, hidden=[8], seed=0)
    b = build_network("fc", "dense", n_features=50, n_labels=5, hidden=[8], seed=1)
    assert not torch.equal(a.backbone.input_layer.weight, b.backbone.input_layer.weight)
    assert isinstance(a, Network)


def test_build_network_rejects_bad_configurations():
    with pytest.raises(InputError, match="unknown backbone"):
        build_network("rnn", "hrr", n_features=5, n_labels=3)
    with pytest.raises(InputError, match="n_features"):
        build_network("fc", "hrr", n_labels=3)
    with pytest.raises(InputError, match="not accepted"):
        build_network("fc", "dense", n_features=5, n_labels=3, dim=10)


@pytest.mark.parametrize("backbone", ["cnn", "lstm"])
def test_token_backbones_train_their_word_vectors_with_sparse_updates(backbone):
    rng = np.random.default_rng(0)
    tokens = rng.integers(1, 150, size=(64, 12))
    tokens[:, 9:] = 0  # padded tails
    Y = sp.csr_matrix((rng.random((64, 10)) < 0.2).astype(np.float32))
    network = build_network(backbone, "dense", n_labels=10, vocab_size=300, dropout=0.0, seed=0)
    initial = network.backbone.embedding.weight.detach().clone()
    config = TrainConfig(epochs=2, batch_size=16, val_fraction=0.0, sparse_updates=True, progress=False)
    Trainer(config).fit(network, tokens, Y)
    assert network.backbone.embedding.sparse
    table = network.backbone.embedding.weight.detach()
    seen = np.unique(tokens[tokens > 0])
    unseen = np.setdiff1d(np.arange(1, 300), seen)
    assert torch.equal(table[0], initial[0])  # the padding vector
    assert torch.equal(table[unseen], initial[unseen])
    assert (table[seen] != initial[seen]).any(1).all()

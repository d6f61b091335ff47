"""The models on a CUDA device: they train, decode, save, load onto the CPU and resume
there, and learn as well as on the CPU.

Skipped without a CUDA device (CI has none); run on a GPU machine with
``python -m pytest tests/test_cuda.py``. Kernels differ between CPU and GPU (summation
order, atomics in ``embedding_bag``'s backward), so a GPU run is compared with the CPU run
by quality, not bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.estimator import XMCClassifier
from holoxmc.train import TrainConfig, Trainer
from test_estimator import SMALL, data, popularity_p1, small  # noqa: F401  (data is a fixture)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")


def tokens(X: sp.csr_matrix, length: int = 12) -> np.ndarray:
    """Token ids (PAD = 0) from the active features of each row, for the text backbones."""
    ids = np.zeros((X.shape[0], length), dtype=np.int64)
    for row in range(X.shape[0]):
        active = X.indices[X.indptr[row] : X.indptr[row + 1]][:length]
        ids[row, : len(active)] = active + 1
    return ids


@pytest.mark.parametrize(
    "head, options",
    [
        ("dense", {}),
        ("hrr", {}),
        ("hrr", {"loss": "abs"}),
        ("hrr", {"learn_pm": True}),
        ("hrr", {"learn_labels": True}),
        ("hrr", {"cache_codes": False, "label_chunk": 16}),
        ("hrr", {"ranking": 1.0, "label_bias": True}),
        ("hrr", {"ranking": 1.0, "label_bias": True, "ranking_candidates": 8}),  # sampled on the GPU's RNG
        ("hrr", {"ranking": 1.0, "label_bias": True, "code": "circulant", "ranking_candidates": 4096}),  # FFT
    ],
)
def test_cuda_training_learns_like_cpu(data, head, options):
    train, test = data
    params = small(head) | {"head": head, "head_options": options}
    cpu = XMCClassifier(**params).fit(train.X, train.Y)
    gpu = XMCClassifier(**params, device="cuda").fit(train.X, train.Y)
    assert all(p.is_cuda for p in gpu.network_.parameters())
    assert all(b.is_cuda for b in gpu.network_.buffers())
    cpu_p1, gpu_p1 = cpu.evaluate(test.X, test.Y)["P@1"], gpu.evaluate(test.X, test.Y)["P@1"]
    assert gpu_p1 > popularity_p1(train, test) + 20
    # 150 test rows (one is 0.67 points); float rounding differs between the devices, and
    # with sampled candidates the draws do too (the CUDA generator is not the CPU one)
    assert abs(gpu_p1 - cpu_p1) < 10


@pytest.mark.parametrize("head, linear_width", [("dense", 0), ("hrr", 0), ("hrr", 16)])
def test_cuda_sparse_updates_learn_like_cpu(data, head, linear_width):
    """Row-sparse input gradients and CatchUpAdam (with its read hooks and flush) on the GPU,
    also for the linear path's table."""
    train, test = data
    params = small(head) | {"head": head, "sparse_updates": True, "linear_width": linear_width}
    cpu = XMCClassifier(**params).fit(train.X, train.Y)
    gpu = XMCClassifier(**params, device="cuda").fit(train.X, train.Y)
    backbone = gpu.network_.backbone
    assert backbone.input_layer.sparse and (not linear_width or backbone.linear_path.sparse)
    cpu_p1, gpu_p1 = cpu.evaluate(test.X, test.Y)["P@1"], gpu.evaluate(test.X, test.Y)["P@1"]
    assert gpu_p1 > popularity_p1(train, test) + 20
    assert abs(gpu_p1 - cpu_p1) < 10


def test_cuda_model_saved_and_loaded_on_cpu_decodes_the_same(tmp_path, data):
    train, test = data
    gpu = XMCClassifier(**SMALL, head="hrr", head_options={"ranking": 1.0, "label_bias": True}, device="cuda")
    gpu.fit(train.X, train.Y)
    on_cpu = XMCClassifier.load(gpu.save(tmp_path / "model"), device="cpu")
    assert all(not p.is_cuda for p in on_cpu.network_.parameters())
    gpu_indices, gpu_scores = gpu.predict_topk(test.X, k=5)
    cpu_indices, cpu_scores = on_cpu.predict_topk(test.X, k=5)
    np.testing.assert_allclose(cpu_scores, gpu_scores, rtol=1e-4, atol=1e-4)
    assert (cpu_indices == gpu_indices).mean() > 0.98  # near-ties may swap between kernels
    full = gpu.decision_function(test.X[:10])
    np.testing.assert_allclose(np.take_along_axis(full, gpu_indices[:10], 1), gpu_scores[:10], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("head, n_models", [("dense", 1), ("hrr", 1), ("hrr", 2)])
def test_cuda_topk_agrees_with_the_full_scores(data, head, n_models):
    """Top-k on the GPU matches the full score matrix (with small L the HRR head's top-k
    goes through its folded decoder, the full scores do not; an ensemble averages both)."""
    train, test = data
    gpu = XMCClassifier(**small(head), head=head, n_models=n_models, device="cuda").fit(train.X, train.Y)
    indices, scores = gpu.predict_topk(test.X, k=5)
    full = gpu.decision_function(test.X)
    np.testing.assert_allclose(np.take_along_axis(full, indices, 1), scores, rtol=1e-4, atol=1e-4)


def test_cuda_killed_run_resumes_to_the_uninterrupted_weights(tmp_path, data):
    train, _ = data
    clf = XMCClassifier(**SMALL, head="hrr", head_options={"ranking": 1.0, "label_bias": True}, device="cuda")
    config = TrainConfig(epochs=6, batch_size=32, lr=1e-2, seed=1, device="cuda", progress=False)

    def network():
        return clf.new_network(train.n_labels, train.n_features)

    reference = network()
    expected = Trainer(config).fit(reference, train.X, train.Y, run_dir=tmp_path / "whole")
    killed, steps = network(), []
    own_loss = killed.loss

    def loss_until_killed(x, labels):  # 17 steps per epoch: killed in the third
        steps.append(1)
        if len(steps) > 40:
            raise KeyboardInterrupt
        return own_loss(x, labels)

    killed.loss = loss_until_killed
    with pytest.raises(KeyboardInterrupt):
        Trainer(config).fit(killed, train.X, train.Y, run_dir=tmp_path / "killed")
    resumed = network()
    result = Trainer(config).fit(resumed, train.X, train.Y, run_dir=tmp_path / "killed", resume=True)
    assert [h["epoch"] for h in result.history] == [h["epoch"] for h in expected.history]
    assert result.best_epoch == expected.best_epoch
    for (name, mine), theirs in zip(resumed.state_dict().items(), reference.state_dict().values()):
        assert torch.allclose(mine, theirs, rtol=1e-4, atol=1e-5), name


@pytest.mark.parametrize("backbone", ["cnn", "lstm"])
def test_cuda_text_backbones_train_and_decode(data, backbone):
    train, test = data
    params = dict(SMALL, backbone=backbone, hidden=None, device="cuda", epochs=15)
    for head in ("dense", "hrr"):
        clf = XMCClassifier(**small(head, params), head=head).fit(tokens(train.X), train.Y)
        assert clf.evaluate(tokens(test.X), test.Y)["P@1"] > popularity_p1(train, test) + 10, head


@pytest.mark.parametrize("backbone", ["fc", "cnn", "lstm"])
def test_cuda_bfloat16_training_learns_like_float32(data, backbone):
    train, test = data
    X_train, X_test = (train.X, test.X) if backbone == "fc" else (tokens(train.X), tokens(test.X))
    params = dict(SMALL, backbone=backbone, device="cuda") | ({} if backbone == "fc" else {"hidden": None, "epochs": 15})
    for head in ("dense", "hrr"):
        full = XMCClassifier(**small(head, params), head=head).fit(X_train, train.Y)
        mixed = XMCClassifier(**small(head, params), head=head, precision="bfloat16").fit(X_train, train.Y)
        assert all(p.dtype == torch.float32 and p.is_cuda for p in mixed.network_.parameters())
        full_p1, mixed_p1 = full.evaluate(X_test, test.Y)["P@1"], mixed.evaluate(X_test, test.Y)["P@1"]
        assert mixed_p1 > popularity_p1(train, test) + 10 and abs(mixed_p1 - full_p1) < 10, (head, mixed_p1, full_p1)


def test_cuda_solar_trains_and_decodes(data):
    train, test = data
    clf = XMCClassifier(head="solar", hidden=(64,), epochs=8, batch_size=32, lr=1e-2, seed=1, progress=False,
                        device="cuda", head_options={"n_chunks": 4, "n_buckets": 10}).fit(train.X, train.Y)
    assert clf.evaluate(test.X, test.Y)["P@1"] > popularity_p1(train, test) + 15


def test_dropout_on_cuda_keeps_the_scaling_and_the_mask_is_drawn_there():
    from holoxmc.backbones.dropout import Dropout, dropout_mask

    dropped = Dropout(0.5)(torch.ones(256, 512, device="cuda"))  # torch's fused kernel on a GPU
    assert set(dropped.unique().tolist()) <= {0.0, 2.0}
    assert abs(float((dropped > 0).float().mean()) - 0.5) < 0.02
    mask = dropout_mask((1000, 100), 0.5, device="cuda")
    assert mask.is_cuda and abs(float(mask.mean()) - 1.0) < 0.02


@pytest.mark.parametrize(
    "head, options",
    [
        ("dense", {}),
        ("hrr", {}),
        ("hrr", {"ranking": 1.0, "label_bias": True, "code": "circulant", "ranking_candidates": 4096}),
    ],
)
def test_cuda_training_step_never_waits_for_the_gpu(data, head, options):
    """A step that synchronises (a value read back, a size the host must learn) costs the
    host its lead over the GPU; the presets' steps have none (``benchmarks/sync_points.py``)."""
    train, _ = data
    clf = XMCClassifier(**small(head) | {"head": head, "head_options": options})
    network = clf.new_network(train.Y.shape[1], train.X.shape[1]).to("cuda")
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-3, fused=True)
    x, y = SparseBatch.from_csr(train.X[:64]).to("cuda"), LabelBatch.from_csr(train.Y[:64]).to("cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(2):
            optimizer.zero_grad(set_to_none=True)
            network.loss(x, y).backward()
            optimizer.step()
    finally:
        torch.cuda.set_sync_debug_mode("default")

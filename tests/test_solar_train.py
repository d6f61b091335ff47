"""SOLAR training: zero-communication chunk jobs, resume after a kill, backends agree,
save/load round trip."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc.models.solar.codes import SolarLabelCode
from holoxmc.data.batch import SparseBatch
from holoxmc.errors import InputError
from holoxmc.models.solar.head import solar_decode
from holoxmc.metrics import evaluate
from holoxmc.models.solar.fit import SolarConfig, SolarModel, chunk_dir, fit_solar
from holoxmc.train.trainer import TrainConfig

N_CHUNKS = 3


def _learnable_data(n: int = 480, n_features: int = 90, n_labels: int = 30, seed: int = 0):
    """Each label owns 3 features; a point's features are its labels' features plus noise."""
    rng = np.random.default_rng(seed)
    Y = np.zeros((n, n_labels), np.float32)
    for i in range(n):
        Y[i, rng.choice(n_labels, rng.integers(1, 4), replace=False)] = 1
    owner = np.arange(n_features) % n_labels
    X = Y[:, owner] * rng.uniform(0.5, 1.0, (n, n_features)) + (rng.random((n, n_features)) < 0.03)
    return sp.csr_matrix(X.astype(np.float32)), sp.csr_matrix(Y)


def _config(**overrides) -> SolarConfig:
    values = dict(
        n_chunks=N_CHUNKS, n_buckets=8, hidden=(16,), top_buckets=3, min_freq=2, feature_dim=64, seed=5,
        train=TrainConfig(epochs=5, batch_size=32, lr=3e-2, val_fraction=0.2, progress=False),
    )
    return SolarConfig(**(values | overrides))


def _files(run_dir: Path) -> dict[str, tuple[int, str]]:
    """Every file under ``run_dir`` → (mtime_ns, sha256)."""
    return {
        str(p.relative_to(run_dir)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(run_dir.rglob("*"))
        if p.is_file()
    }


def _weights(run_dir: Path) -> list[str]:
    return [
        hashlib.sha256((chunk_dir(run_dir, k) / "model.safetensors").read_bytes()).hexdigest()
        for k in range(N_CHUNKS)
    ]


@pytest.fixture(scope="module")
def data():
    return _learnable_data()


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data):
    run_dir = tmp_path_factory.mktemp("solar") / "run"
    X, Y = data
    return run_dir, fit_solar(X, Y, _config(), run_dir)


def test_fit_writes_one_directory_per_chunk_and_learns(trained, data):
    run_dir, model = trained
    X, Y = data
    for k in range(N_CHUNKS):
        files = sorted(p.name for p in chunk_dir(run_dir, k).iterdir())
        assert files == ["done.json", "model.safetensors"]  # trainer checkpoint removed when done
        done = json.loads((chunk_dir(run_dir, k) / "done.json").read_text())
        assert done["chunk"] == k and 1 <= done["best_epoch"] <= 5
    meta = json.loads((run_dir / "solar.json").read_text())
    assert meta["n_labels"] == 30 and meta["config"]["n_buckets"] == 8
    indices, scores, candidates = model.predict(X, k=5)
    assert indices.shape == scores.shape == (480, 5) and candidates.shape == (480,)
    assert ((indices >= 0) & (indices < 30)).all()
    # the first labels are the same whatever k asks (scores fall within a hit-count tier)
    assert np.array_equal(model.predict(X, k=2)[0], indices[:, :2])
    popular = np.argsort(-np.asarray(Y.sum(0)).ravel())[:5]
    baseline = evaluate(np.tile(popular, (480, 1)), Y)["P@1"]
    assert evaluate(indices, Y)["P@1"] > baseline + 50


def test_chunks_train_with_sparse_updates_and_reload(data, tmp_path):
    X, Y = data
    config = _config(train=TrainConfig(epochs=5, batch_size=32, lr=3e-2, val_fraction=0.2, progress=False,
                                       sparse_updates=True))
    model = fit_solar(X, Y, config, tmp_path / "run")
    assert json.loads((tmp_path / "run" / "solar.json").read_text())["config"]["train"]["sparse_updates"] is True
    indices, _, _ = model.predict(X, k=5)
    popular = np.argsort(-np.asarray(Y.sum(0)).ravel())[:5]
    assert evaluate(indices, Y)["P@1"] > evaluate(np.tile(popular, (480, 1)), Y)["P@1"] + 50
    assert np.array_equal(SolarModel.load(tmp_path / "run").predict(X, k=5)[0], indices)


def test_load_and_save_round_trip_give_identical_predictions(trained, data, tmp_path):
    run_dir, model = trained
    X, _ = data
    expected = model.predict(X, k=5, scoring="logit")
    loaded = SolarModel.load(run_dir)
    for a, b in zip(expected, loaded.predict(X, k=5, scoring="logit")):
        np.testing.assert_array_equal(a, b)
    model.save(tmp_path / "copy")
    copy = SolarModel.load(tmp_path / "copy")
    assert copy.fingerprint == model.fingerprint
    np.testing.assert_array_equal(copy.predict(X, k=5, scoring="logit")[0], expected[0])
    with pytest.raises(InputError):
        SolarModel.load(tmp_path)
    with pytest.raises(InputError):
        model.predict(X[:, :10])


def test_rerun_reuses_finished_chunks_and_rejects_other_configs(trained, data):
    run_dir, _ = trained
    X, Y = data
    before = _files(run_dir)
    fit_solar(X, Y, _config(), run_dir)
    after = _files(run_dir)
    assert {k: v for k, v in after.items() if k.startswith("chunk_")} == {
        k: v for k, v in before.items() if k.startswith("chunk_")
    }
    # decoding settings are not part of training: changing them retrains nothing
    fit_solar(X, Y, _config(min_freq=1, scoring="logprob"), run_dir)
    assert _weights(run_dir) == [before[f"chunk_{k:03d}/model.safetensors"][1] for k in range(N_CHUNKS)]
    with pytest.raises(InputError, match="another configuration"):
        fit_solar(X, Y, _config(hidden=(8,)), run_dir)


_KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import holoxmc.train.trainer as trainer
    from holoxmc.models.solar.fit import fit_solar
    sys.path.insert(0, {tests!r})
    from test_solar_train import _config, _learnable_data

    real_save = trainer.save_checkpoint

    def save_then_die(run_dir, **kwargs):
        real_save(run_dir, **kwargs)
        if str(run_dir).endswith("chunk_001") and kwargs["state"]["epoch"] == 1:
            os.kill(os.getpid(), signal.SIGKILL)  # killed mid-training, right after epoch 1

    trainer.save_checkpoint = save_then_die
    X, Y = _learnable_data()
    fit_solar(X, Y, _config(), {run_dir!r})
    """
)


def test_a_chunk_killed_mid_training_is_resumed_alone(trained, data, tmp_path):
    reference_dir, _ = trained
    run_dir = tmp_path / "killed"
    script = _KILL_SCRIPT.format(tests=str(Path(__file__).parent), run_dir=str(run_dir))
    process = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert process.returncode == -9, process.stderr
    assert (chunk_dir(run_dir, 0) / "done.json").is_file()
    assert (chunk_dir(run_dir, 1) / "checkpoint.safetensors").is_file()
    assert not (chunk_dir(run_dir, 1) / "done.json").exists()
    assert not chunk_dir(run_dir, 2).exists()
    finished = {k: v for k, v in _files(run_dir).items() if k.startswith("chunk_000")}

    X, Y = data
    fit_solar(X, Y, _config(), run_dir)
    assert {k: v for k, v in _files(run_dir).items() if k.startswith("chunk_000")} == finished
    # resumed and fresh chunks end bit-identical to the uninterrupted run
    assert _weights(run_dir) == _weights(reference_dir)


@pytest.mark.xdist_group("ray")  # one local Ray instance at a time under `make test`
def test_worker_processes_and_ray_tasks_train_the_same_model(data, tmp_path, map_every_array):
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install 'holoxmc[ray]'")
    X, Y = data
    local = fit_solar(X, Y, _config(), tmp_path / "local", workers=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        remote = fit_solar(X, Y, _config(), tmp_path / "ray", workers=2, ray_address="local")
    finally:
        ray.shutdown()
    assert _weights(tmp_path / "local") == _weights(tmp_path / "ray")
    for a, b in zip(local.predict(X), remote.predict(X)):
        np.testing.assert_array_equal(a, b)


def test_invalid_inputs(data, tmp_path):
    X, Y = data
    with pytest.raises(InputError):
        fit_solar(X[:10], Y, _config(), tmp_path / "a")
    with pytest.raises(InputError):
        fit_solar(X.toarray(), Y, _config(), tmp_path / "b")
    with pytest.raises(InputError):
        fit_solar(X, Y, _config(), tmp_path / "c", X_val=X[:5])
    with pytest.raises(InputError):
        SolarConfig(scoring="max")
    with pytest.raises(InputError):
        SolarConfig(n_buckets=0)
    with pytest.raises(InputError, match="refit"):  # its validation labels are buckets, not labels
        SolarConfig(train=TrainConfig(refit=True))


def test_first_chunks_is_the_smaller_k_model(trained, data, tmp_path):
    _, model = trained
    X, Y = data
    two = model.first_chunks(2)
    assert two.config.n_chunks == 2 and two.config.min_freq == 1
    np.testing.assert_array_equal(two.code.buckets, model.code.buckets[:2])
    np.testing.assert_array_equal(two.chunk_logits(X[:7]).numpy(), model.chunk_logits(X[:7])[:, :2].numpy())
    with pytest.raises(InputError):
        model.first_chunks(N_CHUNKS + 1)


@pytest.mark.parametrize("feature_dim, hidden", [(64, (16,)), (None, (16, 12)), (20, (8, 6, 10))])
def test_batched_inference_equals_each_chunk_network(data, feature_dim, hidden):
    """All K chunks run at once (one embedding bag, one baddbmm per layer) give the logits and
    predictions of K separate Network forwards on K separately hashed inputs."""
    X, Y = data
    config = _config(feature_dim=feature_dim, hidden=hidden, normalize_rows=True)
    code = SolarLabelCode(Y.shape[1], N_CHUNKS, config.n_buckets, config.seed, config.code_method)
    model = SolarModel(config, code, n_features=X.shape[1])
    for network in model.networks:  # non-zero biases, so a misplaced bias cannot hide
        for name, parameter in network.named_parameters():
            if "bias" in name:
                torch.nn.init.uniform_(parameter.data, -0.5, 0.5, generator=torch.Generator().manual_seed(len(name)))
    X_test = sp.vstack([X[:40], sp.csr_matrix((1, X.shape[1]), dtype=np.float32)]).tocsr()  # one empty row
    norms = np.sqrt(X_test.multiply(X_test).sum(1)).clip(1e-30)
    normalized = sp.csr_matrix(X_test.multiply(1 / norms), dtype=np.float32)
    with torch.no_grad():
        expected = torch.stack(
            [
                network(SparseBatch.from_csr(normalized if hasher is None else hasher.transform(normalized)))
                for hasher, network in zip(model.hashers, model.networks)
            ],
            dim=1,
        )
    logits = model.chunk_logits(X_test)
    assert logits.shape == (41, N_CHUNKS, config.n_buckets)
    torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
    scores, labels, candidates = solar_decode(
        expected, model._table, model._buckets, 5, top_buckets=config.top_buckets, min_freq=config.min_freq
    )
    indices, got_scores, got_candidates = model.predict(X_test, 5, batch_size=16)
    np.testing.assert_array_equal(indices, labels.numpy())
    np.testing.assert_allclose(got_scores, scores.numpy(), rtol=1e-5)
    np.testing.assert_array_equal(got_candidates, candidates.numpy())


def test_a_float32_solar_config_is_recorded_as_before_precision_existed():
    """Its training fingerprint then matches folders written before the field, so they resume."""
    assert "precision" not in _config().to_dict()["train"]
    mixed = _config(train=TrainConfig(epochs=5, precision="bfloat16", progress=False))
    assert mixed.to_dict()["train"]["precision"] == "bfloat16"
    assert SolarConfig.from_dict(mixed.to_dict()).train.precision == "bfloat16"

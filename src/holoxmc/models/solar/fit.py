"""SOLAR training and serving: K independent chunk models trained with zero communication,
decoded through the inverted index.

Every chunk k is its own job — feature hashing with its own seed, an FC backbone and a
:class:`SolarChunkHead` over B buckets, trained by the shared :class:`Trainer` — writing only
under ``run_dir/chunk_{k:03d}/``. A chunk is finished when its ``done.json`` marker (written
atomically, last) names the same training fingerprint; finished chunks are never retrained,
an interrupted one resumes from its own trainer checkpoint. Jobs run in this process, in
spawned worker processes (``workers``) or as Ray tasks (``ray_address``).

Run directory layout::

    run_dir/solar.json              config, sizes and training fingerprint
    run_dir/index.safetensors       label codes (K, L) and the inverted index
    run_dir/chunk_000/model.safetensors, done.json   (+ checkpoint.* while training)
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from holoxmc.models.solar.codes import FeatureHash, chunk_seed
from holoxmc.distributed import run_jobs, threads_per_worker
from holoxmc.errors import InputError
from holoxmc.io import atomic_write_json, to_json
from holoxmc.io import read_json as read_side_file
from holoxmc.train.checkpoint import (
    CHECKPOINT_JSON,
    CHECKPOINT_TENSORS,
    data_digest,
    save_state_dict,
)
from holoxmc.train.optim import choose_sparse_updates
from holoxmc.train.streaming import epoch_order
from holoxmc.train.trainer import TrainConfig, Trainer, split_validation
from holoxmc.models.solar.config import (CONFIG_FILE, DONE_FILE, INFERENCE_FIELDS, MODEL_FILE,
                                         SolarConfig, SolarNetwork, chunk_dir, chunk_network, feature_hash,
                                         normalized_rows, read_json, resolved_size)
from holoxmc.models.solar.head import SAMPLED_LOSSES, bucket_matrix
from holoxmc.models.solar.model import SolarModel


__all__ = ["SolarConfig", "fit_solar", "train_chunk", "ChunkJob", "SolarData", "chunk_dir"]







@dataclass(frozen=True)
class SolarData:
    """Read-only data shared by every chunk job (shipped once per worker / once to Ray)."""

    X_train: sp.csr_matrix
    Y_train: sp.csr_matrix
    X_val: sp.csr_matrix | None
    Y_val: sp.csr_matrix | None
    buckets: np.ndarray  # (K, L) int32


@dataclass(frozen=True)
class ChunkJob:
    """One chunk to train: its number, the resolved config and where to write."""

    chunk: int
    config: dict[str, Any]
    run_dir: str
    fingerprint: str






def _hashed(hasher: FeatureHash | None, X: sp.csr_matrix) -> sp.csr_matrix:
    return X if hasher is None else hasher.transform(X)




def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_done(directory: Path) -> dict[str, Any] | None:
    try:  # a regular file, bounded, depth-checked (a FIFO would block a plain read forever)
        return read_side_file(directory / DONE_FILE, what=DONE_FILE)
    except InputError:
        return None


def chunk_is_done(run_dir: str | os.PathLike, chunk: int, fingerprint: str) -> bool:
    """Whether chunk ``chunk`` finished training with this fingerprint and its weights are intact."""
    directory = chunk_dir(run_dir, chunk)
    done = _read_done(directory)
    model = directory / MODEL_FILE
    return (
        done is not None
        and done.get("fingerprint") == fingerprint
        and model.is_file()
        and done.get("model_sha256") == _sha256_file(model)
    )


def prepare_chunk_network(network: SolarNetwork, config: SolarConfig, X: sp.csr_matrix, Y: sp.csr_matrix,
                          train_config: TrainConfig) -> TrainConfig:
    """Ready a chunk's fresh network for training on ``X`` (hashed) and ``Y`` ``(n, L)``; returns
    the training settings to use.

    With ``prior_bias`` the output biases start at the bucket priors' log-odds. With the
    sampled loss, ``sparse_updates="auto"`` is decided on the input table alone (as the
    trainer decides for an FC network) and applies to the output rows too: the trainer's own
    rule would judge the input's reads against the output table's B rows.
    """
    if config.prior_bias:
        network.head.start_from_labels(Y)
    if network.head.loss_kind == "row-softmax":
        network.head.count_buckets(Y)
    if config.loss in SAMPLED_LOSSES and train_config.sparse_updates == "auto":
        device = torch.device(train_config.device)
        order = epoch_order(X, np.arange(X.shape[0]), train_config.seed, 0)
        sparse = choose_sparse_updates("auto", network.backbone, X, order, train_config.batch_size,
                                       weight_decay=train_config.weight_decay, device=device, world=1)
        train_config = replace(train_config, sparse_updates=sparse)
    return train_config


def train_chunk(job: ChunkJob, data: SolarData) -> dict[str, Any]:
    """Train one chunk and write its weights, then its done-marker (atomically, last).

    Resumes from the chunk's own trainer checkpoint when one is there. Returns the summary
    stored in ``done.json``.
    """
    config = SolarConfig.from_dict(job.config)
    k = job.chunk
    directory = chunk_dir(job.run_dir, k)
    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    train_config = replace(config.train, seed=chunk_seed(config.seed, k, "train"), device=device)
    hasher = feature_hash(config, data.X_train.shape[1], k)
    network = chunk_network(config, data.X_train.shape[1], data.buckets[k], k)
    X_train = _hashed(hasher, data.X_train)
    X_val = Y_val = None
    if data.X_val is not None:
        X_val = _hashed(hasher, data.X_val)
        Y_val = bucket_matrix(data.Y_val, data.buckets[k], resolved_size(config.n_buckets, "n_buckets"))
    else:
        train_config = replace(train_config, val_fraction=0.0)
    train_config = prepare_chunk_network(network, config, X_train, data.Y_train, train_config)
    result = Trainer(train_config).fit(network, X_train, data.Y_train, X_val, Y_val, run_dir=directory, resume=True)
    save_state_dict(directory / MODEL_FILE, network.cpu().state_dict())
    summary = {
        "chunk": k,
        "fingerprint": job.fingerprint,
        "model_sha256": _sha256_file(directory / MODEL_FILE),
        "best_epoch": result.best_epoch,
        "val_bucket_P@1": result.best_score if X_val is not None else None,
        "train_seconds": result.train_seconds,
        "epoch_seconds": result.epoch_seconds,
    }
    atomic_write_json(directory / DONE_FILE, summary)
    for name in (CHECKPOINT_TENSORS, CHECKPOINT_JSON):  # the weights are final; drop optimiser state
        (directory / name).unlink(missing_ok=True)
    return summary




def _check_xy(X: Any, Y: Any, name: str) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    if not sp.issparse(X) or not sp.issparse(Y):
        raise InputError(f"X{name} and Y{name} must be scipy sparse matrices")
    if X.shape[0] != Y.shape[0]:
        raise InputError(f"X{name} has {X.shape[0]} rows but Y{name} has {Y.shape[0]}")
    if X.shape[0] == 0:
        raise InputError(f"X{name} is empty")
    Y = sp.csr_matrix(Y, dtype=np.float32)
    Y.sum_duplicates()
    Y.sort_indices()
    return sp.csr_matrix(X, dtype=np.float32), Y


def fit_solar(
    X: sp.csr_matrix,
    Y: sp.csr_matrix,
    config: SolarConfig | None,
    run_dir: str | os.PathLike,
    *,
    X_val: sp.csr_matrix | None = None,
    Y_val: sp.csr_matrix | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    groups: np.ndarray | None = None,
) -> SolarModel:
    """Train a SOLAR model: K chunk jobs with zero communication, then load them.

    Re-running with the same data and config retrains only the chunks without a valid
    done-marker (killed or failed ones); finished chunks are reused untouched.

    Args:
        X: ``(n, D)`` sparse features; Y: ``(n, L)`` binary sparse labels.
        config: a :class:`SolarConfig` (``None`` = the defaults).
        run_dir: the model directory (see the module docstring for its layout).
        X_val, Y_val: validation set for per-chunk model selection; when omitted,
            ``config.train.val_fraction`` of the rows is carved out (the same rows for all
            chunks). Never pass the test set.
        groups: ``(n,)`` group codes: the carved rows are whole groups.
        workers: local worker processes (spawned), each with ``cpu_count // workers`` torch threads.
        ray_address: run chunks as Ray tasks on this cluster (``"auto"``, an address, or
            ``"local"`` for a local instance); one GPU per task when the cluster has GPUs.

    Returns:
        the trained :class:`SolarModel` (also saved in ``run_dir``).

    Raises:
        InputError: bad inputs, or ``run_dir`` holding a model with another config or data.
        holoxmc.distributed.JobsFailed: some chunks failed (finished ones are kept; re-run).

    Example:
        >>> model = fit_solar(X, Y, SolarConfig(n_chunks=8), "runs/solar", workers=2)  # doctest: +SKIP
        >>> labels, scores, candidates = model.predict(X_test, k=5)                    # doctest: +SKIP
    """
    X, Y = _check_xy(X, Y, "")
    if (X_val is None) != (Y_val is None):
        raise InputError("give both X_val and Y_val, or neither")
    if X_val is not None:
        X_val, Y_val = _check_xy(X_val, Y_val, "_val")
        if X_val.shape[1] != X.shape[1] or Y_val.shape[1] != Y.shape[1]:
            raise InputError("validation data must have the training data's features and labels")
    config = (config or SolarConfig()).resolved(n_labels=Y.shape[1], n_features=X.shape[1])
    if config.normalize_rows:
        X = normalized_rows(X)
        X_val = None if X_val is None else normalized_rows(X_val)
    if X_val is None and config.train.val_fraction > 0:
        train_rows, val_rows = split_validation(X.shape[0], config.train.val_fraction, config.seed, groups)
        X, Y, X_val, Y_val = X[train_rows], Y[train_rows], X[val_rows], Y[val_rows]
    code = config.label_code(Y.shape[1])

    training = {k: v for k, v in config.to_dict().items() if k not in INFERENCE_FIELDS}
    fingerprint = hashlib.sha256(
        to_json({"config": training, "data": data_digest(X, Y, X_val, Y_val)}, sort_keys=True).encode()
    ).hexdigest()
    run_dir = Path(run_dir)
    existing = read_json(run_dir / CONFIG_FILE)
    if existing is not None and existing.get("fingerprint") != fingerprint:
        raise InputError(
            f"{run_dir}: holds a SOLAR model trained with another configuration or data; "
            "use the same options to continue it, or a new run directory"
        )
    model = SolarModel(config, code, n_features=X.shape[1], fingerprint=fingerprint)
    model._write_metadata(run_dir)

    threads = threads_per_worker(workers)
    jobs = [
        ChunkJob(k, config.to_dict(), str(run_dir), fingerprint)
        for k in range(config.n_chunks)
        if not chunk_is_done(run_dir, k, fingerprint)
    ]
    data = SolarData(X, Y, X_val, Y_val, code.buckets)
    run_jobs(train_chunk, jobs, data, workers=workers, ray_address=ray_address, threads_per_job=threads)
    model._load_chunks(run_dir)
    return model







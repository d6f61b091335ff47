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
import json
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize

from holoxmc.backbones.fc import FCBackbone
from holoxmc.backbones.network import Network
from holoxmc.codes.solar import CodeMethod, FeatureHash, SolarLabelCode, chunk_seed
from holoxmc.distributed import run_jobs, threads_per_worker
from holoxmc.errors import InputError, check_number_types
from holoxmc.heads.solar import MIN_FREQ_MODES, SCORINGS, MinFreqMode, Scoring, SolarChunkHead
from holoxmc.io import atomic_write_json, to_json
from holoxmc.limits import check_allocation, check_size
from holoxmc.train.checkpoint import (
    CHECKPOINT_JSON,
    CHECKPOINT_TENSORS,
    data_digest,
    save_state_dict,
)
from holoxmc.train.trainer import TrainConfig, Trainer, split_validation
from holoxmc.trust import tensor_shapes

if TYPE_CHECKING:
    from holoxmc.models.solar import SolarModel

__all__ = ["SolarConfig", "SolarModel", "fit_solar", "train_chunk", "ChunkJob", "SolarData", "chunk_dir"]

FORMAT = "holoxmc-solar/1"
MODEL_FILE = "model.safetensors"
DONE_FILE = "done.json"
INDEX_FILE = "index.safetensors"
CONFIG_FILE = "solar.json"
# Fields that only change decoding: editing them never retrains a chunk.
INFERENCE_FIELDS = ("top_buckets", "min_freq", "min_freq_mode", "scoring")


@dataclass
class SolarConfig:
    """Everything that defines a SOLAR model.

    Args:
        n_chunks: K independent chunk models (non-zeros per label code).
        n_buckets: B buckets per chunk; ``None`` = ``ceil(L / 2)`` (at most 20,000).
        code_method: ``"balanced"`` (equal bucket loads) or ``"murmur"`` (the paper's hash).
        feature_dim: width of each chunk's hashed input (each chunk hashes with its own
            seed); ``None`` = no hashing when D <= 2**17, else 2**17.
        alternate_sign: signed feature hashing.
        normalize_rows: L2-normalise every input row (before hashing), in training and inference.
        hidden: hidden widths of each chunk's FC backbone (one layer by default).
        dropout: dropout after hidden activations.
        top_buckets: m, buckets per chunk retrieved at inference.
        min_freq: least number of chunks that must retrieve a label; ``None`` = ``K // 2``,
            the paper's choice.
        min_freq_mode: ``"relaxed"`` lowers ``min_freq`` per point to its k-th best hit count
            when fewer than k labels would pass; ``"strict"`` is the paper's filter as it
            stands (a point may get fewer than k labels; ``min_freq`` at most ``n_chunks``).
        scoring: ``"prob"`` (sum of probabilities), ``"logprob"`` or ``"logit"``.
        seed: seeds codes, hashing, initialisation, validation split and shuffling.
        device: ``"auto"`` trains on CUDA when the job sees a GPU, else CPU.
        train: optimiser settings for every chunk (its ``seed`` is replaced per chunk).

    Example:
        >>> SolarConfig(n_chunks=4).resolved(n_labels=100, n_features=50).n_buckets
        50
    """

    n_chunks: int = 8
    n_buckets: int | None = None
    code_method: CodeMethod = "balanced"
    feature_dim: int | None = None
    alternate_sign: bool = True
    normalize_rows: bool = True
    hidden: tuple[int, ...] = (512,)
    dropout: float = 0.0
    top_buckets: int = 10
    min_freq: int | None = None
    min_freq_mode: MinFreqMode = "relaxed"
    scoring: Scoring = "prob"
    seed: int = 0
    device: str = "auto"
    train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=15, batch_size=256, lr=5e-3))

    def __post_init__(self) -> None:
        if isinstance(self.train, dict):
            self.train = TrainConfig.from_dict(self.train)
        check_number_types(self)
        if self.seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {self.seed!r}")
        self.hidden = tuple(int(h) for h in self.hidden)
        for name in ("n_chunks", "top_buckets"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("n_buckets", "feature_dim", "min_freq"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InputError(f"{name} must be >= 1 or None, got {value}")
        if self.scoring not in SCORINGS:
            raise InputError(f"scoring must be one of {SCORINGS}, got {self.scoring!r}")
        if self.min_freq_mode not in MIN_FREQ_MODES:
            raise InputError(f"min_freq_mode must be one of {MIN_FREQ_MODES}, got {self.min_freq_mode!r}")
        if self.min_freq_mode == "strict" and (self.min_freq or 0) > self.n_chunks:
            raise InputError(f"min_freq ({self.min_freq}) exceeds n_chunks ({self.n_chunks}): the strict filter "
                             "would keep no label")
        if not self.hidden or min(self.hidden) < 1:
            raise InputError(f"hidden widths must be positive, got {self.hidden}")
        if self.train.refit:
            raise InputError("SOLAR chunks select their epoch on a bucket-space validation split "
                             "and cannot refit on it; set train.refit=False")

    def label_code(self, n_labels: int) -> SolarLabelCode:
        """The label code this (resolved) config regenerates for ``n_labels`` labels."""
        return SolarLabelCode(n_labels, self.n_chunks, _resolved(self.n_buckets, "n_buckets"), self.seed,
                              self.code_method)

    def resolved(self, n_labels: int, n_features: int) -> "SolarConfig":
        """A copy with every ``None`` default replaced by its value for this data.

        Raises:
            InputError: more buckets than labels (``B > L`` leaves at least ``B - L``
                buckets of every chunk empty: each chunk trains an output layer wider than
                the label set, and decoding retrieves empty buckets; ``B = L`` is one label
                per bucket, the widest useful code).
        """
        if self.n_buckets is not None and self.n_buckets > n_labels:
            raise InputError(f"n_buckets ({self.n_buckets}) must be at most the label count: there are "
                             f"{n_labels} labels, so at least {self.n_buckets - n_labels} buckets per chunk "
                             "would stay empty")
        return replace(
            self,
            n_buckets=self.n_buckets or max(1, min(-(-n_labels // 2), 20_000)),
            feature_dim=self.feature_dim or (None if n_features <= 2**17 else 2**17),
            min_freq=self.min_freq or max(1, self.n_chunks // 2),
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hidden"] = list(self.hidden)
        out["train"] = self.train.record()
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "SolarConfig":
        """Build from a dict, ignoring unknown keys (``train`` may be a dict)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


def _resolved(value: int | None, name: str) -> int:
    """A :meth:`SolarConfig.resolved` setting (never ``None`` once resolved)."""
    if value is None:
        raise ValueError(f"SolarConfig.{name} is unset: use SolarConfig.resolved() first")
    return value


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


def chunk_dir(run_dir: str | os.PathLike, chunk: int) -> Path:
    """``run_dir/chunk_{chunk:03d}``."""
    return Path(run_dir) / f"chunk_{chunk:03d}"


def _feature_hash(config: SolarConfig, n_features: int, chunk: int) -> FeatureHash | None:
    if config.feature_dim is None:
        return None
    return FeatureHash(n_features, config.feature_dim, chunk_seed(config.seed, chunk, "features"), config.alternate_sign)


def _hashed(hasher: FeatureHash | None, X: sp.csr_matrix) -> sp.csr_matrix:
    return X if hasher is None else hasher.transform(X)


def _chunk_network(config: SolarConfig, n_features: int, bucket_of_label: np.ndarray, chunk: int) -> Network:
    init_seed = chunk_seed(config.seed, chunk, "init")
    backbone = FCBackbone(config.feature_dim or n_features, config.hidden, dropout=config.dropout, seed=init_seed)
    head = SolarChunkHead(backbone.out_features, torch.from_numpy(np.array(bucket_of_label)),  # own copy: shared rows are read-only
                          _resolved(config.n_buckets, "n_buckets"), seed=init_seed)
    return Network(backbone, head)


def _bucket_matrix(Y: sp.csr_matrix, bucket_of_label: np.ndarray, n_buckets: int) -> sp.csr_matrix:
    """``(n, B)`` binary CSR: the OR of each row's label buckets (validation targets)."""
    assign = sp.csr_matrix(
        (np.ones(len(bucket_of_label), np.float32), bucket_of_label, np.arange(len(bucket_of_label) + 1)),
        shape=(len(bucket_of_label), n_buckets),
    )
    out = (sp.csr_matrix(Y, dtype=np.float32) @ assign).tocsr()
    out.data[:] = 1.0
    out.sort_indices()
    return out


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_done(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / DONE_FILE).read_text())
    except (OSError, ValueError):
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
    hasher = _feature_hash(config, data.X_train.shape[1], k)
    network = _chunk_network(config, data.X_train.shape[1], data.buckets[k], k)
    X_val = Y_val = None
    if data.X_val is not None:
        X_val = _hashed(hasher, data.X_val)
        Y_val = _bucket_matrix(data.Y_val, data.buckets[k], _resolved(config.n_buckets, "n_buckets"))
    else:
        train_config = replace(train_config, val_fraction=0.0)
    result = Trainer(train_config).fit(
        network, _hashed(hasher, data.X_train), data.Y_train, X_val, Y_val, run_dir=directory, resume=True
    )
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


def _normalized(X: sp.csr_matrix) -> sp.csr_matrix:
    return normalize(X, norm="l2", copy=True).astype(np.float32)


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
        X = _normalized(X)
        X_val = None if X_val is None else _normalized(X_val)
    if X_val is None and config.train.val_fraction > 0:
        train_rows, val_rows = split_validation(X.shape[0], config.train.val_fraction, config.seed)
        X, Y, X_val, Y_val = X[train_rows], Y[train_rows], X[val_rows], Y[val_rows]
    code = config.label_code(Y.shape[1])

    training = {k: v for k, v in config.to_dict().items() if k not in INFERENCE_FIELDS}
    fingerprint = hashlib.sha256(
        to_json({"config": training, "data": data_digest(X, Y, X_val, Y_val)}, sort_keys=True).encode()
    ).hexdigest()
    run_dir = Path(run_dir)
    existing = _read_json(run_dir / CONFIG_FILE)
    if existing is not None and existing.get("fingerprint") != fingerprint:
        raise InputError(
            f"{run_dir}: holds a SOLAR model trained with another configuration or data; "
            "use the same options to continue it, or a new run directory"
        )
    from holoxmc.models.solar import SolarModel

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


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable ({exc})") from exc


def _checked_model_config(directory: Path, meta: dict[str, Any]) -> SolarConfig:
    """The :class:`SolarConfig` of a saved model folder, once every size its ``solar.json``
    claims matches the stored tensors (shapes read from the file headers) and fits in memory."""
    where = str(directory / CONFIG_FILE)
    if not isinstance(meta.get("config"), dict):
        raise InputError(f"{where}: 'config' must be a JSON object")
    try:
        config = SolarConfig.from_dict(meta["config"])
    except (TypeError, ValueError) as exc:
        raise InputError(f"{where}: {exc}") from None
    n_labels = check_size("n_labels", meta.get("n_labels"), where=where)
    n_features = check_size("n_features", meta.get("n_features"), where=where)
    buckets = tensor_shapes(directory / INDEX_FILE).get("buckets")
    if buckets != (config.n_chunks, n_labels):
        raise InputError(f"{where}: n_labels {n_labels} and n_chunks {config.n_chunks} do not match the stored "
                         f"label codes of shape {buckets}")
    sizes = [config.n_buckets, config.feature_dim or n_features, *config.hidden]
    for k in range(config.n_chunks):
        stored = {d for shape in tensor_shapes(chunk_dir(directory, k) / MODEL_FILE).values() for d in shape}
        unmatched = [size for size in sizes if size not in stored]
        if unmatched:
            raise InputError(f"{where}: size {unmatched[0]} matches no tensor of chunk {k} (edited or from another model)")
    widths = [config.feature_dim or n_features, *config.hidden, _resolved(config.n_buckets, "n_buckets")]
    check_allocation(4 * config.n_chunks * sum(a * b for a, b in zip(widths[:-1], widths[1:])),
                     "the chunk networks this configuration describes", where=where)
    return config


def __getattr__(name: str) -> Any:
    """``SolarModel`` and ``_StackedChunks``, served from :mod:`holoxmc.models.solar` (their
    home; imported lazily there, as that module builds on this one)."""
    if name in ("SolarModel", "_StackedChunks"):
        from holoxmc.models import solar

        return getattr(solar, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

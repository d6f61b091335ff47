"""SOLAR's settings and what training and serving both build from them: the
:class:`SolarConfig`, the run folder's file names, each chunk's feature hash and network, and
the check of a saved folder's ``solar.json`` against its tensors.

Example:
    >>> SolarConfig(n_chunks=4).resolved(n_labels=100, n_features=50).n_buckets
    50
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor
from sklearn.preprocessing import normalize

from holoxmc.backbones.fc import FCBackbone
from holoxmc.backbones.network import Network
from holoxmc.errors import InputError, check_number_types
from holoxmc.io import read_json as read_side_file
from holoxmc.limits import SOLAR_HASH_ABOVE, check_allocation, check_size
from holoxmc.models.solar.codes import CodeMethod, FeatureHash, SolarLabelCode, chunk_seed
from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.models.solar.head import LOSSES, SAMPLED_LOSSES, Loss, MinFreqMode, Scoring, SolarChunkHead
from holoxmc.constraints import check_params
from holoxmc.settings import HEAD_OPTIONS, SETTING, option_default
from holoxmc.train.trainer import TrainConfig
from holoxmc.trust import tensor_shapes

__all__ = ["SolarConfig", "SolarNetwork", "chunk_dir", "chunk_network", "checked_model_config", "feature_hash", "normalized_rows",
           "read_json", "resolved_size"]


FORMAT = "holoxmc-solar/1"

MODEL_FILE = "model.safetensors"

DONE_FILE = "done.json"

INDEX_FILE = "index.safetensors"

CONFIG_FILE = "solar.json"

# Fields that only change decoding: editing them never retrains a chunk.
INFERENCE_FIELDS = ("top_buckets", "min_freq", "min_freq_mode", "scoring")
#: Settings added after SOLAR folders were first written, with the value those folders
#: trained with: :meth:`SolarConfig.to_dict` leaves them out at that value and
#: :meth:`SolarConfig.from_dict` fills them in when absent, so older folders still load,
#: resume and match their fingerprints.
LATER_FIELDS: dict[str, Any] = {"loss": "full", "negatives": 1024, "prior_bias": False}

#: ``loss="auto"`` trains a softmax over the buckets from this many buckets a chunk, the BCE
#: below. Chosen on held-out training rows (docs/results/solar.md, "The softmax loss"): the
#: softmax won at B = 5,000 (realistic-10k) and 20,000 (a 100K-label generated set) by wide
#: margins, and lost on Delicious (B = 492: test P@1 66.59 against 68.23) and on Bibtex's P@5
#: (B = 80); any value between 493 and 5,000 splits those sets so.
SOFTMAX_FROM_BUCKETS = 2_000
#: The ``loss`` values a configuration takes: a chunk's (:data:`LOSSES`) or ``"auto"``.
CONFIG_LOSSES: tuple[str, ...] = (*LOSSES, "auto")

#: SOLAR's head options checked against the settings table's constraints (``loss``, whose
#: allowed values differ by head, is checked against :data:`LOSSES`).
_TABLE_CHECKED = tuple(name for name in HEAD_OPTIONS["solar"].values() if name != "loss")


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
        loss: each chunk's training loss: ``"auto"`` (the default) is ``"softmax"`` from
            :data:`SOFTMAX_FROM_BUCKETS` buckets a chunk and ``"full"`` below; ``"full"``, the BCE over all B buckets, or
            ``"sampled"``, the batch's positive buckets and ``negatives`` shared random ones,
            reweighted to an unbiased estimate of the full loss
            (:meth:`~holoxmc.models.solar.head.SolarChunkHead.sampled_loss`); a step then costs
            little more than its positives whatever B is; or ``"softmax"``, the cross-entropy
            of a softmax over the buckets against each row's positive buckets, scored on the
            sampled loss's columns (:meth:`~holoxmc.models.solar.head.SolarChunkHead.softmax_loss`);
            or ``"row-softmax"``, that softmax with each row scored against its own positive
            buckets and the drawn ones only
            (:meth:`~holoxmc.models.solar.head.SolarChunkHead.row_softmax_loss`).
        negatives: buckets the sampled and softmax losses draw per batch (``>= B``: all).
        prior_bias: start every bucket's output bias at the log-odds of its share of the
            training rows (the loss then starts near its priors' value instead of spending
            the first steps pulling every bucket's probability from 0.5 down).
        seed: seeds codes, hashing, initialisation, validation split and shuffling.
        device: ``"auto"`` trains on CUDA when the job sees a GPU, else CPU.
        train: optimiser settings for every chunk (its ``seed`` is replaced per chunk).

    Example:
        >>> SolarConfig(n_chunks=4).resolved(n_labels=100, n_features=50).n_buckets
        50
    """

    n_chunks: int = option_default("solar", "n_chunks")
    n_buckets: int | None = option_default("solar", "n_buckets")
    code_method: CodeMethod = option_default("solar", "code_method")
    feature_dim: int | None = option_default("solar", "feature_dim")
    alternate_sign: bool = True
    normalize_rows: bool = True
    hidden: tuple[int, ...] = (512,)
    dropout: float = 0.0
    top_buckets: int = option_default("solar", "top_buckets")
    min_freq: int | None = option_default("solar", "min_freq")
    min_freq_mode: MinFreqMode = option_default("solar", "min_freq_mode")
    scoring: Scoring = option_default("solar", "scoring")
    loss: Loss | Literal["auto"] = option_default("solar", "loss")
    negatives: int = option_default("solar", "negatives")
    prior_bias: bool = option_default("solar", "prior_bias")
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
        if self.loss not in CONFIG_LOSSES:
            raise InputError(f"loss must be one of {CONFIG_LOSSES}, got {self.loss!r}")
        # each head option's own form, from its one declaration (the loss's forms differ by head: above)
        check_params({name: getattr(self, name) for name in _TABLE_CHECKED},
                     {name: SETTING[name].allowed for name in _TABLE_CHECKED})
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
        return SolarLabelCode(n_labels, self.n_chunks, resolved_size(self.n_buckets, "n_buckets"), self.seed,
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
        n_buckets = self.n_buckets or max(1, min(-(-n_labels // 2), 20_000))
        return replace(
            self,
            n_buckets=n_buckets,
            loss=chunk_loss(self.loss, n_buckets),
            feature_dim=self.feature_dim or (None if n_features <= SOLAR_HASH_ABOVE else SOLAR_HASH_ABOVE),
            min_freq=self.min_freq or max(1, self.n_chunks // 2),
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hidden"] = list(self.hidden)
        out["train"] = self.train.record()
        for name, earlier in LATER_FIELDS.items():
            if out[name] == earlier:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "SolarConfig":
        """Build from a dict, ignoring unknown keys (``train`` may be a dict); a setting of
        :data:`LATER_FIELDS` that is absent takes the value folders had before it existed."""
        names = {f.name for f in fields(cls)}
        return cls(**(LATER_FIELDS | {k: v for k, v in values.items() if k in names}))


def chunk_loss(loss: str, n_buckets: int) -> Loss:
    """The loss a chunk of ``n_buckets`` buckets trains with: ``loss`` itself, or for
    ``"auto"`` the softmax from :data:`SOFTMAX_FROM_BUCKETS` buckets and the BCE below.

    Example:
        >>> chunk_loss("auto", 492), chunk_loss("auto", 20_000), chunk_loss("sampled", 20_000)
        ('full', 'softmax', 'sampled')
    """
    if loss == "auto":
        return "softmax" if n_buckets >= SOFTMAX_FROM_BUCKETS else "full"
    return cast(Loss, loss)


def resolved_size(value: int | None, name: str) -> int:
    """A :meth:`SolarConfig.resolved` setting (never ``None`` once resolved)."""
    if value is None:
        raise ValueError(f"SolarConfig.{name} is unset: use SolarConfig.resolved() first")
    return value


def chunk_dir(run_dir: str | os.PathLike, chunk: int) -> Path:
    """``run_dir/chunk_{chunk:03d}``."""
    return Path(run_dir) / f"chunk_{chunk:03d}"


def feature_hash(config: SolarConfig, n_features: int, chunk: int) -> FeatureHash | None:
    if config.feature_dim is None:
        return None
    return FeatureHash(n_features, config.feature_dim, chunk_seed(config.seed, chunk, "features"), config.alternate_sign)


class SolarNetwork(Network):
    """A chunk's network: with a sampled loss, :meth:`loss` goes from the backbone output
    straight to :meth:`SolarChunkHead.training_loss` (never the B-wide output); otherwise it
    is :class:`Network`'s."""

    head: SolarChunkHead

    def loss(self, x: SparseBatch | Tensor, labels: LabelBatch) -> Tensor:
        if self.head.loss_kind in SAMPLED_LOSSES:
            return self.head.training_loss(self.backbone(x), labels)
        return super().loss(x, labels)


def chunk_network(config: SolarConfig, n_features: int, bucket_of_label: np.ndarray, chunk: int) -> SolarNetwork:
    """Chunk ``chunk``'s network (FC backbone + :class:`SolarChunkHead`), initialised from the seed."""
    init_seed = chunk_seed(config.seed, chunk, "init")
    backbone = FCBackbone(config.feature_dim or n_features, config.hidden, dropout=config.dropout, seed=init_seed)
    n_buckets = resolved_size(config.n_buckets, "n_buckets")
    head = SolarChunkHead(backbone.out_features, torch.from_numpy(np.array(bucket_of_label)),  # own copy: shared rows are read-only
                          n_buckets, seed=init_seed, loss=chunk_loss(config.loss, n_buckets),
                          negatives=config.negatives, prior_bias=config.prior_bias)
    return SolarNetwork(backbone, head)


def normalized_rows(X: sp.csr_matrix) -> sp.csr_matrix:
    return normalize(X, norm="l2", copy=True).astype(np.float32)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object of the side file ``path`` (:func:`holoxmc.io.read_json`: a regular
    file, bounded, depth-checked); ``None`` when there is none."""
    if not path.exists() and not path.is_symlink():
        return None
    return read_side_file(path, what=path.name)


def checked_model_config(directory: Path, meta: dict[str, Any]) -> SolarConfig:
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
    widths = [config.feature_dim or n_features, *config.hidden, resolved_size(config.n_buckets, "n_buckets")]
    check_allocation(4 * config.n_chunks * sum(a * b for a, b in zip(widths[:-1], widths[1:])),
                     "the chunk networks this configuration describes", where=where)
    return config

"""The one trainer every model shares: Adam, LR schedule, validation-based model selection,
early stopping, an optional refit on all rows, atomic safetensors checkpoints and exact
resume.

Determinism: the shuffling order and the torch RNG (dropout) of epoch ``e`` are derived
from ``(seed, e)`` only, inside a forked RNG scope, so a run resumed after epoch ``e``
replays epochs ``e+1..`` exactly like an uninterrupted one and the caller's global RNG
state is left untouched.

Inside a ``torch.distributed`` process group (e.g. under torchrun) the same trainer runs
data-parallel: see :mod:`holoxmc.distributed.data_parallel`.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import scipy.sparse as sp
import torch
import torch.distributed as dist
from torch import Tensor, nn
from tqdm.auto import tqdm

from holoxmc.backbones.network import Network
from holoxmc.data.batch import LabelBatch, SparseBatch, input_batch, label_batch
from holoxmc.data.shards import is_sharded
from holoxmc.devices import check_device
from holoxmc.distributed.data_parallel import (
    data_parallel,
    from_rank_zero,
    process_group,
    share_of_batch,
    sum_over_ranks,
)
from holoxmc.errors import InputError, TrainingDiverged, check_number_types
from holoxmc.io import to_json
from holoxmc.train.checkpoint import data_digest, load_checkpoint, save_checkpoint
from holoxmc.train.heap import reuse_freed_memory
from holoxmc.train.inference import evaluate_topk
from holoxmc.train.optim import (
    bring_up_to_date, build_optimizers, choose_sparse_updates, clip_grad_norm_, sparse_update_tables, watching,
)
from holoxmc.train.streaming import as_labels, epoch_order, take_rows

__all__ = [
    "TrainConfig", "Trainer", "FitResult", "TrainableNetwork", "split_validation", "lr_factor", "REFIT_DIR",
    "SELECT_METRICS", "VALIDATION_KS",
]

_LOG = logging.getLogger(__name__)

#: Sub-folder of a run directory holding the refit phase's checkpoint.
REFIT_DIR = "refit"

Schedule = Literal["none", "cosine", "linear"]
_SCHEDULES = ("none", "cosine", "linear")
Precision = Literal["float32", "bfloat16"]
_PRECISIONS = ("float32", "bfloat16")
#: Training settings added after runs were first recorded, with the value those runs trained
#: with: :meth:`TrainConfig.record` leaves them out at that value, so older checkpoints and
#: SOLAR folders still match.
LATER_FIELDS: dict[str, Any] = {"precision": "float32", "time_limit": None, "abandon_below": None}


class TrainableNetwork(Protocol):
    """What the trainer needs from a model (``holoxmc.backbones.Network`` satisfies it)."""

    def loss(self, x: SparseBatch | Tensor, labels: LabelBatch) -> Tensor: ...

    def topk(self, x: SparseBatch | Tensor, k: int) -> tuple[Tensor, Tensor]: ...


#: The largest value of each setting that scales the loss or the steps that is still within
#: any sane use (the defaults and presets: lr at most 1e-2, weight decay 0, the HRR ranking
#: weight 1): a diverged run names those above theirs as the likely cause, else the learning rate.
SANE_MAGNITUDES: dict[str, float] = {"lr": 1.0, "weight_decay": 1.0, "ranking": 100.0}


def divergence_hint(config: "TrainConfig", network: Any) -> str:
    """What to change after the loss turned non-finite: the settings past their
    :data:`SANE_MAGNITUDES` (the HRR head's ``ranking`` read from ``network.head``), else a
    smaller learning rate or gradient clipping.

    Example:
        >>> divergence_hint(TrainConfig(lr=1e-3, weight_decay=1e308), None)
        'weight_decay 1e+308 is far above any sane value (at most 1): lower it'
        >>> divergence_hint(TrainConfig(lr=1e-3), None)
        'lr 0.001: try a smaller learning rate, or grad_clip'
    """
    given = {"lr": config.lr, "weight_decay": config.weight_decay,
             "ranking": getattr(getattr(network, "head", None), "ranking", None)}
    values = {name: float(value) for name, value in given.items() if isinstance(value, (int, float))}
    extreme = [name for name, value in values.items() if not abs(value) <= SANE_MAGNITUDES[name]]
    if not extreme:
        return f"lr {config.lr}: try a smaller learning rate, or grad_clip"
    if len(extreme) == 1:
        name = extreme[0]
        return f"{name} {values[name]:g} is far above any sane value (at most {SANE_MAGNITUDES[name]:g}): lower it"
    named = " and ".join(f"{name} {values[name]:g} (at most {SANE_MAGNITUDES[name]:g})" for name in extreme)
    return f"{named} are far above any sane value: lower them"


#: Cut-offs of the per-epoch validation metrics, and the metrics model selection can use.
VALIDATION_KS = (1, 3, 5)
SELECT_METRICS = tuple(f"{name}@{k}" for name in ("P", "nDCG") for k in VALIDATION_KS)


@dataclass
class TrainConfig:
    """Optimisation settings of :class:`Trainer`.

    Args:
        epochs: maximum number of passes over the training rows.
        batch_size: training rows per step.
        lr: Adam learning rate (peak, after warm-up).
        weight_decay: Adam (L2) weight decay.
        sparse_updates: train the input embedding tables (FC feature weights, CNN/LSTM
            word vectors) with row-sparse gradients and :class:`~holoxmc.train.optim.CatchUpAdam`,
            which computes only on the rows a batch reads and makes dense Adam's steps:
            many times faster for large D. ``True`` is refused with ``weight_decay``;
            ``"auto"`` uses them where they were measured faster
            (:func:`~holoxmc.train.optim.choose_sparse_updates`: a CPU, one process, no
            weight decay, at least 15,000 table rows of which a batch reads at most 7.5 %).
        schedule: LR multiplier over the run: ``"none"``, ``"cosine"`` (to 0) or ``"linear"`` (to 0).
        warmup_epochs: linear warm-up length, in epochs (fractional allowed).
        grad_clip: clip the global gradient norm to this value; ``None`` disables.
        val_fraction: share of the training rows held out for model selection when no
            validation set is given; ``0`` trains on everything and keeps the last epoch.
        patience: stop after this many epochs without validation improvement; ``None`` never.
        time_limit: stop at the end of the first epoch that ends more than this many seconds
            (wall time, validation included) after this call to :meth:`Trainer.fit` began,
            keeping the best epoch so far; ``None`` never. The refit phase has no limit (it
            stops at the selected epoch).
        abandon_below: stop once the validation ``select_metric`` can no longer reach this
            value (:func:`reachable`, less the score's standard error on the validation rows:
            a race closer than that is noise); ``None`` never. ``head="auto"`` gives a network
            candidate the leading candidate's validation P@1.
        refit: after selecting the best epoch on the validation set, train the network
            again from its initial weights on every row (training and validation) with the
            same schedule, stop at that epoch (``stop_epoch``), and keep that model instead
            of the selected one (much as scikit-learn's ``GridSearchCV(refit=True)``
            retrains the winning setting). At most doubles the training time; ignored when
            there is no validation set.
        stop_epoch: end the run after this many epochs of the ``epochs``-long schedule
            (the refit phase stops where the selected model was, at the same learning rate);
            ``None`` runs all ``epochs``.
        select_metric: validation metric maximised for model selection, one of
            :data:`SELECT_METRICS` (P@k or nDCG@k at the validation cut-offs 1, 3, 5).
        seed: seeds the validation split, the shuffling and dropout.
        device: where to train (``"cpu"``, ``"cuda"``, ...).
        eval_batch_size: rows per inference batch.
        progress: show a tqdm bar; ``None`` = only when stderr is a terminal.
        reuse_memory: on a CPU, keep freed large blocks mapped while training
            (:func:`~holoxmc.train.heap.reuse_freed_memory`, a process-wide ``mallopt``)
            instead of paying page faults for fresh ones in every step; results are the same
            either way. ``None`` (default): on only when ``HOLOXMC_REUSE_FREED_MEMORY=1``.
        precision: ``"float32"``, or ``"bfloat16"`` for mixed precision: each training
            step's forward pass runs under ``torch.autocast`` with bfloat16 on the CPU or a
            GPU (matrix products and convolutions in bfloat16; embedding tables, weights,
            gradients and Adam's state stay float32, and so does the loss of a
            :class:`~holoxmc.backbones.Network`, which computes it with autocast off; on the
            CPU an LSTM over packed sequences stays float32 too). Validation, scoring and
            saved weights are float32 either way.
    """

    epochs: int = 20
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 0.0
    sparse_updates: bool | Literal["auto"] = "auto"
    schedule: Schedule = "cosine"
    warmup_epochs: float = 0.0
    grad_clip: float | None = None
    val_fraction: float = 0.1
    patience: int | None = None
    time_limit: float | None = None
    abandon_below: float | None = None
    refit: bool = False
    stop_epoch: int | None = None
    select_metric: str = "P@1"
    seed: int = 0
    device: str = "cpu"
    eval_batch_size: int = 1024
    progress: bool | None = None
    reuse_memory: bool | None = None
    precision: Precision = "float32"

    def __post_init__(self) -> None:
        check_number_types(self)
        if self.epochs < 1:
            raise InputError(f"epochs must be >= 1, got {self.epochs}")
        if self.batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {self.batch_size}")
        if not 0.0 < self.lr < math.inf:
            raise InputError(f"lr must be a finite number > 0, got {self.lr}")
        if self.schedule not in _SCHEDULES:
            raise InputError(f"schedule must be one of {_SCHEDULES}, got {self.schedule!r}")
        if not 0.0 <= self.val_fraction < 1.0:
            raise InputError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.stop_epoch is not None and not 1 <= self.stop_epoch <= self.epochs:
            raise InputError(f"stop_epoch must be in [1, epochs={self.epochs}], got {self.stop_epoch}")
        if self.patience is not None and self.patience < 1:
            raise InputError(f"patience must be >= 1 or None, got {self.patience}")
        if self.time_limit is not None and not 0.0 <= self.time_limit < math.inf:
            raise InputError(f"time_limit must be a finite number of seconds >= 0 or None, got {self.time_limit}")
        if self.abandon_below is not None and not 0.0 <= self.abandon_below <= 100.0:
            raise InputError(f"abandon_below must be a score in [0, 100] or None, got {self.abandon_below}")
        if not 0.0 <= self.weight_decay < math.inf:
            raise InputError(f"weight_decay must be a finite number >= 0, got {self.weight_decay}")
        if not 0.0 <= self.warmup_epochs < math.inf:
            raise InputError(f"warmup_epochs must be a finite number >= 0, got {self.warmup_epochs}")
        if self.grad_clip is not None and not 0.0 < self.grad_clip < math.inf:
            raise InputError(f"grad_clip must be a finite number > 0 or None, got {self.grad_clip}")
        if self.seed < 0:
            raise InputError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.sparse_updates not in (True, False, "auto"):
            raise InputError(f"sparse_updates must be True, False or 'auto', got {self.sparse_updates!r}")
        if self.sparse_updates is True and self.weight_decay:
            raise InputError(
                "sparse_updates has no weight decay (it would move every row in every step); "
                "set weight_decay=0 or sparse_updates=False"
            )
        if self.precision not in _PRECISIONS:
            raise InputError(f"precision must be one of {_PRECISIONS}, got {self.precision!r}")
        if self.select_metric not in SELECT_METRICS:
            raise InputError(f"select_metric must be one of {SELECT_METRICS}, got {self.select_metric!r}")
        check_device(self.device)

    def record(self) -> dict[str, Any]:
        """The settings that decide what training computes, as the JSON record a checkpoint
        or a SOLAR run is matched by: every field but ``progress`` (display) and
        ``reuse_memory`` (where memory comes from), and without a field of
        :data:`LATER_FIELDS` while it holds the value runs recorded before it existed had."""
        record = asdict(self) | {"progress": None}
        del record["reuse_memory"]
        for name, earlier in LATER_FIELDS.items():
            if record[name] == earlier:
                del record[name]
        return record

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "TrainConfig":
        """Build from a dict, ignoring keys that are not config fields."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


@dataclass
class FitResult:
    """What :meth:`Trainer.fit` learned about the run.

    ``history`` has one entry per epoch: ``{"epoch", "loss", "seconds", "val": {...}}``;
    ``refit`` is the result of the refit phase (``TrainConfig.refit``), if one ran;
    ``epoch_seconds`` is the optimisation time of every epoch run, selection phase then
    refit (validation excluded); ``sparse_updates`` is whether the run used them (what
    ``TrainConfig.sparse_updates="auto"`` chose); ``stopped_by`` is the setting that stopped
    it early (``"patience"``, ``"time_limit"`` or ``"abandon_below"``; ``""``: none, or not
    recorded by the checkpoint it resumed from).
    """

    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = 0
    best_score: float = -math.inf
    stopped_early: bool = False
    refit: "FitResult | None" = None
    sparse_updates: bool = False
    stopped_by: str = ""

    @property
    def epoch_seconds(self) -> list[float]:
        refit = self.refit.epoch_seconds if self.refit is not None else []
        return [h["seconds"] for h in self.history] + refit

    @property
    def train_seconds(self) -> float:
        return float(sum(self.epoch_seconds))


def split_validation(n_rows: int, fraction: float, seed: int,
                     groups: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n_rows)`` into sorted ``(train_rows, val_rows)``.

    At least one row goes to each side when ``fraction > 0`` and ``n_rows >= 2``. With
    ``groups`` (``(n_rows,)`` codes ``0 ..``, :func:`holoxmc.data.groups.check_groups`), whole
    groups go to one side: groups in a seeded order until the validation side holds
    ``fraction`` of the rows (at least one group each side; one group alone: a row split).

    Example:
        >>> train, val = split_validation(10, 0.2, seed=0)
        >>> len(train), len(val)
        (8, 2)
        >>> groups = np.array([0, 0, 0, 1, 1, 2])
        >>> train, val = split_validation(6, 0.5, 0, groups=groups)
        >>> set(groups[val]).isdisjoint(groups[train])
        True
    """
    n_val = int(round(n_rows * fraction))
    if fraction > 0:
        n_val = min(max(n_val, 1), n_rows - 1)
    rng = np.random.default_rng([seed, 0x5EED])
    if groups is not None and fraction > 0 and len(groups) and int(groups.max()) >= 1:
        sizes = np.bincount(groups)
        order = rng.permutation(len(sizes))
        taken = min(max(int(np.searchsorted(np.cumsum(sizes[order]), n_val)) + 1, 1), len(sizes) - 1)
        held = np.zeros(len(sizes), bool)
        held[order[:taken]] = True
        return np.flatnonzero(~held[groups]), np.flatnonzero(held[groups])
    order = rng.permutation(n_rows)
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def training_autocast(precision: Precision, device_type: str) -> torch.autocast:
    """The autocast a training step's forward runs under: bfloat16 for ``"bfloat16"``, off
    for ``"float32"`` (see :class:`TrainConfig`)."""
    return torch.autocast(device_type, dtype=torch.bfloat16, enabled=precision == "bfloat16")


def lr_factor(schedule: Schedule, step: int, total_steps: int, warmup_steps: int = 0) -> float:
    """LR multiplier at optimisation ``step`` (0-based) of ``total_steps``.

    Example:
        >>> lr_factor("cosine", 0, 100), round(lr_factor("cosine", 50, 100), 3)
        (1.0, 0.5)
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(total_steps - warmup_steps, 1)
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if schedule == "linear":
        return 1.0 - progress
    return 1.0


def reachable(scores: Sequence[float], factors: Sequence[float]) -> float:
    """An optimistic bound on the best validation score a run can still reach, from its
    ``scores`` after each epoch so far and the learning-rate ``factors`` at the end of each of
    its epochs (all of them): the best so far plus, for every epoch left, the larger of its last
    two gains scaled by that epoch's factor over the current one's (a gain per unit of
    learning rate that does not grow: the library's networks learn on concave curves,
    ``benchmarks/results/auto_curves.json``). ``inf`` before three epochs (two gains).

    Example:
        >>> reachable([10.0, 20.0, 25.0], [1.0, 1.0, 1.0, 1.0, 1.0])  # 25 + 10 * 2
        45.0
        >>> reachable([10.0, 20.0, 25.0], [1.0, 1.0, 0.5, 0.25, 0.0])  # 25 + 10 * 0.25 / 0.5
        30.0
        >>> reachable([10.0, 20.0], [1.0, 1.0, 1.0])
        inf
    """
    done = len(scores)
    if done < 3:
        return math.inf
    gain = max(scores[-1] - scores[-2], scores[-2] - scores[-3], 0.0)
    now = factors[done - 1]
    best = max(scores)
    return best if now <= 0 else best + gain * sum(factors[done:]) / now


def standard_error(score: float, rows: int) -> float:
    """The standard error, in points, of a percentage ``score`` measured on ``rows`` rows.

    Example:
        >>> round(standard_error(50.0, 100), 2)
        5.0
    """
    p = min(max(score / 100.0, 0.0), 1.0)
    return 100.0 * math.sqrt(p * (1.0 - p) / max(rows, 1))


def _epoch_seed(seed: int, epoch: int) -> int:
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1, dtype=np.uint64)[0]) >> 1


def _same_shapes(saved: dict[str, Tensor], current: dict[str, Tensor]) -> bool:
    """Whether a checkpoint's weights ``saved`` fit the network whose state is ``current``
    (same names, same shapes): a checkpoint of another model or size does not."""
    return saved.keys() == current.keys() and all(saved[k].shape == current[k].shape for k in saved)


def _out_of_time(limit: float | None, begun: float, world: int) -> bool:
    """Whether more than ``limit`` seconds passed since ``begun`` (rank 0's answer on every rank)."""
    if limit is None:
        return False
    over = time.perf_counter() - begun > limit
    return bool(from_rank_zero(over)) if world > 1 else over


def _epoch_line(record: dict[str, Any], epochs: int) -> str:
    """``epoch 3/20: loss 0.1234, 1.2 s, val P@1 45.60 ...`` for the log."""
    val = "".join(f", val {name} {value:.2f}" for name, value in (record.get("val") or {}).items())
    return f"epoch {record['epoch']}/{epochs}: loss {record['loss']:.4f}, {record['seconds']:.1f} s{val}"


def _copy_state(module: nn.Module) -> dict[str, Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def _json_copy(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), for comparing with a checkpoint."""
    return json.loads(to_json(value))


def _check_like(state: dict[str, Tensor], network: nn.Module) -> None:
    """Refuse stored weights whose names or shapes differ from ``network``'s."""
    expected = {name: tuple(tensor.shape) for name, tensor in network.state_dict().items()}
    if {name: tuple(tensor.shape) for name, tensor in state.items()} != expected:
        raise ValueError("the stored best weights do not fit this network")


@dataclass
class _Plan:
    """What one :meth:`Trainer.fit` call trains, on which rows and with what: fixed once
    :meth:`Trainer._prepare` has made it.

    ``X_val``/``Y_val`` are the validation rows (carved from ``X_train`` when ``carved``;
    ``None`` when nothing is held out); ``initial_state`` is the weights before training,
    kept for the refit; ``fingerprint``, ``config_json`` and ``network_config`` are what a
    checkpoint must match to be resumed; ``begun`` is when :meth:`Trainer.fit` began.
    """

    network: Network
    X_train: sp.csr_matrix | np.ndarray
    Y_train: sp.csr_matrix
    train_rows: np.ndarray
    X_val: sp.csr_matrix | np.ndarray | None
    Y_val: sp.csr_matrix | None
    carved: bool
    device: torch.device
    rank: int
    world: int
    initial_state: dict[str, Tensor] | None
    sparse_updates: bool
    optimizers: list[torch.optim.Optimizer]
    steps_per_epoch: int
    total_steps: int
    warmup_steps: int
    run_dir: str | Path | None
    fingerprint: dict[str, Any]
    config_json: dict[str, Any]
    network_config: Any
    show: bool
    begun: float


@dataclass
class _Selection:
    """Model selection so far: the result, the best weights, the epochs since the best and
    the next epoch to train (``0``, or where a resumed checkpoint left off)."""

    result: FitResult
    best_state: dict[str, Tensor]
    since_best: int = 0
    next_epoch: int = 0


def _check_pairs(
    X_train: sp.csr_matrix | np.ndarray,
    Y_train: sp.csr_matrix,
    X_val: sp.csr_matrix | np.ndarray | None,
    Y_val: sp.csr_matrix | None,
) -> None:
    """Refuse a validation set without its labels (or labels without inputs), and training
    inputs and labels with different row counts."""
    if (X_val is None) != (Y_val is None):
        raise InputError("give both X_val and Y_val, or neither")
    if X_train.shape[0] != Y_train.shape[0]:
        raise InputError(f"X_train has {X_train.shape[0]} rows but Y_train has {Y_train.shape[0]}")


def _check_refit(cfg: TrainConfig, X_train: Any, Y_train: Any, Y_val: Any, carved: bool) -> None:
    """Refuse a refit that would join two shard stores, or whose validation labels are not
    the training labels (the refit trains on both)."""
    if cfg.refit and not carved and is_sharded(X_train):
        raise InputError("refit trains on the training and validation rows together, which would join two "
                         "shard stores: refit on one store with val_fraction instead")
    if cfg.refit and Y_val is not None and Y_val.shape[1] != Y_train.shape[1]:
        raise InputError(f"refit trains on the validation rows too, so their labels must be the training "
                         f"labels: Y_train has {Y_train.shape[1]} columns, Y_val {Y_val.shape[1]}")


def _held_out(
    cfg: TrainConfig,
    X_train: sp.csr_matrix | np.ndarray,
    Y_train: sp.csr_matrix,
    X_val: sp.csr_matrix | np.ndarray | None,
    Y_val: sp.csr_matrix | None,
    groups: np.ndarray | None = None,
) -> tuple[np.ndarray, sp.csr_matrix | np.ndarray | None, sp.csr_matrix | None]:
    """``(train_rows, X_val, Y_val)``: every row of ``X_train`` with the given validation set,
    else the seeded ``cfg.val_fraction`` split of its rows, whole ``groups`` to one side
    (``None, None`` when it holds out nothing)."""
    if X_val is not None:
        return np.arange(X_train.shape[0]), X_val, Y_val
    train_rows, val_rows = split_validation(X_train.shape[0], cfg.val_fraction, cfg.seed, groups)
    if not len(val_rows):
        return train_rows, None, None
    return train_rows, take_rows(X_train, val_rows), take_rows(Y_train, val_rows)


def _fingerprint(
    X_train: sp.csr_matrix | np.ndarray,
    Y_train: sp.csr_matrix,
    X_val: sp.csr_matrix | np.ndarray | None,
    Y_val: sp.csr_matrix | None,
    train_rows: np.ndarray,
    carved: bool,
    run_dir: str | Path | None,
) -> dict[str, Any]:
    """The data a checkpoint records and a resume must match: row counts, shape, and (with a
    ``run_dir``) a digest of the contents."""
    return {
        "n_train": int(len(train_rows)),
        "n_val": 0 if X_val is None else int(X_val.shape[0]),
        "shape": [int(X_train.shape[1]), int(Y_train.shape[1])],
        # carved validation rows are rows of X_train: its digest covers them
        "digest": None if run_dir is None else data_digest(X_train, Y_train, *(() if carved else (X_val, Y_val))),
    }


def _param_groups(optimizers: list[torch.optim.Optimizer]) -> list[dict[str, Any]]:
    """Every parameter group of ``optimizers`` (whose ``"lr"`` the schedule sets each step).

    Read afresh every epoch: ``load_state_dict`` (resume) replaces the group dicts."""
    return [group for optimizer in optimizers for group in optimizer.param_groups]


def _fused_params(optimizers: list[torch.optim.Optimizer]) -> list[Tensor]:
    """The parameters of ``optimizers`` that a fused kernel updates."""
    return [p for optimizer in optimizers if optimizer.defaults.get("fused")
            for group in optimizer.param_groups for p in group["params"]]


class Trainer:
    """Train a :class:`~holoxmc.backbones.network.Network` (any backbone with any head).

    Args:
        config: a :class:`TrainConfig` (defaults when omitted).

    Example:
        >>> trainer = Trainer(TrainConfig(epochs=5, seed=0))  # doctest: +SKIP
        >>> result = trainer.fit(network, X, Y)               # doctest: +SKIP
        >>> result.history[-1]["val"]["P@1"]                  # doctest: +SKIP
    """

    def __init__(self, config: TrainConfig | None = None):
        self.config = config or TrainConfig()

    def fit(
        self,
        network: Network,
        X_train: sp.csr_matrix | np.ndarray,
        Y_train: sp.csr_matrix,
        X_val: sp.csr_matrix | np.ndarray | None = None,
        Y_val: sp.csr_matrix | None = None,
        run_dir: str | Path | None = None,
        resume: bool = False,
        groups: np.ndarray | None = None,
    ) -> FitResult:
        """Train ``network`` in place and leave it holding the best validation weights.

        Args:
            network: the model; moved to ``config.device``.
            X_train: ``(n, D)`` CSR features or ``(n, T)`` token ids; Y_train: ``(n, L)`` binary CSR.
            X_val, Y_val: a validation set; when omitted, ``config.val_fraction`` of the
                training rows is held out (seeded). Never pass the test set.
            run_dir: where to write a checkpoint after every epoch (the refit phase's in
                ``run_dir/refit``); ``None`` writes nothing.
            resume: continue from ``run_dir``'s checkpoint when there is one.
            groups: ``(n,)`` group codes of the training rows: a carved validation split
                keeps each group on one side (:func:`split_validation`).

        Returns:
            a :class:`FitResult` with the per-epoch history and the selected epoch.
        """
        on_cpu = torch.device(self.config.device).type == "cpu"
        with reuse_freed_memory(on_cpu and self.config.reuse_memory):
            return self._fit(network, X_train, Y_train, X_val, Y_val, run_dir, resume, groups)

    def _fit(
        self,
        network: Network,
        X_train: sp.csr_matrix | np.ndarray,
        Y_train: sp.csr_matrix,
        X_val: sp.csr_matrix | np.ndarray | None,
        Y_val: sp.csr_matrix | None,
        run_dir: str | Path | None,
        resume: bool,
        groups: np.ndarray | None = None,
    ) -> FitResult:
        """:meth:`fit`'s work: prepare the run, resume it from ``run_dir``'s checkpoint when
        asked and there is one, train its epochs, then refit or keep the best weights."""
        plan = self._prepare(network, X_train, Y_train, X_val, Y_val, run_dir, begun=time.perf_counter(),
                             groups=groups)
        selection = self._resumed(plan) if resume and run_dir is not None else None
        if selection is None:
            selection = _Selection(FitResult(), _copy_state(network))
        selection.result.sparse_updates = plan.sparse_updates
        self._run_epochs(plan, selection)
        if plan.initial_state is not None and plan.X_val is not None:
            best_epoch = selection.result.best_epoch
            selection.result.refit = self._refit(plan, plan.initial_state, plan.X_val, best_epoch, resume)
        else:
            network.load_state_dict(selection.best_state)
        return selection.result

    def _prepare(
        self,
        network: Network,
        X_train: sp.csr_matrix | np.ndarray,
        Y_train: sp.csr_matrix,
        X_val: sp.csr_matrix | np.ndarray | None,
        Y_val: sp.csr_matrix | None,
        run_dir: str | Path | None,
        begun: float,
        groups: np.ndarray | None = None,
    ) -> _Plan:
        """Check the data, hold out the validation rows (unless given), move ``network`` to
        the device and build its optimizers: the :class:`_Plan` of the run."""
        cfg = self.config
        rank, world = process_group()
        _check_pairs(X_train, Y_train, X_val, Y_val)
        Y_train = as_labels(Y_train)  # shard-store rows stay on disk
        carved = X_val is None  # the validation rows are part of X_train
        _check_refit(cfg, X_train, Y_train, Y_val, carved)
        train_rows, X_val, Y_val = _held_out(cfg, X_train, Y_train, X_val, Y_val, groups)
        device = torch.device(cfg.device)
        network.to(device)
        initial_state = _copy_state(network) if cfg.refit else None
        sparse_updates = choose_sparse_updates(
            cfg.sparse_updates, network, X_train, epoch_order(X_train, train_rows, cfg.seed, 0),
            cfg.batch_size, weight_decay=cfg.weight_decay, device=device, world=world,
        )  # "auto" reads the batches the first epoch trains on (its order is drawn as in _epoch)
        sparse_tables = sparse_update_tables(network, sparse_updates, dist.get_backend() if world > 1 else None)
        optimizers = build_optimizers(network, sparse_tables, lr=cfg.lr, weight_decay=cfg.weight_decay, device=device)
        steps_per_epoch = math.ceil(len(train_rows) / cfg.batch_size)
        return _Plan(
            network=network, X_train=X_train, Y_train=Y_train, train_rows=train_rows, X_val=X_val, Y_val=Y_val,
            carved=carved, device=device, rank=rank, world=world, initial_state=initial_state,
            sparse_updates=sparse_updates, optimizers=optimizers, steps_per_epoch=steps_per_epoch,
            total_steps=steps_per_epoch * cfg.epochs, warmup_steps=int(round(cfg.warmup_epochs * steps_per_epoch)),
            run_dir=run_dir, fingerprint=_fingerprint(X_train, Y_train, X_val, Y_val, train_rows, carved, run_dir),
            config_json=cfg.record() | {"device": None},
            network_config=_json_copy(getattr(network, "config", None)),
            show=rank == 0 and (cfg.progress if cfg.progress is not None else sys.stderr.isatty()), begun=begun,
        )

    def _resumed(self, plan: _Plan) -> _Selection | None:
        """Load ``plan.run_dir``'s checkpoint into the network and optimizers: the selection
        it recorded, or ``None`` when there is no checkpoint.

        Raises:
            InputError: the checkpoint was made with another configuration, network or data.
        """
        checkpoint = load_checkpoint(plan.run_dir, plan.device) if plan.run_dir is not None else None
        if checkpoint is None:
            return None
        state = checkpoint["state"]
        another = InputError(f"{plan.run_dir}: the checkpoint was made with another configuration or data; "
                             "use the same options to resume, or a new run directory")
        # "network" is absent from checkpoints written before it was recorded
        if (state["config"] != plan.config_json or state["data"] != plan.fingerprint
                or state.get("network", plan.network_config) != plan.network_config):
            raise another
        try:
            plan.network.load_state_dict(checkpoint["model"])
            for optimizer, optimizer_state in zip(plan.optimizers, checkpoint["optimizers"], strict=True):
                optimizer.load_state_dict(optimizer_state)
            _check_like(checkpoint["best_model"], plan.network)
        except (RuntimeError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
            raise another from exc  # the optimizer states or weights do not fit this network
        result = FitResult(state["history"], state["best_epoch"], state["best_score"], state["stopped_early"],
                           stopped_by=str(state.get("stopped_by", "")))
        return _Selection(result, checkpoint["best_model"], since_best=state["since_best"], next_epoch=state["epoch"])

    def _run_epochs(self, plan: _Plan, selection: _Selection) -> None:
        """Train from ``selection.next_epoch`` to ``stop_epoch`` (or ``epochs``), validating,
        selecting and checkpointing after each epoch, until early stopping or the time limit.

        The data-parallel wrapper of the loss lives only as long as this call: the refit
        makes its own.
        """
        cfg = self.config
        loss_of = plan.network.loss if plan.world == 1 else data_parallel(plan.network, plan.device)
        for epoch in range(selection.next_epoch, cfg.stop_epoch or cfg.epochs):
            if selection.result.stopped_early:
                break
            record = self._epoch(plan, loss_of, epoch, selection.result)
            self._select(plan, selection, record)
            self._stop_if_out_of_time(plan, selection.result, epoch)
            self._stop_if_behind(plan, selection.result, epoch)
            if plan.run_dir is not None and plan.rank == 0:
                self._save(plan.run_dir, plan, selection, epoch)

    def _epoch(
        self,
        plan: _Plan,
        loss_of: Callable[[SparseBatch | Tensor, LabelBatch], Tensor],
        epoch: int,
        result: FitResult,
    ) -> dict[str, Any]:
        """Train epoch ``epoch`` (0-based) with its own ``(seed, epoch)`` order and dropout
        RNG, then score the validation rows: the epoch's history record."""
        cfg = self.config
        device = plan.device
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(_epoch_seed(cfg.seed, epoch) + plan.rank)  # each rank its own dropout masks
            order = epoch_order(plan.X_train, plan.train_rows, cfg.seed, epoch)
            loss, seconds = self._train_epoch(plan, loss_of, order, epoch, result)
        record: dict[str, Any] = {"epoch": epoch + 1, "loss": loss, "seconds": seconds}
        if plan.X_val is not None:
            val = None if plan.rank else evaluate_topk(
                plan.network, plan.X_val, plan.Y_val, ks=VALIDATION_KS, batch_size=cfg.eval_batch_size, device=device
            )
            record["val"] = val if plan.world == 1 else from_rank_zero(val)
        return record

    def _select(self, plan: _Plan, selection: _Selection, record: dict[str, Any]) -> None:
        """Add the epoch's ``record`` to the history (and the log); keep the network's weights
        when it scores best so far (the last epoch when nothing is held out), else count it
        towards ``patience``."""
        cfg = self.config
        result = selection.result
        # nothing held out: the last epoch wins
        score = record["val"][cfg.select_metric] if plan.X_val is not None else -record["loss"]
        result.history.append(record)
        if plan.rank == 0 and not plan.show:  # no progress bar: one line per epoch
            _LOG.info(_epoch_line(record, cfg.epochs))
        if score > result.best_score or plan.X_val is None:
            result.best_score, result.best_epoch, selection.since_best = float(score), record["epoch"], 0
            selection.best_state = _copy_state(plan.network)
        else:
            selection.since_best += 1
            if cfg.patience is not None and selection.since_best >= cfg.patience:
                result.stopped_early, result.stopped_by = True, "patience"

    def _stop_if_out_of_time(self, plan: _Plan, result: FitResult, epoch: int) -> None:
        """Stop early after epoch ``epoch`` (0-based) when ``time_limit`` has passed and more
        epochs were to come."""
        cfg = self.config
        last = epoch + 1 == (cfg.stop_epoch or cfg.epochs)
        if not (result.stopped_early or last) and _out_of_time(cfg.time_limit, plan.begun, plan.world):
            result.stopped_early, result.stopped_by = True, "time_limit"
            if plan.rank == 0:
                _LOG.info(f"stopped after epoch {epoch + 1}: time_limit {cfg.time_limit:g} s reached")

    def _stop_if_behind(self, plan: _Plan, result: FitResult, epoch: int) -> None:
        """Stop early after epoch ``epoch`` (0-based) when the validation score cannot reach
        ``abandon_below`` any more (:func:`reachable`, less its standard error)."""
        cfg = self.config
        epochs = cfg.stop_epoch or cfg.epochs
        if cfg.abandon_below is None or plan.X_val is None or result.stopped_early or epoch + 1 == epochs:
            return
        scores = [record["val"][cfg.select_metric] for record in result.history]
        steps = plan.total_steps / max(cfg.epochs, 1)  # per epoch
        factors = [lr_factor(cfg.schedule, max(int(steps * (e + 1)) - 1, 0), plan.total_steps, plan.warmup_steps)
                   for e in range(epochs)]
        bound = reachable(scores, factors)
        noise = standard_error(cfg.abandon_below, plan.X_val.shape[0])
        if bound < cfg.abandon_below - noise:
            result.stopped_early, result.stopped_by = True, "abandon_below"
            if plan.rank == 0:
                _LOG.info(f"stopped after epoch {epoch + 1}: {cfg.select_metric} can reach about {bound:.2f}, "
                          f"below abandon_below {cfg.abandon_below:g} less its standard error {noise:.2f}")

    def _save(self, run_dir: str | Path, plan: _Plan, selection: _Selection, epoch: int) -> None:
        """Checkpoint the run after epoch ``epoch`` (0-based) in ``run_dir``: weights, best
        weights, optimizer states and everything :meth:`_resumed` needs to carry on exactly."""
        cfg = self.config
        result = selection.result
        save_checkpoint(
            run_dir,
            model=plan.network.state_dict(),
            best_model=selection.best_state,
            optimizers=plan.optimizers,
            state={
                "epoch": epoch + 1,
                "config": plan.config_json,
                "network": plan.network_config,
                "data": plan.fingerprint,
                "rng": {"scheme": "per-epoch (seed, epoch)", "seed": cfg.seed, "next_epoch": epoch + 1},
                "history": result.history,
                "best_epoch": result.best_epoch,
                "best_score": result.best_score,
                "since_best": selection.since_best,
                "stopped_early": result.stopped_early,
                "stopped_by": result.stopped_by,
            },
        )

    def _refit(
        self,
        plan: _Plan,
        initial_state: dict[str, Tensor],
        X_val: sp.csr_matrix | np.ndarray,
        best_epoch: int,
        resume: bool,
    ) -> FitResult:
        """Train the network again from its ``initial_state`` on the training and validation
        rows (``X_val``, ``plan.Y_val``) together, stopping at the selected ``best_epoch``
        (checkpoints in ``run_dir/refit``); the network keeps the refit weights."""
        plan.network.load_state_dict(initial_state)
        X_train, Y_train = plan.X_train, plan.Y_train
        if not plan.carved:  # refit on the given training and validation sets together
            both = [X_train, X_val]
            X_train = sp.vstack(both, format="csr") if sp.issparse(X_train) else np.concatenate(both)
            Y_train = sp.vstack([Y_train, plan.Y_val], format="csr")
        refit_config = replace(self.config, stop_epoch=best_epoch, val_fraction=0.0, patience=None, refit=False,
                               sparse_updates=plan.sparse_updates, time_limit=None)
        folder = None if plan.run_dir is None else Path(plan.run_dir) / REFIT_DIR
        return Trainer(refit_config).fit(plan.network, X_train, Y_train, run_dir=folder, resume=resume)

    def _train_epoch(
        self,
        plan: _Plan,
        loss_of: Callable[[SparseBatch | Tensor, LabelBatch], Tensor],
        order: np.ndarray,
        epoch: int,
        result: FitResult,
    ) -> tuple[float, float]:
        """One pass over ``order``; returns ``(mean loss, optimisation seconds)``.

        ``loss_of`` is ``network.loss``, or its data-parallel wrapper inside a process group,
        where this rank trains on its share of every batch.

        Raises:
            TrainingDiverged: the epoch's mean loss is not finite.
        """
        cfg = self.config
        plan.network.train()
        groups, fused_params = _param_groups(plan.optimizers), _fused_params(plan.optimizers)
        total_loss = torch.zeros((), device=plan.device)
        last_val = result.history[-1].get("val", {}).get(cfg.select_metric) if result.history else None
        bar = tqdm(
            total=plan.steps_per_epoch, desc=f"epoch {epoch + 1}/{cfg.epochs}", disable=not plan.show, leave=False,
            file=sys.stderr,
        )
        start = time.perf_counter()
        with watching(plan.optimizers, plan.network):  # sparse updates: catch up rows before reads
            for i in range(plan.steps_per_epoch):
                batch = order[i * cfg.batch_size : (i + 1) * cfg.batch_size]
                loss, rows, weight = self._step(plan, loss_of, batch, epoch * plan.steps_per_epoch + i,
                                                groups, fused_params)
                if weight:
                    total_loss += loss.detach() * len(rows)
                if plan.show:
                    bar.update(1)
                    if i % 10 == 0:
                        bar.set_postfix(loss=f"{loss.item():.4f}",
                                        val_p1="-" if last_val is None else f"{last_val:.2f}")
        bring_up_to_date(plan.optimizers)  # the weights dense Adam would hold, to evaluate and save
        if plan.world > 1:
            sum_over_ranks(total_loss)
        mean_loss = float(total_loss) / max(len(order), 1)
        if not math.isfinite(mean_loss):
            raise TrainingDiverged(f"training diverged in epoch {epoch + 1}: the loss is {mean_loss} "
                                   f"({divergence_hint(cfg, plan.network)})")
        seconds = time.perf_counter() - start
        bar.close()
        return mean_loss, seconds

    def _step(
        self,
        plan: _Plan,
        loss_of: Callable[[SparseBatch | Tensor, LabelBatch], Tensor],
        batch: np.ndarray,
        step: int,
        groups: list[dict[str, Any]],
        fused_params: list[Tensor],
    ) -> tuple[Tensor, np.ndarray, float]:
        """One optimisation step on the training rows ``batch`` at step ``step`` (0-based, over
        the whole schedule): set the scheduled learning rate on ``groups``, compute the loss
        (this rank's share of ``batch`` in a process group), back-propagate, clip, step.

        Returns:
            ``(loss, rows, weight)``: the loss of the rows this rank trained on and the
            weight its gradient was scaled by (``1.0`` in one process).
        """
        cfg = self.config
        factor = lr_factor(cfg.schedule, step, plan.total_steps, plan.warmup_steps)
        for group in groups:
            group["lr"] = cfg.lr * factor
        rows, weight = (batch, 1.0) if plan.world == 1 else share_of_batch(batch, plan.rank, plan.world)
        with training_autocast(cfg.precision, plan.device.type):
            x, labels = input_batch(plan.X_train, rows).to(plan.device), label_batch(plan.Y_train, rows).to(plan.device)
            loss = loss_of(x, labels)
        for optimizer in plan.optimizers:
            optimizer.zero_grad(set_to_none=True)
        (loss if weight == 1.0 else loss * weight).backward()
        if cfg.grad_clip is not None:
            clip_grad_norm_(plan.network.parameters(), cfg.grad_clip)
        for optimizer in plan.optimizers:
            optimizer.step()
        if fused_params:  # the fused kernel writes in place without bumping version counters,
            # which caches keyed on ``param._version`` (e.g. a folded decoder) rely on
            torch.autograd.graph.increment_version(fused_params)
        return loss, rows, weight

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
from collections.abc import Callable
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
LATER_FIELDS: dict[str, Any] = {"precision": "float32", "time_limit": None}


class TrainableNetwork(Protocol):
    """What the trainer needs from a model (``holoxmc.backbones.Network`` satisfies it)."""

    def loss(self, x: SparseBatch | Tensor, labels: LabelBatch) -> Tensor: ...

    def topk(self, x: SparseBatch | Tensor, k: int) -> tuple[Tensor, Tensor]: ...


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
    ``TrainConfig.sparse_updates="auto"`` chose).
    """

    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = 0
    best_score: float = -math.inf
    stopped_early: bool = False
    refit: "FitResult | None" = None
    sparse_updates: bool = False

    @property
    def epoch_seconds(self) -> list[float]:
        refit = self.refit.epoch_seconds if self.refit is not None else []
        return [h["seconds"] for h in self.history] + refit

    @property
    def train_seconds(self) -> float:
        return float(sum(self.epoch_seconds))


def split_validation(n_rows: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n_rows)`` into sorted ``(train_rows, val_rows)``.

    At least one row goes to each side when ``fraction > 0`` and ``n_rows >= 2``.

    Example:
        >>> train, val = split_validation(10, 0.2, seed=0)
        >>> len(train), len(val)
        (8, 2)
    """
    n_val = int(round(n_rows * fraction))
    if fraction > 0:
        n_val = min(max(n_val, 1), n_rows - 1)
    order = np.random.default_rng([seed, 0x5EED]).permutation(n_rows)
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

        Returns:
            a :class:`FitResult` with the per-epoch history and the selected epoch.
        """
        on_cpu = torch.device(self.config.device).type == "cpu"
        with reuse_freed_memory(on_cpu and self.config.reuse_memory):
            return self._fit(network, X_train, Y_train, X_val, Y_val, run_dir, resume)

    def _fit(
        self,
        network: Network,
        X_train: sp.csr_matrix | np.ndarray,
        Y_train: sp.csr_matrix,
        X_val: sp.csr_matrix | np.ndarray | None,
        Y_val: sp.csr_matrix | None,
        run_dir: str | Path | None,
        resume: bool,
    ) -> FitResult:
        cfg = self.config
        begun = time.perf_counter()
        rank, world = process_group()
        if (X_val is None) != (Y_val is None):
            raise InputError("give both X_val and Y_val, or neither")
        if X_train.shape[0] != Y_train.shape[0]:
            raise InputError(f"X_train has {X_train.shape[0]} rows but Y_train has {Y_train.shape[0]}")
        Y_train = as_labels(Y_train)  # shard-store rows stay on disk
        carved = X_val is None  # the validation rows are part of X_train
        if cfg.refit and not carved and is_sharded(X_train):
            raise InputError("refit trains on the training and validation rows together, which would join two "
                             "shard stores: refit on one store with val_fraction instead")
        if cfg.refit and Y_val is not None and Y_val.shape[1] != Y_train.shape[1]:
            raise InputError(f"refit trains on the validation rows too, so their labels must be the training "
                             f"labels: Y_train has {Y_train.shape[1]} columns, Y_val {Y_val.shape[1]}")
        if X_val is None:
            train_rows, val_rows = split_validation(X_train.shape[0], cfg.val_fraction, cfg.seed)
            X_val, Y_val = (take_rows(X_train, val_rows), take_rows(Y_train, val_rows)) if len(val_rows) else (None, None)
        else:
            train_rows = np.arange(X_train.shape[0])
        device = torch.device(cfg.device)
        network.to(device)
        initial_state = _copy_state(network) if cfg.refit else None
        sparse_updates = choose_sparse_updates(
            cfg.sparse_updates, network, X_train, epoch_order(X_train, train_rows, cfg.seed, 0),
            cfg.batch_size, weight_decay=cfg.weight_decay, device=device, world=world,
        )  # "auto" reads the batches the first epoch trains on (its order is drawn as below)
        sparse_tables = sparse_update_tables(network, sparse_updates, dist.get_backend() if world > 1 else None)
        optimizers = build_optimizers(network, sparse_tables, lr=cfg.lr, weight_decay=cfg.weight_decay, device=device)
        steps_per_epoch = math.ceil(len(train_rows) / cfg.batch_size)
        total_steps = steps_per_epoch * cfg.epochs
        warmup_steps = int(round(cfg.warmup_epochs * steps_per_epoch))

        result = FitResult()
        best_state = _copy_state(network)
        since_best = 0
        fingerprint = {
            "n_train": int(len(train_rows)),
            "n_val": 0 if X_val is None else int(X_val.shape[0]),
            "shape": [int(X_train.shape[1]), int(Y_train.shape[1])],
            # carved validation rows are rows of X_train: its digest covers them
            "digest": None if run_dir is None else data_digest(X_train, Y_train, *(() if carved else (X_val, Y_val))),
        }
        config_json = cfg.record() | {"device": None}
        network_config = _json_copy(getattr(network, "config", None))
        start_epoch = 0
        if resume and run_dir is not None:
            checkpoint = load_checkpoint(run_dir, device)
            if checkpoint is not None:
                state = checkpoint["state"]
                another = InputError(f"{run_dir}: the checkpoint was made with another configuration or data; "
                                     "use the same options to resume, or a new run directory")
                # "network" is absent from checkpoints written before it was recorded
                if (state["config"] != config_json or state["data"] != fingerprint
                        or state.get("network", network_config) != network_config):
                    raise another
                try:
                    network.load_state_dict(checkpoint["model"])
                    for optimizer, optimizer_state in zip(optimizers, checkpoint["optimizers"], strict=True):
                        optimizer.load_state_dict(optimizer_state)
                    _check_like(checkpoint["best_model"], network)
                except (RuntimeError, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
                    raise another from exc  # the optimizer states or weights do not fit this network
                best_state = checkpoint["best_model"]
                start_epoch = state["epoch"]
                since_best = state["since_best"]
                result = FitResult(state["history"], state["best_epoch"], state["best_score"], state["stopped_early"])
        result.sparse_updates = sparse_updates
        loss_of = network.loss if world == 1 else data_parallel(network, device)

        show = rank == 0 and (cfg.progress if cfg.progress is not None else sys.stderr.isatty())
        for epoch in range(start_epoch, cfg.stop_epoch or cfg.epochs):
            if result.stopped_early:
                break
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                torch.manual_seed(_epoch_seed(cfg.seed, epoch) + rank)  # each rank its own dropout masks
                order = epoch_order(X_train, train_rows, cfg.seed, epoch)
                loss, seconds = self._train_epoch(
                    network, loss_of, optimizers, X_train, Y_train, order, epoch, steps_per_epoch,
                    total_steps, warmup_steps, device, show, result,
                )
            record: dict[str, Any] = {"epoch": epoch + 1, "loss": loss, "seconds": seconds}
            if X_val is not None:
                val = None if rank else evaluate_topk(
                    network, X_val, Y_val, ks=VALIDATION_KS, batch_size=cfg.eval_batch_size, device=device
                )
                record["val"] = val if world == 1 else from_rank_zero(val)
                score = record["val"][cfg.select_metric]
            else:
                score = -loss  # nothing held out: the last epoch wins
            result.history.append(record)
            if rank == 0 and not show:  # no progress bar: one line per epoch
                _LOG.info(_epoch_line(record, cfg.epochs))
            if score > result.best_score or X_val is None:
                result.best_score, result.best_epoch, since_best = float(score), epoch + 1, 0
                best_state = _copy_state(network)
            else:
                since_best += 1
                if cfg.patience is not None and since_best >= cfg.patience:
                    result.stopped_early = True
            last = epoch + 1 == (cfg.stop_epoch or cfg.epochs)
            if not (result.stopped_early or last) and _out_of_time(cfg.time_limit, begun, world):
                result.stopped_early = True
                if rank == 0:
                    _LOG.info(f"stopped after epoch {epoch + 1}: time_limit {cfg.time_limit:g} s reached")
            if run_dir is not None and rank == 0:
                save_checkpoint(
                    run_dir,
                    model=network.state_dict(),
                    best_model=best_state,
                    optimizers=optimizers,
                    state={
                        "epoch": epoch + 1,
                        "config": config_json,
                        "network": network_config,
                        "data": fingerprint,
                        "rng": {"scheme": "per-epoch (seed, epoch)", "seed": cfg.seed, "next_epoch": epoch + 1},
                        "history": result.history,
                        "best_epoch": result.best_epoch,
                        "best_score": result.best_score,
                        "since_best": since_best,
                        "stopped_early": result.stopped_early,
                    },
                )
        del loss_of  # a data-parallel wrapper must not outlive its phase: the refit makes its own
        if initial_state is not None and X_val is not None:
            network.load_state_dict(initial_state)
            if not carved:  # refit on the given training and validation sets together
                both = [X_train, X_val]
                X_train = sp.vstack(both, format="csr") if sp.issparse(X_train) else np.concatenate(both)
                Y_train = sp.vstack([Y_train, Y_val], format="csr")
            refit_config = replace(cfg, stop_epoch=result.best_epoch, val_fraction=0.0, patience=None, refit=False,
                                   sparse_updates=sparse_updates, time_limit=None)
            folder = None if run_dir is None else Path(run_dir) / REFIT_DIR
            result.refit = Trainer(refit_config).fit(network, X_train, Y_train, run_dir=folder, resume=resume)
        else:
            network.load_state_dict(best_state)
        return result

    def _train_epoch(
        self,
        network: Network,
        loss_of: Callable[[SparseBatch | Tensor, LabelBatch], Tensor],
        optimizers: list[torch.optim.Optimizer],
        X: sp.csr_matrix | np.ndarray,
        Y: sp.csr_matrix,
        order: np.ndarray,
        epoch: int,
        steps_per_epoch: int,
        total_steps: int,
        warmup_steps: int,
        device: torch.device,
        show: bool,
        result: FitResult,
    ) -> tuple[float, float]:
        """One pass over ``order``; returns ``(mean loss, optimisation seconds)``.

        ``loss_of`` is ``network.loss``, or its data-parallel wrapper inside a process group,
        where this rank trains on its share of every batch.
        """
        cfg = self.config
        rank, world = process_group()
        network.train()
        groups = [group for optimizer in optimizers for group in optimizer.param_groups]
        fused_params = [p for optimizer in optimizers if optimizer.defaults.get("fused")
                        for group in optimizer.param_groups for p in group["params"]]
        total_loss = torch.zeros((), device=device)
        last_val = result.history[-1].get("val", {}).get(cfg.select_metric) if result.history else None
        bar = tqdm(
            total=steps_per_epoch, desc=f"epoch {epoch + 1}/{cfg.epochs}", disable=not show, leave=False,
            file=sys.stderr,
        )
        start = time.perf_counter()
        with watching(optimizers, network):  # sparse updates: catch up rows before reads
            for i in range(steps_per_epoch):
                rows = order[i * cfg.batch_size : (i + 1) * cfg.batch_size]
                factor = lr_factor(cfg.schedule, epoch * steps_per_epoch + i, total_steps, warmup_steps)
                for group in groups:
                    group["lr"] = cfg.lr * factor
                rows, weight = (rows, 1.0) if world == 1 else share_of_batch(rows, rank, world)
                with training_autocast(cfg.precision, device.type):
                    loss = loss_of(input_batch(X, rows).to(device), label_batch(Y, rows).to(device))
                for optimizer in optimizers:
                    optimizer.zero_grad(set_to_none=True)
                (loss if weight == 1.0 else loss * weight).backward()
                if cfg.grad_clip is not None:
                    clip_grad_norm_(network.parameters(), cfg.grad_clip)
                for optimizer in optimizers:
                    optimizer.step()
                if fused_params:  # the fused kernel writes in place without bumping version counters,
                    # which caches keyed on ``param._version`` (e.g. a folded decoder) rely on
                    torch.autograd.graph.increment_version(fused_params)
                if weight:
                    total_loss += loss.detach() * len(rows)
                if show:
                    bar.update(1)
                    if i % 10 == 0:
                        bar.set_postfix(loss=f"{loss.item():.4f}", val_p1="-" if last_val is None else f"{last_val:.2f}")
        bring_up_to_date(optimizers)  # the weights dense Adam would hold, to evaluate and save
        if world > 1:
            sum_over_ranks(total_loss)
        mean_loss = float(total_loss) / max(len(order), 1)
        if not math.isfinite(mean_loss):
            raise TrainingDiverged(f"training diverged in epoch {epoch + 1}: the loss is {mean_loss} "
                                   f"(lr {cfg.lr}: try a smaller learning rate, or grad_clip)")
        seconds = time.perf_counter() - start
        bar.close()
        return mean_loss, seconds

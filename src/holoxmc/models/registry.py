"""One registry of the head kinds: ``head name -> Family`` (how it fits, its default
settings, the settings that apply to it, how it loads and reports). The estimator looks a
head up here and nowhere else branches on its name; a new head kind plugs in with one entry.

Example:
    >>> FAMILIES["solar"].defaults["lr"], "hidden" in FAMILIES["linear"].settings
    (0.005, False)
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import scipy.sparse as sp
from torch import Tensor

from holoxmc.distributed import scratch_folder
from holoxmc.errors import InputError
from holoxmc.models.base import FitSettings, FittedModel
from holoxmc.models.network.fusion import FUSION_OPTIONS, NETWORK_HEAD, FusionPlan, fit_fusion, fusion_report, load_fusion
from holoxmc.models.linear.model import LinearModel
from holoxmc.models.network.model import MemberData, NetworkPlan, check_plan_fits, fit_networks, \
    load_network, network_options, report_fields, takes_code_dim
from holoxmc.models.rerank.model import RerankModel
from holoxmc.models.solar.model import SolarModel
from holoxmc.presets import HEAD_DEFAULTS, network_defaults
from holoxmc.seeding import member_seeds
from holoxmc.settings import HEAD_SETTINGS, heads_taking
from holoxmc.train import FitResult, TrainConfig
from holoxmc.models.linear.fit import SELECT_METRIC, LinearConfig, fit_linear
from holoxmc.models.rerank.fit import RerankConfig, fit_rerank
from holoxmc.models.solar.fit import DONE_FILE, SolarConfig, chunk_dir, fit_solar

__all__ = ["Family", "FitData", "FAMILIES", "HEADS", "NETWORK_SETTINGS", "family", "streaming_heads"]

#: Estimator keywords that configure or train a network.
NETWORK_SETTINGS = ("dim", "hidden", "dropout", "linear_width", "epochs", "batch_size", "lr", "weight_decay",
                    "sparse_updates", "schedule", "warmup_epochs", "grad_clip", "patience", "time_limit", "n_models",
                    "precision")
#: Estimator keywords that some heads only take: the settings table says which
#: (:data:`holoxmc.settings.HEAD_SETTINGS`); changing one for another head is refused.
HEAD_SPECIFIC = HEAD_SETTINGS


def _takes(head: str) -> frozenset[str]:
    """The settings of :data:`HEAD_SPECIFIC` that the settings table gives ``head``."""
    return frozenset(name for name in HEAD_SPECIFIC if head in heads_taking(name))


@dataclass(frozen=True)
class FitData:
    """The checked training data and where the fit checkpoints."""

    X: Any
    Y: sp.csr_matrix
    X_val: Any
    Y_val: sp.csr_matrix | None
    run_dir: str | Path | None
    resume: bool


@dataclass(frozen=True)
class Family:
    """One head kind.

    Attributes:
        head: its name.
        defaults: values of the settings the estimator leaves at ``None``.
        settings: which of :data:`HEAD_SPECIFIC` apply to it (the settings table's rows that
            name it, :func:`holoxmc.settings.heads_taking`).
        backbones: the backbones it takes.
        attribute: the fitted attribute that serves its model (``network_``, ``solar_``, ``linear_``).
        plan: ``(settings, n_labels, n_features) -> plan``: its settings (a frozen
            :class:`~holoxmc.models.base.FitSettings`) resolved and checked against the data's
            sizes, before any training.
        fit: ``(settings, plan, data) -> (model, fit results)``.
        load: ``(settings, folder, config.json, tensors) -> model``.
        public: the object :attr:`attribute` shows (the network, or the model itself).
        report: ``fit results -> {"best_epoch", "sparse_updates", "epoch_seconds", ...}``.
        code_dim: whether it has a label-code width d' (the ``dim`` setting).
        jobs_apart: whether it trains as independent jobs (``workers``, ``ray_address``
            spread them without an ensemble).
        refit_from: ``fitted estimator -> settings`` that retrain it on every row with what
            its validation rows chose (``None``: it cannot be refit so).
        kept_from_selection: attributes of its served model that a refit winner keeps from
            its selection run (the linear model's Platt calibration, fitted on validation rows).
        streams: whether it trains and scores from a shard store batch by batch (on the fc
            backbone; :mod:`holoxmc.train.streaming`).
        holds_out: whether a fit without ``X_val`` and without ``refit`` holds the seeded
            ``val_fraction`` share of the rows out of training (what ``predict``'s rule is then
            chosen on); the re-rank model trains on every row.
    """

    head: str
    defaults: Mapping[str, Any]
    settings: frozenset[str]
    backbones: tuple[str, ...]
    attribute: str
    plan: Callable[[FitSettings, int, int], Any]
    fit: Callable[[FitSettings, Any, FitData], tuple[FittedModel, list[FitResult]]]
    load: Callable[[FitSettings, Path, dict[str, Any], dict[str, Tensor]], FittedModel]
    public: Callable[[Any], Any]
    report: Callable[[list[FitResult]], dict[str, Any]]
    code_dim: bool = False
    jobs_apart: bool = False
    refit_from: Callable[[Any], dict[str, Any]] | None = None
    kept_from_selection: tuple[str, ...] = ()
    streams: bool = False
    holds_out: bool = True


# ---------------------------------------------------------------------------- networks
def _network_plan(s: FitSettings, n_labels: int, n_features: int, head: str | None = None,
                  head_options: dict[str, Any] | None = None) -> NetworkPlan:
    head = s.head if head is None else head
    given = s.head_options if head_options is None else head_options
    options = network_options(s.backbone, head, hidden=s.hidden, dropout=s.dropout,
                              linear_width=s.linear_width, dim=s.dim,
                              head_options=network_defaults(s.backbone, head) | dict(given or {}))
    size = "n_features" if s.backbone == "fc" else "vocab_size"
    build = {"backbone": s.backbone, "head": head, "n_labels": n_labels, size: n_features, **options}
    plan = NetworkPlan(build, s.train, str(s.device))
    check_plan_fits(plan, s.n_models)
    return plan


def _fit_networks(s: FitSettings, plan: NetworkPlan, data: FitData) -> tuple[FittedModel, list[FitResult]]:
    members = MemberData(plan, data.X, data.Y, data.X_val, data.Y_val, data.resume)
    # n_jobs (scikit-learn's name) sets the workers of an ensemble; one network trains here
    workers = s.workers if s.n_jobs is None or s.n_models > 1 else 1
    return fit_networks(plan, member_seeds(s.seed, s.n_models), members, run_dir=data.run_dir,
                        workers=workers, ray_address=s.ray_address)


def _load_network(s: FitSettings, path: Path, config: dict[str, Any], tensors: dict[str, Tensor]) -> FittedModel:
    return load_network(config["network"], tensors, config["n_labels"], s.device, path / "model.safetensors")


def _network_refit(candidate: Any) -> dict[str, Any]:
    """A network's best epoch as its number of epochs, trained without a validation share
    (the schedule then ends at that epoch)."""
    return {"epochs": max(1, int(candidate.fit_results_[0].best_epoch)), "val_fraction": 0.0}


def _network_family(head: str) -> Family:
    return Family(head, HEAD_DEFAULTS[head], _takes(head), ("fc", "cnn", "lstm"), "network_", _network_plan,
                  _fit_networks, _load_network, lambda model: model.network, report_fields,
                  code_dim=takes_code_dim(head), refit_from=_network_refit, streams=True)


# ---------------------------------------------------------------------------- text network + TF-IDF
def _fusion_plan(s: FitSettings, n_labels: int, n_features: int) -> FusionPlan:
    if s.ray_address is not None:
        raise InputError("head 'xr' trains on this machine (workers: the linear stage's processes); "
                         "ray_address does not apply to it")
    options = dict(s.head_options or {})
    fusion = {name: options.pop(name) for name in FUSION_OPTIONS if name in options}
    C = fusion.pop("C", LinearConfig().C_grid[0])
    network = _network_plan(s, n_labels, n_features, head=NETWORK_HEAD, head_options=options)
    return FusionPlan(network.build, network.train, network.device, linear=LinearConfig(C=C, seed=s.seed),
                      **fusion)


def _fit_fusion(s: FitSettings, plan: FusionPlan, data: FitData) -> tuple[FittedModel, list[FitResult]]:
    return fit_fusion(plan, member_seeds(s.seed, 1)[0], data.X, data.Y, data.X_val, data.Y_val,
                      val_fraction=s.val_fraction, run_dir=data.run_dir, resume=data.resume, workers=s.workers)


def _load_fusion(s: FitSettings, path: Path, config: dict[str, Any], tensors: dict[str, Tensor]) -> FittedModel:
    plan = _fusion_plan(s, config["n_labels"], config["n_features"])
    return load_fusion(config["network"], tensors, config["n_labels"], plan, path / "model.safetensors")


# ---------------------------------------------------------------------------- SOLAR
#: SolarConfig fields a user sets through ``head_options`` (the rest come from the classifier).
SOLAR_OPTIONS = frozenset(f.name for f in fields(SolarConfig)) - {"hidden", "dropout", "seed", "device", "train"}


def _solar_plan(s: FitSettings, n_labels: int, n_features: int) -> SolarConfig:
    options = dict(s.head_options or {})
    unknown = sorted(set(options) - SOLAR_OPTIONS)
    if unknown:
        raise InputError(f"options {unknown} are not accepted by head 'solar' (accepted: {sorted(SOLAR_OPTIONS)})")
    assert s.hidden is not None and s.dropout is not None  # SOLAR's head defaults set both
    config = SolarConfig(hidden=s.hidden, dropout=s.dropout, seed=s.seed, device=s.device, train=s.train, **options)
    config.resolved(n_labels=n_labels, n_features=n_features)  # its checks against the data's sizes
    return config


def _fit_solar(s: FitSettings, config: SolarConfig, data: FitData) -> tuple[FittedModel, list[FitResult]]:
    """The K chunk models as independent jobs in ``run_dir`` (a scratch folder when ``None``,
    removed afterwards, or by a later fit if this process is killed); re-running on the same
    folder retrains only unfinished chunks."""
    with scratch_folder() as scratch:
        folder = Path(data.run_dir) if data.run_dir is not None else Path(scratch)
        model = fit_solar(data.X, data.Y, config, folder, X_val=data.X_val, Y_val=data.Y_val,
                          workers=s.workers, ray_address=s.ray_address)
        return model, [FitResult(history=_solar_history(folder, model.config.n_chunks))]


def _solar_history(run_dir: Path, n_chunks: int) -> list[dict[str, Any]]:
    """Per-epoch history of a SOLAR run: the seconds every chunk spent on epoch ``e``, summed
    (the compute a single worker would need), from the chunks' done-markers."""
    per_chunk = [json.loads((chunk_dir(run_dir, k) / DONE_FILE).read_text())["epoch_seconds"] for k in range(n_chunks)]
    n_epochs = max(len(seconds) for seconds in per_chunk)
    return [{"epoch": e + 1, "seconds": float(sum(s[e] for s in per_chunk if e < len(s)))} for e in range(n_epochs)]


def _solar_report(results: list[FitResult]) -> dict[str, Any]:
    """SOLAR's epochs are per chunk: no one best epoch; ``epoch_seconds`` sum the chunks."""
    return {"best_epoch": None, "sparse_updates": None, "epoch_seconds": results[0].epoch_seconds}


# ---------------------------------------------------------------------------- linear
#: LinearConfig fields a user sets through ``head_options`` (the seed comes from the classifier).
LINEAR_OPTIONS = frozenset(f.name for f in fields(LinearConfig)) - {"seed"}


def _cpu_config(s: FitSettings, config_type: Callable[..., Any], accepted: frozenset[str]) -> Any:
    """The config of a liblinear head (``linear``, ``rerank``) from ``head_options``, on the CPU only."""
    if str(s.device).partition(":")[0] != "cpu":  # also the one error for a name that is no device
        raise InputError(f"head {s.head!r} trains and scores with liblinear and scipy on the CPU, not {s.device!r}")
    options = dict(s.head_options or {})
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise InputError(f"options {unknown} are not accepted by head {s.head!r} (accepted: {sorted(accepted)})")
    return config_type(seed=s.seed, **options)


def _linear_plan(s: FitSettings, n_labels: int, n_features: int) -> LinearConfig:
    config: LinearConfig = _cpu_config(s, LinearConfig, LINEAR_OPTIONS)
    TrainConfig(val_fraction=s.val_fraction)  # the trainer's own check of the validation share
    return config


def _fit_linear(s: FitSettings, config: LinearConfig, data: FitData) -> tuple[FittedModel, list[FitResult]]:
    model, history = fit_linear(data.X, data.Y, config, data.X_val, data.Y_val, val_fraction=s.val_fraction,
                                refit=bool(s.refit), workers=s.workers, ray_address=s.ray_address)
    return model, [FitResult(history=history)]


def _load_linear(s: FitSettings, path: Path, config: dict[str, Any], tensors: dict[str, Tensor]) -> FittedModel:
    weights = {name.removeprefix("linear."): value for name, value in tensors.items()}
    try:
        return LinearModel.from_tensors(weights, config["n_features"], config["n_labels"],
                                        _linear_plan(s, config["n_labels"], config["n_features"]).normalize_rows)
    except InputError as exc:
        raise InputError(f"{path / 'model.safetensors'}: {exc}") from None


def _linear_refit(candidate: Any) -> dict[str, Any]:
    """The ``C`` the candidate's validation rows chose (its last fit when none was scored)."""
    chosen = [fit for fit in candidate.fit_results_[0].history if "val" in fit]
    best = max(chosen, key=lambda fit: fit["val"][SELECT_METRIC]) if chosen else candidate.fit_results_[0].history[-1]
    return {"head_options": {"C": float(best["C"])}}


def _linear_report(results: list[FitResult]) -> dict[str, Any]:
    """No epochs: one liblinear fit per C tried, and the refit, under ``fits``."""
    return {"best_epoch": None, "sparse_updates": None, "epoch_seconds": [], "fits": results[0].history}


# ---------------------------------------------------------------------------- rerank
#: RerankConfig fields a user sets through ``head_options`` (the seed comes from the classifier).
RERANK_OPTIONS = frozenset(f.name for f in fields(RerankConfig)) - {"seed"}


def _rerank_plan(s: FitSettings, n_labels: int, n_features: int) -> RerankConfig:
    config: RerankConfig = _cpu_config(s, RerankConfig, RERANK_OPTIONS)
    return config


def _fit_rerank(s: FitSettings, config: RerankConfig, data: FitData) -> tuple[FittedModel, list[FitResult]]:
    """The fit, with its wall seconds (alpha's choice included) as its one history entry."""
    started = time.perf_counter()
    model = fit_rerank(data.X, data.Y, config, data.X_val, data.Y_val, workers=s.workers,
                       ray_address=s.ray_address, run_dir=data.run_dir, resume=data.resume)
    return model, [FitResult(history=[{"stage": "rerank", "seconds": time.perf_counter() - started}])]


def _rerank_refit(candidate: Any) -> dict[str, Any]:
    """The mix weight ``alpha`` the candidate's validation rows chose (no second choice on every
    row), with the shortlist it was validated with (not the rule again on more rows). The
    training shortlist is resolved again on the refit's rows: a resource bound, it may cut a
    few labels more there than on the fewer fitting rows."""
    return {"head_options": {"alpha": float(candidate.model_.alpha), "shortlist": int(candidate.model_.shortlist)}}


def _load_rerank(s: FitSettings, path: Path, config: dict[str, Any], tensors: dict[str, Tensor]) -> FittedModel:
    stored = {name.removeprefix("rerank."): value for name, value in tensors.items()}
    try:
        return RerankModel.from_tensors(stored, config["n_features"], config["n_labels"])
    except InputError as exc:
        raise InputError(f"{path / 'model.safetensors'}: {exc}") from None


# ---------------------------------------------------------------------------- the table
FAMILIES: dict[str, Family] = {
    "hrr": _network_family("hrr"),
    "dense": _network_family("dense"),
    "solar": Family("solar", HEAD_DEFAULTS["solar"], _takes("solar"), ("fc",),
                    "solar_", _solar_plan, _fit_solar, lambda s, path, config, tensors: SolarModel.load(path),
                    lambda model: model, _solar_report, jobs_apart=True),
    "linear": Family("linear", HEAD_DEFAULTS["linear"], _takes("linear"), ("fc",), "linear_", _linear_plan,
                     _fit_linear, _load_linear, lambda model: model, _linear_report, jobs_apart=True,
                     refit_from=_linear_refit, kept_from_selection=("calibration",)),
    "rerank": Family("rerank", HEAD_DEFAULTS["rerank"], _takes("rerank"), ("fc",), "rerank_", _rerank_plan,
                     _fit_rerank, _load_rerank, lambda model: model,
                     lambda results: {"best_epoch": None, "sparse_updates": None, "epoch_seconds": []}, jobs_apart=True,
                     refit_from=_rerank_refit, holds_out=False),
    # a text network, then a linear model on its text embedding and the tokens' TF-IDF
    "xr": Family("xr", HEAD_DEFAULTS["xr"], _takes("xr"), ("cnn", "lstm"),
                 "network_", _fusion_plan, _fit_fusion, _load_fusion, lambda model: model.network, fusion_report,
                 code_dim=True),
}
#: Every head kind.
HEADS = tuple(FAMILIES)


def streaming_heads() -> tuple[str, ...]:
    """The heads that train and score from a shard store.

    Example:
        >>> streaming_heads()
        ('hrr', 'dense')
    """
    return tuple(head for head, kind in FAMILIES.items() if kind.streams)


def family(head: Any) -> Family:
    """The family of ``head``.

    Raises:
        InputError: an unknown head name.
    """
    if not isinstance(head, str) or head not in FAMILIES:
        raise InputError(f"unknown head {head!r}; choose from {sorted(FAMILIES)}")
    return FAMILIES[head]

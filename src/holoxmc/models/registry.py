"""One registry of the head kinds: ``head name -> Family`` (how it fits, its default
settings, the settings that apply to it, how it loads and reports). The estimator looks a
head up here and nowhere else branches on its name; a new head kind plugs in with one entry.

Each family is built when it is first looked up, and each imports its fitting code when it
fits: looking up (and loading) the linear or re-rank family imports neither torch nor
scikit-learn (``holoxmc predict`` of such a run starts without them); a network or SOLAR family
imports torch.

Example:
    >>> FAMILIES["solar"].defaults["lr"], "hidden" in FAMILIES["linear"].settings
    (0.005, False)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import scipy.sparse as sp

from holoxmc.constraints import check_params
from holoxmc.errors import InputError
from holoxmc.models.base import FitSettings, FittedModel
from holoxmc.models.linear.config import LinearConfig
from holoxmc.models.linear.model import LinearModel
from holoxmc.models.rerank.model import RerankModel
from holoxmc.presets import HEAD_DEFAULTS, network_defaults, setting_defaults
from holoxmc.settings import ESTIMATOR_CONSTRAINTS, HEAD_SETTINGS, SETTING_NAMES, heads_taking
from holoxmc.validation import check_head_settings

if TYPE_CHECKING:
    from torch import Tensor

    from holoxmc.models.network.fusion import FusionPlan
    from holoxmc.models.network.model import NetworkModel, NetworkPlan
    from holoxmc.models.rerank.fit import RerankConfig
    from holoxmc.models.solar.fit import SolarConfig
    from holoxmc.train import FitResult, TrainConfig

__all__ = ["Family", "Families", "FitData", "FAMILIES", "HEADS", "NETWORK_SETTINGS", "family", "streaming_heads",
           "check_settings", "carves_split", "holds_rows_out", "head_setting", "random_seed", "n_workers",
           "train_config", "fit_settings"]

#: Estimator keywords that configure or train a network.
NETWORK_SETTINGS = ("dim", "hidden", "dropout", "linear_width", "epochs", "batch_size", "lr", "weight_decay",
                    "sparse_updates", "schedule", "warmup_epochs", "grad_clip", "patience", "time_limit", "abandon_below", "n_models",
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
    warm: FittedModel | None = None  # a warm start: the fitted model whose weights training starts from
    groups: Any = None  # (n,) group codes of the rows: a carved validation split keeps each group on one side


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
        add_labels: ``(fitted estimator, X, Y of the new labels) -> model``: its model with
            those labels appended, the others untouched (``None``: it cannot).
        arrays: whether :attr:`load` takes the stored tensors as NumPy arrays (read without
            torch, :func:`holoxmc.persist.load_classifier`); else torch tensors.
        finish: ``(selection run's estimator, every X, every Y, held-out rows) -> model | None``:
            the model of a ``head="auto"`` selection run finished on every row without a second
            training (``None``, or a ``None`` result: it is refit, :attr:`refit_from`).
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
    add_labels: Callable[[Any, Any, Any], FittedModel] | None = None
    arrays: bool = False
    finish: Callable[[Any, Any, Any, np.ndarray], FittedModel | None] | None = None


# ---------------------------------------------------------------------------- networks
def _network_plan(s: FitSettings, n_labels: int, n_features: int, head: str | None = None,
                  head_options: dict[str, Any] | None = None) -> NetworkPlan:
    from holoxmc.models.network.model import NetworkPlan, check_plan_fits, network_options

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
    from holoxmc.models.network.model import MemberData, fit_networks
    from holoxmc.seeding import member_seeds

    members = MemberData(plan, data.X, data.Y, data.X_val, data.Y_val, data.resume, data.groups)
    # n_jobs (scikit-learn's name) sets the workers of an ensemble; one network trains here
    workers = s.workers if s.n_jobs is None or s.n_models > 1 else 1
    starts = None if data.warm is None else [
        {name: tensor.detach().cpu().clone() for name, tensor in network.state_dict().items()}
        for network in cast("NetworkModel", data.warm).members]
    return fit_networks(plan, member_seeds(s.seed, s.n_models), members, run_dir=data.run_dir,
                        workers=workers, ray_address=s.ray_address, starts=starts)


def _load_network(s: FitSettings, path: Path, config: dict[str, Any], tensors: dict[str, Tensor]) -> FittedModel:
    from holoxmc.models.network.model import load_network

    return load_network(config["network"], tensors, config["n_labels"], s.device, path / "model.safetensors")


def _network_refit(candidate: Any) -> dict[str, Any]:
    """A network's best epoch as its number of epochs, trained without a validation share
    (the schedule then ends at that epoch)."""
    return {"epochs": max(1, int(candidate.fit_results_[0].best_epoch)), "val_fraction": 0.0}


def _finish_network(candidate: Any, X: Any, Y: Any, held: np.ndarray) -> FittedModel | None:
    """The selection run's network finished on every row: one more epoch, from its best
    epoch's weights, on the training and held-out rows together, at the learning rate its
    schedule had at the last step of that epoch and annealed from there to zero over the
    epoch (a cosine schedule; a constant one keeps it). No held-out share, no second choice
    of epochs or of ``predict``'s rule. A best epoch that ended the schedule (its rate
    annealed to zero) is kept as it is; an ensemble is refit (``None``). On Delicious, where
    the FC candidate wins, it scored as the refit it replaces in a fifteenth of its time
    (docs/tuning.md, "A network winner finished with one epoch")."""
    from holoxmc.train.trainer import lr_factor

    results = candidate.fit_results_
    if len(results) != 1:
        return None
    params = candidate.get_params()
    epochs, best = int(candidate.setting("epochs")), max(1, int(results[0].best_epoch))
    if best >= epochs and params["schedule"] != "none":
        return candidate.model_
    steps = -(-int(np.count_nonzero(~held)) // int(candidate.setting("batch_size")))  # per epoch of the run
    factor = lr_factor(params["schedule"], steps * best - 1, steps * epochs, round(float(params["warmup_epochs"]) * steps))
    finishing = params | {"epochs": 1, "val_fraction": 0.0, "warmup_epochs": 0.0, "time_limit": None,
                          "abandon_below": None, "patience": None, "refit": False, "warm_start": True,
                          "lr": float(candidate.setting("lr")) * factor}
    settings = fit_settings(finishing)
    kind = family(candidate.head)
    plan = kind.plan(settings, int(Y.shape[1]), int(candidate.n_features_))
    model, _ = kind.fit(settings, plan, FitData(X, Y, None, None, None, False, warm=candidate.model_))
    return model


def _network_report(results: list[FitResult]) -> dict[str, Any]:
    from holoxmc.models.network.model import report_fields

    return report_fields(results)


def _network_family(head: str) -> Family:
    from holoxmc.models.network.model import takes_code_dim

    return Family(head, HEAD_DEFAULTS[head], _takes(head), ("fc", "cnn", "lstm"), "network_", _network_plan,
                  _fit_networks, _load_network, lambda model: model.network, _network_report,
                  code_dim=takes_code_dim(head), refit_from=_network_refit, streams=True,
                  finish=_finish_network)


# ---------------------------------------------------------------------------- text network + TF-IDF
def _fusion_plan(s: FitSettings, n_labels: int, n_features: int) -> FusionPlan:
    from holoxmc.models.network.fusion import FUSION_OPTIONS, NETWORK_HEAD, FusionPlan

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
    from holoxmc.models.network.fusion import fit_fusion
    from holoxmc.seeding import member_seeds

    return fit_fusion(plan, member_seeds(s.seed, 1)[0], data.X, data.Y, data.X_val, data.Y_val,
                      val_fraction=s.val_fraction, run_dir=data.run_dir, resume=data.resume, workers=s.workers,
                      groups=data.groups)


def _load_fusion(s: FitSettings, path: Path, config: dict[str, Any], tensors: dict[str, Tensor]) -> FittedModel:
    from holoxmc.models.network.fusion import load_fusion

    plan = _fusion_plan(s, config["n_labels"], config["n_features"])
    return load_fusion(config["network"], tensors, config["n_labels"], plan, path / "model.safetensors")


# ---------------------------------------------------------------------------- SOLAR
def _options(config_type: Any, *others: str) -> frozenset[str]:
    """The fields of a head's config class a user sets through ``head_options`` (the seed and
    ``others`` come from the classifier)."""
    return frozenset(f.name for f in fields(config_type)) - {"seed", *others}


def _solar_plan(s: FitSettings, n_labels: int, n_features: int) -> SolarConfig:
    from holoxmc.models.solar.fit import SolarConfig

    options = dict(s.head_options or {})
    accepted = _options(SolarConfig, "hidden", "dropout", "device", "train")
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise InputError(f"options {unknown} are not accepted by head 'solar' (accepted: {sorted(accepted)})")
    assert s.hidden is not None and s.dropout is not None  # SOLAR's head defaults set both
    config = SolarConfig(hidden=s.hidden, dropout=s.dropout, seed=s.seed, device=s.device, train=s.train, **options)
    config.resolved(n_labels=n_labels, n_features=n_features)  # its checks against the data's sizes
    return config


def _fit_solar(s: FitSettings, config: SolarConfig, data: FitData) -> tuple[FittedModel, list[FitResult]]:
    """The K chunk models as independent jobs in ``run_dir`` (a scratch folder when ``None``,
    removed afterwards, or by a later fit if this process is killed); re-running on the same
    folder retrains only unfinished chunks."""
    from holoxmc.distributed import scratch_folder
    from holoxmc.models.solar.fit import fit_solar
    from holoxmc.train import FitResult

    with scratch_folder() as scratch:
        folder = Path(data.run_dir) if data.run_dir is not None else Path(scratch)
        model = fit_solar(data.X, data.Y, config, folder, X_val=data.X_val, Y_val=data.Y_val,
                          workers=s.workers, ray_address=s.ray_address, groups=data.groups)
        return model, [FitResult(history=_solar_history(folder, model.config.n_chunks))]


def _solar_history(run_dir: Path, n_chunks: int) -> list[dict[str, Any]]:
    """Per-epoch history of a SOLAR run: the seconds every chunk spent on epoch ``e``, summed
    (the compute a single worker would need), from the chunks' done-markers."""
    from holoxmc.models.solar.fit import DONE_FILE, chunk_dir

    per_chunk = [json.loads((chunk_dir(run_dir, k) / DONE_FILE).read_text())["epoch_seconds"] for k in range(n_chunks)]
    n_epochs = max(len(seconds) for seconds in per_chunk)
    return [{"epoch": e + 1, "seconds": float(sum(s[e] for s in per_chunk if e < len(s)))} for e in range(n_epochs)]


def _solar_report(results: list[FitResult]) -> dict[str, Any]:
    """SOLAR's epochs are per chunk: no one best epoch; ``epoch_seconds`` sum the chunks."""
    return {"best_epoch": None, "sparse_updates": None, "epoch_seconds": results[0].epoch_seconds}


# ---------------------------------------------------------------------------- linear
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
    from holoxmc.train import TrainConfig

    config: LinearConfig = _cpu_config(s, LinearConfig, _options(LinearConfig))
    TrainConfig(val_fraction=s.val_fraction)  # the trainer's own check of the validation share
    return config


def _fit_linear(s: FitSettings, config: LinearConfig, data: FitData) -> tuple[FittedModel, list[FitResult]]:
    from holoxmc.models.linear.fit import fit_linear
    from holoxmc.train import FitResult

    model, history = fit_linear(data.X, data.Y, config, data.X_val, data.Y_val, val_fraction=s.val_fraction,
                                refit=bool(s.refit), workers=s.workers, ray_address=s.ray_address,
                                groups=data.groups)
    return model, [FitResult(history=history)]


def _load_linear(s: FitSettings, path: Path, config: dict[str, Any], tensors: dict[str, Any]) -> FittedModel:
    """The saved model, from NumPy arrays (:attr:`Family.arrays`): its ``head_options`` checked
    by :func:`_cpu_config` as a fit checks them (the trainer's check of ``val_fraction`` that
    :func:`_linear_plan` adds is the settings table's, which loading has passed already)."""
    weights = {name.removeprefix("linear."): value for name, value in tensors.items()}
    plan: LinearConfig = _cpu_config(s, LinearConfig, _options(LinearConfig))
    try:
        return LinearModel.from_tensors(weights, config["n_features"], config["n_labels"], plan.normalize_rows)
    except InputError as exc:
        raise InputError(f"{path / 'model.safetensors'}: {exc}") from None


def _grown_settings(clf: Any) -> FitSettings:
    """The settings a fitted estimator's new labels train with: its winner's head, with its
    ``head_options`` where it named that head (``head="auto"``: the head's defaults)."""
    s = clf.fit_settings()
    return replace(s, head=clf.head_, head_options=MappingProxyType(dict(s.head_options) if clf.head == clf.head_ else {}))


def _add_linear_labels(clf: Any, X: Any, Y: Any) -> FittedModel:
    """New labels' SVMs with the fitted ``C``: the explicit one, else the one its validation
    rows chose in this process, else the grid's one value (the default grid)."""
    s = _grown_settings(clf)
    config = _linear_plan(s, 0, 0)
    C = config.C
    if C is None and getattr(clf, "fit_results_", None) and clf.fit_results_[0].history:
        C = _linear_refit(clf)["head_options"]["C"]
    elif C is None and len(config.C_grid) == 1:
        C = config.C_grid[0]
    if C is None:
        raise InputError("adding labels needs the C the model was fitted with: give head_options={'C': ...}")
    from holoxmc.models.linear.fit import add_labels

    return add_labels(clf.model_, X, Y, C, config, workers=s.workers, ray_address=s.ray_address)


def _linear_refit(candidate: Any) -> dict[str, Any]:
    """The ``C`` the candidate's validation rows chose (its last fit when none was scored)."""
    from holoxmc.models.linear.fit import SELECT_METRIC

    chosen = [fit for fit in candidate.fit_results_[0].history if "val" in fit]
    best = max(chosen, key=lambda fit: fit["val"][SELECT_METRIC]) if chosen else candidate.fit_results_[0].history[-1]
    return {"head_options": {"C": float(best["C"])}}


def _linear_report(results: list[FitResult]) -> dict[str, Any]:
    """No epochs: one liblinear fit per C tried, and the refit, under ``fits``."""
    return {"best_epoch": None, "sparse_updates": None, "epoch_seconds": [], "fits": results[0].history}


# ---------------------------------------------------------------------------- rerank
def _rerank_plan(s: FitSettings, n_labels: int, n_features: int) -> RerankConfig:
    from holoxmc.models.rerank.fit import RerankConfig

    config: RerankConfig = _cpu_config(s, RerankConfig, _options(RerankConfig))
    return config


def _fit_rerank(s: FitSettings, config: RerankConfig, data: FitData) -> tuple[FittedModel, list[FitResult]]:
    """The fit, with its wall seconds (alpha's choice included) as its one history entry."""
    from holoxmc.models.rerank.fit import fit_rerank
    from holoxmc.train import FitResult

    started = time.perf_counter()
    model = fit_rerank(data.X, data.Y, config, data.X_val, data.Y_val, workers=s.workers,
                       ray_address=s.ray_address, run_dir=data.run_dir, resume=data.resume)
    return model, [FitResult(history=[{"stage": "rerank", "seconds": time.perf_counter() - started}])]


def _add_rerank_labels(clf: Any, X: Any, Y: Any) -> FittedModel:
    from holoxmc.models.rerank.fit import add_labels

    s = _grown_settings(clf)
    return add_labels(clf.model_, X, Y, _rerank_plan(s, 0, 0), workers=s.workers, ray_address=s.ray_address)


def _finish_rerank(candidate: Any, X: Any, Y: Any, held: np.ndarray) -> FittedModel | None:
    """The selection run's model finished on the held-out rows
    (:func:`~holoxmc.models.rerank.fit.absorb_rows`, with the rows its labels trained on when
    its fit kept them); ``None`` (refit) for the clustered retriever or a kNN vote."""
    from holoxmc.models.rerank.fit import absorb_rows

    model = candidate.model_
    fit_rows = vars(model).pop("fit_rows", None)  # never saved nor kept
    if model.matcher is not None or model.knn:
        return None
    s = _grown_settings(candidate)
    return absorb_rows(model, X, Y, held, _rerank_plan(s, 0, 0), fit_rows=fit_rows, workers=s.workers,
                       ray_address=s.ray_address)


def _rerank_refit(candidate: Any) -> dict[str, Any]:
    """The mix weight ``alpha`` the candidate's validation rows chose (no second choice on every
    row), with the shortlist it was validated with (not the rule again on more rows). The
    training shortlist is resolved again on the refit's rows: a resource bound, it may cut a
    few labels more there than on the fewer fitting rows."""
    return {"head_options": {"alpha": float(candidate.model_.alpha), "shortlist": int(candidate.model_.shortlist)}}


def _load_rerank(s: FitSettings, path: Path, config: dict[str, Any], tensors: dict[str, Any]) -> FittedModel:
    stored = {name.removeprefix("rerank."): value for name, value in tensors.items()}
    try:
        return RerankModel.from_tensors(stored, config["n_features"], config["n_labels"])
    except InputError as exc:
        raise InputError(f"{path / 'model.safetensors'}: {exc}") from None


# ---------------------------------------------------------------------------- the table
def _solar_family() -> Family:
    from holoxmc.models.solar.model import SolarModel

    return Family("solar", HEAD_DEFAULTS["solar"], _takes("solar"), ("fc",),
                  "solar_",
                  _solar_plan, _fit_solar, lambda s, path, config, tensors: SolarModel.load(path),
                  lambda model: model, _solar_report, jobs_apart=True)


def _xr_family() -> Family:
    """A text network, then a linear model on its text embedding and the tokens' TF-IDF."""
    from holoxmc.models.network.fusion import fusion_report

    return Family("xr", HEAD_DEFAULTS["xr"], _takes("xr"),
                  ("cnn", "lstm"),
                  "network_", _fusion_plan, _fit_fusion, _load_fusion, lambda model: model.network, fusion_report,
                  code_dim=True)


class Families(Mapping[str, Family]):
    """``head name -> Family``, each family built when first looked up (then kept): building a
    network or SOLAR family imports torch, the linear and re-rank ones do not. Iterating over
    the names builds nothing; over the families (``values()``, ``items()``) builds them all."""

    def __init__(self, builders: dict[str, Callable[[], Family]]) -> None:
        self._builders = builders
        self._built: dict[str, Family] = {}

    def __getitem__(self, head: str) -> Family:
        if head not in self._built:
            self._built[head] = self._builders[head]()  # KeyError for a name that is no head
        return self._built[head]

    def __contains__(self, head: object) -> bool:
        return head in self._builders

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)


FAMILIES: Mapping[str, Family] = Families({
    "hrr": lambda: _network_family("hrr"),
    "dense": lambda: _network_family("dense"),
    "solar": _solar_family,
    "linear": lambda: Family("linear", HEAD_DEFAULTS["linear"], _takes("linear"), ("fc",), "linear_",
                             _linear_plan, _fit_linear, _load_linear, lambda model: model, _linear_report,
                             jobs_apart=True, refit_from=_linear_refit, kept_from_selection=("calibration",),
                             arrays=True, add_labels=_add_linear_labels),
    "rerank": lambda: Family("rerank", HEAD_DEFAULTS["rerank"], _takes("rerank"), ("fc",), "rerank_", _rerank_plan,
                             _fit_rerank, _load_rerank, lambda model: model,
                             lambda results: {"best_epoch": None, "sparse_updates": None, "epoch_seconds": []},
                             jobs_apart=True, refit_from=_rerank_refit, holds_out=False, arrays=True,
                             add_labels=_add_rerank_labels, finish=_finish_rerank),
    "xr": _xr_family,
})
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


# ---------------------------------------------------------------------------- an estimator's settings, resolved
# Functions of ``params``, an estimator's ``get_params()`` (every keyword, a default where none
# was given): the estimator's methods of the same names call them, and loading a saved model
# (:func:`holoxmc.persist.read_saved`) resolves its settings with them, without an estimator.
def carves_split(s: FitSettings) -> bool:
    """Whether a fit of these settings, given no ``X_val``, draws the seeded ``val_fraction``
    share of its rows to choose on: the networks' epoch, SOLAR's chunks, the linear model's
    ``C`` when it chooses one (a fixed ``C`` trains on every row); the re-rank model draws none.

    Example:
        >>> from holoxmc.settings import DEFAULTS
        >>> carves_split(fit_settings(DEFAULTS | {"head": "rerank"})), carves_split(fit_settings(DEFAULTS | {"head": "dense"}))
        (False, True)
    """
    if not family(s.head).holds_out or not 0.0 < float(s.val_fraction) < 1.0:
        return False
    return s.head != "linear" or _linear_plan(s, 0, 0).C is None


def holds_rows_out(s: FitSettings) -> bool:
    """Whether that share is also left out of the served model, so that ``predict``'s rule and
    ``validation_`` are chosen and scored on rows it never trained on: not after a ``refit``,
    nor for an ensemble (each member draws its own share with its own seed), nor for ``xr``
    (its linear stage is refit on those rows)."""
    return carves_split(s) and not s.refit and s.n_models == 1 and s.head != "xr"


def check_settings(params: Mapping[str, Any], defaults: Mapping[str, Any]) -> Family:
    """Every setting against :data:`~holoxmc.settings.ESTIMATOR_CONSTRAINTS` and the head's
    family (:func:`~holoxmc.validation.check_head_settings`), before any data is read.

    Args:
        params: every setting's value; defaults: every setting's default.

    Returns:
        the head's :class:`Family`.

    Raises:
        InputError: naming the first setting refused.

    Example:
        >>> from holoxmc.settings import DEFAULTS
        >>> check_settings(DEFAULTS | {"head": "linear"}, DEFAULTS).head
        'linear'
    """
    check_params(params, ESTIMATOR_CONSTRAINTS, SETTING_NAMES)
    kind = family(params["head"])
    check_head_settings(params, defaults, kind, HEAD_SPECIFIC)
    return kind


def head_setting(params: Mapping[str, Any], name: str) -> Any:
    """The value of a head-dependent setting: the explicit one, else the head's default
    (``None`` where the head has none, as the linear model's network settings).

    Example:
        >>> from holoxmc.settings import DEFAULTS
        >>> head_setting(DEFAULTS | {"head": "solar"}, "lr"), head_setting(DEFAULTS | {"head": "linear"}, "epochs")
        (0.005, None)
    """
    value, head = params[name], params["head"]
    defaults = setting_defaults(dict(FAMILIES[head].defaults), params["backbone"]) if head in FAMILIES else {}
    return defaults.get(name) if value is None else value


def random_seed(params: Mapping[str, Any]) -> int:
    """The seed of every random stream: ``random_state`` when given, else ``seed``."""
    return int(params["seed"] if params["random_state"] is None else params["random_state"])


def n_workers(params: Mapping[str, Any]) -> int:
    """Parallel local processes: ``n_jobs`` when given (``-1``: one per CPU core), else ``workers``."""
    if params["n_jobs"] is None:
        return int(params["workers"])
    return int(os.cpu_count() or 1) if params["n_jobs"] == -1 else int(params["n_jobs"])


def train_config(params: Mapping[str, Any], seed: int | None = None) -> TrainConfig:
    """The trainer's settings (:class:`~holoxmc.train.TrainConfig`; imports torch)."""
    from holoxmc.train import TrainConfig

    return TrainConfig(
        epochs=head_setting(params, "epochs"), batch_size=head_setting(params, "batch_size"),
        lr=head_setting(params, "lr"), weight_decay=params["weight_decay"], sparse_updates=params["sparse_updates"],
        schedule=params["schedule"], warmup_epochs=params["warmup_epochs"], grad_clip=params["grad_clip"],
        val_fraction=params["val_fraction"], patience=params["patience"], time_limit=params["time_limit"],
        abandon_below=params["abandon_below"], refit=params["refit"], precision=params["precision"], seed=random_seed(params) if seed is None else seed,
        device=params["device"], progress=params["progress"],
    )


def fit_settings(params: Mapping[str, Any]) -> FitSettings:
    """The settings resolved and frozen, as the model families read them (the head's
    defaults where a setting is ``None``, the trainer's settings, the seed and workers that
    the scikit-learn names choose); a head without a network (linear, re-rank) has no
    trainer's settings, and torch is not imported for it."""
    hidden = head_setting(params, "hidden")
    return FitSettings(
        head=params["head"], backbone=params["backbone"], dim=params["dim"],
        hidden=None if hidden is None else tuple(hidden), dropout=head_setting(params, "dropout"),
        linear_width=params["linear_width"], head_options=MappingProxyType(dict(params["head_options"] or {})),
        train=None if head_setting(params, "epochs") is None else train_config(params),  # no network: no trainer
        device=str(params["device"]), n_models=params["n_models"], seed=random_seed(params),
        workers=n_workers(params), n_jobs=params["n_jobs"], ray_address=params["ray_address"],
        val_fraction=params["val_fraction"], refit=bool(params["refit"]),
    )

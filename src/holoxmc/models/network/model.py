"""The served network model (the ``hrr`` and ``dense`` heads): one
:class:`~holoxmc.backbones.Network` or an :class:`~holoxmc.backbones.Ensemble` of networks
trained from different seeds, and how such a model is fitted and loaded.

A network is described once, by its *plan*: the :func:`~holoxmc.backbones.build_network`
keywords resolved from the estimator's settings (:func:`network_plan`). The plan builds the
network, bounds its memory before it is built (:func:`parameter_bytes`) and is saved, with
the member's seed, as the network's ``config``.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn

from holoxmc.backbones.network import Ensemble, Network, build_model, build_network
from holoxmc.data.batch import input_batch
from holoxmc.distributed import run_jobs, threads_per_worker
from holoxmc.distributed.data_parallel import process_group
from holoxmc.errors import InputError
from holoxmc.heads import HEAD_CLASSES
from holoxmc.limits import check_allocation
from holoxmc.train import FitResult, TrainConfig, Trainer, predict_topk

__all__ = ["NetworkModel", "NetworkPlan", "network_options", "takes_code_dim", "with_word_vectors", "parameter_bytes",
           "fit_networks", "load_network", "MEMBER_DIR"]

#: Checkpoints of an ensemble's member ``m`` go to ``run_dir/member-m``.
MEMBER_DIR = "member"


class NetworkModel:
    """A trained network or ensemble, served on ``device``.

    Args:
        network: the trained :class:`Network` or :class:`Ensemble` (put in eval mode).
        n_labels: its label count L.
        device: where it lives; inputs are moved there.

    Example:
        >>> net = build_network("fc", "dense", n_features=10, n_labels=5, hidden=[8])
        >>> NetworkModel(net, 5).parameter_counts()["output_layer"]
        45
    """

    def __init__(self, network: Network | Ensemble, n_labels: int, device: str = "cpu") -> None:
        self.network = network.eval()
        self.n_labels = int(n_labels)
        self.device = device

    @property
    def members(self) -> list[Network]:
        """The networks: one, or an ensemble's members."""
        return self.network.networks if isinstance(self.network, Ensemble) else [self.network]

    def predict_topk(self, X: Any, k: int, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` labels and scores of every row of ``X``, best first."""
        return predict_topk(self.network, X, k, batch_size=batch_size, device=self.device)

    @torch.no_grad()
    def confidence_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """The head's (members' mean) confidences of every row of ``X``, label chunk by chunk."""
        yield from self.network.confidence_chunks(self._batch(X))

    @torch.no_grad()
    def score_chunks(self, X: Any) -> Iterator[tuple[int, Tensor]]:
        """``(0, (n, L) scores)`` of every label (the members' mean for an ensemble)."""
        yield 0, self.network.scores(self._batch(X))

    def _batch(self, X: Any) -> Any:
        return input_batch(X, np.arange(X.shape[0])).to(self.device)

    def save_to(self, directory: Path) -> dict[str, Tensor]:
        """The weights (prefixed ``network.``); no files of its own."""
        return {f"network.{name}": tensor for name, tensor in self.network.state_dict().items()}

    def parameter_counts(self) -> dict[str, int]:
        """Every member's parameters, and those of its head (the output layer)."""
        return {
            "total": sum(p.numel() for network in self.members for p in network.parameters()),
            "output_layer": sum(p.numel() for network in self.members for p in cast(nn.Module, network.head).parameters()),
        }


# ---------------------------------------------------------------------------- planning
def takes_code_dim(head: str) -> bool:
    """Whether the network head ``head`` has a label-code width d' (its class takes ``dim``).

    Example:
        >>> takes_code_dim("hrr"), takes_code_dim("dense"), takes_code_dim("solar")
        (True, False, False)
    """
    head_class = HEAD_CLASSES.get(head)
    return head_class is not None and "dim" in inspect.signature(head_class).parameters


def network_options(backbone: str, head: str, *, hidden: Any, dropout: Any, linear_width: int, dim: int,
                    head_options: dict[str, Any] | None) -> dict[str, Any]:
    """The backbone and head keywords of one network, from the estimator's settings.

    The FC backbone takes ``hidden`` (and ``linear_width`` when set); the text backbones
    take only ``dropout`` of the shared settings; the HRR head takes ``dim``; then
    ``head_options`` over all of them.

    Example:
        >>> network_options("fc", "hrr", hidden=(8,), dropout=0.0, linear_width=0, dim=16, head_options=None)
        {'hidden': [8], 'dropout': 0.0, 'dim': 16}
    """
    options: dict[str, Any] = {"hidden": list(hidden), "dropout": dropout}
    if linear_width:
        options["linear_width"] = int(linear_width)
    if backbone != "fc":
        options = {"dropout": dropout}
    if takes_code_dim(head):
        options["dim"] = dim
    return options | dict(head_options or {})


@dataclass(frozen=True)
class NetworkPlan:
    """Everything that builds and trains one network but its seed.

    Attributes:
        build: :func:`build_network` keywords without ``seed`` (backbone, head, sizes, options).
        train: the trainer's settings (its ``seed`` is replaced per member).
        device: where the network trains and serves.
        word_vectors: ``(token ids, vectors)`` a text backbone's embedding rows start from.
    """

    build: dict[str, Any]
    train: TrainConfig
    device: str
    word_vectors: tuple[np.ndarray, np.ndarray] | None = None

    def network(self, seed: int) -> Network:
        """The network of ``seed``, freshly initialised (with the word vectors, if any)."""
        network = build_network(**self.build, seed=seed)
        if self.word_vectors is not None:
            ids, vectors = self.word_vectors
            cast(Any, network.backbone).load_word_vectors(torch.from_numpy(ids), torch.from_numpy(vectors))
        return network


def with_word_vectors(plan: Any, word_vectors: Any) -> NetworkPlan:
    """``plan`` with its text backbone's embedding rows starting from ``word_vectors`` (a
    :class:`~holoxmc.data.embeddings.WordVectors`).

    Raises:
        InputError: ``plan`` is no network plan of a text backbone (cnn, lstm).
    """
    if not isinstance(plan, NetworkPlan) or plan.build["backbone"] == "fc":
        raise InputError("word_vectors initialise the embeddings of a text backbone (cnn, lstm)")
    return replace(plan, word_vectors=(word_vectors.ids, word_vectors.vectors))


def parameter_bytes(build: dict[str, Any]) -> int:
    """A lower bound on the float32 bytes of the network ``build`` describes: its input
    table (features or vocabulary × first width), an FC backbone's hidden-to-hidden layers,
    and its output layer (last width × output width), plus an HRR head's cached label keys.
    Computed before anything is allocated.

    Example:
        >>> parameter_bytes({"backbone": "fc", "head": "dense", "n_features": 100, "n_labels": 10, "hidden": [8]})
        3520
    """
    input_size = int(build.get("n_features") or build.get("vocab_size") or 0)
    n_labels = int(build["n_labels"])
    if build["backbone"] == "fc":
        hidden = [int(h) for h in build.get("hidden", [512, 512])]
        extra = int(build.get("linear_width", 0) or 0)
        first, last = hidden[0] + extra, hidden[-1] + extra
        between = sum(a * b for a, b in zip(hidden[:-1], hidden[1:]))
    else:
        first = int(build.get("embed_dim", 300))
        last = int(build.get("bottleneck", build.get("fc_size", 512)))
        between = 0
    if takes_code_dim(build["head"]):
        dim = int(build.get("dim", 400))
        out = dim
        code = n_labels * 2 * dim if build.get("cache_codes", True) else 0
    else:
        out, code = n_labels, 0
    return 4 * (input_size * first + between + last * out + code)


def check_plan_fits(plan: NetworkPlan, n_models: int) -> None:
    """Refuse a network whose weights, gradients and Adam's two moments (four float32
    copies), times ``n_models``, cannot fit in this machine's memory.

    Raises:
        InputError: naming the sizes, before anything is built.
    """
    n_bytes = 4 * n_models * parameter_bytes(plan.build)
    sizes = ", ".join(f"{key}={plan.build[key]}" for key in ("n_features", "vocab_size", "n_labels", "hidden", "dim")
                      if key in plan.build)
    check_allocation(n_bytes, f"training {'this network' if n_models == 1 else f'these {n_models} networks'} ({sizes})")


# ---------------------------------------------------------------------------- fitting
@dataclass(frozen=True)
class MemberJob:
    """One network of an ensemble: its seed, checkpoint folder and, for a warm start, the
    weights it starts from (``None``: a fresh initialisation)."""

    seed: int
    run_dir: str | None
    start: dict[str, Tensor] | None = None


@dataclass(frozen=True)
class MemberData:
    """What every network of an ensemble trains from."""

    plan: NetworkPlan
    X: Any
    Y: sp.csr_matrix
    X_val: Any
    Y_val: sp.csr_matrix | None
    resume: bool
    groups: np.ndarray | None = None  # group codes of the rows: a carved validation split keeps groups apart


def train_member(job: MemberJob, data: MemberData) -> tuple[Network, FitResult]:
    """Build and train the network of seed ``job.seed`` (one network, or one member), from
    ``job.start``'s weights when given (a warm start).

    Raises:
        InputError: ``job.start`` does not fit the planned network (another configuration).
    """
    network = data.plan.network(job.seed)
    if job.start is not None:
        try:
            network.load_state_dict(job.start)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[-1].strip()
            raise InputError(f"warm_start: the fitted network's weights do not fit this configuration "
                             f"(set warm_start=False to start afresh): {first}") from None
    else:
        start_from_labels = getattr(network.head, "start_from_labels", None)  # the dense head's prior_bias
        if start_from_labels is not None:
            start_from_labels(data.Y)
    result = Trainer(replace(data.plan.train, seed=job.seed)).fit(
        network, data.X, data.Y, data.X_val, data.Y_val, run_dir=job.run_dir, resume=data.resume, groups=data.groups
    )
    return network, result


def train_member_state(job: MemberJob, data: MemberData) -> tuple[dict[str, Tensor], FitResult]:
    """:func:`train_member` in a worker: the weights travel back, on the CPU."""
    network, result = train_member(job, data)
    return {name: tensor.cpu() for name, tensor in network.state_dict().items()}, result


def member_dir(run_dir: str | Path | None, member: int, n_models: int) -> str | None:
    """Where member ``member`` checkpoints: ``run_dir`` itself for one network."""
    if run_dir is None:
        return None
    return str(run_dir if n_models == 1 else Path(run_dir) / f"{MEMBER_DIR}-{member}")


def fit_networks(plan: NetworkPlan, seeds: list[int], data: MemberData, *, run_dir: str | Path | None,
                 workers: int, ray_address: str | None,
                 starts: list[dict[str, Tensor]] | None = None) -> tuple[NetworkModel, list[FitResult]]:
    """Train one network per seed (here, or apart as worker processes or Ray tasks) and
    serve them as one model: a network, or the ensemble of their mean score.

    Args:
        starts: a warm start: each network's weights to start from (one per seed, on the CPU).

    Returns:
        ``(model, one FitResult per network)``.
    """
    starts = [None] * len(seeds) if starts is None else starts  # type: ignore[list-item]
    if len(starts) != len(seeds):
        raise InputError(f"warm_start: the fitted model has {len(starts)} networks and this fit trains "
                         f"{len(seeds)} (n_models); set warm_start=False to start afresh")
    jobs = [MemberJob(seed, member_dir(run_dir, member, len(seeds)), start)
            for member, (seed, start) in enumerate(zip(seeds, starts))]
    if workers == 1 and ray_address is None:
        trained = [train_member(job, data) for job in jobs]
    else:
        trained = _train_apart(jobs, data, workers, ray_address)
    networks = [network.eval() for network, _ in trained]
    served: Network | Ensemble = networks[0] if len(networks) == 1 else Ensemble(networks)
    return NetworkModel(served, plan.build["n_labels"], plan.device), [result for _, result in trained]


def _train_apart(jobs: list[MemberJob], data: MemberData, workers: int,
                 ray_address: str | None) -> list[tuple[Network, FitResult]]:
    """An ensemble's networks as independent jobs: local worker processes or Ray tasks."""
    if len(jobs) == 1:
        raise InputError("workers and ray_address train SOLAR's chunks or an ensemble's networks "
                         "(n_models > 1) apart; one network trains in this process (torchrun for data parallelism)")
    if process_group()[1] > 1:
        raise InputError("an ensemble trains its networks either data-parallel (torchrun) or as jobs "
                         "(workers, ray_address), not both")
    apart = replace(data, plan=replace(data.plan, train=replace(data.plan.train, progress=False)))
    states = run_jobs(train_member_state, jobs, apart, workers=workers, ray_address=ray_address,
                      threads_per_job=threads_per_worker(workers))
    trained = []
    for job, (state, result) in zip(jobs, states):
        network = data.plan.network(job.seed)  # its trained weights replace the initial ones
        network.load_state_dict(state)
        trained.append((network.to(data.plan.device), result))
    return trained


# ---------------------------------------------------------------------------- loading
def load_network(config: dict[str, Any], tensors: dict[str, Tensor], n_labels: int, device: str,
                 where: Path) -> NetworkModel:
    """The model a saved ``config.json``'s ``network`` entry and ``network.*`` tensors describe.

    Raises:
        InputError: the weights do not match the configuration.
    """
    if not isinstance(config, dict):
        raise InputError(f"{where}: 'network' must be a JSON object, got {config!r}")
    network = build_model(config)
    weights = {name.removeprefix("network."): value for name, value in tensors.items()}
    try:
        network.load_state_dict(weights)
    except RuntimeError as exc:
        raise InputError(f"{where}: weights do not match config.json ({' '.join(str(exc).split())})") from exc
    return NetworkModel(network.to(device), n_labels, device)


def report_fields(results: list[FitResult]) -> dict[str, Any]:
    """A fit's epochs for a report: ``best_epoch`` and ``sparse_updates`` (lists, one entry
    per member, for an ensemble) and every member's ``epoch_seconds`` in turn."""
    def one_or_list(values: list[Any]) -> Any:
        return values[0] if len(values) == 1 else values

    return {
        "best_epoch": one_or_list([result.best_epoch for result in results]),
        "sparse_updates": one_or_list([result.sparse_updates for result in results]),
        "epoch_seconds": [seconds for result in results for seconds in result.epoch_seconds],
    }

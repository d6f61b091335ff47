"""A backbone and an output head composed into one model, and a factory that rebuilds a
model from a JSON-able configuration (what checkpoints store next to the weights)."""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import torch
from torch import Tensor, nn

from holoxmc.backbones.cnn import XMLCNNBackbone
from holoxmc.backbones.fc import FCBackbone
from holoxmc.backbones.lstm import AttentionLSTMBackbone
from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.errors import InputError
from holoxmc.limits import check_allocation
from holoxmc.heads import HEAD_CLASSES, OutputHead
from holoxmc.heads.decoding import running_topk

__all__ = ["Network", "Ensemble", "build_network", "build_model", "BACKBONES", "HEADS"]

BACKBONES: dict[str, type[FCBackbone] | type[XMLCNNBackbone] | type[AttentionLSTMBackbone]] = {
    "fc": FCBackbone,
    "cnn": XMLCNNBackbone,
    "lstm": AttentionLSTMBackbone,
}
#: The head table of :mod:`holoxmc.heads` (one table, not a copy).
HEADS = HEAD_CLASSES

Input = SparseBatch | Tensor


class Network(nn.Module):
    """``head(backbone(x))`` with the head's loss and decoding.

    Args:
        backbone: module with ``forward(x) -> (B, out_features)`` and ``out_features``.
        head: an :class:`~holoxmc.heads.OutputHead` module (``forward``, ``loss``, ``topk``,
            ``scores``, ``score_chunks``).
        config: the :func:`build_network` keywords that rebuild this model, if known.

    Example:
        >>> net = build_network("fc", "hrr", n_features=50, n_labels=30, hidden=[16], dim=32)
        >>> net.config["head"], net.head.dim
        ('hrr', 32)
    """

    head: OutputHead

    def __init__(self, backbone: nn.Module, head: OutputHead, config: dict[str, Any] | None = None) -> None:
        super().__init__()
        self.backbone = backbone
        self.head = head
        self.config = config

    def forward(self, x: Input) -> Tensor:
        return self.head(self.backbone(x))

    def loss(self, x: Input, labels: LabelBatch) -> Tensor:
        """Scalar training loss of a batch (mean over its rows).

        Under ``torch.autocast`` (``TrainConfig(precision="bfloat16")``) the backbone and the
        head's layer run in lower precision; the loss itself is computed in float32 from the
        head output cast back, as cosines, FFTs and BCE need.
        """
        out = self(x)
        if out.dtype in (torch.bfloat16, torch.float16):
            out = out.float()
        with torch.autocast(out.device.type, enabled=False):
            return self.head.loss(out, labels)

    def topk(self, x: Input, k: int) -> tuple[Tensor, Tensor]:
        """``(scores (B, k), label indices (B, k))``, best first.

        A head may offer ``topk_hidden(h, k)``, the same result computed straight from the
        backbone output (the HRR head folds its layers there); it is used when present.
        """
        hidden = self.backbone(x)
        topk_hidden = getattr(self.head, "topk_hidden", None)
        if topk_hidden is not None:
            return topk_hidden(hidden, k)
        return self.head.topk(self.head(hidden), k)

    def score_chunks(self, x: Input) -> Iterator[tuple[int, Tensor]]:
        """``(start, scores)`` label chunks of the scores :meth:`topk` ranks by."""
        return self.head.score_chunks(self.backbone(x))

    def confidence_chunks(self, x: Input) -> Iterator[tuple[int, Tensor]]:
        """``(start, confidences)`` label chunks: the head's cosines or probabilities, which a
        threshold cuts into label sets."""
        return self.head.confidence_chunks(self.backbone(x))

    def scores(self, x: Input) -> Tensor:
        """Score of every label, ``(B, L)``; for small L only."""
        return self.head.scores(self(x))


class Ensemble(nn.Module):
    """Networks of one configuration trained from different seeds; a label's score is the
    mean of the members' scores (each member its own initialisation, label code, validation
    split and batch order).

    Args:
        members: the trained networks, all with the same labels and label chunking.

    Example:
        >>> import numpy as np, scipy.sparse as sp
        >>> from holoxmc.data.batch import input_batch
        >>> nets = [build_network("fc", "hrr", n_features=50, n_labels=30, hidden=[16], dim=32, seed=s)
        ...         for s in (0, 1)]
        >>> X = sp.random(4, 50, density=0.2, format="csr", dtype=np.float32, random_state=0)
        >>> Ensemble(nets).topk(input_batch(X, np.arange(4)), 3)[1].shape
        torch.Size([4, 3])
    """

    def __init__(self, members: Sequence[Network]) -> None:
        super().__init__()
        if len(members) < 2:
            raise InputError(f"an ensemble needs at least two networks, got {len(members)}")
        self.members = nn.ModuleList(members)

    @property
    def networks(self) -> list[Network]:
        """The members as networks (``nn.ModuleList`` types them as plain modules)."""
        return [cast(Network, member) for member in self.members]

    @property
    def config(self) -> dict[str, Any]:
        """What :func:`build_model` rebuilds this ensemble from."""
        return {"members": [member.config for member in self.networks]}

    def score_chunks(self, x: Input) -> Iterator[tuple[int, Tensor]]:
        """``(start, scores)`` label chunks of the members' mean score."""
        return _mean_chunks([member.score_chunks(x) for member in self.networks])

    def confidence_chunks(self, x: Input) -> Iterator[tuple[int, Tensor]]:
        """``(start, confidences)`` label chunks of the members' mean confidence."""
        return _mean_chunks([member.confidence_chunks(x) for member in self.networks])

    def topk(self, x: Input, k: int) -> tuple[Tensor, Tensor]:
        """``(scores (B, k), label indices (B, k))`` by the members' mean score, best first."""
        return running_topk(self.score_chunks(x), k)

    def scores(self, x: Input) -> Tensor:
        """The members' mean score of every label, ``(B, L)``; for small L only."""
        return torch.cat([scores for _, scores in self.score_chunks(x)], 1)


def _mean_chunks(members: list[Iterator[tuple[int, Tensor]]]) -> Iterator[tuple[int, Tensor]]:
    """The element-wise mean of the members' ``(start, values)`` label chunks, chunk by chunk."""
    for parts in zip(*members, strict=True):
        start, first = parts[0]
        if any(s != start or values.shape != first.shape for s, values in parts):
            raise InputError("the ensemble's members split their labels into different chunks")
        yield start, torch.stack([values for _, values in parts]).mean(0)


# Keywords build_network fills itself; never taken from ``options``.
_RESERVED = {"self", "in_features", "n_labels", "n_features", "vocab_size", "seed"}


def _accepted(cls: type[nn.Module]) -> set[str]:
    return set(inspect.signature(cls.__init__).parameters) - _RESERVED


def _json_value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def estimate_network_bytes(config: Mapping[str, Any]) -> int:
    """A rough count of the bytes a network of ``config`` allocates (weights, Adam-free):
    the products of consecutive layer widths, the embedding tables, and an HRR head's
    cached label code. Used to refuse a configuration no machine here could hold."""
    def get(key: str, default: int) -> int:
        value = config.get(key, default)
        return int(value) if isinstance(value, numbers.Integral) else default

    n_labels = get("n_labels", 1)
    if config.get("backbone") == "fc":
        hidden = [int(h) for h in config.get("hidden", [512, 512]) if isinstance(h, numbers.Integral)] or [1]
        widths = [get("n_features", 1), *hidden]
        total = sum(a * b for a, b in zip(widths[:-1], widths[1:])) + get("n_features", 1) * get("linear_width", 0)
        last = hidden[-1] + get("linear_width", 0)
    else:
        embed, vocab = get("embed_dim", 300), get("vocab_size", 1)
        last = max(get("bottleneck", 512), get("fc_size", 256), get("hidden_size", 256))
        total = vocab * embed + 8 * last * (embed + last) + get("n_filters", 32) * embed * 16
    out = get("dim", n_labels) if config.get("head") == "hrr" else n_labels
    total += last * out + (n_labels * out if config.get("head") == "hrr" else 0)
    return 4 * total


def build_network(
    backbone: str = "fc",
    head: str = "hrr",
    *,
    n_labels: int,
    n_features: int | None = None,
    vocab_size: int | None = None,
    seed: int = 0,
    **options: Any,
) -> Network:
    """Build ``Network(backbone, head)`` from plain, JSON-able keywords.

    Every option goes to the backbone or the head that accepts a keyword of that name
    (``hidden``, ``dropout``, ``embed_dim``… for backbones; ``dim``, ``learn_pm``,
    ``loss``, ``label_chunk``… for heads). ``seed`` seeds both. The returned network's
    ``config`` holds all keywords, so ``build_network(**net.config)`` rebuilds it.

    Args:
        backbone: ``"fc"`` (needs ``n_features``), ``"cnn"`` or ``"lstm"`` (need ``vocab_size``).
        head: ``"dense"`` or ``"hrr"``.
        n_labels: number of labels L.
        n_features: input dimension of the FC backbone.
        vocab_size: token vocabulary of the text backbones (PAD = 0 included).
        seed: initialisation seed of the backbone and head (and the HRR label code).
        **options: backbone and head keywords.

    Raises:
        InputError: unknown backbone/head name, a missing input size, or an option neither
            the backbone nor the head accepts.
    """
    if backbone not in BACKBONES:
        raise InputError(f"unknown backbone {backbone!r}; choose from {sorted(BACKBONES)}")
    if head not in HEADS:
        raise InputError(f"unknown head {head!r}; choose from {sorted(HEADS)}")
    backbone_cls, head_cls = BACKBONES[backbone], HEADS[head]
    backbone_keys, head_keys = _accepted(backbone_cls), _accepted(head_cls)
    unknown = sorted(set(options) - backbone_keys - head_keys)
    if unknown:
        raise InputError(f"options {unknown} are not accepted by backbone {backbone!r} or head {head!r}")

    input_size_name = "n_features" if backbone == "fc" else "vocab_size"
    input_size = n_features if backbone == "fc" else vocab_size
    if input_size is None:
        raise InputError(f"backbone {backbone!r} needs {input_size_name}")
    check_allocation(estimate_network_bytes({"backbone": backbone, "head": head, "n_labels": n_labels,
                                             input_size_name: input_size, **options}), "this network")
    backbone_module = backbone_cls(
        input_size, seed=seed, **{key: value for key, value in options.items() if key in backbone_keys}
    )
    head_module = head_cls(
        backbone_module.out_features,
        n_labels,
        seed=seed,
        **{key: value for key, value in options.items() if key in head_keys},
    )
    config = {
        "backbone": backbone,
        "head": head,
        "n_labels": int(n_labels),
        input_size_name: int(input_size),
        "seed": int(seed),
        **{key: _json_value(value) for key, value in options.items()},
    }
    return Network(backbone_module, head_module, config)


def build_model(config: dict[str, Any]) -> Network | Ensemble:
    """Rebuild a :class:`Network` or an :class:`Ensemble` from its ``config``.

    Example:
        >>> net = build_network("fc", "dense", n_features=10, n_labels=5, hidden=[8])
        >>> type(build_model(Ensemble([net, net]).config)).__name__
        'Ensemble'
    """
    if "members" in config:
        return Ensemble([build_network(**member) for member in config["members"]])
    return build_network(**config)

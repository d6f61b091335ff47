"""Output layers: each one a loss and a decoding over the backbone's output.

Every head satisfies :class:`OutputHead`, the contract :class:`holoxmc.backbones.network.Network`
relies on: :class:`~holoxmc.heads.dense.DenseHead` and :class:`~holoxmc.heads.hrr.HRRHead`
score labels (SOLAR's chunk head, :mod:`holoxmc.models.solar.head`, keeps the same contract).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from torch import Tensor

from holoxmc.data.batch import LabelBatch

__all__ = ["OutputHead", "HEAD_CLASSES"]


class OutputHead(Protocol):
    """What a network needs of its output head.

    Shapes:
        ``__call__``: ``(B, in_features)`` → ``(B, out)`` raw outputs; ``loss``: scalar;
        ``topk``: ``(B, k)`` scores and ids; ``scores``: ``(B, n)``; ``score_chunks``:
        ``(start, (B, n_chunk))`` pairs from the backbone output, covering all ``n`` ids;
        ``confidence_chunks``: the same layout, of confidences that a threshold cuts into
        label sets (an HRR head's cosines, a dense head's probabilities).
    """

    def __call__(self, h: Tensor) -> Tensor: ...

    def loss(self, out: Tensor, labels: LabelBatch) -> Tensor: ...

    def topk(self, out: Tensor, k: int) -> tuple[Tensor, Tensor]: ...

    def scores(self, out: Tensor) -> Tensor: ...

    def score_chunks(self, h: Tensor) -> Iterator[tuple[int, Tensor]]: ...

    def confidence_chunks(self, h: Tensor) -> Iterator[tuple[int, Tensor]]: ...


# The network heads' classes, by head name: the one table ``build_network`` looks a head up in
# (imported last, as the head modules import this package's helpers).
from holoxmc.heads.dense import DenseHead  # noqa: E402
from holoxmc.heads.hrr import HRRHead  # noqa: E402

#: Head name → class of the heads a [`Network`][holoxmc.backbones.network.Network] ends in
#: (SOLAR's chunk heads are built by its own model).
HEAD_CLASSES: dict[str, type[DenseHead] | type[HRRHead]] = {"dense": DenseHead, "hrr": HRRHead}

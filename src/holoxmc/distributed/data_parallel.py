"""Data-parallel training of one network over ``torch.distributed`` (DDP).

Every rank runs the same :class:`holoxmc.train.Trainer` on the same seeded batch order and
takes its share ``rows[rank::world]`` of each batch; ``DistributedDataParallel`` averages
the gradients, and each rank's loss is weighted by its share of the batch, so every step
makes the update one process would make on the whole batch (up to the order of float
sums, and with other dropout masks: each rank draws its own) and the ranks hold identical
weights throughout. Rank 0 alone evaluates the validation split (and hands the result to
the others) and writes checkpoints; every rank reads them on resume, so on several
machines the run directory must be on a shared filesystem.

What crosses the network each step is the gradient of every weight: with a dense output
layer that includes ``L × hidden`` floats, with the HRR head ``d' × hidden``.

Launch with torchrun (one process per GPU, or per CPU socket)::

    torchrun --standalone --nproc-per-node 2 -m holoxmc train delicious --model hrr-fc --out R

or initialise a process group yourself before ``XMCClassifier.fit``; without one,
training runs in a single process as usual.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from inspect import signature
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

from holoxmc.devices import check_device
from holoxmc.errors import InputError

if TYPE_CHECKING:
    from holoxmc.backbones.network import Network

__all__ = ["process_group", "join_from_environment", "leaving_at_exit", "LossModule", "data_parallel",
           "share_of_batch", "from_rank_zero", "sum_over_ranks"]


def process_group() -> tuple[int, int]:
    """``(rank, world_size)`` of the current process group, ``(0, 1)`` when there is none."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def join_from_environment(device: str | None) -> tuple[int, int, str | None]:
    """Join the process group torchrun describes (``WORLD_SIZE`` > 1 in the environment).

    Args:
        device: the requested device (``None``: the CPU); ``"cuda"`` becomes
            ``cuda:LOCAL_RANK`` under torchrun.

    Returns:
        ``(rank, world_size, device)``; ``(0, 1, device)`` outside torchrun.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, device
    if not dist.is_available():
        raise InputError("WORLD_SIZE > 1 but this torch build has no torch.distributed")
    device = device or "cpu"
    if device.startswith("cuda") and ":" not in device:
        device = f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    check_device(device)
    if not dist.is_initialized():
        backend = "nccl" if device.startswith("cuda") else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(torch.device(device))
        dist.init_process_group(backend)
    rank, world = process_group()
    return rank, world, device


@contextmanager
def leaving_at_exit() -> Iterator[None]:
    """Leave the process group, if one was joined, when the block ends.

    After a normal end the ranks first meet at a barrier (waiting with the GIL released): on
    torch 2.2 a rank that destroyed its gloo group right after a collective could deadlock, its
    worker thread needing the GIL (held by the destroying thread) to free that collective's
    tensors. After an error, which the other ranks may not share, it leaves at once: they would
    never reach the barrier.
    """
    def leave(meet: bool) -> None:
        if dist.is_available() and dist.is_initialized():
            if meet:
                dist.barrier()
            dist.destroy_process_group()

    try:
        yield
    except BaseException:
        leave(meet=False)
        raise
    leave(meet=True)


class LossModule(nn.Module):
    """``forward(x, labels) = network.loss(x, labels)``: DDP synchronises what ``forward`` runs."""

    def __init__(self, network: Network):
        super().__init__()
        self.network = network

    def forward(self, x: Any, labels: Any) -> Tensor:
        return self.network.loss(x, labels)


def data_parallel(network: Network, device: torch.device) -> DistributedDataParallel:
    """Wrap ``network``'s loss for data-parallel training; broadcasts rank 0's weights.

    Buffers (the HRR code's keys, regenerated from the seed on every rank) are not
    broadcast each step.
    """
    device_ids = None
    if device.type == "cuda":
        device_ids = [device.index if device.index is not None else torch.cuda.current_device()]
    # torch >= 2.13 names the per-step buffer broadcast ``forward_sync_buffers``
    no_buffer_sync: dict[str, Any] = (
        {"forward_sync_buffers": False} if "forward_sync_buffers" in signature(DistributedDataParallel).parameters
        else {"broadcast_buffers": False}
    )
    return DistributedDataParallel(LossModule(network), device_ids=device_ids, **no_buffer_sync)


def share_of_batch(rows: Any, rank: int, world: int) -> tuple[Any, float]:
    """This rank's rows of a batch and the weight of their mean loss.

    DDP averages the ranks' gradients, so a rank whose ``n`` of the batch's ``N`` rows give
    mean loss ``ℓ`` back-propagates ``ℓ · n · world / N``: the average is then the whole
    batch's mean loss. A rank left without rows (a last batch smaller than ``world``) takes
    one row at weight 0, since every rank must take part in every gradient exchange.
    """
    share = rows[rank::world]
    if len(share) == 0:
        return rows[:1], 0.0
    return share, len(share) * world / len(rows)


def from_rank_zero(value: Any) -> Any:
    """Rank 0's ``value`` on every rank (any picklable object)."""
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def sum_over_ranks(value: Tensor) -> Tensor:
    """The sum of ``value`` over all ranks (in place, returned)."""
    dist.all_reduce(value)
    return value

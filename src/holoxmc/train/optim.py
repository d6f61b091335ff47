"""The trainer's optimisers: Adam over the dense weights and, with ``sparse_updates``,
Adam over the input tables that computes only on the rows a batch touches.

A network's first layer is an embedding table read by row: the FC backbone's
``D × hidden`` feature weights (``nn.EmbeddingBag``), the CNN/LSTM word vectors
(``nn.Embedding``). A batch touches few of its rows, yet a dense Adam step writes the
gradient of all of them and updates every row's moments: at ``D = 10^6`` and 512 hidden
units that is 2 GB of gradient per step. With *sparse updates* the table yields a
row-sparse gradient and :class:`CatchUpAdam` steps only the touched rows.

Lazy Adam (``torch.optim.SparseAdam``) also steps only the touched rows, but it is another
optimiser: dense Adam keeps moving a row by its decaying momentum in the steps after the
batch that touched it (an isolated gradient moves a row about nine times as far in all as
its own step), lazy Adam does not, and rows of rare features learn more slowly (FC lost
2.6 P@1 with it on an Amazon-670K-like feature space). :class:`CatchUpAdam` keeps, for each
row, the step it was last brought up to; when a batch touches the row again, or at
:meth:`CatchUpAdam.flush`, it first makes in one closed-form update the moves dense Adam
made in the skipped steps, then Adam's own step. It makes dense Adam's steps up to Adam's
epsilon in the skipped steps and a truncation below 1e-8 of the sum (tested against
``torch.optim.Adam``).

Measured here (``benchmarks/sparse_updates.py``, docs/tuning.md, "Sparse updates"): a step 1.5x
faster than dense Adam's when a batch reads 13 % of the rows, 4.7x at 3 %, 22x at 0.6 %
(0.85x at 32 %); test P@1 within noise of dense Adam's, where lazy Adam cost FC 2.6 points.
The trainer's default, ``sparse_updates="auto"`` (:func:`choose_sparse_updates`), uses
them where that crossover grid found them faster.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn

from holoxmc.errors import InputError

__all__ = [
    "embedding_tables", "read_share", "choose_sparse_updates", "sparse_update_tables", "CatchUpAdam",
    "build_optimizers", "watching", "bring_up_to_date", "clip_grad_norm_",
]

Table = nn.Embedding | nn.EmbeddingBag
#: added under square roots: the CPU kernel takes 5x as long on exact zeros (untouched
#: columns' moments), and sqrt(1e-37) = 3e-19 is far below Adam's epsilon
_TINY = 1e-37
#: ``sparse_updates="auto"`` turns them on for tables of at least this many rows ...
AUTO_MIN_ROWS = 15_000
#: ... when the first batches read at most this share of the rows, on average: the region
#: where the crossover grid (``python benchmarks/sparse_updates.py --parts crossover``;
#: docs/tuning.md, "Sparse updates") found sparse updates faster than dense Adam.
AUTO_MAX_READ_SHARE = 0.075
#: batches sampled by the rule (the first of epoch 1's order)
AUTO_SAMPLE_BATCHES = 16


def embedding_tables(network: nn.Module) -> list[Table]:
    """The trainable embedding tables of ``network`` (the input layers read by row)."""
    return [
        m for m in network.modules()
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.weight.requires_grad
    ]


def read_share(X: sp.csr_matrix | np.ndarray, order: np.ndarray, batch_size: int, n_rows: int,
               n_batches: int = AUTO_SAMPLE_BATCHES) -> float:
    """Mean share of a table's ``n_rows`` rows that the first ``n_batches`` batches of
    ``order`` read: distinct feature columns of CSR rows, or distinct token ids.

    Example:
        >>> X = sp.csr_matrix(np.eye(8, dtype=np.float32))
        >>> read_share(X, np.arange(8), batch_size=2, n_rows=8)
        0.25
    """
    shares = []
    for start in range(0, min(len(order), n_batches * batch_size), batch_size):
        rows = order[start : start + batch_size]
        part = X[rows]  # CSR rows (in memory or of a shard store) or token ids
        ids = part.indices if sp.issparse(part) else np.asarray(part).ravel()
        shares.append(len(np.unique(ids)) / n_rows)
    return float(np.mean(shares)) if shares else 1.0


def choose_sparse_updates(
    setting: bool | str,
    network: nn.Module,
    X: sp.csr_matrix | np.ndarray,
    order: np.ndarray,
    batch_size: int,
    *,
    weight_decay: float,
    device: torch.device,
    world: int,
) -> bool:
    """Resolve ``TrainConfig.sparse_updates``: ``True``/``False`` as given; ``"auto"`` is
    ``True`` when every embedding table has at least :data:`AUTO_MIN_ROWS` rows and the
    first batches of ``order`` read at most :data:`AUTO_MAX_READ_SHARE` of them, training
    on a CPU in one process without weight decay (the crossover was measured only there).

    Args:
        setting: ``True``, ``False`` or ``"auto"``.
        network: the model whose tables would get sparse updates.
        X: the training inputs (CSR features or token ids); ``order``: the training rows
            in the order the first epoch reads them.
        batch_size: training rows per step.
        weight_decay, device, world: the run's weight decay, device and process count.

    Example:
        >>> from holoxmc.backbones import FCBackbone
        >>> X = sp.random(256, 50_000, density=2e-4, format="csr", random_state=0)
        >>> choose_sparse_updates("auto", FCBackbone(50_000, hidden=(8,)), X, np.arange(256), 64,
        ...                       weight_decay=0.0, device=torch.device("cpu"), world=1)
        True
    """
    if setting != "auto":
        return bool(setting)
    tables = embedding_tables(network)
    if not tables or weight_decay or device.type != "cpu" or world > 1:
        return False
    rows = min(table.num_embeddings for table in tables)
    return rows >= AUTO_MIN_ROWS and read_share(X, order, batch_size, rows) <= AUTO_MAX_READ_SHARE


def sparse_update_tables(network: nn.Module, sparse_updates: bool, backend: str | None = None) -> list[Table]:
    """The embedding tables to train with sparse updates (all of them, or none), with their
    gradients switched to row-sparse (``module.sparse``).

    Args:
        network: the model.
        sparse_updates: whether to train the tables with sparse updates.
        backend: the ``torch.distributed`` backend, ``None`` in a single process.

    Example:
        >>> from holoxmc.backbones import FCBackbone
        >>> net = FCBackbone(50_000, hidden=(8,))
        >>> [type(t).__name__ for t in sparse_update_tables(net, True)], net.input_layer.sparse
        (['EmbeddingBag'], True)
    """
    if sparse_updates and backend == "nccl":
        raise InputError("sparse_updates needs the gloo backend under torch.distributed: NCCL cannot sum sparse gradients")
    tables = embedding_tables(network)
    for table in tables:
        table.sparse = sparse_updates
    return tables if sparse_updates else []


class CatchUpAdam(torch.optim.Optimizer):
    """Adam over row-sparse gradients that makes dense Adam's steps while computing, in each
    step, only on the rows a batch reads (and on every row at :meth:`flush`).

    For a row without gradient in steps ``s+1 .. e`` dense Adam's moments only decay, and
    its step ``s+j`` moves the row by ``-c_(s+j) · r^j · m_s / sqrt(v_s)`` where
    ``r = β1 / sqrt(β2)`` and ``c_t = lr_t · sqrt(1 - β2^t) / (1 - β1^t)`` (Adam's epsilon
    aside). This optimiser logs ``c_t`` for every step and keeps, per row, the step it was
    last brought up to. Before a training forward pass reads rows of a watched table
    (:meth:`watch`), it makes their skipped moves in one update and decays their moments by
    ``β1^k``, ``β2^k``, so the gradient is taken where dense Adam's weights are; then
    :meth:`step` makes Adam's step on the rows with gradient. The sum stops after the ``J``
    terms where ``r^J`` falls below 1e-8 (``J = 176`` for the default betas).

    Args:
        params: the tables' weights, ``(rows, dim)``; their gradients must be row-sparse.
        lr, betas, eps: as for ``torch.optim.Adam``.

    Example:
        >>> table = nn.Embedding(1000, 4, sparse=True)
        >>> optimizer = CatchUpAdam(table.parameters(), lr=0.1)
        >>> _ = optimizer.watch(table)
        >>> table(torch.tensor([3])).sum().backward(); optimizer.step()
        >>> optimizer.zero_grad(); table(torch.tensor([7])).sum().backward(); optimizer.step()
        >>> int(optimizer.state[table.weight]["last_step"][3])  # row 3 waits for its next read
        1
        >>> optimizer.flush(); int(optimizer.state[table.weight]["last_step"][3])
        2
    """

    #: rows brought up per block in :meth:`flush` (bounds its work tensors)
    FLUSH_ROWS = 1 << 13

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        beta1, beta2 = betas
        if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0 and beta1 * beta1 < beta2):
            raise ValueError(f"CatchUpAdam needs 0 <= beta1 < 1, 0 <= beta2 < 1 and beta1^2 < beta2, got {betas}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps})
        self._work: dict[int, Tensor] = {}

    def _state_of(self, p: Tensor) -> dict[str, Tensor]:
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.int64)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
            state["last_step"] = torch.zeros(p.shape[0], dtype=torch.int64, device=p.device)
            state["step_scale"] = torch.zeros(1024, dtype=torch.float32, device=p.device)  # c_t at index t
        return state

    def _group_of(self, p: Tensor) -> dict:
        return next(group for group in self.param_groups if any(q is p for q in group["params"]))

    def _buffer(self, slot: int, shape: tuple[int, ...], like: Tensor) -> Tensor:
        """A reused work tensor of ``shape``: a fresh large tensor in every step costs page
        faults on CPU that took as long as the arithmetic."""
        need = math.prod(shape)
        buffer = self._work.get(slot)
        if buffer is None or buffer.numel() < need or buffer.device != like.device or buffer.dtype != like.dtype:
            buffer = self._work[slot] = torch.empty(need, dtype=like.dtype, device=like.device)
        return buffer[:need].view(shape)

    def _rows_of(self, source: Tensor, rows: Tensor, slot: int) -> Tensor:
        """``source[rows]``, into work tensor ``slot``."""
        return torch.index_select(source, 0, rows, out=self._buffer(slot, (len(rows), *source.shape[1:]), source))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        # (torch's stub splits this signature into two overloads, on whether a closure is given)
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if not p.grad.is_sparse or p.grad.sparse_dim() != 1:
                    raise RuntimeError("CatchUpAdam takes row-sparse gradients (nn.Embedding(..., sparse=True))")
                state = self._state_of(p)
                grad = p.grad.coalesce()
                rows, values = grad.indices()[0], grad.values()
                step = int(state["step"]) + 1
                self._bring_up(p, state, group, rows, step - 1)  # rows no watched forward read
                state["step"].fill_(step)
                bias1, bias2 = 1 - beta1**step, 1 - beta2**step
                if step >= len(state["step_scale"]):
                    state["step_scale"] = torch.cat([state["step_scale"], torch.zeros_like(state["step_scale"])])
                state["step_scale"][step] = group["lr"] * math.sqrt(bias2) / bias1
                exp_avg = self._rows_of(state["exp_avg"], rows, 0).mul_(beta1).add_(values, alpha=1 - beta1)
                exp_avg_sq = self._rows_of(state["exp_avg_sq"], rows, 1).mul_(beta2)
                exp_avg_sq.addcmul_(values, values, value=1 - beta2)
                state["exp_avg"].index_copy_(0, rows, exp_avg)
                state["exp_avg_sq"].index_copy_(0, rows, exp_avg_sq)
                denominator = exp_avg_sq.add_(_TINY).sqrt_().div_(math.sqrt(bias2)).add_(group["eps"])
                p.index_add_(0, rows, exp_avg.div_(denominator), alpha=-group["lr"] / bias1)
                state["last_step"].index_fill_(0, rows, step)
        return loss

    @torch.no_grad()
    def catch_up(self, p: Tensor, rows: Tensor) -> None:
        """Bring ``rows`` of ``p`` (any order, repeats allowed) up to the last step."""
        state = self.state.get(p)
        if state:
            self._bring_up(p, state, self._group_of(p), torch.unique(rows.reshape(-1)), int(state["step"]))

    def watch(self, table: Table) -> torch.utils.hooks.RemovableHandle:
        """Catch up the rows each training forward pass of ``table`` reads, before it reads
        them; returns the hook's handle (``handle.remove()`` ends it)."""
        def before_forward(module: Table, args: tuple, kwargs: dict) -> None:
            if module.training and torch.is_grad_enabled():
                self.catch_up(module.weight, args[0] if args else kwargs["input"])
        return table.register_forward_pre_hook(before_forward, with_kwargs=True)

    @torch.no_grad()
    def flush(self) -> None:
        """Bring every row up to the last step: make the moves dense Adam made to rows no
        batch touched since. The weights are then dense Adam's (call before reading them)."""
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state.get(p)
                if state:
                    for start in range(0, p.shape[0], self.FLUSH_ROWS):
                        rows = torch.arange(start, min(start + self.FLUSH_ROWS, p.shape[0]), device=p.device)
                        self._bring_up(p, state, group, rows, int(state["step"]))

    def _bring_up(self, p: Tensor, state: dict[str, Tensor], group: dict, rows: Tensor, end: int) -> None:
        """Move the distinct ``rows`` as dense Adam did in their skipped steps up to ``end``,
        and decay their moments to step ``end``."""
        last = state["last_step"].index_select(0, rows)
        pending = last < end
        rows, last = rows[pending], last[pending]
        if not len(rows):
            return
        beta1, beta2 = group["betas"]
        ratio = beta1 / math.sqrt(beta2)
        horizon = 0 if ratio == 0.0 else math.ceil(math.log(1e-8) / math.log(ratio))
        exp_avg, exp_avg_sq = self._rows_of(state["exp_avg"], rows, 0), self._rows_of(state["exp_avg_sq"], rows, 1)
        if horizon:
            starts, which = torch.unique(last, return_inverse=True)
            offsets = torch.arange(1, horizon + 1, device=p.device)
            steps = starts[:, None] + offsets  # (distinct last steps, J)
            weights = torch.pow(ratio, offsets.to(torch.float64)).to(torch.float32)
            terms = state["step_scale"][steps.clamp(max=end)] * weights
            scale = torch.where(steps <= end, terms, 0.0).sum(1)[which].to(p.dtype)
            move = self._buffer(2, exp_avg.shape, exp_avg)
            torch.add(exp_avg_sq, _TINY, out=move).sqrt_().add_(group["eps"])
            p.index_add_(0, rows, torch.div(exp_avg, move, out=move).mul_(scale[:, None]), alpha=-1.0)
        gap = (end - last).to(torch.float64)[:, None]
        state["exp_avg"].index_copy_(0, rows, exp_avg.mul_(torch.pow(beta1, gap).to(p.dtype)))
        state["exp_avg_sq"].index_copy_(0, rows, exp_avg_sq.mul_(torch.pow(beta2, gap).to(p.dtype)))
        state["last_step"].index_fill_(0, rows, end)

    def load_state_dict(self, state_dict: dict) -> None:
        # torch casts every floating-point parameter's state to the parameter's dtype; keep
        # the per-row step counters exact integers
        last_steps = {index: saved["last_step"] for index, saved in state_dict["state"].items()}
        super().load_state_dict(state_dict)
        params = [p for group in self.param_groups for p in group["params"]]
        for index, last_step in last_steps.items():
            self.state[params[index]]["last_step"] = last_step.to(device=params[index].device, dtype=torch.int64)


def build_optimizers(
    network: nn.Module, sparse_tables: list[Table], *, lr: float, weight_decay: float, device: torch.device
) -> list[torch.optim.Optimizer]:
    """``[Adam over every other weight]`` plus :class:`CatchUpAdam` over ``sparse_tables``, if any.

    The dense Adam is the fused (single-kernel) one where torch has it (CUDA; CPU from torch
    2.4): ~8x faster than the per-tensor loop on CPU, where the step over a dense input table
    dominates a small batch.
    """
    sparse = [table.weight for table in sparse_tables]
    dense = [p for p in network.parameters() if all(p is not q for q in sparse)]
    optimizers: list[torch.optim.Optimizer] = [
        torch.optim.Adam(dense, lr=lr, weight_decay=weight_decay, fused=_has_fused_adam(device))
    ]
    if sparse:
        optimizers.append(CatchUpAdam(sparse, lr=lr))
    return optimizers


def _has_fused_adam(device: torch.device) -> bool:
    """Whether this torch has a fused Adam kernel for ``device``: CUDA, and CPU from torch 2.4."""
    cpu_kernel = torch.torch_version.TorchVersion(torch.__version__) >= "2.4"
    return device.type == "cuda" or (device.type == "cpu" and cpu_kernel)


@contextmanager
def watching(optimizers: Iterable[torch.optim.Optimizer], network: nn.Module) -> Iterator[None]:
    """Within the block, every :class:`CatchUpAdam` in ``optimizers`` catches up the rows of
    its tables in ``network`` before training forward passes read them (:meth:`CatchUpAdam.watch`)."""
    handles = [
        optimizer.watch(table)
        for optimizer in optimizers if isinstance(optimizer, CatchUpAdam)
        for table in embedding_tables(network)
        if any(table.weight is p for group in optimizer.param_groups for p in group["params"])
    ]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def bring_up_to_date(optimizers: Iterable[torch.optim.Optimizer]) -> None:
    """Make every pending catch-up move (:meth:`CatchUpAdam.flush`), so that the weights are
    those dense Adam would hold; call before evaluating or saving them."""
    for optimizer in optimizers:
        if isinstance(optimizer, CatchUpAdam):
            optimizer.flush()


def clip_grad_norm_(parameters: Iterable[nn.Parameter], max_norm: float) -> None:
    """Scale all gradients so that their joint 2-norm is at most ``max_norm``, as
    ``nn.utils.clip_grad_norm_`` does, also when some are row-sparse (those are coalesced
    first: a sparse gradient may list a row once per occurrence in the batch)."""
    grads = []
    for p in parameters:
        if p.grad is not None:
            if p.grad.is_sparse:
                p.grad = p.grad.coalesce()
            grads.append(p.grad._values() if p.grad.is_sparse else p.grad)
    if not grads:
        return
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale)

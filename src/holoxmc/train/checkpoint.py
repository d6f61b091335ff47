"""Training checkpoints without pickle: tensors in safetensors, everything else in JSON.

A checkpoint is ONE ``.safetensors`` file, written atomically, whose header metadata holds
the JSON trainer state (config, epoch, history, RNG scheme, optimizer hyper-parameters),
so tensors and state can never disagree after a crash; a readable ``.json`` copy of the
same state is written beside it for people. The model, the best model so far and the
optimizers' per-parameter states are flattened into named tensors.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from safetensors.torch import save as safetensors_bytes
from torch import Tensor

from holoxmc.errors import InputError
from holoxmc.io import atomic_write_bytes, atomic_write_json, parse_json, to_json
from holoxmc.limits import MAX_SIZE, check_size
from holoxmc.trust import check_finite, read_safetensors

__all__ = [
    "CHECKPOINT_TENSORS",
    "CHECKPOINT_JSON",
    "CHECKPOINT_FORMAT",
    "save_checkpoint",
    "load_checkpoint",
    "flatten_optimizer_state",
    "unflatten_optimizer_state",
    "save_state_dict",
    "load_state_dict_file",
    "data_digest",
    "check_checkpoint_state",
]

CHECKPOINT_TENSORS = "checkpoint.safetensors"
CHECKPOINT_JSON = "checkpoint.json"
_STATE_KEY = "trainer_state"
#: Version 2 holds a list of optimisers (dense Adam, and SparseAdam with sparse updates);
#: version 3 holds CatchUpAdam's state in place of SparseAdam's.
CHECKPOINT_FORMAT = "holoxmc-trainer-checkpoint/3"


def data_digest(*matrices: sp.spmatrix | np.ndarray | None) -> str:
    """SHA-256 of the matrices' shapes and contents (CSR arrays, or a dense array's bytes),
    ``None`` included: a run resumes only on the data it started with.

    Example:
        >>> a = sp.csr_matrix(np.eye(2, dtype=np.float32))
        >>> data_digest(a, None) == data_digest(a.copy(), None) != data_digest(2 * a, None)
        True
    """
    digest = hashlib.sha256()
    for M in matrices:
        if M is None:
            digest.update(b"none")
            continue
        digest.update(repr(M.shape).encode())
        if hasattr(M, "digest"):  # rows of a shard store: the manifest's checksums
            digest.update(M.digest().encode())
            continue
        if sp.issparse(M):
            csr = sp.csr_matrix(M)
            arrays: tuple[np.ndarray, ...] = (csr.indptr, csr.indices, csr.data)
        else:
            arrays = (np.asarray(M),)
        for array in arrays:
            digest.update(str(array.dtype).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _detached(tensors: dict[str, Tensor]) -> dict[str, Tensor]:
    # safetensors refuses shared or non-contiguous storage; clone breaks sharing.
    return {name: t.detach().cpu().contiguous().clone() for name, t in tensors.items()}


def save_state_dict(path: str | Path, state: dict[str, Tensor], metadata: dict[str, str] | None = None) -> None:
    """Atomically write a tensor dictionary (e.g. ``module.state_dict()``) as safetensors."""
    atomic_write_bytes(path, safetensors_bytes(_detached(state), metadata=metadata))


def load_state_dict_file(path: str | Path, device: torch.device | str = "cpu") -> tuple[dict[str, Tensor], dict[str, str]]:
    """Read a safetensors file: ``(tensors, metadata)``. No code is executed while loading
    (:func:`holoxmc.trust.read_safetensors`)."""
    return read_safetensors(path, framework="pt", device=str(device))


def flatten_optimizer_state(optimizer: torch.optim.Optimizer) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Split ``optimizer.state_dict()`` into named tensors and JSON-able rest.

    Returns:
        tensors named ``"{param_id}.{key}"``, and ``{"param_groups": ..., "scalars": ...}``
        where ``scalars`` keeps any non-tensor per-parameter entries.
    """
    state = optimizer.state_dict()
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, Any] = {}
    for param_id, entries in state["state"].items():
        for key, value in entries.items():
            if isinstance(value, Tensor):
                tensors[f"{param_id}.{key}"] = value
            else:
                scalars[f"{param_id}.{key}"] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def unflatten_optimizer_state(tensors: dict[str, Tensor], rest: dict[str, Any]) -> dict[str, Any]:
    """Inverse of :func:`flatten_optimizer_state`: a dict for ``optimizer.load_state_dict``."""
    per_param: dict[int, dict[str, Any]] = {}
    for flat, value in list(tensors.items()) + list(rest["scalars"].items()):
        param_id, key = flat.split(".", 1)
        per_param.setdefault(int(param_id), {})[key] = value
    return {"state": per_param, "param_groups": rest["param_groups"]}


def save_checkpoint(
    run_dir: str | Path,
    *,
    model: dict[str, Tensor],
    best_model: dict[str, Tensor],
    optimizers: list[torch.optim.Optimizer],
    state: dict[str, Any],
) -> None:
    """Write ``run_dir/checkpoint.safetensors`` (+ a readable ``checkpoint.json``) atomically.

    Args:
        run_dir: folder of the run (created if missing).
        model: current weights (``network.state_dict()``).
        best_model: weights of the best validation epoch so far.
        optimizers: their state tensors are stored, their hyper-parameters go to JSON.
        state: JSON-able trainer state (epoch, history, config, RNG scheme, ...).
    """
    run_dir = Path(run_dir)
    tensors = {f"model.{k}": v for k, v in model.items()}
    tensors |= {f"best.{k}": v for k, v in best_model.items()}
    optimizer_rest = []
    for i, optimizer in enumerate(optimizers):
        optim_tensors, optim_rest = flatten_optimizer_state(optimizer)
        tensors |= {f"optim{i}.{k}": v for k, v in optim_tensors.items()}
        optimizer_rest.append(optim_rest)
    full_state = {"format": CHECKPOINT_FORMAT, **state, "optimizers": optimizer_rest}
    save_state_dict(run_dir / CHECKPOINT_TENSORS, tensors, metadata={_STATE_KEY: to_json(full_state)})
    atomic_write_json(run_dir / CHECKPOINT_JSON, full_state)


def load_checkpoint(run_dir: str | Path, device: torch.device | str = "cpu") -> dict[str, Any] | None:
    """Read the checkpoint of ``run_dir``; ``None`` when there is none.

    Returns:
        ``{"model": tensors, "best_model": tensors, "optimizers": [optimizer state dicts],
        "state": JSON trainer state}``.
    """
    for stale in Path(run_dir).glob(".checkpoint.*.tmp"):  # a write cut short by a kill
        stale.unlink(missing_ok=True)
    path = Path(run_dir) / CHECKPOINT_TENSORS
    if not path.exists():
        return None
    tensors, metadata = load_state_dict_file(path, device)
    if _STATE_KEY not in metadata:
        raise InputError(f"{path}: not a holoxmc training checkpoint (no trainer state)")
    state = parse_json(metadata[_STATE_KEY], str(path), expect=None, what="trainer state")  # depth-checked
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise InputError(
            f"{path}: checkpoint format {state.get('format') if isinstance(state, dict) else state!r}, "
            f"this holoxmc resumes {CHECKPOINT_FORMAT!r}; "
            "start again in a new run directory"
        )
    check_checkpoint_state(state, path)
    check_finite(tensors.items(), str(path))
    rests = state.pop("optimizers")
    names = ("model", "best", *(f"optim{i}" for i in range(len(rests))))
    groups: dict[str, dict[str, Tensor]] = {name: {} for name in names}
    for name, tensor in tensors.items():
        group, _, key = name.partition(".")
        if group not in groups or not key:
            raise InputError(f"{path}: unexpected tensor {name!r}")
        groups[group][key] = tensor
    try:
        optimizers = [unflatten_optimizer_state(groups[f"optim{i}"], rest) for i, rest in enumerate(rests)]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"{path}: unreadable optimizer state ({exc!r})") from None
    for i, optimizer in enumerate(optimizers):
        _check_complete_state(optimizer["state"], f"{path}: optim{i}")
    return {"model": groups["model"], "best_model": groups["best"], "optimizers": optimizers, "state": state}


def _check_complete_state(per_param: dict[int, dict[str, Any]], where: str) -> None:
    """Every parameter with optimizer state holds the same entries (Adam: ``step``,
    ``exp_avg``, ``exp_avg_sq``): a tensor missing from an edited or truncated checkpoint is
    named here, not met as a ``KeyError`` in the first step after ``--resume``.

    Raises:
        InputError: ``"<file>: optim0: no tensor '1.exp_avg' (edited or truncated)"``.
    """
    every = set().union(*(set(entries) for entries in per_param.values())) if per_param else set()
    for param_id, entries in sorted(per_param.items()):
        missing = sorted(every - set(entries))
        if missing:
            raise InputError(f"{where}: no tensor '{param_id}.{missing[0]}' (the checkpoint was edited or truncated); "
                             "start again in a new run directory")


def check_checkpoint_state(state: Any, where: str | os.PathLike) -> None:
    """Refuse a training checkpoint's JSON state with missing keys or values of the wrong
    type or range (epochs and counters are non-negative integers, ``since_best`` at most
    ``epoch``, ``history`` a list of ``epoch`` records).

    Raises:
        InputError: naming ``where`` and the first bad field.
    """
    if not isinstance(state, dict):
        raise InputError(f"{where}: the trainer state must be a JSON object, got {type(state).__name__}")
    for key in ("epoch", "since_best", "best_epoch"):
        check_size(key, state.get(key), where=str(where), minimum=0, limit=MAX_SIZE)
    for key in ("config", "data"):
        if not isinstance(state.get(key), dict):
            raise InputError(f"{where}: {key!r} must be a JSON object, got {state.get(key)!r}")
    if not isinstance(state.get("stopped_early"), bool):
        raise InputError(f"{where}: 'stopped_early' must be true or false, got {state.get('stopped_early')!r}")
    if not isinstance(state.get("stopped_by", ""), str):
        raise InputError(f"{where}: 'stopped_by' must be a string, got {state.get('stopped_by')!r}")
    score = state.get("best_score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or math.isnan(score) or score == math.inf:
        raise InputError(f"{where}: 'best_score' must be a number, got {score!r}")
    history = state.get("history")
    if not isinstance(history, list) or len(history) != state["epoch"]:
        raise InputError(f"{where}: 'history' must list one record per epoch ({state['epoch']})")
    if not all(isinstance(record, dict) for record in history):
        raise InputError(f"{where}: every 'history' record must be a JSON object")
    if state["since_best"] > state["epoch"] or state["best_epoch"] > state["epoch"]:
        raise InputError(f"{where}: 'since_best' and 'best_epoch' cannot exceed 'epoch' ({state['epoch']})")
    optimizers = state.get("optimizers")
    if not isinstance(optimizers, list) or not all(
        isinstance(rest, dict) and isinstance(rest.get("param_groups"), list) and isinstance(rest.get("scalars"), dict)
        for rest in optimizers
    ):
        raise InputError(f"{where}: 'optimizers' must be a list of {{param_groups, scalars}} objects")

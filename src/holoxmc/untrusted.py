"""Checks of model folders and checkpoints that holoxmc did not write itself (or that were
edited, truncated or corrupted since): every size a ``config.json`` or a checkpoint claims is
checked against the tensors actually present in the safetensors file (read from its header,
before any module is built) and against :mod:`holoxmc.limits`, so a hostile folder gives one
:class:`~holoxmc.errors.InputError` instead of a traceback or an unbounded allocation.

Example:
    >>> check_json_values({"lr": 1e-3, "hidden": [512]}, "config.json")
    >>> check_json_values({"lr": float("nan")}, "config.json")
    Traceback (most recent call last):
    ...
    holoxmc.errors.InputError: config.json: lr is not a finite number (nan)
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor

from holoxmc.errors import InputError
from holoxmc.limits import MAX_SIZE, check_allocation, check_size

__all__ = [
    "tensor_shapes",
    "check_finite_tensors",
    "check_json_values",
    "check_network_config",
    "check_checkpoint_state",
    "codes_digest",
    "check_saved_classifier",
    "check_loaded_weights",
    "CODE_KEYS",
]

Shapes = dict[str, tuple[int, ...]]

#: Network-config keys that regenerate the label code (and so change every score when edited).
CODE_KEYS = ("head", "n_labels", "dim", "seed", "code", "label_chunk")
#: Deepest nesting accepted in a JSON value read from a model folder.
MAX_DEPTH = 16
#: Seeds are 63-bit (``torch.Generator.manual_seed`` and numpy's ``SeedSequence``).
MAX_SEED = 2**63 - 1


def tensor_shapes(path: str | os.PathLike) -> Shapes:
    """``{name: shape}`` of the safetensors file ``path``, read from its header only (no
    tensor data is read or allocated).

    Raises:
        InputError: the file is missing or not a readable safetensors file.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such model file")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            return {name: tuple(int(n) for n in f.get_slice(name).get_shape()) for name in f.keys()}
    except (OSError, SafetensorError) as exc:
        raise InputError(f"{path}: not a readable safetensors file ({exc})") from exc


def check_finite_tensors(tensors: Mapping[str, Tensor], where: str | os.PathLike) -> None:
    """Refuse a floating-point tensor holding NaN or an infinity.

    Raises:
        InputError: naming ``where`` and the first such tensor.

    Example:
        >>> check_finite_tensors({"w": torch.tensor([1.0, float("inf")])}, "model.safetensors")
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: model.safetensors: tensor 'w' holds NaN or infinite values
    """
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise InputError(f"{where}: tensor {name!r} holds NaN or infinite values")


def check_json_values(value: Any, where: str | os.PathLike, name: str = "", depth: int = 0) -> None:
    """Refuse NaN or infinite numbers, non-string keys and nesting deeper than
    :data:`MAX_DEPTH` anywhere in the JSON value ``value``.

    Raises:
        InputError: naming ``where`` and the offending key path.
    """
    label = name or "the value"
    if depth > MAX_DEPTH:
        raise InputError(f"{where}: {label} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{where}: {label} is not a finite number ({value})")
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InputError(f"{where}: {label} has a non-string key {key!r}")
            check_json_values(item, where, f"{name}.{key}" if name else key, depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_json_values(item, where, f"{label}[{i}]", depth + 1)


def check_network_config(
    network: Any, shapes: Shapes, n_labels: int, n_features: int, where: str | os.PathLike, prefix: str = "network."
) -> None:
    """Check a saved network config (one network, or ``{"members": [...]}``) against the
    tensor shapes of its weights file, before any module is built.

    Every size the config claims must be an integer within :data:`holoxmc.limits.MAX_SIZE`;
    the backbone is built on the ``meta`` device (no memory) and its parameter shapes must
    equal the stored ones; the head's sizes must match its stored weights, and what the head
    regenerates without storing it (the HRR label code's keys) must fit in memory.

    Args:
        network: the ``network`` entry of ``config.json``.
        shapes: :func:`tensor_shapes` of the weights file.
        n_labels: the (checked) label count of ``config.json``.
        n_features: the (checked) input size of ``config.json``.
        where: the config file, for messages.
        prefix: the weights' name prefix.

    Raises:
        InputError: one line naming ``where`` and the first mismatch.
    """
    if isinstance(network, dict) and "members" in network:
        members = network["members"]
        if set(network) != {"members"} or not isinstance(members, list) or not 2 <= len(members) <= 64:
            raise InputError(f"{where}: 'network.members' must be a list of 2 to 64 network configs")
        for i, member in enumerate(members):
            check_network_config(member, shapes, n_labels, n_features, where, f"{prefix}members.{i}.")
        return
    if not isinstance(network, dict):
        raise InputError(f"{where}: 'network' must be a JSON object, got {network!r}")
    _check_member(network, _under(shapes, prefix), n_labels, n_features, f"{where}: network")


def _under(shapes: Shapes, prefix: str) -> Shapes:
    return {name[len(prefix):]: shape for name, shape in shapes.items() if name.startswith(prefix)}


def _check_member(config: dict[str, Any], shapes: Shapes, n_labels: int, n_features: int, where: str) -> None:
    from holoxmc.backbones.network import BACKBONES, HEADS

    backbone, head = config.get("backbone"), config.get("head")
    if not isinstance(backbone, str) or backbone not in BACKBONES:
        raise InputError(f"{where}: 'backbone' must be one of {sorted(BACKBONES)}, got {backbone!r}")
    if not isinstance(head, str) or head not in HEADS:
        raise InputError(f"{where}: 'head' must be one of {sorted(HEADS)}, got {head!r}")
    input_name = "n_features" if backbone == "fc" else "vocab_size"
    for key, expected in (("n_labels", n_labels), (input_name, n_features)):
        if config.get(key) != expected or isinstance(config.get(key), bool):
            raise InputError(f"{where}: {key!r} is {config.get(key)!r}, the model's is {expected}")
    check_size("seed", config.get("seed"), where=where, minimum=0, limit=MAX_SEED)
    for key, value in config.items():
        _check_option(key, value, len(shapes), where)
    in_features = _check_backbone(config, shapes, where)
    if head == "hrr":
        _check_hrr_head(config, shapes, n_labels, in_features, where)
    else:
        _check_dense_head(config, shapes, n_labels, in_features, where)


def _check_option(key: str, value: Any, n_tensors: int, where: str) -> None:
    """An option is a JSON scalar or a short list of integers; an integer is a bounded size."""
    if isinstance(value, list):
        if len(value) > max(n_tensors, 1):
            raise InputError(f"{where}: {key!r} lists {len(value)} values, more than the model has tensors")
        for item in value:
            check_size(key, item, where=where, minimum=0)
    elif isinstance(value, int) and not isinstance(value, bool):
        if key != "seed":
            check_size(key, value, where=where, minimum=0)
    elif not (value is None or isinstance(value, (bool, float, str))):
        raise InputError(f"{where}: {key!r} must be a number, a string or a list of integers, got {value!r}")


def _check_backbone(config: dict[str, Any], shapes: Shapes, where: str) -> int:
    """Build the backbone on the meta device, compare its parameter shapes and return its
    output width."""
    from holoxmc.backbones.network import BACKBONES, _accepted

    cls = BACKBONES[config["backbone"]]
    input_size = config["n_features" if config["backbone"] == "fc" else "vocab_size"]
    options = {key: value for key, value in config.items() if key in _accepted(cls)}
    try:
        with torch.device("meta"):
            module = cls(input_size, seed=0, **options)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError(f"{where}: invalid backbone options ({exc})") from None
    _compare(module.state_dict(), shapes, "backbone.", where)
    return int(module.out_features)


def _compare(state: Mapping[str, Tensor], shapes: Shapes, prefix: str, where: str) -> None:
    expected = {f"{prefix}{name}": tuple(tensor.shape) for name, tensor in state.items()}
    stored = {name: shape for name, shape in shapes.items() if name.startswith(prefix)}
    for name in sorted(set(expected) | set(stored)):
        if expected.get(name) != stored.get(name):
            raise InputError(f"{where}: tensor {name!r} is stored as {stored.get(name)}, "
                             f"the config builds {expected.get(name)}")


def _check_dense_head(config: dict[str, Any], shapes: Shapes, n_labels: int, in_features: int, where: str) -> None:
    """Build the dense head on the meta device and compare its parameter shapes."""
    from holoxmc.backbones.network import HEADS, _accepted

    cls = HEADS["dense"]
    options = {key: value for key, value in config.items() if key in _accepted(cls)}
    try:
        with torch.device("meta"):
            module = cls(in_features, n_labels, seed=0, **options)
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError(f"{where}: invalid head options ({exc})") from None
    _compare(module.state_dict(), shapes, "head.", where)


def _check_hrr_head(config: dict[str, Any], shapes: Shapes, n_labels: int, in_features: int, where: str) -> None:
    """The HRR head's stored ``linear`` must be ``(dim, in_features)``; the code keys it
    regenerates (``2·L·dim`` floats) must fit in memory."""
    dim = check_size("dim", config.get("dim", 400), where=where)
    stored = shapes.get("head.linear.weight")
    if stored != (dim, in_features):
        raise InputError(f"{where}: tensor 'head.linear.weight' is stored as {stored}, the config builds "
                         f"{(dim, in_features)}")
    check_size("label_chunk", config.get("label_chunk", 16384), where=where)
    check_allocation(2 * n_labels * dim * 4, f"the label code ({n_labels} labels x {dim})", where=where)


def check_saved_classifier(config: dict[str, Any], model_file: Path, config_path: Path) -> Shapes:
    """Check a saved classifier's ``config.json`` (already read as a JSON object) against
    its weights file's header, before any weight is read or any module built.

    Returns:
        the weights' :func:`tensor_shapes`.

    Raises:
        InputError: one line naming the file and the first fault.
    """
    check_json_values({k: v for k, v in config.items() if k != "history"}, config_path)
    n_labels = check_size("n_labels", config["n_labels"], where=str(config_path))
    n_features = check_size("n_features", config["n_features"], where=str(config_path))
    shapes = tensor_shapes(model_file)
    if shapes.get("inv_prop") != (n_labels,):
        raise InputError(f"{model_file}: tensor 'inv_prop' is stored as {shapes.get('inv_prop')}, "
                         f"{config_path.name} claims {n_labels} labels")
    head = config["params"].get("head", "hrr")
    if head in ("hrr", "dense"):
        check_network_config(config["network"], shapes, n_labels, n_features, config_path)
    elif head == "linear":
        for name, shape in (("linear.bias", (n_labels,)), ("linear.weights.indptr", (n_features + 1,))):
            if shapes.get(name) != shape:
                raise InputError(f"{model_file}: tensor {name!r} is stored as {shapes.get(name)}, expected {shape}")
    elif head != "solar":
        raise InputError(f"{config_path}: unknown head {head!r}")
    return shapes


def check_loaded_weights(tensors: Mapping[str, Tensor], metadata: Mapping[str, str], network: Any,
                         model_file: Path) -> None:
    """Refuse non-finite weights, and a network config whose label-code parameters differ
    from those the weights were trained with (:func:`codes_digest` in the file's metadata;
    a file written before the digest existed has none and is not checked).

    Raises:
        InputError: naming ``model_file``.
    """
    check_finite_tensors(tensors, model_file)
    stored = metadata.get("codes_digest")
    if stored is not None and stored != codes_digest(network):
        raise InputError(f"{model_file}: the label-code parameters in config.json ({', '.join(CODE_KEYS)}) differ "
                         "from those the weights were trained with; the folder was edited")


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


def codes_digest(network: Any) -> str | None:
    """SHA-256 of what regenerates a network's label codes (:data:`CODE_KEYS` of each member),
    or ``None`` for a network without a regenerated code (dense heads).

    Example:
        >>> a = {"head": "hrr", "n_labels": 10, "dim": 32, "seed": 0}
        >>> codes_digest(a) == codes_digest(dict(a)) != codes_digest(a | {"seed": 1})
        True
    """
    members = network["members"] if isinstance(network, dict) and "members" in network else [network]
    if not all(isinstance(member, dict) for member in members):
        return None
    parts = [{key: member.get(key) for key in CODE_KEYS} for member in members if member.get("head") == "hrr"]
    if not parts:
        return None
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()

"""Checks of a model folder before anything is built from it.

A saved model's ``config.json`` is plain text that anyone can edit, and a folder may come
from someone else. Every size it claims is checked against the tensors actually stored in
its safetensors files (whose shapes are read from the file header, without loading the
data) and against this machine's memory, before a module is allocated; stored weights must
be finite. Each failure is one :class:`~holoxmc.errors.InputError` naming the file.

Only the network checks import torch (and the checks of torch tensors): a model folder whose
arrays are read with ``safetensors.numpy`` (:func:`read_safetensors`) is checked without it.

Example:
    >>> sizes_in({"hidden": [512, 512], "dim": 400, "seed": 7, "code": "random"})
    [512, 512, 400]
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from safetensors import safe_open

from holoxmc.errors import InputError
from holoxmc.limits import check_allocation, check_size

__all__ = ["tensor_shapes", "read_safetensors", "sizes_in", "check_network_config", "check_finite"]

#: Keys of a network configuration that are not sizes (numbers that allocate nothing).
NOT_SIZES = frozenset({"seed", "dropout", "ranking", "ranking_scale", "n_layers", "pooling_chunks", "filter_sizes",
                       "max_length"})
#: Largest value of a numeric setting that allocates per unit (label_chunk, ranking_candidates):
#: they bound buffers of ``rows x value`` and are checked against this, not the stored tensors.
MAX_CHUNK = 2**22
_CHUNK_KEYS = frozenset({"label_chunk", "ranking_candidates"})
#: Largest token cap of a text backbone (``max_length``): a batch pads to it, so it allocates
#: ``rows x max_length`` tokens and activations; it is checked against this, not the stored tensors.
MAX_SEQUENCE = 2**16


def tensor_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """The shape of every tensor in the safetensors file ``path``, from its header alone.

    Raises:
        InputError: the file is missing or not a readable safetensors file.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such model file")
    try:
        with safe_open(str(path), framework="numpy") as f:  # the header alone: any dtype, no torch
            return {name: tuple(int(d) for d in f.get_slice(name).get_shape()) for name in f.keys()}
    except Exception as exc:  # safetensors raises its own error types, which differ by version
        raise InputError(f"{path}: not a readable safetensors file ({exc})") from None


def read_safetensors(path: str | Path, *, framework: str = "pt", device: str = "cpu") -> tuple[dict[str, Any],
                                                                                               dict[str, str]]:
    """Read a safetensors file: ``(tensors, metadata)``, torch tensors on ``device``
    (``framework="pt"``) or NumPy arrays (``"numpy"``: torch is not imported; a dtype NumPy
    lacks, such as bfloat16, is refused). No code is executed while loading.

    Raises:
        InputError: ``"<path>: no such model file"``, ``"<path>: not a readable safetensors file (...)"``.
    """
    from safetensors import SafetensorError

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such model file")
    try:
        options = {"device": str(device)} if framework == "pt" else {}
        with safe_open(str(path), framework=framework, **options) as f:
            tensors = {name: f.get_tensor(name) for name in f.keys()}
            metadata = dict(f.metadata() or {})
    except (OSError, SafetensorError, TypeError) as exc:  # TypeError: a dtype NumPy lacks
        raise InputError(f"{path}: not a readable safetensors file ({exc})") from exc
    return tensors, metadata


def sizes_in(config: Mapping[str, Any]) -> list[int]:
    """The integers of a network configuration that size a module (every int, or list of
    ints, except the keys in :data:`NOT_SIZES` and the chunk settings)."""
    sizes: list[int] = []
    for key, value in config.items():
        if key in NOT_SIZES or key in _CHUNK_KEYS or key == "members":
            continue
        values = value if isinstance(value, list) else [value]
        sizes += [int(v) for v in values if isinstance(v, numbers.Integral) and not isinstance(v, bool)]
    return sizes


def _members(config: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    if not isinstance(config, Mapping):
        raise InputError(f"{where}: 'network' must be a JSON object, got {config!r}")
    if "members" not in config:
        return [config]
    members = config["members"]
    if not isinstance(members, list) or not members or not all(isinstance(m, Mapping) for m in members):
        raise InputError(f"{where}: 'network.members' must be a non-empty list of JSON objects")
    return members


def check_network_config(
    config: Any, shapes: Mapping[str, tuple[int, ...]], *, n_features: int, n_labels: int, where: str
) -> None:
    """Check a saved ``network`` configuration against the stored tensors before building it.

    Args:
        config: the ``network`` value of ``config.json`` (one network, or ``{"members": [...]}``).
        shapes: the stored tensors' shapes (:func:`tensor_shapes`).
        n_features: the model's input size (already checked against the stored tensors).
        n_labels: the model's label count (already checked against the stored tensors).
        where: the file, for messages.

    Raises:
        InputError: a member's sizes differ from the model's, a size appears in no stored
            tensor, or building it would need more memory than this machine has.
    """
    stored = {d for shape in shapes.values() if math.prod(shape) > 0 for d in shape}
    for member in _members(config, where):
        if member.get("n_labels") != n_labels:
            raise InputError(f"{where}: network.n_labels {member.get('n_labels')!r} differs from n_labels {n_labels}")
        input_key = "n_features" if member.get("backbone") == "fc" else "vocab_size"
        if member.get(input_key) != n_features:
            raise InputError(f"{where}: network.{input_key} {member.get(input_key)!r} differs from "
                             f"n_features {n_features}")
        for key in _CHUNK_KEYS & set(member):
            check_size(f"network.{key}", member[key], where=where, limit=MAX_CHUNK)
        if "max_length" in member:
            check_size("network.max_length", member["max_length"], where=where, limit=MAX_SEQUENCE)
        for size in sizes_in(member):
            if size != 0 and size not in stored and size != n_labels:
                raise InputError(f"{where}: network size {size} matches no stored tensor (edited or "
                                 "from another model)")
        from holoxmc.backbones.network import estimate_network_bytes

        check_allocation(estimate_network_bytes(member), "the network this configuration describes", where=where)


def check_finite(tensors: Iterable[tuple[str, Any]], where: str, *, infinite_ok: Collection[str] = ()) -> None:
    """Refuse stored weights holding NaN or infinite values; the tensors named in
    ``infinite_ok`` may hold ±inf (never NaN): the linear model's biases, ``-inf`` for a label
    no training row has and ``+inf`` for one every row has. Torch tensors or NumPy arrays.

    Raises:
        InputError: naming the first such tensor.

    Example:
        >>> check_finite([("bias", np.array([0.0, -np.inf]))], "model.safetensors", infinite_ok={"bias"})
        >>> check_finite([("w", np.array([np.nan]))], "model.safetensors")
        Traceback (most recent call last):
        ...
        holoxmc.errors.InputError: model.safetensors: tensor 'w' holds NaN or infinite values
    """
    for name, tensor in tensors:
        if isinstance(tensor, np.ndarray):
            if not np.issubdtype(tensor.dtype, np.floating):
                continue
            has_nan, all_finite = bool(np.isnan(tensor).any()), bool(np.isfinite(tensor).all())
        else:
            import torch

            if not tensor.is_floating_point():
                continue
            has_nan, all_finite = bool(torch.isnan(tensor).any()), bool(torch.isfinite(tensor).all())
        if name in infinite_ok:
            if has_nan:
                raise InputError(f"{where}: tensor {name!r} holds NaN values")
        elif not all_finite:
            raise InputError(f"{where}: tensor {name!r} holds NaN or infinite values")

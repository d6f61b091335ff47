"""Saving and loading an ``XMCClassifier``: ``config.json`` (settings, the resolved network
configuration, sizes, history) and ``model.safetensors`` (weights), no pickle.

The estimator's ``save`` and ``load`` call [`save_classifier`][holoxmc.persist.save_classifier]
and [`load_classifier`][holoxmc.persist.load_classifier] in one line each. Reading a folder and
every check of it is [`read_saved`][holoxmc.persist.read_saved], which needs no estimator:
a linear or re-rank model is read with ``safetensors.numpy`` and checked with NumPy, without
importing torch or scikit-learn (:func:`holoxmc.serving.load_served`).

Example:
    >>> path = save_classifier(clf, "model_dir")               # doctest: +SKIP
    >>> clf = load_classifier(XMCClassifier, "model_dir")      # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from holoxmc import __version__
from holoxmc.errors import InputError
from holoxmc.io import atomic_write_files, finite_or_null, json_text, read_json, to_json
from holoxmc.labels import check_classes
from holoxmc.limits import check_size
from holoxmc.auto import Trial, read_trials
from holoxmc.models.registry import FAMILIES, Family, check_settings, fit_settings
from holoxmc.models.thresholds import LabelRule
from holoxmc.settings import untaken_defaults
from holoxmc.trust import check_finite, check_network_config, read_safetensors, tensor_shapes

__all__ = ["FORMAT", "CONFIG_FILE", "MODEL_FILE", "CONFIG_KEYS", "DIGEST_KEY", "SavedModel", "save_classifier",
           "load_classifier", "read_saved", "read_labels", "network_dim", "read_config", "scoring_digest",
           "read_history", "read_json_object"]

FORMAT = "holoxmc-xmc-classifier/1"
CONFIG_FILE = "config.json"
MODEL_FILE = "model.safetensors"
#: Keys of config.json that loading reads, besides ``format`` (``network`` is ``null`` but for networks).
CONFIG_KEYS = ("params", "network", "n_features", "n_labels")
#: Key of model.safetensors' metadata holding [`scoring_digest`][holoxmc.persist.scoring_digest]
#: of the saved config.
DIGEST_KEY = "scoring_config_sha256"


def save_classifier(clf: Any, path: str | Path) -> Path:
    """Write ``path/config.json`` and ``path/model.safetensors`` (atomically each) of a fitted
    classifier.

    Args:
        clf: a fitted ``XMCClassifier``.
        path: the folder.

    Returns:
        the folder.

    Example:
        >>> save_classifier(clf, "model_dir")  # doctest: +SKIP
    """
    import torch
    from safetensors.torch import save as safetensors_bytes

    from holoxmc.models.network.model import NetworkModel

    clf._check_fitted()
    path = Path(path)
    state = clf.model_.save_to(path)
    state["inv_prop"] = torch.from_numpy(clf.inv_prop_)
    histories = [result.history for result in clf.fit_results_]
    network = clf.model_.network.config if isinstance(clf.model_, NetworkModel) else None
    params = clf.get_params() | {"head": clf.head_} | untaken_defaults(clf.head_)  # auto's winner: its own settings
    params = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
    if network_dim(network) is not None:  # the resolved network configuration holds it, once
        del params["dim"]
    config = {
        "format": FORMAT,
        "written_by": {"holoxmc": __version__, "torch": torch.__version__},
        "params": params,
        "network": network,
        "n_features": clf.n_features_,
        "n_labels": clf.n_labels_,
        "history": histories[0] if len(histories) == 1 else histories,
    }
    if hasattr(clf, "selection_"):  # chosen by head="auto": saved as the winner, with the candidates
        config["selection"] = [trial.as_dict() for trial in clf.selection_]
    config |= clf._saved_labels()  # predict's rule, and the label names of a model fitted on names
    weights = safetensors_bytes({k: v.detach().cpu().contiguous().clone() for k, v in state.items()},
                                metadata={"format": FORMAT, DIGEST_KEY: scoring_digest(config)})
    atomic_write_files(path, {MODEL_FILE: weights,  # config.json, which load reads first, goes last
                              CONFIG_FILE: json_text(finite_or_null(config), allow_nan=False).encode()})
    return path


def load_classifier(cls: Any, path: str | Path, *, device: str | None = None) -> Any:
    """Rebuild a classifier saved by [`save_classifier`][holoxmc.persist.save_classifier].

    Args:
        cls: the estimator class (``XMCClassifier`` or a subclass).
        path: the folder.
        device: override the saved device (e.g. load a GPU-trained model on ``"cpu"``).

    Returns:
        the fitted classifier.

    Example:
        >>> clf = load_classifier(XMCClassifier, "model_dir", device="cpu")  # doctest: +SKIP
    """
    from holoxmc.train import FitResult

    saved = read_saved(path, cls._get_param_names(), cls._defaults(), device=device)
    assert saved is not None  # every head: read_saved returns None only with arrays_only
    clf = cls(**saved.given)
    clf.n_features_, clf.n_labels_ = saved.n_features, saved.n_labels
    if clf.backbone == "fc":
        clf.n_features_in_ = clf.n_features_
    clf.inv_prop_ = saved.inv_prop
    clf.label_rule_ = saved.label_rule
    if saved.multiclass:
        clf.multiclass_ = True
    clf._with_labels(saved.names)
    if saved.selection is not None:
        clf.selection_ = saved.selection
    results = [FitResult(history=h) for h in (saved.history if clf.n_models > 1 else [saved.history])]
    clf._set_model(saved.model, results)
    return clf


@dataclass(frozen=True)
class SavedModel:
    """A saved classifier's folder, read and checked by [`read_saved`][holoxmc.persist.read_saved]:
    what [`load_classifier`][holoxmc.persist.load_classifier] sets on an estimator, and what
    :class:`holoxmc.serving.ServedClassifier` serves without one.

    Attributes:
        given: the saved settings as the estimator's keywords (lists as tuples, ``dim`` from
            the network configuration, the device overridden); params: every setting, a default
            where none was saved (the estimator's ``get_params()``); kind: the head's family;
        n_features, n_labels: the sizes; inv_prop: ``(L,)`` inverse propensities;
        label_rule, names, multiclass: :func:`read_labels`; selection: ``head="auto"``'s
            candidates (``None``: not chosen so); history: the saved per-epoch history;
        model: the served :class:`~holoxmc.models.base.FittedModel`.
    """

    given: dict[str, Any]
    params: dict[str, Any]
    kind: Family
    n_features: int
    n_labels: int
    inv_prop: np.ndarray
    label_rule: LabelRule
    names: np.ndarray | None
    multiclass: bool
    selection: list[Trial] | None
    history: list[Any]
    model: Any


def read_saved(path: str | Path, param_names: Sequence[str], defaults: Mapping[str, Any], *,
               device: str | None = None, arrays_only: bool = False) -> SavedModel | None:
    """Read and check the folder [`save_classifier`][holoxmc.persist.save_classifier] wrote, in
    this order: ``config.json`` (format, keys, known settings, sizes), the device, every setting
    (:func:`~holoxmc.models.registry.check_settings`), ``model.safetensors`` (shapes against the
    config, finite values, the scoring digest), the labels, the selection, the history, then
    the model itself (its family's ``load``).

    Args:
        path: the folder.
        param_names: the estimator's setting names (any other saved is refused).
        defaults: every setting's default (those of the estimator's ``__init__``).
        device: override the saved device.
        arrays_only: return ``None``, after reading ``config.json`` only, unless the model
            loads from NumPy arrays (:attr:`~holoxmc.models.registry.Family.arrays`: the linear
            and re-rank models) on the CPU: then nothing here imports torch or scikit-learn.

    Returns:
        the :class:`SavedModel`, or ``None`` (``arrays_only``).

    Raises:
        InputError: naming the file and what is wrong.

    Example:
        >>> from holoxmc.settings import DEFAULTS
        >>> read_saved("run", list(DEFAULTS), DEFAULTS, arrays_only=True)  # doctest: +SKIP
    """
    path = Path(path)
    config_path = path / CONFIG_FILE
    if not config_path.exists() and not config_path.is_symlink():  # anything else: read_json_object says what it is
        raise InputError(f"{path}: not a saved model (no {CONFIG_FILE})")
    config = read_config(config_path, param_names)
    given = _saved_params(config, device)
    head = given.get("head", defaults["head"])
    if arrays_only and (given.get("device", defaults["device"]) != "cpu" or head not in FAMILIES
                        or not FAMILIES[head].arrays):
        return None
    _check_device(given.get("device", "cpu"), path, overridden=device is not None)
    params = {name: defaults[name] for name in param_names} | given  # what the estimator's get_params() gives
    try:
        kind = check_settings(params, defaults)
    except InputError as exc:
        raise InputError(f"{config_path}: {exc}") from None
    n_features, n_labels = config["n_features"], config["n_labels"]
    tensors = _read_weights(path, config, n_features, n_labels, kind)
    inv_prop = np.asarray(tensors.pop("inv_prop"))
    rule, names, multiclass = read_labels(config, str(config_path), n_labels)
    selection = read_trials(config["selection"], str(config_path)) if "selection" in config else None
    history = read_history(config.get("history", []), params["n_models"], config_path)
    model = kind.load(fit_settings(params), path, config, tensors)
    return SavedModel(given, params, kind, n_features, n_labels, inv_prop, rule, names, multiclass, selection, history,
                      model)


def _saved_params(config: dict[str, Any], device: str | None) -> dict[str, Any]:
    """The saved settings as the estimator's keywords, on ``device`` when given."""
    params: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in config["params"].items()}
    # a setting the head does not take never changed the model: an older holoxmc's fit ignored
    # it (dense's dim), and head="auto" saved its own time_budget with the winner
    params |= {key: value for key, value in untaken_defaults(params.get("head")).items() if key in params}
    dim = network_dim(config["network"])
    if "dim" not in params and dim is not None:  # saved once, in the network configuration
        params["dim"] = dim
    if device is not None:
        params["device"] = device
    return params


def _check_device(name: Any, path: Path, *, overridden: bool) -> None:
    """:func:`holoxmc.devices.check_device` of the saved (or given) device; ``"cpu"`` is
    always one, and is not checked (the check imports torch)."""
    if name == "cpu":
        return
    from holoxmc.devices import check_device

    try:
        check_device(name)
    except InputError as exc:
        hint = "" if overridden else " (it was saved with that device; load it with device='cpu')"
        raise InputError(f"{path}: {exc}{hint}") from None


def read_labels(config: dict[str, Any], where: str, n_labels: int) -> tuple[LabelRule, np.ndarray | None, bool]:
    """``predict``'s rule, the label names and whether the model was fitted on one class per
    row, of a saved ``config.json`` (a model saved before 0.2 has neither rule nor names: the
    top-1 rule, label ids).

    Returns:
        ``(label rule, names (None: label ids 0 .. L-1), multiclass)``.

    Example:
        >>> read_labels({"classes": ["a", "b"]}, "config.json", 2)[1].tolist()
        ['a', 'b']
    """
    rule = config.get("label_rule")
    label_rule = LabelRule(source="saved without a rule: top-1") if rule is None else LabelRule.from_dict(rule, where)
    names = config.get("classes")
    if names is not None:
        try:
            names = check_classes(names)
        except InputError as exc:
            raise InputError(f"{where}: 'classes': {exc}") from None
        if len(names) != n_labels:
            raise InputError(f"{where}: 'classes' holds {len(names)} names for {n_labels} labels")
    single = config.get("multiclass_classes")
    if single is None:
        return label_rule, names, False
    if not isinstance(single, list) or len(single) != n_labels or not (
            all(isinstance(v, str) for v in single)
            or all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in single)):
        raise InputError(f"{where}: 'multiclass_classes' must hold {n_labels} strings or numbers")
    return label_rule, np.asarray(single), True


#: Stored tensors that may hold ±inf: the linear model's biases (a label no training row has
#: scores -inf, one every row has +inf), alone or inside the fused text model.
INFINITE_OK = frozenset({"linear.bias"})


def _read_weights(path: Path, config: dict[str, Any], n_features: int, n_labels: int, kind: Family) -> dict[str, Any]:
    """The checked tensors of ``path/model.safetensors`` (NumPy arrays for a family that loads
    from them, else torch tensors): shapes against the config, finite, and the config's
    scoring digest unchanged."""
    config_path, model_file = path / CONFIG_FILE, path / MODEL_FILE
    shapes = tensor_shapes(model_file)
    if shapes.get("inv_prop") != (n_labels,):
        raise InputError(f"{model_file}: tensor 'inv_prop' of shape {shapes.get('inv_prop')} does not hold "
                         f"the n_labels = {n_labels} of {CONFIG_FILE}")
    if kind.attribute == "network_":  # a network family: its saved network configuration
        check_network_config(config["network"], shapes, n_features=n_features, n_labels=n_labels,
                             where=str(config_path))
    tensors, metadata = read_safetensors(model_file, framework="numpy" if kind.arrays else "pt")
    check_finite(tensors.items(), str(model_file), infinite_ok=INFINITE_OK)
    digest = metadata.get(DIGEST_KEY)
    if digest is None and _writes_digest(config):
        raise InputError(f"{model_file}: holds no scoring digest, which the holoxmc that wrote it records (the file "
                         "was edited)")
    if digest is not None and digest != scoring_digest(config):
        raise InputError(f"{config_path}: edited after the model was saved (its scoring settings no longer "
                         f"match {MODEL_FILE}'s digest)")
    return tensors


def _writes_digest(config: dict[str, Any]) -> bool:
    """Whether the holoxmc named in ``config["written_by"]`` writes the scoring digest (0.2.0
    on: models of 0.1.0 may lack it)."""
    written_by = config.get("written_by")
    version = written_by.get("holoxmc") if isinstance(written_by, dict) else None
    try:
        return tuple(int(part) for part in str(version).split(".")[:2]) >= (0, 2)
    except ValueError:
        return False


def network_dim(network: Any) -> int | None:
    """The HRR dimension a saved network configuration holds (an ensemble's first member's),
    or None when it holds none (a dense head, no network, a malformed value).

    Args:
        network: the ``network`` value of ``config.json``.

    Returns:
        ``dim``, or None.

    Example:
        >>> network_dim({"members": [{"head": "hrr", "dim": 16}]}), network_dim(None)
        (16, None)
    """
    if isinstance(network, dict) and isinstance(network.get("members"), list) and network["members"]:
        network = network["members"][0]
    value = network.get("dim") if isinstance(network, dict) else None
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else None


def read_config(config_path: Path, param_names: Sequence[str]) -> dict[str, Any]:
    """The contents of a saved model's ``config.json``, once it holds what loading needs.

    Args:
        config_path: the file.
        param_names: the estimator's setting names (any other in ``params`` is refused).

    Returns:
        the JSON object.

    Example:
        >>> read_config(Path("model_dir/config.json"), XMCClassifier._get_param_names())  # doctest: +SKIP
    """
    config = read_json_object(config_path)
    if config.get("format") != FORMAT:
        raise InputError(f"{config_path}: unsupported format {config.get('format')!r}, expected {FORMAT!r}")
    missing = [key for key in CONFIG_KEYS if key not in config]
    if missing:
        raise InputError(f"{config_path}: missing key {missing[0]!r}")
    if not isinstance(config["params"], dict):
        raise InputError(f"{config_path}: 'params' must be a JSON object, got {config['params']!r}")
    unknown = sorted(set(config["params"]) - set(param_names))
    if unknown:
        raise InputError(f"{config_path}: unknown params {unknown}")
    for key in ("n_features", "n_labels"):
        check_size(repr(key), config[key], where=str(config_path))
    return config


def scoring_digest(config: dict[str, Any]) -> str:
    """SHA-256 of what a saved model's scores depend on besides its weights: the network
    configuration (its seed regenerates the label code), the sizes and the head's options.

    Args:
        config: the contents of ``config.json``.

    Returns:
        the hex digest.

    Example:
        >>> len(scoring_digest({"params": {}, "network": None}))
        64
    """
    params = config.get("params") or {}
    scoring = {key: config.get(key) for key in ("network", "n_features", "n_labels")}
    scoring |= {key: params.get(key) for key in ("head", "backbone", "head_options")}
    return hashlib.sha256(to_json(scoring, sort_keys=True).encode()).hexdigest()


def read_history(history: Any, n_models: int, where: Path) -> list[Any]:
    """The saved per-epoch history: a list of epoch records (one list per member of an ensemble).

    Args:
        history: the ``history`` value of ``config.json``.
        n_models: the ensemble's size.
        where: the file, for errors.

    Returns:
        ``history``, checked.

    Example:
        >>> read_history([{"epoch": 1}], 1, Path("config.json"))
        [{'epoch': 1}]
    """
    runs = history if n_models > 1 else [history]
    if not isinstance(runs, list) or len(runs) != n_models or not all(
            isinstance(run, list) and all(isinstance(epoch, dict) for epoch in run) for run in runs):
        raise InputError(f"{where}: 'history' must be a list of epoch records"
                         f"{' per member' if n_models > 1 else ''}")
    return history


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in the UTF-8 file ``path``: a regular file (a FIFO, device or folder is
    refused) of at most :data:`holoxmc.io.MAX_JSON_BYTES`, nested at most
    :data:`holoxmc.io.MAX_JSON_DEPTH` deep (:func:`holoxmc.io.read_json`).

    Args:
        path: the file.

    Returns:
        the object.

    Example:
        >>> read_json_object(Path("model_dir/config.json"))["format"]  # doctest: +SKIP
        'holoxmc-xmc-classifier/1'
    """
    return read_json(path, what=path.name)  # a regular file, bounded, depth-checked: holoxmc.io

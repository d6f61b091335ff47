"""Every default and preset a model is built from, in one place: the head kinds' tuned
defaults, the settings per head and per dataset, the CLI's model names and head options,
and the propensity constants of PSP@k.

The evidence behind each tuned value (splits, seeds, measured gains) is the tuning log,
``docs/tuning.md``.

Example:
    >>> preset_params("bibtex", "fc")["hidden"]
    (2048,)
    >>> model_params("hrr-lstm")
    {'head': 'hrr', 'backbone': 'lstm'}
    >>> "linear_width" in preset_params("debtags", "hrr-cnn")  # the Debtags HRR preset is the FC backbone's
    False
"""

from __future__ import annotations

import re
from typing import Any

from holoxmc.errors import InputError

__all__ = ["HEAD_DEFAULTS", "HEAD_PRESETS", "DATASET_PRESETS", "MODELS", "HEAD_OPTIONS", "PROPENSITY_PRESETS",
           "PROPENSITY_SETS", "DEFAULT_PROPENSITY", "BACKBONE_DEFAULTS", "BACKBONE_OPTIONS", "model_params",
           "preset_params", "propensity_preset", "setting_defaults", "dataset_preset"]

#: Values of the settings a head kind leaves at ``None`` (tuning log: ``docs/tuning.md``).
HEAD_DEFAULTS: dict[str, dict[str, Any]] = {
    "hrr": {"hidden": (512, 512), "dropout": 0.5, "epochs": 20, "batch_size": 64, "lr": 1e-3},
    "dense": {"hidden": (512, 512), "dropout": 0.5, "epochs": 20, "batch_size": 64, "lr": 1e-3},
    "solar": {"hidden": (512,), "dropout": 0.0, "epochs": 15, "batch_size": 256, "lr": 5e-3},
    "linear": {},
}

#: Training settings of the text backbones, over :data:`HEAD_DEFAULTS` (both network heads):
#: sized so that Debtags trains in minutes on a CPU; the validation curves of those runs are
#: in docs/results/text-models.md.
BACKBONE_DEFAULTS: dict[str, dict[str, Any]] = {
    "cnn": {"dropout": 0.5, "epochs": 8, "batch_size": 128, "lr": 2e-3},
    "lstm": {"dropout": 0.5, "epochs": 5, "batch_size": 128, "lr": 2e-3},
}

#: The text backbones' own keywords (beneath ``head_options``), recorded in every saved
#: network's configuration; ``max_length`` caps the tokens a backbone reads of each row.
BACKBONE_OPTIONS: dict[str, dict[str, Any]] = {
    "cnn": {"embed_dim": 128, "n_filters": 64, "bottleneck": 512, "max_length": 128},
    "lstm": {"embed_dim": 128, "hidden_size": 64, "fc_size": 256, "max_length": 96},
}

#: Settings of a head kind on every dataset, beneath the dataset presets.
HEAD_PRESETS: dict[str, dict[str, Any]] = {"linear": {"refit": True}}

#: Tuned settings per lower-case dataset name, then model name (``"hrr-cnn"``) or head, over
#: the library defaults (chosen on validation splits and pseudo-tests carved from train;
#: ``docs/tuning.md``). A head's entry was tuned with the FC backbone and applies to it alone.
DATASET_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "bibtex": {
        "hrr": {"hidden": (2048,), "dim": 800, "epochs": 12, "refit": True, "n_models": 3},
        "dense": {"hidden": (2048,), "epochs": 20, "refit": True},
    },
    "delicious": {
        "hrr": {"head_options": {"ranking": 1.0, "label_bias": True, "code": "circulant", "ranking_candidates": 1024},
                "refit": True},
        "dense": {"refit": True},
    },
    "debtags": {"hrr": {"hidden": (2048,), "dim": 800, "linear_width": 400, "epochs": 5, "refit": True},
                "dense": {"hidden": (2048,), "lr": 2e-3}},
}

#: CLI model names → (head, backbone).
MODELS: dict[str, tuple[str, str]] = {
    "fc": ("dense", "fc"),
    "hrr-fc": ("hrr", "fc"),
    "cnn": ("dense", "cnn"),
    "hrr-cnn": ("hrr", "cnn"),
    "lstm": ("dense", "lstm"),
    "hrr-lstm": ("hrr", "lstm"),
    "solar": ("solar", "fc"),
    "linear": ("linear", "fc"),
    "auto": ("auto", "fc"),
}

#: Head-specific ``holoxmc train`` options → head keywords (``head_options``), per head kind.
HEAD_OPTIONS: dict[str, dict[str, str]] = {
    "hrr": {"loss": "loss", "ranking": "ranking", "learn_pm": "learn_pm", "label_bias": "label_bias",
            "label_code": "code", "code_cache": "cache_codes"},
    "solar": {"chunks": "n_chunks", "buckets": "n_buckets"},
    "linear": {"C": "C"},
}

#: ``(A, B)`` of the inverse propensities of Jain et al. (2016): its Wikipedia sets, its
#: Amazon sets, every other set.
PROPENSITY_PRESETS: dict[str, tuple[float, float]] = {
    "default": (0.55, 1.5),
    "wikipedia": (0.5, 0.4),
    "amazon": (0.6, 2.6),
}
DEFAULT_PROPENSITY = PROPENSITY_PRESETS["default"]

#: The sets that take the Wikipedia or the Amazon preset, as :func:`propensity_preset`
#: normalises their names (the convention of Jain et al. 2016, the Extreme Classification
#: Repository and napkinXC's scripts): other Wikipedia or Amazon sets, such as Wiki10-31K
#: and AmazonCat-13K, take the default.
PROPENSITY_SETS: dict[str, frozenset[str]] = {
    "wikipedia": frozenset({"wikilshtc325k", "wikipedia500k", "wiki500k"}),
    "amazon": frozenset({"amazon670k", "amazon3m"}),
}


def propensity_preset(dataset_name: str) -> tuple[float, float]:
    """``(A, B)`` customary for a dataset, by its exact name (case, ``-``, ``_`` and spaces
    ignored): Amazon-670K and Amazon-3M ``(0.6, 2.6)``, WikiLSHTC-325K and Wikipedia-500K
    (Wiki-500K) ``(0.5, 0.4)``, every other set ``(0.55, 1.5)``.

    Example:
        >>> propensity_preset("Amazon-670K"), propensity_preset("wikipedia_500k")
        ((0.6, 2.6), (0.5, 0.4))
        >>> propensity_preset("AmazonCat-13K"), propensity_preset("wiki10-31k")
        ((0.55, 1.5), (0.55, 1.5))
    """
    name = re.sub(r"[-_\s]", "", dataset_name.lower())
    for preset, names in PROPENSITY_SETS.items():
        if name in names:
            return PROPENSITY_PRESETS[preset]
    return PROPENSITY_PRESETS["default"]


def model_params(model: str) -> dict[str, str]:
    """``{"head": ..., "backbone": ...}`` of a CLI model name such as ``"hrr-fc"``.

    Raises:
        InputError: an unknown model name.
    """
    if model not in MODELS:
        raise InputError(f"unknown model {model!r}; choose from {sorted(MODELS)}")
    head, backbone = MODELS[model]
    return {"head": head, "backbone": backbone}


def preset_params(dataset: str, model: str = "hrr-fc") -> dict[str, Any]:
    """Keywords of the tuned ``XMCClassifier`` for a dataset and model name.

    Unknown datasets get the library defaults (plus the head and backbone of ``model``).

    Example:
        >>> preset_params("synthetic", "fc")["head"]
        'dense'
    """
    params: dict[str, Any] = model_params(model)
    head, presets = params["head"], DATASET_PRESETS.get(str(dataset).lower(), {})
    tuned = presets.get(model, presets.get(head, {}) if params["backbone"] == "fc" else {})
    return params | HEAD_PRESETS.get(head, {}) | tuned


def setting_defaults(head_defaults: dict[str, Any], backbone: str) -> dict[str, Any]:
    """The values of the settings an estimator leaves at ``None``: its head's, under those of
    a text backbone.

    Example:
        >>> setting_defaults(HEAD_DEFAULTS["hrr"], "lstm")["lr"], setting_defaults(HEAD_DEFAULTS["hrr"], "fc")["lr"]
        (0.002, 0.001)
    """
    return {**head_defaults, **BACKBONE_DEFAULTS.get(backbone, {})}


def dataset_preset(dataset: str) -> str | None:
    """The name of the tuned preset of a data set (for ``preset=`` / ``--preset``), or ``None``
    where it has none: what the published tables of the three tuned sets were measured with.

    Example:
        >>> dataset_preset("BibTeX"), dataset_preset("my-own-set")
        ('bibtex', None)
    """
    name = str(dataset).lower()
    return name if name in DATASET_PRESETS else None

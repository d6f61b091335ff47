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

__all__ = ["HEAD_DEFAULTS", "HEAD_PRESETS", "DATASET_PRESETS", "MODELS", "PROPENSITY_PRESETS",
           "PROPENSITY_SETS", "DEFAULT_PROPENSITY", "BACKBONE_DEFAULTS", "BACKBONE_OPTIONS", "PAIR_OPTIONS",
           "network_defaults", "PAPER_PRESETS", "RERANK_SHORTLIST", "FC_CANDIDATE", "fc_candidate_runs",
           "PAPER_DATASET_PRESETS", "PAPER_NOT_REPORTED", "RERANK_BUDGETS", "model_params", "preset_params", "paper_params",
           "propensity_preset", "setting_defaults", "dataset_preset"]

#: Values of the settings a head kind leaves at ``None`` (tuning log: ``docs/tuning.md``).
HEAD_DEFAULTS: dict[str, dict[str, Any]] = {
    "hrr": {"hidden": (512, 512), "dropout": 0.5, "epochs": 20, "batch_size": 64, "lr": 1e-3},
    "dense": {"hidden": (512, 512), "dropout": 0.5, "epochs": 20, "batch_size": 64, "lr": 1e-3},
    "solar": {"hidden": (512,), "dropout": 0.0, "epochs": 15, "batch_size": 256, "lr": 5e-3},
    "linear": {},
    "rerank": {},
}
HEAD_DEFAULTS["xr"] = dict(HEAD_DEFAULTS["hrr"])  # its text network is the HRR head's

#: The re-rank model's shortlist when none is given (``holoxmc.models.rerank.fit.shortlist_rule``):
#: ``min(L, cap, max(floor, ceil(per_row x mean labels per training row)))``. ``per_row`` was
#: chosen on validation rows of sets other than Delicious, then applied to it unchanged;
#: ``floor`` is the earlier fixed default; ``cap`` bounds the fit's time and memory (tuning
#: log: "The re-rank shortlist grows with the labels per row").
RERANK_SHORTLIST: dict[str, int] = {"per_row": 16, "floor": 50, "cap": 500}

#: When ``head="auto"`` trains its FC network candidate: only where the training rows carry
#: at least ``min_labels_per_row`` labels on average. In the record of selections (15 sets:
#: the panel's six, three real text sets and six generator sets of 2 to 24 labels a row) FC
#: led the validation rows only at 9.6 labels a row and more (Delicious, 19, by learning; three
#: generator sets by ranking their most frequent label first, which the re-rank model did not),
#: and lost by 3.9 to 55 points below 8; chosen leaving each set out, the rule decides 14 of
#: the 15 as they came out (tuning log: "The FC candidate where it can win").
FC_CANDIDATE: dict[str, float] = {"min_labels_per_row": 8.6}


def fc_candidate_runs(label_nnz: int, rows: int) -> bool:
    """Whether ``head="auto"`` trains its FC candidate on rows carrying ``label_nnz`` labels
    in all (:data:`FC_CANDIDATE`; ``holoxmc.auto`` and ``holoxmc.limits`` both ask here).

    Args:
        label_nnz: the labels of the rows, counted with repeats; rows: how many rows.

    Example:
        >>> fc_candidate_runs(19 * 100, 100), fc_candidate_runs(240, 100)
        (True, False)
    """
    return label_nnz / max(rows, 1) >= FC_CANDIDATE["min_labels_per_row"]

#: Resource bounds of the re-rank fit, not accuracy settings (``holoxmc.models.rerank.fit``):
#: ``train_entries`` bounds the training shortlists (``N x`` the labels each training row
#: brings as hard negatives, ``train_shortlist_rule``): the largest set measured before,
#: L = 670K, holds 43M; at L = 3M it keeps the memberships near 1 GB and the label fits a few
#: times 670K's. ``weight_entries`` bounds the per-label weights (each label keeps at most
#: ``weight_entries / L`` of its largest, ``label_weights_rule``): at L = 3M the pruned SVMs
#: held about 1,000 weights a label, 3.0G entries (24 GB), more than the machine.
RERANK_BUDGETS: dict[str, int] = {"train_entries": 100_000_000, "weight_entries": 500_000_000}

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

#: Head keywords of one (head, backbone) pair, beside :data:`BACKBONE_OPTIONS` and beneath
#: ``head_options``: the dense-head LSTM starts its biases at the labels' prior
#: (``DenseHead(prior_bias=True)``; without it, it ranks the most frequent label first for every
#: text: docs/results/text-models.md, "The dense-head LSTM").
PAIR_OPTIONS: dict[tuple[str, str], dict[str, Any]] = {("dense", "lstm"): {"prior_bias": True}}

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

#: The papers' own configurations per head kind (preset ``"paper"``): the HRR paper (Ganesan et
#: al. 2021, §5.2–5.3) for ``"hrr"`` and ``"dense"``: two hidden layers of 512 (ReLU), d' = 400,
#: the loss J_p + J_n alone (no ranking term, no label bias), fixed p, m and label vectors
#: drawn i.i.d. and projected, one network, no refit; SOLAR (Medini et al. 2021, §5.1) for
#: ``"solar"``: K = 16 chunks, one hidden layer of 4,096, batch 1,000, 10 epochs (its
#: Table 1), m = 100 top buckets, min_freq d = 8 = K/2, the sum of probabilities (the
#: rows of its Tables 1–3 that the paper reports as SOLAR) and the binary cross-entropy over
#: the B buckets (its §3; the library's default is a softmax from 2,000 buckets a chunk). What a paper does not report
#: (:data:`PAPER_NOT_REPORTED`) keeps the library default of :data:`HEAD_DEFAULTS`.
PAPER_PRESETS: dict[str, dict[str, Any]] = {
    "hrr": {"hidden": (512, 512), "dim": 400, "linear_width": 0, "refit": False, "n_models": 1,
            "head_options": {"loss": "cosine", "ranking": 0.0, "learn_pm": False, "learn_labels": False,
                             "label_bias": False, "code": "random"}},
    "dense": {"hidden": (512, 512), "linear_width": 0, "refit": False, "n_models": 1},
    "solar": {"hidden": (4096,), "batch_size": 1000, "epochs": 10,
              "head_options": {"n_chunks": 16, "top_buckets": 100, "min_freq": 8, "scoring": "prob", "loss": "full"}},
}

#: Where a paper's configuration differs per dataset (lower-case names): d' = 3000 on the HRR
#: paper's four large sets (§5.3); SOLAR's K = 32, B = 20,000 on Wiki-500K and Amazon-670K
#: and B = 30,000 with 100K hashed features on Amazon-3M (§5.2).
PAPER_DATASET_PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "wiki10-31k": {"hrr": {"dim": 3000}},
    "amazoncat-13k": {"hrr": {"dim": 3000}},
    "delicious-200k": {"hrr": {"dim": 3000}},
    "amazon-670k": {"hrr": {"dim": 3000},
                    "solar": {"head_options": {"n_chunks": 32, "n_buckets": 20_000, "min_freq": 16}}},
    "wikipedia-500k": {"solar": {"head_options": {"n_chunks": 32, "n_buckets": 20_000, "min_freq": 16}}},
    "amazon-3m": {"solar": {"head_options": {"n_buckets": 30_000, "feature_dim": 100_000}}},
}

#: Settings the papers do not report, per head kind: the ``"paper"`` preset leaves them at
#: the library defaults (:data:`HEAD_DEFAULTS`), and the reproduction says so.
PAPER_NOT_REPORTED: dict[str, tuple[str, ...]] = {
    "hrr": ("epochs", "batch_size", "lr", "dropout"),
    "dense": ("epochs", "batch_size", "lr", "dropout"),
    "solar": ("lr", "dropout"),
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
    "rerank": ("rerank", "fc"),
    "xr-cnn": ("xr", "cnn"),
    "xr-lstm": ("xr", "lstm"),
    "auto": ("auto", "fc"),
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


def network_defaults(backbone: str, head: str) -> dict[str, Any]:
    """The network keywords a ``head`` on ``backbone`` starts from (``head_options`` go over
    them): :data:`BACKBONE_OPTIONS` and :data:`PAIR_OPTIONS`.

    Example:
        >>> network_defaults("lstm", "dense")["prior_bias"], "prior_bias" in network_defaults("lstm", "hrr")
        (True, False)
    """
    return dict(BACKBONE_OPTIONS.get(backbone, {})) | PAIR_OPTIONS.get((head, backbone), {})


def setting_defaults(head_defaults: dict[str, Any], backbone: str) -> dict[str, Any]:
    """The values of the settings an estimator leaves at ``None``: its head's, under those of
    a text backbone.

    Example:
        >>> setting_defaults(HEAD_DEFAULTS["hrr"], "lstm")["lr"], setting_defaults(HEAD_DEFAULTS["hrr"], "fc")["lr"]
        (0.002, 0.001)
    """
    return {**head_defaults, **BACKBONE_DEFAULTS.get(backbone, {})}


#: Settings of the FC backbone only, left out of a CNN's or LSTM's paper preset.
_FC_ONLY = ("hidden", "linear_width")


def paper_params(dataset: str, model: str = "hrr-fc") -> dict[str, Any]:
    """Keywords of the ``XMCClassifier`` each paper trains for a dataset and model name
    (preset ``"paper"``): :data:`PAPER_PRESETS`, then :data:`PAPER_DATASET_PRESETS`; the
    ``"linear"`` model, which neither paper has, gets its library settings.

    Example:
        >>> paper_params("bibtex", "hrr-fc")["head_options"]["ranking"]
        0.0
        >>> paper_params("amazon-670k", "hrr-fc")["dim"]
        3000
        >>> paper_params("delicious", "solar")["head_options"]["n_chunks"]
        16
    """
    params: dict[str, Any] = model_params(model)
    head = params["head"]
    for layer in (PAPER_PRESETS.get(head, HEAD_PRESETS.get(head, {})),
                  PAPER_DATASET_PRESETS.get(str(dataset).lower(), {}).get(head, {})):
        options = dict(params.get("head_options") or {}) | dict(layer.get("head_options") or {})
        params |= {key: value for key, value in layer.items()
                   if key != "head_options" and (params["backbone"] == "fc" or key not in _FC_ONLY)}
        if options:
            params["head_options"] = options
    return params


def dataset_preset(dataset: str) -> str | None:
    """The name of the tuned preset of a data set (for ``preset=`` / ``--preset``), or ``None``
    where it has none: what the published tables of the three tuned sets were measured with.

    Example:
        >>> dataset_preset("BibTeX"), dataset_preset("my-own-set")
        ('bibtex', None)
    """
    name = str(dataset).lower()
    return name if name in DATASET_PRESETS else None

"""Every table and figure of the two papers that the data here allows, regenerated with
each paper's own model (preset ``"paper"``, :func:`holoxmc.presets.paper_params`) and,
beside it, the library's tuned presets; each beside the paper's reported numbers.

A registry, :data:`EXPERIMENTS`, maps a name to an :class:`Experiment` whose ``run``
takes a :class:`Context` and returns a :class:`Result` (rows, notes, an optional PNG).
:func:`run_experiments` runs the chosen ones and writes, per experiment,
``<name>.md``, ``<name>.csv`` and, for figures, ``<name>.png`` into the output folder,
then an index ``README.md`` (what ran, how long, on which machine, with which command).

Sizes: the full run follows the papers' settings on Bibtex, Delicious and Debtags
(``/work/shared/data`` or wherever :func:`holoxmc.data.load` finds them); ``quick``
caps epochs and grids so that everything ends in minutes on a small CPU; ``tiny`` swaps
every dataset for a small synthetic one (with token ids made from its features) and every
size for a toy one, for the tests: the same code paths in seconds, numbers meaningless.

The papers' numbers (:data:`PAPER`) were transcribed from the texts in
``/work/shared/papers``; where a paper reports nothing for a cell the tables say
"not reported", where a row could not run they say "not run: <reason>", never a number.

Example:
    >>> sorted(EXPERIMENTS)[:3]
    ['hrr_capacity', 'hrr_fig2', 'hrr_fig8']
"""

from __future__ import annotations

import csv
import io
import logging
import math
import os
import platform
import statistics
import time
import traceback
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import HoloxmcError, InputError
from holoxmc.io import atomic_write_bytes, atomic_write_text

__all__ = ["Context", "Result", "Experiment", "EXPERIMENTS", "PAPER", "run_experiments", "check_names",
           "NOT_REPORTED"]

log = logging.getLogger("holoxmc.reproduce")

NOT_REPORTED = "not reported"
#: The three sets of this machine (``/work/shared/data``); Debtags alone has raw text.
DATASETS: tuple[str, ...] = ("bibtex", "delicious", "debtags")
#: The sets with raw text, which the CNN and LSTM need.
TEXT_SETS: tuple[str, ...] = ("debtags",)
#: ``XMCClassifier``'s default d'.
_ESTIMATOR_DIM = 400
#: Training rows and tokens per text of the CNN and LSTM in quick runs (one LSTM epoch over
#: Debtags' 15,668 texts of 256 tokens takes far longer than a quick run on 2 CPU cores).
QUICK_TEXT_ROWS = 1000
QUICK_TEXT_LENGTH = 64
#: Hidden width cap of SOLAR's networks in quick runs: the paper's one layer of 4,096 units,
#: over K = 16 chunks, took 828 s for one 2-epoch fit on Delicious on 2 loaded CPU cores
#: (docs/papers/hrr.md); 1,024 units cut a fit's work about fourfold.
QUICK_SOLAR_HIDDEN = 1024
#: Hidden width caps of quick runs, per head.
_QUICK_HIDDEN: dict[str, int] = {"solar": QUICK_SOLAR_HIDDEN}
#: Toy sizes of the text backbones in tiny runs.
_TINY_TEXT = {"cnn": {"embed_dim": 8, "n_filters": 4, "bottleneck": 16, "pooling_chunks": 2, "filter_sizes": (2, 3)},
              "lstm": {"embed_dim": 8, "hidden_size": 8, "fc_size": 16}}
#: Caps of a head's options in tiny runs, per head (``None``: the option left to its default).
_TINY_HEAD: dict[str, dict[str, int | None]] = {"solar": {"n_chunks": 4, "top_buckets": 4, "min_freq": None}}
#: The set of the ablations (HRR Tables 4, 5, Figs. 2, 8; SOLAR Tables 2, 3, 6): the
#: papers used Wiki10-31K and Amazon books / Amazon-670K, which are not here.
ABLATION_SET = "delicious"

# ---------------------------------------------------------------------------- the papers' numbers
#: Numbers as the papers print them (percent; seconds for times), keyed by table.
PAPER: dict[str, Any] = {
    # HRR Table 1, k = 1: (P@1, PSP@1) per (dataset, model). Bibtex and Delicious have FC rows only.
    "hrr_table1": {("bibtex", "fc"): (46.4, 32.5), ("bibtex", "hrr-fc"): (60.3, 45.6),
                   ("delicious", "fc"): (65.0, 64.2), ("delicious", "hrr-fc"): (66.5, 30.0)},
    # HRR Table 2: d', % output compression, % network compression.
    "hrr_table2": {"delicious": (400, 59.30, 29.22), "eurlex-4k": (400, 89.98, 37.80),
                   "wiki10-31k": (3000, 90.25, 29.49), "amazon-13k": (3000, 77.49, 4.74),
                   "delicious-200k": (3000, 98.53, 41.88), "amazon-670k": (3000, 99.55, 42.09)},
    # HRR Table 3: training speedup of HRR-FC over FC (FC time / HRR time).
    "hrr_table3": {"bibtex": 0.35, "delicious": 0.38, "mediamill": 0.39, "eurlex-4k": 0.35,
                   "wiki10-31k": 1.48, "amazon-13k": 1.33, "delicious-200k": 4.47, "amazon-670k": 6.28},
    # HRR Table 4 (Wiki10-31K): (net, layers, hidden, d') -> P@5; FC's d' is L.
    "hrr_table4": {("fc", 2, 512): 46.64, ("fc", 2, 2048): 47.91, ("fc", 3, 512): 41.92, ("fc", 3, 2048): 45.25,
                   ("hrr", 3, 512, 400): 55.06, ("hrr", 3, 2048, 400): 55.36, ("hrr", 3, 2048, 750): 56.84,
                   ("hrr", 3, 2048, 1500): 57.80, ("hrr", 3, 2048, 3000): 58.51},
    # HRR Table 5 (Wiki10-31K): (hidden, d') -> (P@5 fixed c_p, P@5 learned c_p). The
    # table's text says "a 2-layer network"; its fixed column equals Table 4's 3-layer rows.
    "hrr_table5": {(512, 400): (55.06, 53.50), (2048, 400): (55.36, 55.45), (2048, 750): (56.84, 56.75),
                   (2048, 1500): (57.80, 57.69), (2048, 3000): (58.51, 58.18)},
    # HRR Table 7 (App. I): (dataset, model) -> (execution s, optimisation s) per epoch.
    "hrr_table7": {("EURLex-4K", "cnn"): (0.466, 2.306), ("EURLex-4K", "hrr-cnn"): (0.467, 3.657),
                   ("Wiki10-31K", "cnn"): (0.630, 2.665), ("Wiki10-31K", "hrr-cnn"): (0.712, 3.286),
                   ("AmazonCat-12K", "cnn"): (16.722, 83.305), ("AmazonCat-12K", "hrr-cnn"): (16.178, 117.098),
                   ("Amazon-670K", "cnn"): (239.48, 734.694), ("Amazon-670K", "hrr-cnn"): (122.665, 301.376)},
    # SOLAR Table 2 (Amazon books, 1.67M labels; K=16, B=30K, m=100): P@1, P@5, P@10, Rec@100.
    "solar_table2": {"prob": (35.24, 29.71, 26.98, 34.19), "logprob": (35.89, 30.13, 27.11, 34.69),
                     "logit": (35.93, 30.17, 27.14, 34.77)},
    # SOLAR Table 3 (same model): min_freq d -> (candidates, P@1, P@5, P@10, Rec@100); the
    # d = 1 candidate count reads "88495.015" in the text extraction.
    "solar_table3": {1: (88495.015, 34.62, 28.50, 25.25, 25.34), 2: (2483.83, 35.19, 29.62, 26.85, 33.08),
                     4: (96.425, 35.22, 29.65, 26.89, 33.54), 8: (43.885, 35.24, 29.71, 26.98, 34.19)},
    # SOLAR Table 6 (Amazon-670K, m = 25): (B, K) -> (P@1, P@3, P@5, ms per point).
    "solar_table6": {(30_000, 8): (31.34, 29.23, 28.45, 0.647), (20_000, 8): (30.2, 28.25, 27.31, 0.621),
                     (10_000, 8): (27.99, 25.58, 24.36, 0.97), (30_000, 16): (33.27, 31.34, 30.90, 0.908),
                     (20_000, 16): (32.55, 30.69, 29.99, 0.96), (10_000, 16): (29.72, 27.85, 27.04, 1.326),
                     (30_000, 32): (33.99, 32.39, 32.31, 1.65), (20_000, 32): (33.74, 32.06, 31.78, 1.52),
                     (10_000, 32): (32.07, 30.22, 29.65, 1.39)},
}


# ---------------------------------------------------------------------------- registry types
@dataclass
class Context:
    """What every experiment gets.

    Attributes:
        out: the output folder (an experiment may write extra files there).
        quick: capped epochs and grids (minutes on a small CPU).
        tiny: synthetic toy data and sizes (tests; numbers meaningless).
        seed: master seed of every model.
        device: ``"cpu"``, ``"cuda"``, ...
        cache: results shared between experiments of one run (datasets, fits, SOLAR models).
    """

    out: Path
    quick: bool = False
    tiny: bool = False
    seed: int = 0
    device: str = "cpu"
    cache: dict[Any, Any] = field(default_factory=dict)

    @property
    def mode(self) -> str:
        """``"tiny"``, ``"quick"`` or ``"full"``."""
        return "tiny" if self.tiny else "quick" if self.quick else "full"

    def size(self, full: Any, quick: Any, tiny: Any) -> Any:
        """The value of the run's mode."""
        return tiny if self.tiny else quick if self.quick else full


@dataclass
class Result:
    """What an experiment returns: a table (rows of ``columns``), notes and an optional PNG."""

    title: str
    columns: list[str]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    figure: bytes | None = None


@dataclass(frozen=True)
class Experiment:
    """One table or figure: its name, the paper item it reproduces, and its function."""

    name: str
    paper: str
    run: Callable[[Context], Result]
    slow: bool = False


# ---------------------------------------------------------------------------- data
def _tiny_dataset(name: str) -> tuple[Any, Any]:
    """A small synthetic train/test pair named like ``name``, with token ids made from X."""
    from holoxmc.data import make_synthetic

    train, test = make_synthetic(240, 24, 60, n_test=80, labels_per_point=2.0, seed=zlib.crc32(name.encode()) % 1000,
                                 name=f"tiny-{name}")
    if name in TEXT_SETS:
        tokens = _tokens_from_features(train.X, 12)
        tokens[0, -1] = train.n_features  # the vocabulary is the largest id seen in training
        train.tokens, test.tokens = tokens, _tokens_from_features(test.X, 12)
    return train, test


def _tokens_from_features(X: sp.csr_matrix, length: int) -> np.ndarray:
    """``(n, length)`` int32 token ids: each row's feature ids + 1, padded with 0."""
    X = sp.csr_matrix(X)
    tokens = np.zeros((X.shape[0], length), dtype=np.int32)
    for i in range(X.shape[0]):
        ids = X.indices[X.indptr[i]:X.indptr[i + 1]][:length] + 1
        tokens[i, :ids.size] = ids
    return tokens


def dataset(ctx: Context, name: str) -> tuple[Any, Any]:
    """Train and test split of ``name`` (token ids too for text sets), cached per run."""
    key = ("data", name)
    if key not in ctx.cache:
        if ctx.tiny:
            ctx.cache[key] = _tiny_dataset(name)
        else:
            from holoxmc.data import load

            features = "tokens" if name == "debtags" else "tfidf"
            train = load(name, "train", features=features)
            test = load(name, "test", features=features, widths=(train.n_features, train.n_labels))
            ctx.cache[key] = (train, test)
    return ctx.cache[key]


# ---------------------------------------------------------------------------- fitting
def model_settings(ctx: Context, name: str, model: str, preset: str, **changes: Any) -> dict[str, Any]:
    """``XMCClassifier`` keywords of ``preset`` (``"paper"`` or ``"tuned"``) for a dataset
    and model, with ``changes``, sized for the run's mode (epochs capped in quick and tiny
    runs, one network and toy widths in tiny ones)."""
    from holoxmc.models.registry import FAMILIES
    from holoxmc.presets import HEAD_DEFAULTS, paper_params, preset_params, setting_defaults

    params = paper_params(name, model) if preset == "paper" else preset_params(name, model)
    options = dict(params.get("head_options") or {}) | changes.pop("head_options", {})
    params = params | changes | ({"head_options": options} if options else {})
    kind = FAMILIES[params["head"]]
    if kind.code_dim:  # the estimator's d' where a preset leaves it out
        params.setdefault("dim", _ESTIMATOR_DIM)
    if params["backbone"] != "fc":  # the dataset presets' FC widths do not apply to a text backbone
        params = {key: value for key, value in params.items() if key not in ("hidden", "linear_width")}
    # the estimator's own default where a preset leaves epochs out: a text backbone's is not the FC head's
    defaults = setting_defaults(HEAD_DEFAULTS[params["head"]], params["backbone"])
    epochs = params.get("epochs") or defaults.get("epochs", 20)
    params["epochs"] = ctx.size(epochs, min(epochs, 2 if params["backbone"] == "fc" else 1), 1)
    if ctx.quick or ctx.tiny:
        params["n_models"] = 1
    cap = _QUICK_HIDDEN.get(params["head"]) if ctx.quick and not ctx.tiny else None
    if cap is not None:
        params["hidden"] = tuple(min(h, cap) for h in params.get("hidden") or HEAD_DEFAULTS[params["head"]]["hidden"])
    if ctx.tiny:
        if kind.code_dim:  # d' is the label code's: a head without one refuses it
            params["dim"] = min(int(params.get("dim", 400)), 32)
        if params["backbone"] == "fc" and "hidden" in kind.settings:
            params["hidden"] = tuple(min(h, 32) for h in params.get("hidden") or (32,))
        if params["backbone"] in _TINY_TEXT:
            params["head_options"] = options = options | _TINY_TEXT[params["backbone"]]
        if params["head"] in _TINY_HEAD:
            params["head_options"] = options | {key: cap if cap is None or key not in options else min(options[key], cap)
                                                for key, cap in _TINY_HEAD[params["head"]].items()}
    return params | {"seed": ctx.seed, "device": ctx.device, "progress": False}


def fit(ctx: Context, name: str, params: dict[str, Any], rows: int | None = None) -> dict[str, Any]:
    """Fit ``params`` on ``name``'s training split (its first ``rows`` rows when given) and
    score the test split; cached per run on the settings. Returns the test metrics
    (percent), ``train_seconds``, ``params`` (parameter counts) and ``model`` (the estimator)."""
    from holoxmc.estimator import XMCClassifier

    key = ("fit", name, rows, repr(sorted(params.items())))
    if key in ctx.cache:
        return ctx.cache[key]
    train, test = dataset(ctx, name)
    backbone = params["backbone"]
    X, Y = train.inputs_for(backbone), train.Y
    X_test = test.inputs_for(backbone)
    if rows is not None and rows < Y.shape[0]:
        X, Y = _head_rows(X, Y, rows)
    if backbone != "fc" and ctx.quick and not ctx.tiny:
        X, X_test = X[:, :QUICK_TEXT_LENGTH], X_test[:, :QUICK_TEXT_LENGTH]
    started = time.perf_counter()
    clf = XMCClassifier(**params).fit(X, Y)
    seconds = time.perf_counter() - started
    metrics = clf.evaluate(X_test, test.Y)
    result = {"test": metrics, "train_seconds": seconds, "params": clf.n_parameters(), "model": clf}
    ctx.cache[key] = result
    log.info("  %s %s: P@1 %.2f in %.1fs", name, params["head"], metrics["P@1"], seconds)
    return result


def _head_rows(X: Any, Y: Any, rows: int) -> tuple[Any, Any]:
    """The first ``rows`` rows, the last of them swapped for a row that holds the largest
    token id (so the vocabulary, and the test set's ids, stay valid); sparse X as is."""
    take = np.arange(rows)
    if not sp.issparse(X):
        widest = int(np.argmax(np.asarray(X).max(axis=1)))
        if widest >= rows:
            take[-1] = widest
    return X[take], Y[take]


def _cell(value: Any, digits: int = 2) -> Any:
    """A table cell: floats rounded, ``None`` as "not reported"."""
    if value is None:
        return NOT_REPORTED
    if isinstance(value, float):
        return round(value, digits)
    return value


def _paper(value: Any) -> Any:
    """A paper's number as printed, or "not reported"."""
    return NOT_REPORTED if value is None else value


def _not_run(exc: BaseException) -> str:
    """The "not run: <reason>" text of a row whose fit failed."""
    return f"not run: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


# ---------------------------------------------------------------------------- HRR Table 1
_TABLE1_MODELS: tuple[str, ...] = ("fc", "hrr-fc", "cnn", "hrr-cnn", "lstm", "hrr-lstm")
_METRIC_COLUMNS: tuple[str, ...] = ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")


def hrr_table1(ctx: Context) -> Result:
    """HRR Table 1: FC / CNN / LSTM, dense and HRR, paper and tuned presets, on every set here."""
    text_rows = ctx.size(None, QUICK_TEXT_ROWS, None)
    rows = []
    for name in DATASETS:
        for model in _TABLE1_MODELS:
            for preset in ("paper", "tuned"):
                row: dict[str, Any] = {"dataset": name, "model": model, "preset": preset}
                paper = PAPER["hrr_table1"].get((name, model)) if preset == "paper" else None
                row |= {"paper P@1": _paper(paper[0] if paper else None), "paper PSP@1": _paper(paper[1] if paper else None)}
                text = not model.endswith("fc")
                if text and name not in TEXT_SETS:
                    rows.append(row | {"status": f"not run: {name} has no raw text (nor had the paper)"})
                    continue
                try:
                    if text and ctx.quick and not ctx.tiny and preset == "tuned":
                        raise _Skipped("--quick runs the text models' paper preset only")
                    params = model_settings(ctx, name, model, preset)
                    result = fit(ctx, name, params, rows=text_rows if text else None)
                except _Skipped as exc:
                    rows.append(row | {"status": f"not run: {exc}"})
                    continue
                except (HoloxmcError, RuntimeError, ValueError, MemoryError) as exc:
                    rows.append(row | {"status": _not_run(exc)})
                    continue
                row |= {key: _cell(result["test"][key]) for key in _METRIC_COLUMNS}
                rows.append(row | {"epochs": params["epochs"], "train s": _cell(result["train_seconds"], 1),
                                   "status": "ran"})
    notes = ["Paper numbers: HRR paper Table 1 (k = 1 only; Debtags is not in the paper, nor are CNN/LSTM on "
             "Bibtex and Delicious: the paper had no raw text for those sets either).",
             "preset 'paper': `holoxmc.presets.paper_params` (the papers' configuration); 'tuned': the library's "
             "dataset presets (`preset_params`), chosen on validation splits (docs/tuning.md); on a text "
             "backbone the presets' FC widths (hidden, linear_width) are left out."]
    if ctx.quick:
        notes.append(f"--quick: epochs capped at 2 (FC) and 1 (CNN, LSTM), one network where a preset "
                     f"averages several (Bibtex's tuned HRR-FC: 3); CNN/LSTM trained on the first "
                     f"{QUICK_TEXT_ROWS:,} training rows, texts cut to their first {QUICK_TEXT_LENGTH} tokens "
                     "(test texts too); the tuned text rows are left out.")
    columns = ["dataset", "model", "preset", *_METRIC_COLUMNS, "paper P@1", "paper PSP@1", "epochs", "train s",
               "status"]
    return Result("HRR paper Table 1: test P@k / PSP@k (percent)", columns, rows, notes)


class _Skipped(Exception):
    """A row left out of a quick run on purpose."""


# ---------------------------------------------------------------------------- HRR Table 2
def _parameter_counts(ctx: Context, params: dict[str, Any], n_labels: int, n_features: int) -> dict[str, int]:
    """Total and output-layer parameters of the network ``params`` builds (nothing trained)."""
    from holoxmc.estimator import XMCClassifier

    network = XMCClassifier(**params).new_network(n_labels, n_features)
    members = getattr(network, "members", None) or [network]
    return {"total": sum(p.numel() for net in members for p in net.parameters()),
            "output_layer": sum(p.numel() for net in members for p in net.head.parameters())}


def hrr_table2(ctx: Context) -> Result:
    """HRR Table 2: output-layer and whole-network parameter reduction of HRR-FC against FC."""
    rows = []
    for name in DATASETS:
        train, _ = dataset(ctx, name)
        for preset in ("paper", "tuned"):
            counts = {model: _parameter_counts(ctx, model_settings(ctx, name, model, preset), train.n_labels,
                                               train.n_features) for model in ("fc", "hrr-fc")}
            fc, hrr = counts["fc"], counts["hrr-fc"]
            dim = model_settings(ctx, name, "hrr-fc", preset)["dim"]
            paper = PAPER["hrr_table2"].get(name) if preset == "paper" else None
            rows.append({"dataset": name, "preset": preset, "d'": dim, "L": train.n_labels,
                         "FC output": fc["output_layer"], "HRR output": hrr["output_layer"],
                         "output reduction %": _cell(100 * (1 - hrr["output_layer"] / fc["output_layer"])),
                         "FC total": fc["total"], "HRR total": hrr["total"],
                         "network reduction %": _cell(100 * (1 - hrr["total"] / fc["total"])),
                         "paper output %": _paper(paper[1] if paper else None),
                         "paper network %": _paper(paper[2] if paper else None)})
    notes = ["Paper: HRR paper Table 2 (Delicious is its only set here; Bibtex's L = 159 < d' = 400 makes the "
             "HRR output layer larger than FC's, a negative reduction). Counts of untrained networks; an "
             "ensemble preset (n_models) counts every network."]
    return Result("HRR paper Table 2: parameter reduction of HRR-FC over FC", list(rows[0]), rows, notes)


# ---------------------------------------------------------------------------- HRR Table 3
def _epoch_seconds(ctx: Context, params: dict[str, Any], X: Any, Y: Any, repeat: int) -> float:
    """Seconds of one training epoch of a fresh network (constant lr, nothing held out)."""
    from holoxmc.estimator import XMCClassifier
    from holoxmc.train import TrainConfig, Trainer

    clf = XMCClassifier(**params)
    network = clf.new_network(Y.shape[1], X.shape[1] if params["backbone"] == "fc" else int(X.max()) + 1)
    config = TrainConfig(epochs=1, batch_size=clf.setting("batch_size"), lr=clf.setting("lr"), schedule="none",
                         val_fraction=0.0, seed=repeat, progress=False, device=ctx.device)
    return float(Trainer(config).fit(network, X, Y).epoch_seconds[0])


def _paired_seconds(ctx: Context, name: str, models: Sequence[str], repeats: int,
                    rows: int | None = None) -> dict[str, list[float]]:
    """Epoch seconds of each paper-preset model, interleaved repeat by repeat."""
    train, _ = dataset(ctx, name)
    seconds: dict[str, list[float]] = {model: [] for model in models}
    params = {model: model_settings(ctx, name, model, "paper") for model in models}
    for repeat in range(repeats):
        for model in models:
            backbone = params[model]["backbone"]
            X, Y = train.inputs_for(backbone), train.Y
            if rows is not None:
                X, Y = _head_rows(X, Y, rows)
            seconds[model].append(_epoch_seconds(ctx, params[model], X, Y, repeat))
    return seconds


def hrr_table3(ctx: Context) -> Result:
    """HRR Table 3: training speedup (FC epoch seconds / HRR-FC epoch seconds)."""
    repeats = ctx.size(5, 3, 1)
    rows = []
    for name in DATASETS:
        seconds = _paired_seconds(ctx, name, ("fc", "hrr-fc"), repeats)
        fc, hrr = statistics.median(seconds["fc"]), statistics.median(seconds["hrr-fc"])
        ratios = [a / b for a, b in zip(seconds["fc"], seconds["hrr-fc"])]
        rows.append({"dataset": name, "FC s/epoch": _cell(fc, 3), "HRR-FC s/epoch": _cell(hrr, 3),
                     "speedup": _cell(fc / hrr), "paired median": _cell(statistics.median(ratios)),
                     "HRR faster in": f"{sum(r > 1 for r in ratios)} of {repeats}",
                     "paper speedup": _paper(PAPER["hrr_table3"].get(name))})
    notes = [f"Paper preset of both models; {repeats} interleaved epochs each (FC, HRR-FC, FC, ...), medians; "
             "speedup > 1: HRR-FC faster. Paper: HRR paper Table 3 (its GPU; ours: the machine in README.md). "
             "The other engineers' jobs share this machine, so single epochs are noisy."]
    return Result("HRR paper Table 3: training speedup of HRR-FC over FC", list(rows[0]), rows, notes)


# ---------------------------------------------------------------------------- HRR Tables 4, 5
def _grid_table4(ctx: Context) -> list[tuple[str, int, int, int | None]]:
    """(net, layers, hidden, d') of HRR Table 4, scaled down in tiny runs."""
    if ctx.tiny:
        return [("fc", 2, 16, None), ("hrr", 3, 16, 8), ("hrr", 3, 32, 16)]
    return [("fc", 2, 512, None), ("fc", 2, 2048, None), ("fc", 3, 512, None), ("fc", 3, 2048, None),
            ("hrr", 3, 512, 400), ("hrr", 3, 2048, 400), ("hrr", 3, 2048, 750), ("hrr", 3, 2048, 1500),
            ("hrr", 3, 2048, 3000)]


def _grid_params(ctx: Context, net: str, layers: int, hidden: int, dim: int | None, **changes: Any) -> dict[str, Any]:
    model = "hrr-fc" if net == "hrr" else "fc"
    params = model_settings(ctx, ABLATION_SET, model, "paper", **changes)
    params["hidden"] = (hidden,) * layers
    if dim is not None:
        params["dim"] = dim
    return params


def hrr_table4(ctx: Context) -> Result:
    """HRR Table 4: layers x hidden x d' of FC and HRR-FC (paper preset otherwise)."""
    train, _ = dataset(ctx, ABLATION_SET)
    rows = []
    for net, layers, hidden, dim in _grid_table4(ctx):
        result = fit(ctx, ABLATION_SET, _grid_params(ctx, net, layers, hidden, dim))
        paper = PAPER["hrr_table4"].get((net, layers, hidden) if net == "fc" else (net, layers, hidden, dim))
        rows.append({"net": net.upper(), "layers": layers, "hidden": hidden, "out d'": dim or train.n_labels,
                     "P@1": _cell(result["test"]["P@1"]), "P@5": _cell(result["test"]["P@5"]),
                     "parameters": result["params"]["total"], "paper P@5 (Wiki10-31K)": _paper(paper)})
    notes = [f"On {ABLATION_SET} (the paper's Table 4 is on Wiki10-31K, not here); 'layers' counts hidden "
             "layers of the given width; every other setting is the paper preset."]
    return Result(f"HRR paper Table 4 on {ABLATION_SET}: test P@5", list(rows[0]), rows, notes)


def hrr_table5(ctx: Context) -> Result:
    """HRR Table 5: fixed against learned label vectors c_p (``learn_labels``)."""
    rows = []
    for net, layers, hidden, dim in _grid_table4(ctx):
        if net != "hrr":
            continue
        fixed = fit(ctx, ABLATION_SET, _grid_params(ctx, net, layers, hidden, dim))
        learned = fit(ctx, ABLATION_SET, _grid_params(ctx, net, layers, hidden, dim,
                                                      head_options={"learn_labels": True}))
        paper = PAPER["hrr_table5"].get((hidden, dim))
        rows.append({"layers": layers, "hidden": hidden, "out d'": dim, "P@5 fixed": _cell(fixed["test"]["P@5"]),
                     "P@5 learned c_p": _cell(learned["test"]["P@5"]),
                     "paper fixed (Wiki10-31K)": _paper(paper[0] if paper else None),
                     "paper learned (Wiki10-31K)": _paper(paper[1] if paper else None)})
    notes = [f"On {ABLATION_SET}; the HRR rows of Table 4 with the label vectors learned "
             "(`head_options={'learn_labels': True}`, `holoxmc train --learn-labels`), back-propagated through "
             "the projection as in the paper."]
    return Result(f"HRR paper Table 5 on {ABLATION_SET}: fixed vs learned c_p, test P@5", list(rows[0]), rows, notes)


# ---------------------------------------------------------------------------- HRR Table 7
def _execution_seconds(ctx: Context, params: dict[str, Any], X: Any, Y: Any) -> float:
    """Seconds of forward passes and top-5 inference over ``X`` with a fresh network."""
    from holoxmc.estimator import XMCClassifier
    from holoxmc.train import predict_topk

    network = XMCClassifier(**params).new_network(Y.shape[1], int(X.max()) + 1).to(ctx.device)
    started = time.perf_counter()
    predict_topk(network, X, k=5, device=ctx.device)
    return time.perf_counter() - started


def hrr_table7(ctx: Context) -> Result:
    """HRR Table 7 (App. I): execution and optimisation time of CNN and HRR-CNN per epoch."""
    name = "debtags"
    rows_used = ctx.size(None, QUICK_TEXT_ROWS, None)
    rows: list[dict[str, Any]] = []
    try:
        seconds = _paired_seconds(ctx, name, ("cnn", "hrr-cnn"), ctx.size(3, 1, 1), rows=rows_used)
        train, _ = dataset(ctx, name)
        X, Y = train.tokens, train.Y
        if rows_used is not None:
            X, Y = _head_rows(X, Y, rows_used)
        for model in ("cnn", "hrr-cnn"):
            execution = _execution_seconds(ctx, model_settings(ctx, name, model, "paper"), X, Y)
            epoch = statistics.median(seconds[model])
            rows.append({"source": "here", "dataset": name, "model": model, "execution s": _cell(execution, 3),
                         "optimisation s": _cell(max(epoch - execution, 0.0), 3), "epoch s": _cell(epoch, 3)})
    except (HoloxmcError, RuntimeError, ValueError, MemoryError) as exc:
        rows.append({"source": "here", "dataset": name, "model": "cnn, hrr-cnn", "execution s": _not_run(exc),
                     "optimisation s": "", "epoch s": ""})
    for (paper_set, model), (execution, optimisation) in PAPER["hrr_table7"].items():
        rows.append({"source": "paper", "dataset": paper_set, "model": model, "execution s": execution,
                     "optimisation s": optimisation, "epoch s": NOT_REPORTED})
    notes = ["Execution: forward pass and top-5 inference over the epoch's rows (no gradients); optimisation: "
             "one training epoch (loss, gradients, updates) minus that, as App. I splits it. Paper preset; "
             "the paper's sets (its own GPU) are not here, so its rows are listed for the trend only."]
    if rows_used is not None:
        notes.append(f"--quick: the first {rows_used:,} training rows, one epoch each.")
    return Result("HRR paper Table 7: CNN and HRR-CNN time per epoch (seconds)", list(rows[0]), rows, notes)


# ---------------------------------------------------------------------------- HRR figures
def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def hrr_capacity(ctx: Context) -> Result:
    """HRR Figs. 1, 5, 6, 7: binding responses and capacity (:mod:`holoxmc.experiments.capacity`)."""
    from holoxmc.experiments.capacity import CapacityConfig, run_capacity, write_capacity_outputs

    config = ctx.size(CapacityConfig.full(), CapacityConfig.quick(), CapacityConfig.smoke())
    results = run_capacity(config, seed=ctx.seed)
    write_capacity_outputs(results, ctx.out / "hrr_capacity")
    capacity, fig1 = results["capacity"], results["fig1"]
    rows = []
    for i, d in enumerate(capacity["dims"]):
        rows.append({"d": d} | {method: f"{'>=' if capacity['censored'][method][i] else ''}{capacity[method][i]}"
                                for method in capacity["error_curves"]})
    last = len(fig1["terms"]) - 1
    notes = [f"Figures and CSVs: hrr_capacity/ (fig1_response.png, fig5_capacity.png, fig6_retrieval_error.png, "
             f"fig7_response_range.png). Fig. 1 at d = {fig1['dim']}, T = {fig1['terms'][last]}: projected "
             f"present {fig1['projected']['present_mean'][last]:.3f}, absent {fig1['projected']['absent_mean'][last]:.3f}; "
             f"naive present {fig1['naive']['present_mean'][last]:.3f}, absent {fig1['naive']['absent_mean'][last]:.3f}.",
             "Paper (figures only, no numbers): Fig. 1: the projection keeps responses near 1 / 0 up to T = 1024 at "
             "d = 256, naive HRR does not; Fig. 5: projected HRR's capacity grows linearly with d, on par with VTB, "
             "naive HRR worst; Fig. 7: present/absent mean ± std start to overlap near n = 512, the means "
             "drift only near n = 2^16.",
             "Cells: largest n of the √2 grid with at most 3 % retrieval errors (>= : none failed up to the largest n).",
             *(f"![{title}](hrr_capacity/{file})" for title, file in (
                 ("Fig. 1", "fig1_response.png"), ("Fig. 5", "fig5_capacity.png"),
                 ("Fig. 6", "fig6_retrieval_error.png"), ("Fig. 7", "fig7_response_range.png")))]
    return Result("HRR paper Figs. 1, 5-7: binding capacity (retrieval, n pairs vs n distractors)",
                  list(rows[0]), rows, notes)


def _dims_fig2(ctx: Context) -> list[int]:
    return ctx.size([25, 50, 100, 200, 400, 800, 1600], [25, 100, 400, 1600], [8, 16])


def hrr_fig2(ctx: Context) -> Result:
    """HRR Fig. 2: P@5 against d' (paper preset otherwise), with 10 % of L marked."""
    from holoxmc.plotting import figure_class

    rows = []
    for name in ("bibtex", ABLATION_SET):
        train, _ = dataset(ctx, name)
        for dim in _dims_fig2(ctx):
            result = fit(ctx, name, model_settings(ctx, name, "hrr-fc", "paper", dim=dim))
            rows.append({"dataset": name, "L": train.n_labels, "d'": dim, "d'/L %": _cell(100 * dim / train.n_labels, 1),
                         "P@1": _cell(result["test"]["P@1"]), "P@5": _cell(result["test"]["P@5"])})
    figure = figure_class()(figsize=(6.0, 3.8))
    axes = figure.subplots()
    for name in dict.fromkeys(row["dataset"] for row in rows):
        mine = [row for row in rows if row["dataset"] == name]
        (line,) = axes.plot([r["d'"] for r in mine], [r["P@5"] for r in mine], marker="o", label=name)
        axes.axvline(0.1 * mine[0]["L"], color=line.get_color(), linestyle=":", linewidth=0.9)
    axes.set_xscale("log")
    axes.set_xlabel("d' (dotted: 10 % of L)")
    axes.set_ylabel("test P@5")
    axes.set_title("Fig. 2 here: P@5 against d' (HRR-FC, paper preset)")
    axes.legend(fontsize=8)
    notes = ["Paper (Fig. 2, a plot without printed numbers; Wiki10-31K, AmazonCat-13K, Delicious-200K): P@5 "
             "plateaus once d' reaches about 10 % of L (Delicious-200K: d' = 2,500, 1.25 % of L)."]
    return Result("HRR paper Fig. 2: effect of d' on P@5", list(rows[0]), rows, notes, _png(figure))


def hrr_fig8(ctx: Context) -> Result:
    """HRR Fig. 8: P@k with fixed p, m minus P@k with learned p, m (``learn_pm``), per d'."""
    from holoxmc.plotting import figure_class

    dims = ctx.size([100, 400, 1600], [100, 400, 1600], [8, 16])
    rows = []
    for dim in dims:
        fixed = fit(ctx, ABLATION_SET, model_settings(ctx, ABLATION_SET, "hrr-fc", "paper", dim=dim))
        learned = fit(ctx, ABLATION_SET, model_settings(ctx, ABLATION_SET, "hrr-fc", "paper", dim=dim,
                                                        head_options={"learn_pm": True}))
        rows.append({"d'": dim} | {f"P@{k} fixed - learned": _cell(fixed["test"][f"P@{k}"] - learned["test"][f"P@{k}"])
                                   for k in (1, 3, 5)})
    figure = figure_class()(figsize=(6.0, 3.6))
    axes = figure.subplots()
    width = 0.25
    for j, k in enumerate((1, 3, 5)):
        axes.bar(np.arange(len(rows)) + (j - 1) * width, [row[f"P@{k} fixed - learned"] for row in rows], width,
                 label=f"P@{k}")
    axes.axhline(0.0, color="black", linewidth=0.8)
    axes.set_xticks(np.arange(len(rows)), [str(row["d'"]) for row in rows])
    axes.set_xlabel("d'")
    axes.set_ylabel("P@k fixed − learned p, m")
    axes.set_title(f"Fig. 8 here ({ABLATION_SET}): > 0 favours fixed p, m")
    axes.legend(fontsize=8)
    notes = [f"On {ABLATION_SET}, paper preset with `learn_pm` on or off. Paper (Fig. 8, a plot; §5.5): fixed p and m "
             "are better for d' <= 400, and learning them makes no difference for larger d'."]
    return Result("HRR paper Fig. 8: fixed vs learned p and m", list(rows[0]), rows, notes, _png(figure))


# ---------------------------------------------------------------------------- SOLAR Tables 2, 3, 6
def _solar_scores(model: Any, X: Any, Y: Any, inv_prop: np.ndarray, **options: Any) -> dict[str, Any]:
    """P@1/3/5/10, Recall@100 (:func:`holoxmc.metrics.evaluate`'s ``Recall@100``), candidates
    and ms per point of a SOLAR model's decoding."""
    from holoxmc.metrics import evaluate, pad_predictions

    started = time.perf_counter()
    indices, _, candidates = model.predict(X, min(100, Y.shape[1]), **options)
    ms = 1000.0 * (time.perf_counter() - started) / X.shape[0]
    metrics = evaluate(pad_predictions(indices, 100), Y, inv_prop=inv_prop, ks=(1, 3, 5, 10), recall_ks=(100,))
    return {key: _cell(metrics[key]) for key in ("P@1", "P@3", "P@5", "P@10")} | {
        "Rec@100": _cell(metrics["Recall@100"]), "candidates": _cell(float(candidates.mean()), 1),
        "ms/point": _cell(ms, 3)}


def _solar(ctx: Context, preset: str, **head_options: Any) -> tuple[Any, Any]:
    """The fitted SOLAR estimator of ``preset`` on the ablation set, and the test split."""
    params = model_settings(ctx, ABLATION_SET, "solar", preset, head_options=head_options)
    _, test = dataset(ctx, ABLATION_SET)
    return fit(ctx, ABLATION_SET, params)["model"], test


def _solar_quick_note(ctx: Context) -> list[str]:
    """What a quick run changes in the SOLAR tables."""
    if not ctx.quick or ctx.tiny:
        return []
    return [f"--quick: 2 epochs and at most {QUICK_SOLAR_HIDDEN:,} hidden units per chunk (the paper preset's "
            "4,096 in the full run)."]


def solar_table2(ctx: Context) -> Result:
    """SOLAR Table 2: scoring schemes (sum of probabilities, log-probabilities, logits)."""
    rows = []
    for preset in ("paper", "tuned"):
        clf, test = _solar(ctx, preset)
        for scoring in ("prob", "logprob", "logit"):
            ours = _solar_scores(clf.model_, test.X, test.Y, clf.inv_prop_, scoring=scoring)
            paper = PAPER["solar_table2"][scoring] if preset == "paper" else None
            rows.append({"preset": preset, "scoring": scoring} | ours | {
                f"paper {key}": _paper(paper[i] if paper else None)
                for i, key in enumerate(("P@1", "P@5", "P@10", "Rec@100"))})
    notes = [f"On {ABLATION_SET}; paper: SOLAR Table 2 (Amazon books, 1.67M labels, K = 16, B = 30K, m = 100; not "
             f"here). Recall@100 is `holoxmc.metrics`' Recall@k (over the rows with labels). With few labels, m top buckets "
             "per chunk can cover most labels: see the candidates column."]
    notes += _solar_quick_note(ctx)
    return Result(f"SOLAR Table 2 on {ABLATION_SET}: scoring schemes", list(rows[0]), rows, notes)


def solar_table3(ctx: Context) -> Result:
    """SOLAR Table 3: min_freq d (labels retrieved by at least d of K chunks)."""
    rows = []
    for preset in ("paper", "tuned"):
        clf, test = _solar(ctx, preset)
        K = clf.model_.config.n_chunks
        for d in sorted({1, 2, max(1, K // 4), max(1, K // 2), K}):
            paper = PAPER["solar_table3"].get(d) if preset == "paper" else None
            rows.append({"preset": preset, "K": K, "min_freq d": d}
                        | _solar_scores(clf.model_, test.X, test.Y, clf.inv_prop_, min_freq=d, min_freq_mode="strict")
                        | {f"paper {key}": _paper(paper[i] if paper else None)
                           for i, key in enumerate(("candidates", "P@1", "P@5", "P@10", "Rec@100"))})
    notes = [f"On {ABLATION_SET}; paper: SOLAR Table 3 (Amazon books, K = 16, m = 100, B = 30K). With "
             "the paper's strict filter (min_freq_mode='strict': a label needs d chunks, so a point can keep fewer "
             "than k labels; holoxmc's default relaxes d per point instead)."]
    notes += _solar_quick_note(ctx)
    return Result(f"SOLAR Table 3 on {ABLATION_SET}: filtering candidates by min_freq", list(rows[0]), rows, notes)


def solar_table6(ctx: Context) -> Result:
    """SOLAR Table 6: B x K (K by the first chunks of one run; chunks are independent)."""
    train, test = dataset(ctx, ABLATION_SET)
    L = train.n_labels
    fractions = ctx.size((1 / 8, 1 / 4, 1 / 2), (1 / 8, 1 / 4, 1 / 2), (1 / 4, 1 / 2))
    rows = []
    for fraction in fractions:
        B = max(2, round(L * fraction))
        clf, _ = _solar(ctx, "paper", n_buckets=B)
        K = clf.model_.config.n_chunks
        for k in [k for k in (2, 4, 8, 16, 32) if k <= K]:
            model = clf.model_.first_chunks(k)
            ours = _solar_scores(model, test.X, test.Y, clf.inv_prop_, top_buckets=min(25, B))
            rows.append({"source": "here", "dataset": ABLATION_SET, "B": B, "K": k, "P@1": ours["P@1"],
                         "P@3": ours["P@3"], "P@5": ours["P@5"], "ms/point": ours["ms/point"]})
    for (B, K), (p1, p3, p5, ms) in PAPER["solar_table6"].items():
        rows.append({"source": "paper", "dataset": "amazon-670k", "B": B, "K": K, "P@1": p1, "P@3": p3, "P@5": p5,
                     "ms/point": ms})
    notes = [f"On {ABLATION_SET} (L = {L}): B at {', '.join(f'{f:.3g}' for f in fractions)} of L, m = 25 "
             "as in the paper (at most B); the paper's B = 10K-30K are 1.5-4.5 % of Amazon-670K's L, which "
             "would leave a handful of buckets here. Paper preset otherwise."]
    notes += _solar_quick_note(ctx)
    return Result(f"SOLAR Table 6 on {ABLATION_SET}: effect of B and K", list(rows[0]), rows, notes)


# ---------------------------------------------------------------------------- registry
EXPERIMENTS: dict[str, Experiment] = {
    e.name: e for e in (
        Experiment("hrr_table1", "HRR Table 1", hrr_table1, slow=True),
        Experiment("hrr_table2", "HRR Table 2", hrr_table2),
        Experiment("hrr_table3", "HRR Table 3", hrr_table3),
        Experiment("hrr_table4", "HRR Table 4", hrr_table4, slow=True),
        Experiment("hrr_table5", "HRR Table 5", hrr_table5, slow=True),
        Experiment("hrr_table7", "HRR Table 7 (App. I)", hrr_table7, slow=True),
        Experiment("hrr_capacity", "HRR Figs. 1, 5, 6, 7", hrr_capacity),
        Experiment("hrr_fig2", "HRR Fig. 2", hrr_fig2),
        Experiment("hrr_fig8", "HRR Fig. 8", hrr_fig8),
        Experiment("solar_table2", "SOLAR Table 2", solar_table2),
        Experiment("solar_table3", "SOLAR Table 3", solar_table3),
        Experiment("solar_table6", "SOLAR Table 6", solar_table6, slow=True),
    )
}


def check_names(names: Sequence[str] | None) -> list[str]:
    """The experiments to run, in registry order: ``names``, or all of them.

    Raises:
        InputError: an unknown name (the message lists the known ones).
    """
    if not names:
        return list(EXPERIMENTS)
    unknown = [name for name in names if name not in EXPERIMENTS]
    if unknown:
        raise InputError(f"unknown experiment {unknown[0]!r}; choose from: {', '.join(EXPERIMENTS)}")
    return [name for name in EXPERIMENTS if name in names]


# ---------------------------------------------------------------------------- output
def _markdown_table(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def render(name: str, experiment: Experiment, result: Result, seconds: float) -> dict[str, bytes]:
    """The files of one experiment: ``<name>.md``, ``<name>.csv`` and ``<name>.png`` (figures)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=result.columns, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(result.rows)
    text = [f"# {result.title}", "", f"Reproduces: {experiment.paper}. Ran in {seconds:.1f} s.", "",
            _markdown_table(result.columns, result.rows), ""]
    if result.figure is not None:
        text += [f"![{experiment.paper}]({name}.png)", ""]
    text += [f"- {note}" for note in result.notes]
    files = {f"{name}.md": ("\n".join(text) + "\n").encode(), f"{name}.csv": buffer.getvalue().encode()}
    if result.figure is not None:
        files[f"{name}.png"] = result.figure
    return files


def machine() -> str:
    """One line: CPU, cores, torch and its threads, GPU if any."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    cpu = " ".join(dict.fromkeys(part for part in (platform.machine(), platform.processor()) if part)) or "CPU"
    threads = torch.get_num_threads()
    return (f"{cpu}, {os.cpu_count()} cores, {gpu}, torch {torch.__version__} "
            f"({threads} thread{'' if threads == 1 else 's'}), Python {platform.python_version()}")


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def run_experiments(out: Path, names: Sequence[str] | None = None, *, quick: bool = False, tiny: bool = False,
                    seed: int = 0, device: str = "cpu", command: str = "",
                    say: Callable[[str], None] | None = None) -> dict[str, dict[str, Any]]:
    """Run the experiments ``names`` (all by default) and write their files and
    ``README.md`` into ``out``. An experiment that fails is reported in the index (with
    its error) and the others still run.

    Returns:
        ``{name: {"status": "ran" | "failed: ...", "seconds": float, "files": [...]}}``.
    """
    chosen = check_names(names)
    say = say or (lambda message: None)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(out=out, quick=quick, tiny=tiny, seed=seed, device=device)
    load_before = _load()
    summary: dict[str, dict[str, Any]] = {}
    started_all = time.perf_counter()
    for name in chosen:
        experiment = EXPERIMENTS[name]
        say(f"[{name}] {experiment.paper} ...")
        started = time.perf_counter()
        try:
            result = experiment.run(ctx)
        except Exception as exc:  # one experiment's failure is reported, the others still run
            log.debug("%s", traceback.format_exc())
            summary[name] = {"status": f"failed: {type(exc).__name__}: {exc}".splitlines()[0][:300],
                             "seconds": time.perf_counter() - started, "files": []}
            say(f"[{name}] {summary[name]['status']}")
            continue
        seconds = time.perf_counter() - started
        files = render(name, experiment, result, seconds)
        for file_name, data in files.items():
            atomic_write_bytes(out / file_name, data)
        summary[name] = {"status": "ran", "seconds": seconds, "files": list(files)}
        say(f"[{name}] done in {seconds:.1f}s")
    total = time.perf_counter() - started_all
    atomic_write_text(out / "README.md", _index(ctx, summary, total, command, load_before))
    return summary


def _index(ctx: Context, summary: dict[str, dict[str, Any]], total: float, command: str, load_before: str) -> str:
    lines = ["# Reproduction of the HRR (Ganesan et al. 2021) and SOLAR (Medini et al. 2021) tables", "",
             f"- command: `{command or 'holoxmc reproduce'}` (mode: {ctx.mode}, seed {ctx.seed}, device {ctx.device})",
             f"- machine: {machine()}",
             f"- {load_before} at the start, {_load()} at the end; total {total:.0f} s ({total / 60:.1f} min)", "",
             "| experiment | reproduces | status | seconds | files |", "|---|---|---|---|---|"]
    for name, entry in summary.items():
        files = ", ".join(f"[{f}]({f})" for f in entry["files"])
        lines.append(f"| {name} | {EXPERIMENTS[name].paper} | {entry['status']} | {entry['seconds']:.1f} | {files} |")
    lines += ["", "Each table sets our numbers beside the paper's; 'not reported' marks what a paper does not "
              "print, 'not run: <reason>' a row that could not run here. Preset 'paper' is each paper's own "
              "configuration (`holoxmc.presets.paper_params`), 'tuned' the library's dataset presets."]
    if math.isfinite(total) and ctx.mode == "tiny":
        lines.append("Mode tiny: synthetic toy data; the numbers only show that the code paths run.")
    return "\n".join(lines) + "\n"

"""The "unseen data" panel: holoxmc's default against napkinXC, omikuji and PECOS on sets
nobody tuned holoxmc on, side by side in one run (issue 31).

Sets (``--sets``; ``--quick`` swaps in tiny ones for the test suite):

* ``bibtex``, ``delicious``, ``debtags``: the real sets, through ``holoxmc.data.load``;
* ``reuters``, ``appstream``, ``debtags-grouped``: real raw-text sets with a grouped split and a
  ``group`` field, built by ``benchmarks/realdata/build_*.py`` (not stored with the project: see
  ``benchmarks/realdata/SOURCES.md``; ``debtags-grouped`` is the shared Debtags with its source
  packages as groups), read from ``$HOLOXMC_REALDATA/<folder>`` (default
  ``~/.cache/holoxmc/realdata/<folder>``); given by ``--sets`` only, not part of the default list.
  holoxmc's fits get the training file's groups, as ``holoxmc train`` passes them;
* ``mlc-3k``, ``mlc-16k``: ``sklearn.datasets.make_multilabel_classification`` (3,200 / 800
  rows x 300 features x 120 labels; 16,000 / 4,000 rows x 1,000 features x 500 labels),
  rows L2-normalised;
* ``realistic-1k``, ``realistic-10k``: :func:`holoxmc.data.make_realistic` at its default
  knobs (10,000 / 2,000 rows, L = 1,000, D = 5,000; 20,000 / 5,000 rows, L = 10,000,
  D = 20,000).

Models (``--models``): ``holoxmc-default`` (``XMCClassifier()``, no arguments but
``progress=False``: what a user gets, ``head="auto"``: the model chosen on a validation split
within its time budget), ``holoxmc-hrr`` (``XMCClassifier(head="hrr")``: HRR-FC at its library
defaults), ``holoxmc-linear`` (``XMCClassifier(head="linear")``), ``holoxmc-rerank``
(``XMCClassifier(head="rerank")``), ``holoxmc-default-frequent20`` (the default with its re-rank
candidate's ``frequent_labels=20``: :data:`AUTO_VARIANTS`), and the library wrappers of ``benchmarks/baselines.py`` (``napkinxc-plt``, ``omikuji``,
``pecos-xrlinear``) at their defaults. Every (set, model) runs in a process of its own, so
``peak_rss_mb`` (``ru_maxrss``) is that model's peak with its data; metrics, fit and top-5
times are those of ``baselines.measure``. PECOS pins numpy < 2, so its rows run under the
Python of ``--pecos-python`` (default ``.venv-pecos/bin/python``, made as baselines.py
describes); without it they are recorded as not run, with the reason.

Featurisations (``--features``, raw-text sets only): ``default`` reads the texts as
holoxmc's default does (:data:`holoxmc.data.text.DEFAULT_TEXT_FEATURES`); ``words``
(word TF-IDF), ``words+pairs-100k`` (words and word pairs, the 100,000 most frequent terms)
and ``words+pairs+chars`` (adds 2-5 character runs) are the three standard ones a library
is run on; every featurisation's rows are keyed ``MODEL [FEATURES]`` (``default``: ``MODEL``),
and the goals check compares holoxmc's row with the best library row of any featurisation.
``--cache-dir`` keeps each featurised split (``holoxmc.data.load``'s cache) for the next model.

Results are merged (per set and model) into ``--out`` and printed as one table, followed by
the issue-31 goals check for ``holoxmc-default``.

Usage:
    python benchmarks/panel.py --threads 2                  # the whole panel
    python benchmarks/panel.py --sets bibtex realistic-1k --models holoxmc-default napkinxc-plt
    python benchmarks/panel.py --quick --out /tmp/panel.json  # tiny sets, for the test suite
    python benchmarks/panel.py --sets reuters --models omikuji --features words --cache-dir /tmp/panel-cache
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "panel.json"
PECOS_PYTHON = ROOT / ".venv-pecos" / "bin" / "python"
MODELS = ("holoxmc-default", "holoxmc-hrr", "holoxmc-linear", "holoxmc-rerank", "napkinxc-plt", "omikuji", "pecos-xrlinear")
#: holoxmc rows and the XMCClassifier arguments they add to ``progress=False``
HOLOXMC = {"holoxmc-default": {}, "holoxmc-hrr": {"head": "hrr"}, "holoxmc-linear": {"head": "linear"}, "holoxmc-rerank": {"head": "rerank"}}
#: The default with other settings for one of ``head="auto"``'s candidates (a setting measured
#: before it becomes the candidate's default): candidate name -> its extra settings.
AUTO_VARIANTS = {"holoxmc-default-frequent20": {"rerank": {"head_options": {"frequent_labels": 20}}}}
BASELINE_MODELS = ("napkinxc-plt", "omikuji", "pecos-xrlinear")
SETS = ("bibtex", "delicious", "debtags", "mlc-3k", "mlc-16k", "realistic-1k", "realistic-10k")
QUICK_SETS = ("mlc-tiny", "realistic-tiny")
#: real raw-text sets made by benchmarks/realdata: set name -> folder (train.jsonl / test.jsonl)
REALDATA_SETS = {"reuters": "reuters", "appstream": "appstream", "debtags-grouped": "debtags"}
REALDATA_ROOT = Path(os.environ.get("HOLOXMC_REALDATA", "~/.cache/holoxmc/realdata")).expanduser()
QUICK_MODELS = ("holoxmc-linear", "napkinxc-plt")
COLUMNS = ("P@1", "P@5", "PSP@5", "fit_seconds", "predict_ms_per_point", "peak_rss_mb")
HEADER = "| set | N train / test | L | model | P@1 | P@5 | PSP@5 | fit s | top-5 ms/pt | peak MB |"

#: --features: the load options of a raw-text set (issue 49's three standard featurisations, and holoxmc's default)
FEATURISATIONS = {"default": {}, "words": {"text_features": "words"},
                  "words+pairs-100k": {"text_features": "words+pairs", "max_features": 100_000},
                  "words+pairs+chars": {"text_features": "words+pairs+chars"}}

#: make_multilabel_classification arguments: (train rows, test rows, features, labels)
MLC = {"mlc-tiny": (400, 100, 50, 20), "mlc-3k": (3_200, 800, 300, 120), "mlc-16k": (16_000, 4_000, 1_000, 500)}
#: make_realistic arguments: (train rows, test rows, labels, features, seed)
REALISTIC = {"realistic-tiny": (600, 150, 60, 400, 5), "realistic-1k": (10_000, 2_000, 1_000, 5_000, 1),
             "realistic-10k": (20_000, 5_000, 10_000, 20_000, 2)}


def load_set(name: str, features: str = "default", cache_dir: Path | None = None) -> tuple[Any, Any]:
    """The (train, test) :class:`holoxmc.data.Dataset` pair of a panel set (a raw-text set
    read as ``FEATURISATIONS[features]`` says, kept in ``cache_dir`` if given).

    Example:
        >>> train, test = load_set("mlc-tiny")
        >>> len(train), len(test), train.n_labels
        (400, 100, 20)
    """
    from holoxmc.data import Dataset, load, make_realistic

    if features != "default" and (name in MLC or name in REALISTIC or name in ("bibtex", "delicious")):
        raise SystemExit(f"--features {features}: {name} has no raw text")
    if name in MLC:
        from sklearn.datasets import make_multilabel_classification
        from sklearn.preprocessing import normalize

        n_train, n_test, n_features, n_labels = MLC[name]
        X, Y = make_multilabel_classification(n_train + n_test, n_features=n_features, n_classes=n_labels,
                                              sparse=True, return_indicator="sparse", random_state=0)
        X = normalize(sp.csr_matrix(X, dtype=np.float32))
        Y = sp.csr_matrix(Y, dtype=np.float32)
        return (Dataset(X[:n_train], Y[:n_train], name), Dataset(X[n_train:], Y[n_train:], name))
    if name in REALISTIC:
        n_train, n_test, n_labels, n_features, seed = REALISTIC[name]
        return make_realistic(n_train, n_labels, n_features, n_test=n_test, seed=seed, name=name)
    source = REALDATA_ROOT / REALDATA_SETS[name] if name in REALDATA_SETS else name
    if name in REALDATA_SETS and not (source / "train.jsonl").exists():
        raise SystemExit(f"{source}/train.jsonl not found: run benchmarks/realdata/build_{REALDATA_SETS[name]}.py first")
    options = FEATURISATIONS[features]
    train = load(source, "train", cache_dir=cache_dir, **options)
    return train, load(source, "test", widths=(train.n_features, train.n_labels), cache_dir=cache_dir, **options)


def model_fit(model: str, threads: int, groups: Any = None) -> Callable:
    """The ``baselines.measure`` fit function of ``model`` (holoxmc's fit gets the training
    rows' ``groups``, where the set has them, as ``holoxmc train`` passes a file's)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import baselines

    if model in AUTO_VARIANTS:  # this process only: each (set, model) runs in its own
        import holoxmc.auto as auto

        auto.CANDIDATES = tuple((name, {**settings, **AUTO_VARIANTS[model].get(name, {})})
                                for name, settings in auto.CANDIDATES)
    if model.startswith("holoxmc-"):
        from holoxmc.estimator import XMCClassifier

        def fit(X: sp.csr_matrix, Y: sp.csr_matrix) -> Callable[[sp.csr_matrix], np.ndarray]:
            clf = XMCClassifier(progress=False, **HOLOXMC.get(model, {}))
            clf.fit(X, Y, **({} if groups is None else {"groups": groups}))
            return lambda X_test: clf.predict_topk(X_test, k=5)[0]
        return fit
    wrappers = {"napkinxc-plt": baselines.napkinxc_model, "omikuji": baselines.omikuji_model,
                "pecos-xrlinear": baselines.pecos_model}
    return wrappers[model](threads)


def missing_head(model: str) -> str | None:
    """Why a holoxmc row cannot run (its head is not one of holoxmc's), else ``None``.

    Example:
        >>> missing_head("holoxmc-default") is None
        True
    """
    head = HOLOXMC.get(model, {}).get("head")
    if head is None:
        return None
    from holoxmc.auto import SELECTORS
    from holoxmc.models.registry import HEADS

    return None if head in HEADS or head in SELECTORS else f"not run: holoxmc has no head={head!r} yet (heads: {', '.join(HEADS)})"


def row_key(model: str, features: str) -> str:
    """A result row's key: the model, with its featurisation unless the default.

    Example:
        >>> row_key("omikuji", "words"), row_key("omikuji", "default")
        ('omikuji [words]', 'omikuji')
    """
    return model if features == "default" else f"{model} [{features}]"


def run_child(set_name: str, model: str, threads: int, features: str = "default",
              cache_dir: Path | None = None) -> None:
    """Fit and score one model on one set in this process; print the row as JSON."""
    import torch

    torch.set_num_threads(threads)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from baselines import measure

    train, test = load_set(set_name, features, cache_dir)
    row = measure(model_fit(model, threads, train.groups), train, test) | {"n_features": train.n_features}
    shape = {"n_train": len(train), "n_test": len(test), "n_labels": train.n_labels, "n_features": train.n_features}
    print(json.dumps({"row": row, "shape": shape}))


def run_isolated(set_name: str, model: str, threads: int, pecos_python: Path, timeout: float,
                 features: str = "default", cache_dir: Path | None = None) -> dict[str, Any]:
    """One (set, model) in a fresh process; its row, or ``{"error": ...}`` when it did not finish."""
    python = str(pecos_python) if model == "pecos-xrlinear" else sys.executable
    missing = missing_head(model)
    if missing:
        return {"error": missing}
    if model == "pecos-xrlinear" and not pecos_python.exists():
        return {"error": f"not run: no PECOS environment at {pecos_python} (see benchmarks/baselines.py)"}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    command = [python, str(Path(__file__).resolve()), "--child", set_name, model, "--threads", str(threads),
               "--features", features, *(["--cache-dir", str(cache_dir)] if cache_dir else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"not finished within {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {last}"}
    return json.loads(lines[-1])


def table(results: dict[str, Any], sets: list[str]) -> str:
    """The markdown table of ``sets`` in ``results``."""
    lines = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    for name in sets:
        entry = results["sets"].get(name, {})
        shape = entry.get("shape", {})
        size = f"{shape.get('n_train', '?')} / {shape.get('n_test', '?')}"
        for model, row in entry.get("models", {}).items():
            if "error" in row:
                lines.append(f"| {name} | {size} | {shape.get('n_labels', '?')} | {model} | {row['error']} |||||")
                continue
            lines.append(f"| {name} | {size} | {shape.get('n_labels', '?')} | {model} | {row['P@1']:.2f} | "
                         f"{row['P@5']:.2f} | {row['PSP@5']:.2f} | {row['fit_seconds']:.2f} | "
                         f"{row['predict_ms_per_point']:.3f} | {row['peak_rss_mb']:.0f} |")
    return "\n".join(lines)


def goals(results: dict[str, Any], sets: list[str], model: str = "holoxmc-default") -> list[str]:
    """Issue 31's goals for ``model`` against the best baseline of each set.

    Goals: P@1 and P@5 at or above the best of napkinXC/omikuji/PECOS on every set and +0.5
    P@1 on the panel mean; fit at most 5x the fastest library's; top-5 at most 1x the
    fastest library's ms/point.
    """
    lines, gaps = [], []
    for name in sets:
        models = results["sets"].get(name, {}).get("models", {})
        ours = models.get(model, {})
        theirs = {m: r for m, r in models.items() if m.split(" [")[0] in BASELINE_MODELS and "error" not in r}
        if "error" in ours or not ours or not theirs:
            lines.append(f"- {name}: not comparable (missing rows)")
            continue
        best = {k: max(r[k] for r in theirs.values()) for k in ("P@1", "P@5")}
        fastest = {k: min(r[k] for r in theirs.values()) for k in ("fit_seconds", "predict_ms_per_point")}
        gaps.append(ours["P@1"] - best["P@1"])
        lines.append(
            f"- {name}: P@1 {ours['P@1'] - best['P@1']:+.2f}, P@5 {ours['P@5'] - best['P@5']:+.2f} vs the best "
            f"library; fit {ours['fit_seconds'] / fastest['fit_seconds']:.1f}x (goal <= 5x), top-5 "
            f"{ours['predict_ms_per_point'] / fastest['predict_ms_per_point']:.1f}x (goal <= 1x) the fastest")
    if gaps:
        lines.append(f"- panel mean P@1 gap to the best library: {np.mean(gaps):+.2f} (goal >= +0.5) "
                     f"over {len(gaps)} sets")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", choices=[*SETS, *REALDATA_SETS, *QUICK_SETS])
    parser.add_argument("--models", nargs="+", choices=[*MODELS, *AUTO_VARIANTS])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="tiny sets, napkinXC and holoxmc's linear model")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--pecos-python", type=Path, default=PECOS_PYTHON)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for one model on one set")
    parser.add_argument("--features", choices=list(FEATURISATIONS), default="default",
                        help="how a raw-text set becomes features (default: holoxmc's default)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="keep featurised splits here for the next model")
    parser.add_argument("--child", nargs=2, metavar=("SET", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(*args.child, args.threads, args.features, args.cache_dir)
        return
    sets = args.sets or list(QUICK_SETS if args.quick else SETS)
    models = args.models or list(QUICK_MODELS if args.quick else MODELS)
    from holoxmc.io import atomic_write_json

    results = json.loads(args.out.read_text()) if args.out.exists() else {"sets": {}}
    results["machine"] = (f"{platform.machine()}, {os.cpu_count()} CPUs, {args.threads} threads per library; "
                          f"{time.strftime('%Y-%m-%d')}")
    results["command"] = " ".join(["python benchmarks/panel.py", *(argv if argv is not None else sys.argv[1:])])
    for name in sets:
        for model in models:
            outcome = run_isolated(name, model, args.threads, args.pecos_python, args.timeout, args.features,
                                   args.cache_dir)
            entry = results["sets"].setdefault(name, {"models": {}})
            entry.setdefault("models", {})[row_key(model, args.features)] = outcome.get("row", outcome)
            if "shape" in outcome:
                entry["shape"] = outcome["shape"]
            print(json.dumps({"set": name, "model": model, "features": args.features, **outcome}), flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(args.out, results)
    print()
    print(table(results, sets))
    print()
    print("\n".join(goals(results, sets)))


if __name__ == "__main__":
    main()

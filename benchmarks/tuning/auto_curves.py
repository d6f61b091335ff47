"""Validation curves of ``head="auto"``'s candidates on the unseen-data panel's sets: what a
rule that stops a losing network early (successive halving) would keep and save.

For each set, the candidates train exactly as ``fit_auto`` trains them (the linear model, then
HRR-FC and FC at their library defaults (``--candidates``; ``fit_auto`` tried all three when this ran), on the training rows less the estimator's seeded
validation share) and every epoch's validation P@1 is written out, with each candidate's
seconds. Only training rows are read: the test split is never scored here.

``--shortlist-k K ...`` also fits the re-rank model with ``shortlist = ceil(K x mean labels
per fitting row)`` for each ``K`` (no floor, no cap: the curves that choose the constant of
:func:`holoxmc.models.rerank.fit.shortlist_rule`), and ``--shortlists S ...`` with fixed sizes.
``realistic-1k-m16`` is realistic-1k's shape with 16 labels drawn per row (a set with many
labels per row that is not Delicious).

``--choose-k FILE ...`` reads such runs and prints, per ``K``, each set's validation P@1 and its
regret to that set's best ``K``; the ``K`` chosen is the smallest whose mean regret is within
``--tolerance`` of the least (a larger shortlist costs fit time), and each set's ``K`` chosen on
the other sets is printed beside it.

Run: PYTHONPATH=src python benchmarks/tuning/auto_curves.py --sets mlc-3k bibtex ... [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from panel import load_set  # noqa: E402

from holoxmc.estimator import XMCClassifier  # noqa: E402
from holoxmc.auto import _validation_split  # noqa: E402

#: What was measured: the linear model and both networks, each at its library defaults.
MEASURED = {"linear": {"head": "linear"}, "rerank": {"head": "rerank"}, "hrr-fc": {"head": "hrr"},
            "fc": {"head": "dense"}}


#: Sets of this script beside the panel's: ``(n_train, L, D, seed, labels drawn per row)``.
EXTRA_SETS = {"realistic-1k-m16": (10_000, 1_000, 5_000, 1, 16)}


def training_split(name: str):  # noqa: ANN201 (a Dataset)
    """The training split of a panel set or of an :data:`EXTRA_SETS` set."""
    if name in EXTRA_SETS:
        from holoxmc.data import make_realistic

        n_train, n_labels, n_features, seed, per_row = EXTRA_SETS[name]
        return make_realistic(n_train, n_labels, n_features, seed=seed, labels_per_point=per_row, name=name)[0]
    return load_set(name)[0]


def shortlist_runs(Y_fit, ks: list[float], sizes: list[int]) -> dict[str, dict]:  # noqa: ANN001
    """``{run name: estimator keywords}`` of the re-rank fits at each ``K`` and fixed size."""
    mean = Y_fit.nnz / max(Y_fit.shape[0], 1)
    runs = {f"rerank-k{k:g}": {"head": "rerank", "head_options": {"shortlist": max(1, math.ceil(k * mean))}}
            for k in ks}
    runs.update({f"rerank-s{s}": {"head": "rerank", "head_options": {"shortlist": s}} for s in sizes})
    return runs


def curves(name: str, candidates: list[str], ks: list[float] = [], sizes: list[int] = [],  # noqa: B006
           repeats: int = 1) -> dict:
    """``{candidate: {"seconds", "val_p1", "curve"}}`` of one panel set's training split
    (re-rank runs also record their ``shortlist``). With ``repeats``, the runs are repeated
    in turn and ``seconds`` is the median (``all_seconds`` lists each)."""
    train = training_split(name)
    auto = XMCClassifier(progress=False)
    X_fit, Y_fit, X_val, Y_val = _validation_split(auto, train.X, train.Y)
    out: dict[str, dict] = {}
    runs = {model: MEASURED[model] for model in candidates} | shortlist_runs(Y_fit, ks, sizes)
    for _ in range(repeats):
        for model, keywords in runs.items():
            started = time.perf_counter()
            clf = XMCClassifier(progress=False, **keywords).fit(X_fit, Y_fit, X_val, Y_val)
            seconds = time.perf_counter() - started
            curve = [entry["val"]["P@1"] for entry in clf.fit_result_.history if "val" in entry]
            times = out.get(model, {}).get("all_seconds", []) + [seconds]
            out[model] = {"seconds": statistics.median(times), "all_seconds": times,
                          "val_p1": clf.score(X_val, Y_val), "curve": curve}
            if keywords["head"] == "rerank":
                out[model]["shortlist"] = clf.rerank_.shortlist
            print(name, model, out[model].get("shortlist", ""), f"{seconds:.1f} s",
                  f"val P@1 {out[model]['val_p1']:.2f}", " ".join(f"{p:.1f}" for p in curve), flush=True)
    return out


def choose_k(points: dict[str, dict[float, float]], tolerance: float) -> float:
    """The smallest ``K`` whose mean regret over ``points`` (``{set: {K: val P@1}}``) is
    within ``tolerance`` of the least; only the ``K`` every set has."""
    ks = sorted(set.intersection(*(set(curve) for curve in points.values())))
    regret = {k: sum(max(curve.values()) - curve[k] for curve in points.values()) / len(points) for k in ks}
    least = min(regret.values())
    return min(k for k in ks if regret[k] <= least + tolerance)


def print_choice(files: list[Path], leave_out: list[str], tolerance: float) -> None:
    """The per-``K`` table of the ``--shortlist-k`` runs in ``files``, the ``K`` chosen on every
    set but ``leave_out``, and each set's ``K`` chosen leaving it out too."""
    points: dict[str, dict[float, float]] = {}
    for file in files:
        for name, runs in json.loads(file.read_text()).items():
            for run, result in runs.items():
                if run.startswith("rerank-k") and name not in leave_out:
                    points.setdefault(name, {})[float(run.removeprefix("rerank-k"))] = result["val_p1"]
    ks = sorted(set.intersection(*(set(curve) for curve in points.values())))
    print("| K | " + " | ".join(points) + " | mean regret |")
    print("|---" * (len(points) + 2) + "|")
    for k in ks:
        cells = [f"{curve[k]:.2f}" for curve in points.values()]
        regret = sum(max(curve.values()) - curve[k] for curve in points.values()) / len(points)
        print(f"| {k:g} | " + " | ".join(cells) + f" | {regret:.2f} |")
    print(f"chosen on {sorted(points)}: K = {choose_k(points, tolerance):g}")
    for name in points:
        others = {other: curve for other, curve in points.items() if other != name}
        print(f"  without {name}: K = {choose_k(others, tolerance):g}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--choose-k", nargs="+", type=Path, help="print the choice of K from these runs, train nothing")
    parser.add_argument("--leave-out", nargs="*", default=["delicious"])
    parser.add_argument("--tolerance", type=float, default=0.25)
    parser.add_argument("--sets", nargs="+")
    parser.add_argument("--candidates", nargs="*", choices=list(MEASURED), default=list(MEASURED))
    parser.add_argument("--shortlist-k", nargs="*", type=float, default=[])
    parser.add_argument("--shortlists", nargs="*", type=int, default=[])
    parser.add_argument("--repeats", type=int, default=1, help="fit each run this many times, in turn (median seconds)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/auto_curves.json"))
    args = parser.parse_args()
    if args.choose_k:
        print_choice(args.choose_k, args.leave_out, args.tolerance)
        return
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    for name in args.sets or []:
        results[name] = curves(name, args.candidates, args.shortlist_k, args.shortlists, args.repeats)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

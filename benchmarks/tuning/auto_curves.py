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
from holoxmc.auto import _held_rows  # noqa: E402

#: What was measured: the linear model and both networks, each at its library defaults.
MEASURED = {"linear": {"head": "linear"}, "rerank": {"head": "rerank"}, "hrr-fc": {"head": "hrr"},
            "fc": {"head": "dense"}}


#: Sets of this script beside the panel's: :func:`holoxmc.data.make_realistic` keywords. None
#: is reported anywhere; they widen the record of where each candidate leads (labels a row from
#: 2 to 24, D from 500 to 5,000).
EXTRA_SETS: dict[str, dict] = {
    "realistic-1k-m16": {"n_points": 10_000, "n_labels": 1_000, "n_features": 5_000, "seed": 1, "labels_per_point": 16},
    "hist-m8": {"n_points": 8_000, "n_labels": 1_000, "n_features": 5_000, "seed": 2, "labels_per_point": 8,
                "noise": 0.8, "zipf_exponent": 0.9},
    "hist-m12-d500": {"n_points": 8_000, "n_labels": 500, "n_features": 500, "seed": 3, "labels_per_point": 12,
                      "doc_length": 80.0},
    "hist-m24": {"n_points": 8_000, "n_labels": 2_000, "n_features": 3_000, "seed": 4, "labels_per_point": 24},
    "hist-m4-d500": {"n_points": 8_000, "n_labels": 1_000, "n_features": 500, "seed": 5, "labels_per_point": 4},
    "hist-m2": {"n_points": 6_000, "n_labels": 300, "n_features": 2_000, "seed": 6, "labels_per_point": 2},
}


def training_split(name: str):  # noqa: ANN201 (a Dataset)
    """The training split of a panel set or of an :data:`EXTRA_SETS` set."""
    if name in EXTRA_SETS:
        from holoxmc.data import make_realistic

        return make_realistic(**EXTRA_SETS[name], name=name)[0]
    return load_set(name)[0]


def shortlist_runs(Y_fit, ks: list[float], sizes: list[int]) -> dict[str, dict]:  # noqa: ANN001
    """``{run name: estimator keywords}`` of the re-rank fits at each ``K`` and fixed size."""
    mean = Y_fit.nnz / max(Y_fit.shape[0], 1)
    runs = {f"rerank-k{k:g}": {"head": "rerank", "head_options": {"shortlist": max(1, math.ceil(k * mean))}}
            for k in ks}
    runs.update({f"rerank-s{s}": {"head": "rerank", "head_options": {"shortlist": s}} for s in sizes})
    return runs


def curves(name: str, candidates: list[str], ks: list[float] = [], sizes: list[int] = [],  # noqa: B006
           repeats: int = 1, abandon: bool = False) -> dict:
    """``{candidate: {"seconds", "val_p1", "curve"}}`` of one panel set's training split
    (re-rank runs also record their ``shortlist``). With ``repeats``, the runs are repeated
    in turn and ``seconds`` is the median (``all_seconds`` lists each). With ``abandon``, a
    network gets the best validation P@1 before it as ``abandon_below``, as ``fit_auto`` gives
    it (no time budget)."""
    train = training_split(name)
    auto = XMCClassifier(progress=False)
    held = _held_rows(auto, train.X)
    X_fit, Y_fit, X_val, Y_val = train.X[~held], train.Y[~held], train.X[held], train.Y[held]
    out: dict[str, dict] = {"_shape": {"rows": X_fit.shape[0], "features": X_fit.shape[1], "nnz": int(X_fit.nnz),
                                       "labels": Y_fit.shape[1], "label_nnz": int(Y_fit.nnz)}}
    runs = {model: MEASURED[model] for model in candidates} | shortlist_runs(Y_fit, ks, sizes)
    for _ in range(repeats):
        for model, keywords in runs.items():
            started = time.perf_counter()
            leader = max((run["val_p1"] for key, run in out.items() if key not in ("_shape", model)), default=None)
            if abandon and leader is not None and keywords["head"] in ("dense", "hrr"):
                keywords = keywords | {"abandon_below": leader}  # as fit_auto gives a network (no budget)
            clf = XMCClassifier(progress=False, **keywords).fit(X_fit, Y_fit, X_val, Y_val)
            seconds = time.perf_counter() - started
            curve = [entry["val"]["P@1"] for entry in clf.fit_result_.history if "val" in entry]
            times = out.get(model, {}).get("all_seconds", []) + [seconds]
            out[model] = {"seconds": statistics.median(times), "all_seconds": times,
                          "val_p1": clf.score(X_val, Y_val), "curve": curve,
                          "epoch_seconds": [entry["seconds"] for entry in clf.fit_result_.history]}
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


def choose_gate(points: dict[str, tuple[float, bool]]) -> float:
    """The least labels a row ``t`` at which the FC candidate should run, from ``points``
    (``{set: (mean labels per fitting row, FC led validation)}``): the rule "FC only where
    labels a row >= t" that misjudges the fewest sets; among such ``t``, the geometric middle
    of their range (``inf`` where FC led nowhere).

    Example:
        >>> choose_gate({"a": (2.0, False), "b": (8.0, False), "c": (12.0, True)})
        9.797958971132712
    """
    values = sorted({m for m, _ in points.values()})
    cuts = [values[0] / 2] + [math.sqrt(a * b) for a, b in zip(values, values[1:])] + [math.inf]
    errors = [sum((m >= t) != led for m, led in points.values()) for t in cuts]
    best = [t for t, e in zip(cuts, errors) if e == min(errors)]
    low, high = best[0], best[-1]
    return math.inf if low == math.inf else low if high == math.inf else math.sqrt(low * high)


def print_gate(files: list[Path]) -> None:
    """Each set's labels a row, the re-rank model's and FC's validation P@1, and the gate
    chosen on the other sets (leave one set out) with what it decides for the set left out."""
    points, rows = {}, []
    for file in files:
        for name, runs in json.loads(file.read_text()).items():
            if "_shape" not in runs or "fc" not in runs or "rerank" not in runs:
                continue
            shape = runs["_shape"]
            m = shape["label_nnz"] / shape["rows"]
            led = runs["fc"]["val_p1"] > runs["rerank"]["val_p1"]
            points[name] = (m, led)
            flat = len(set(runs["fc"]["curve"])) == 1
            rows.append((name, shape, m, runs["rerank"], runs["fc"], led, flat))
    print("| set | rows | D | L | labels a row | re-rank val P@1 (s) | FC val P@1 (s, epochs) | led "
          "| t chosen without it | FC runs | right |")
    print("|---|---:|---:|---:|---:|---|---|---|---:|---|---|")
    for name, shape, m, rerank, fc, led, flat in sorted(rows, key=lambda row: row[2]):
        t = choose_gate({other: point for other, point in points.items() if other != name})
        runs = m >= t
        print(f"| {name} | {shape['rows']:,} | {shape['features']:,} | {shape['labels']:,} | {m:.2f} "
              f"| {rerank['val_p1']:.2f} ({rerank['seconds']:.1f}) "
              f"| {fc['val_p1']:.2f} ({fc['seconds']:.1f}, {len(fc['curve'])}{', flat' if flat else ''}) "
              f"| {'FC' if led else 're-rank'} | {t:.2f} | {'yes' if runs else 'no'} | {'yes' if runs == led else 'NO'} |")
    print(f"chosen on all {len(points)} sets: t = {choose_gate(points):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--choose-k", nargs="+", type=Path, help="print the choice of K from these runs, train nothing")
    parser.add_argument("--choose-gate", nargs="+", type=Path,
                        help="print the FC candidate's labels-a-row gate chosen leaving each set out, train nothing")
    parser.add_argument("--leave-out", nargs="*", default=["delicious"])
    parser.add_argument("--tolerance", type=float, default=0.25)
    parser.add_argument("--sets", nargs="+")
    parser.add_argument("--candidates", nargs="*", choices=list(MEASURED), default=list(MEASURED))
    parser.add_argument("--shortlist-k", nargs="*", type=float, default=[])
    parser.add_argument("--shortlists", nargs="*", type=int, default=[])
    parser.add_argument("--repeats", type=int, default=1, help="fit each run this many times, in turn (median seconds)")
    parser.add_argument("--abandon", action="store_true",
                        help="a network stops once it cannot reach the best run before it (fit_auto's abandon_below)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/auto_curves.json"))
    args = parser.parse_args()
    if args.choose_gate:
        print_gate(args.choose_gate)
        return
    if args.choose_k:
        print_choice(args.choose_k, args.leave_out, args.tolerance)
        return
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    for name in args.sets or []:
        results[name] = curves(name, args.candidates, args.shortlist_k, args.shortlists, args.repeats, args.abandon)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Library defaults chosen leave-one-set-out (issue 31, item 3): no figure reported for a set
comes from settings tuned on that set.

Every set of a panel (Bibtex, Delicious, Debtags from ``/work/shared/data``; two sklearn
``make_multilabel_classification`` sets; a :func:`holoxmc.data.make_realistic` set) is
split, seeded, into a fit part and a pseudo-test of 20 % of its TRAIN rows (the test split is
never loaded). Each candidate of a small grid trains on the fit part exactly as the library
does (its own validation split carved from the fit part, seed 0) and is scored on the
pseudo-test. A candidate's score on a group of sets is its mean pseudo-test P@1; the choice
on a group is the best mean, except that a candidate within ``--tolerance`` P@1 points of it
and cheaper (mean fit seconds relative to the first candidate, the old default) wins.

For every set, the table gives the candidate chosen on the OTHER sets (leave one set out),
its P@1 there, and the choice on all sets (what ships as the library default).

Linear one-vs-rest: one liblinear fit per ``C`` of the union of the grids on the carved
split, and one on the whole fit part (the refit); the candidates (``C_grid`` x ``refit`` x
``prune``) are assembled from those fits exactly as :func:`~holoxmc.models.linear.fit.fit_linear`
would run them (the same seeds give the same per-label SVMs whatever the grid; pruning is
applied to the stored weights). Networks (``hrr-fc``, ``fc``): one fit per candidate, on at
most ``--network-rows`` rows of each fit part (seeded), to keep the run short.

Usage:
    python benchmarks/tuning/defaults_loo.py --part linear --out benchmarks/results/defaults_loo_linear.jsonl
    python benchmarks/tuning/defaults_loo.py --part network --out benchmarks/results/defaults_loo_network.jsonl
    python benchmarks/tuning/defaults_loo.py --report benchmarks/results/defaults_loo_*.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import make_multilabel_classification

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier
from holoxmc.metrics import evaluate, pad_predictions
from holoxmc.train import split_validation
from holoxmc.models.linear.fit import LinearConfig, LinearModel, fit_linear

#: The panel, in report order.
PANEL = ("bibtex", "delicious", "debtags", "mlc-a", "mlc-b", "realistic")
#: Seed of the pseudo-test split (not the library's validation seed, 0).
PSEUDO_TEST_SEED = 2031
PSEUDO_TEST_FRACTION = 0.2

#: Linear candidates: C grids (a one-value grid still carves the validation split that
#: fits the confidence calibration), refit, prune. The first combination is the old default.
LINEAR_GRIDS: tuple[tuple[float, ...], ...] = ((0.1, 0.3, 1.0, 3.0), (0.3, 1.0), (0.3,), (1.0,))
LINEAR_REFIT = (False, True)
LINEAR_PRUNE = (0.01, 0.05)

#: Network candidates, per head (the first is the old default of both heads).
NETWORK_CANDIDATES: tuple[dict[str, Any], ...] = (
    {"batch_size": 64, "lr": 1e-3, "epochs": 20},
    {"batch_size": 256, "lr": 2e-3, "epochs": 20},
    {"batch_size": 256, "lr": 2e-3, "epochs": 10},
)
NETWORK_HEADS = ("hrr", "dense")


def panel_set(name: str) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The TRAIN rows of a panel set as ``(X, Y)`` CSR."""
    if name.startswith("mlc"):
        shape = {"mlc-a": (3200, 300, 120, 4, 0), "mlc-b": (6000, 1000, 400, 6, 1)}[name]
        X, Y = make_multilabel_classification(n_samples=shape[0], n_features=shape[1], n_classes=shape[2],
                                              n_labels=shape[3], allow_unlabeled=False, random_state=shape[4])
        return sp.csr_matrix(X.astype(np.float32)), sp.csr_matrix(Y.astype(np.float32))
    if name == "realistic":
        from holoxmc.data import make_realistic  # type: ignore[attr-defined]

        train, _ = make_realistic(n_points=8000, n_labels=1000, n_features=5000, seed=0)
        return sp.csr_matrix(train.X), sp.csr_matrix(train.Y)
    train = load(name, "train")
    return sp.csr_matrix(train.X), sp.csr_matrix(train.Y)


def p_at_1(model: Any, X: sp.csr_matrix, Y: sp.csr_matrix) -> float:
    """P@1 of a served model or an estimator (both have ``predict_topk(X, k)``) on ``(X, Y)``."""
    indices, _ = model.predict_topk(X, 1)
    return float(evaluate(pad_predictions(indices, 5), Y, ks=(1,))["P@1"])


def pruned(model: LinearModel, prune: float) -> LinearModel:
    """``model`` with the weights of magnitude below ``prune`` dropped (as training prunes)."""
    W = model.weights.copy()
    W.data[np.abs(W.data) < prune] = 0
    W.eliminate_zeros()
    return LinearModel(W, model.bias, normalize_rows=model.normalize_rows)


# ---------------------------------------------------------------------------- measuring
def linear_fits(name: str) -> Iterable[dict[str, Any]]:
    """One row per (C, phase): seconds, validation and pseudo-test P@1 per prune."""
    X, Y = panel_set(name)
    fit_rows, test_rows = split_validation(X.shape[0], PSEUDO_TEST_FRACTION, PSEUDO_TEST_SEED)
    X_fit, Y_fit, X_test, Y_test = X[fit_rows], Y[fit_rows], X[test_rows], Y[test_rows]
    inner, held = split_validation(X_fit.shape[0], 0.1, 0)  # fit_linear's own carving (seed 0)
    for C in sorted({C for grid in LINEAR_GRIDS for C in grid}):
        for phase, rows in (("carved", inner), ("refit", np.arange(X_fit.shape[0]))):
            started = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model, _ = fit_linear(X_fit[rows], Y_fit[rows], LinearConfig(C=C, prune=0.0))
            seconds = time.perf_counter() - started
            row = {"part": "linear", "set": name, "C": C, "phase": phase, "seconds": round(seconds, 3)}
            for prune in LINEAR_PRUNE:
                kept = pruned(model, prune)
                row[f"test@{prune}"] = p_at_1(kept, X_test, Y_test)
                if phase == "carved":
                    row[f"val@{prune}"] = p_at_1(kept, X_fit[held], Y_fit[held])
            yield row


def network_fits(name: str, max_rows: int) -> Iterable[dict[str, Any]]:
    """One row per (head, candidate): fit seconds and pseudo-test P@1."""
    X, Y = panel_set(name)
    fit_rows, test_rows = split_validation(X.shape[0], PSEUDO_TEST_FRACTION, PSEUDO_TEST_SEED)
    rng = np.random.default_rng([PSEUDO_TEST_SEED, 1])
    if len(fit_rows) > max_rows:
        fit_rows = np.sort(rng.choice(fit_rows, max_rows, replace=False))
    test_rows = test_rows[: max(1, max_rows // 4)]
    for head in NETWORK_HEADS:
        for index, candidate in enumerate(NETWORK_CANDIDATES):
            clf = XMCClassifier(head=head, progress=False, seed=0, **candidate)
            started = time.perf_counter()
            clf.fit(X[fit_rows], Y[fit_rows])
            seconds = time.perf_counter() - started
            yield {"part": "network", "set": name, "head": head, "candidate": index, **candidate,
                   "seconds": round(seconds, 3), "test": p_at_1(clf, X[test_rows], Y[test_rows])}


# ---------------------------------------------------------------------------- choosing
def linear_settings() -> dict[str, dict[str, Any]]:
    """Every linear candidate by name: ``{"C_grid", "refit", "prune"}``."""
    return {f"C_grid={list(grid)} refit={refit} prune={prune}": {"C_grid": grid, "refit": refit, "prune": prune}
            for grid in LINEAR_GRIDS for refit in LINEAR_REFIT for prune in LINEAR_PRUNE}


def network_settings() -> dict[str, dict[str, Any]]:
    """Every network candidate by name."""
    return {" ".join(f"{key}={value}" for key, value in candidate.items()): candidate
            for candidate in NETWORK_CANDIDATES}


def linear_candidates(rows: list[dict[str, Any]]) -> dict[str, dict[str, tuple[float, float]]]:
    """``{candidate name: {set: (pseudo-test P@1, fit seconds)}}`` assembled from the fits as
    ``fit_linear`` runs a candidate: every C of the grid on the carved split, the best by
    validation P@1 (ties: first in grid order), then, with refit, that C on the whole part."""
    fits = {(r["set"], r["C"], r["phase"]): r for r in rows if r["part"] == "linear"}
    sets = sorted({r["set"] for r in rows if r["part"] == "linear"}, key=_panel_order)
    sets = [s for s in sets if all((s, C, phase) in fits for C in {C for grid in LINEAR_GRIDS for C in grid}
                                   for phase in ("carved", "refit"))]  # a set whose run finished
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for name, settings in linear_settings().items():
        grid, refit, prune = settings["C_grid"], settings["refit"], settings["prune"]
        table[name] = {}
        for s in sets:
            C = max(grid, key=lambda c: (fits[s, c, "carved"][f"val@{prune}"], -grid.index(c)))
            seconds = sum(fits[s, c, "carved"]["seconds"] for c in grid)
            final = fits[s, C, "refit" if refit else "carved"]
            table[name][s] = (final[f"test@{prune}"], seconds + (final["seconds"] if refit else 0.0))
    return table


def network_candidates(rows: list[dict[str, Any]], head: str) -> dict[str, dict[str, tuple[float, float]]]:
    """``{candidate name: {set: (pseudo-test P@1, fit seconds)}}`` of one head."""
    table: dict[str, dict[str, tuple[float, float]]] = {name: {} for name in network_settings()}
    for r in rows:
        if r["part"] == "network" and r["head"] == head:
            name = " ".join(f"{key}={r[key]}" for key in NETWORK_CANDIDATES[0])
            table[name][r["set"]] = (r["test"], r["seconds"])
    return table


def complete_sets(table: dict[str, dict[str, tuple[float, float]]]) -> list[str]:
    """The sets every candidate of ``table`` was measured on, in panel order."""
    sets = sorted({s for per in table.values() for s in per}, key=_panel_order)
    return [s for s in sets if all(s in per for per in table.values())]


def shipped(rows: list[dict[str, Any]], tolerance: float = 0.25) -> dict[str, dict[str, Any]]:
    """The settings chosen on every measured set, per model (``"linear"`` and the network
    heads measured): what the library ships as its defaults."""
    tables = {"linear": (linear_candidates(rows), linear_settings())}
    tables |= {head: (network_candidates(rows, head), network_settings()) for head in NETWORK_HEADS}
    return {model: settings[choose(table, complete_sets(table), tolerance)]
            for model, (table, settings) in tables.items() if complete_sets(table)}


def choose(table: dict[str, dict[str, tuple[float, float]]], sets: list[str], tolerance: float) -> str:
    """The candidate with the best mean P@1 over ``sets``, or a cheaper one within
    ``tolerance`` of it (cost: mean over the sets of its seconds over the first candidate's)."""
    names = list(table)
    mean = {n: float(np.mean([table[n][s][0] for s in sets])) for n in names}
    cost = {n: float(np.mean([table[n][s][1] / max(table[names[0]][s][1], 1e-9) for s in sets])) for n in names}
    best = max(mean.values())
    return min((n for n in names if mean[n] >= best - tolerance), key=lambda n: (cost[n], -mean[n]))


def report(table: dict[str, dict[str, tuple[float, float]]], title: str, tolerance: float) -> str:
    """A markdown table: per held-out set, the choice on the other sets and on all sets."""
    sets = complete_sets(table)
    overall = choose(table, sets, tolerance)
    old = next(iter(table))
    lines = [f"**{title}** — choice on all {len(sets)} sets (ships): `{overall}`; old default: `{old}`", "",
             "| held-out set | chosen on the other sets | its P@1 | s | old default P@1 | s | best on this set (P@1) |",
             "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
    for held in sets if len(sets) > 1 else []:
        loo = choose(table, [s for s in sets if s != held], tolerance)
        best = max(table, key=lambda n: table[n][held][0])
        mark = "same" if loo == overall else f"`{loo}`"
        lines.append(f"| {held} | {mark} | {table[loo][held][0]:.2f} | {table[loo][held][1]:.1f} | "
                     f"{table[old][held][0]:.2f} | {table[old][held][1]:.1f} | `{best}` ({table[best][held][0]:.2f}) |")
    return "\n".join(lines)


def _panel_order(name: str) -> int:
    return PANEL.index(name) if name in PANEL else len(PANEL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("linear", "network"))
    parser.add_argument("--sets", nargs="+", default=list(PANEL), choices=PANEL)
    parser.add_argument("--network-rows", type=int, default=2000)
    parser.add_argument("--out", type=Path, help="JSON lines of the fits (appended)")
    parser.add_argument("--report", nargs="+", type=Path, help="JSON-lines files to choose from")
    parser.add_argument("--tolerance", type=float, default=0.25)
    args = parser.parse_args()
    if args.part:
        for name in args.sets:
            rows = linear_fits(name) if args.part == "linear" else network_fits(name, args.network_rows)
            for row in rows:
                print(json.dumps(row), flush=True)
                if args.out:
                    with args.out.open("a") as f:
                        f.write(json.dumps(row) + "\n")
    if args.report:
        rows = [json.loads(line) for path in args.report for line in path.read_text().splitlines() if line.strip()]
        if complete_sets(linear_candidates(rows)):
            print(report(linear_candidates(rows), "linear", args.tolerance), "\n")
        for head in NETWORK_HEADS:
            if complete_sets(network_candidates(rows, head)):
                print(report(network_candidates(rows, head), f"{head} (fc backbone)", args.tolerance), "\n")


if __name__ == "__main__":
    main()

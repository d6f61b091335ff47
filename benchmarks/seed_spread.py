"""Seed spread of the default models: the same configuration trained with several seeds
(each seed draws its own validation split, initialisation, label code and shuffling),
reporting the selected epoch's validation P@1 and the test P@k of every run.

This measures how much of a difference between two Table 1 numbers is noise. It selects
nothing: every run uses the library's default configuration for its dataset.

Usage:
    python benchmarks/seed_spread.py bibtex --models fc hrr-fc --seeds 0 1 2 3 4 [--no-refit]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from holoxmc.data import load
from holoxmc.estimator import MODELS, XMCClassifier, preset_params
from holoxmc.io import atomic_write_json


def run(dataset: str, model: str, seed: int, overrides: dict) -> dict:
    train, test = load(dataset, "train"), load(dataset, "test")
    params = preset_params(dataset, model) | overrides | {"seed": seed, "progress": False}
    clf = XMCClassifier(**params).fit(train.X, train.Y)
    scores = clf.evaluate(test.X, test.Y)
    best = [result.best_epoch for result in clf.fit_results_]  # one entry per network of an ensemble
    val = [round(result.history[result.best_epoch - 1]["val"]["P@1"], 2) for result in clf.fit_results_]
    return {
        "model": model,
        "seed": seed,
        "best_epoch": best[0] if len(best) == 1 else best,
        "val_P@1": val[0] if len(val) == 1 else val,
        "test": {k: round(scores[k], 2) for k in ("P@1", "P@3", "P@5")},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--models", nargs="+", default=["fc", "hrr-fc"], choices=[m for m in MODELS if m != "solar"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-refit", action="store_true", help="turn off the presets' refit (Table 1b's right half)")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the runs and their summary")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    runs = []
    for model in args.models:
        for seed in args.seeds:
            runs.append(run(args.dataset, model, seed, {"refit": False} if args.no_refit else {}))
            print(json.dumps(runs[-1]), flush=True)
    summary = {}
    for model in args.models:
        p1 = [r["test"]["P@1"] for r in runs if r["model"] == model]
        summary[model] = {
            "test_P@1_mean": round(statistics.mean(p1), 2),
            "test_P@1_std": round(statistics.stdev(p1), 2) if len(p1) > 1 else 0.0,
            "test_P@1_min": min(p1),
            "test_P@1_max": max(p1),
        }
    print(json.dumps(summary, indent=1))
    if args.out is not None:
        atomic_write_json(args.out, {"dataset": args.dataset, "runs": runs, "summary": summary})


if __name__ == "__main__":
    sys.exit(main())

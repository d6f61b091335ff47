"""Each model's default configuration on ``refit_check``'s pseudo-test (10 % of TRAIN held out
per seed; the test split is never loaded): P@1/3/5 and whole-fit seconds, for comparing the
linear one-vs-rest model with the networks' presets (``docs/tuning.md``, sixth round).

``--blend`` is a diagnostic: it also scores the first two models' mean score after each row's scores are
standardised per model (finite scores only: the linear model gives ``-inf`` to a label no training row has),
with weights 0.3 / 0.5 / 0.7 on the first model.

Usage:
    python benchmarks/tuning/linear_check.py bibtex --models linear hrr-fc fc --seeds 48 49 50 51 --threads 2
    python benchmarks/tuning/linear_check.py debtags --models linear hrr-fc --seeds 56 57 58 59 --blend
    python benchmarks/tuning/linear_check.py debtags --models linear --seeds 52 53 54 55 --data-option ngrams=2
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import torch

from holoxmc.cli.data import add_data_options, data_options
from holoxmc.data import load
from holoxmc.estimator import MODELS, XMCClassifier, preset_params
from holoxmc.metrics import evaluate_scores
from holoxmc.train import split_validation

from refit_check import _OUTER_SEED


def standardised(scores: np.ndarray) -> np.ndarray:
    """Each row's finite scores minus their mean, over their standard deviation; ``-inf`` stays."""
    finite = np.isfinite(scores)
    values = np.where(finite, scores, np.nan)
    mean, std = np.nanmean(values, axis=1, keepdims=True), np.nanstd(values, axis=1, keepdims=True)
    return np.where(finite, (scores - mean) / np.maximum(std, 1e-12), -np.inf)


def check(dataset: str, model: str, seed: int, options: dict, keep_scores: list | None = None) -> dict:
    train = load(dataset, "train", **options)
    inner, outer = split_validation(train.X.shape[0], 0.1, _OUTER_SEED + seed)
    started = time.perf_counter()
    clf = XMCClassifier(**preset_params(dataset, model) | {"progress": False, "seed": seed})
    clf.fit(train.X[inner], train.Y[inner])
    fit_seconds = time.perf_counter() - started
    metrics = clf.evaluate(train.X[outer], train.Y[outer], ks=(1, 3, 5))
    if keep_scores is not None:
        keep_scores.append((standardised(clf.decision_function(train.X[outer])), train.Y[outer]))
    row = {"dataset": dataset, "model": model, "seed": seed, "fit_seconds": round(fit_seconds, 1)}
    if options:
        row["data_options"] = options
    if clf.head == "linear":
        row["C"] = clf.fit_result_.history[-1]["C"]
    return row | {key: round(metrics[key], 2) for key in ("P@1", "P@3", "P@5")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--models", nargs="+", default=["linear", "hrr-fc", "fc"], choices=sorted(MODELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[48, 49, 50, 51])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--blend", action="store_true", help="also score blends of the first two models")
    add_data_options(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        kept: list | None = [] if args.blend else None
        for model in args.models:
            print(json.dumps(check(args.dataset, model, seed, data_options(args), kept)), flush=True)
        if kept:
            (first, Y), (second, _) = kept[:2]
            row = {"dataset": args.dataset, "seed": seed, "blend": args.models[:2]}
            for weight in (0.3, 0.5, 0.7):
                metrics = evaluate_scores(weight * first + (1 - weight) * second, Y, ks=(1, 3, 5))
                row[f"w={weight}"] = {key: round(metrics[key], 2) for key in ("P@1", "P@3", "P@5")}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    sys.exit(main())

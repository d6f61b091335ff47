"""Each model's default configuration on ``refit_check``'s pseudo-test (10 % of TRAIN held out
per seed; the test split is never loaded): P@1/3/5 and whole-fit seconds, for comparing the
linear one-vs-rest model with the networks' presets (``benchmarks/TUNING.md``, sixth round).

Usage:
    python benchmarks/linear_check.py bibtex --models linear hrr-fc fc --seeds 48 49 50 51 --threads 2
    python benchmarks/linear_check.py debtags --models linear --seeds 52 53 54 55 --data-option ngrams=2
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from holoxmc.cli.data import add_data_options, data_options
from holoxmc.data import load
from holoxmc.estimator import MODELS, XMCClassifier, preset_params
from holoxmc.train import split_validation

from refit_check import _OUTER_SEED


def check(dataset: str, model: str, seed: int, options: dict) -> dict:
    train = load(dataset, "train", **options)
    inner, outer = split_validation(train.X.shape[0], 0.1, _OUTER_SEED + seed)
    started = time.perf_counter()
    clf = XMCClassifier(**preset_params(dataset, model) | {"progress": False, "seed": seed})
    clf.fit(train.X[inner], train.Y[inner])
    fit_seconds = time.perf_counter() - started
    metrics = clf.score(train.X[outer], train.Y[outer], ks=(1, 3, 5))
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
    add_data_options(parser)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        for model in args.models:
            print(json.dumps(check(args.dataset, model, seed, data_options(args))), flush=True)


if __name__ == "__main__":
    sys.exit(main())

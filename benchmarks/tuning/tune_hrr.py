"""Tune HRR-FC (and FC) on the VALIDATION split only: 10 % of the training rows, seeded,
exactly what ``XMCClassifier.fit`` holds out for model selection. The test split is
never loaded here.

Each trial is one JSON object of ``XMCClassifier`` keywords over the preset of the
dataset; its best validation P@1/P@3/P@5 (over epochs) and median seconds per epoch are
appended as one JSON line to ``--log``.

One validation split is small (Bibtex: 488 rows, standard error of P@1 ≈ 2.2 points), so
``--seeds`` runs every trial once per seed (each seed draws its own split, initialisation,
label code and order) and logs one line per seed; compare trials by their mean.
Trials train one network (``n_models=1`` over a preset's ensemble): the trainer validates
networks epoch by epoch, not ensembles; ``ensemble_check.py`` measures those.

Usage:
    python benchmarks/tuning/tune_hrr.py bibtex --seeds 0,1,2 '{"dropout": 0.5}' '{"dropout": 0.7, "dim": 800}'
    python benchmarks/tuning/tune_hrr.py delicious --model fc '{}'
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier, preset_params
from holoxmc.io import atomic_write_text


def run_trial(dataset: str, model: str, overrides: dict) -> dict:
    train = load(dataset, "train")
    if overrides.get("n_models", 1) != 1:
        raise SystemExit("tune_hrr.py validates one network per epoch; measure ensembles with ensemble_check.py")
    params = preset_params(dataset, model) | {"n_models": 1} | overrides | {"progress": False}
    start = time.perf_counter()
    clf = XMCClassifier(**params).fit(train.X, train.Y)
    history = clf.fit_result_.history
    best = history[clf.fit_result_.best_epoch - 1]["val"]
    return {
        "dataset": dataset,
        "model": model,
        "overrides": overrides,
        "val": {k: round(best[k], 2) for k in ("P@1", "P@3", "P@5")},
        "best_epoch": clf.fit_result_.best_epoch,
        "val_p1_per_epoch": [round(h["val"]["P@1"], 2) for h in history],
        "s_per_epoch": round(statistics.median(clf.fit_result_.epoch_seconds), 3),
        "wall_s": round(time.perf_counter() - start, 1),
        "threads": torch.get_num_threads(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("trials", nargs="+", help="JSON objects of XMCClassifier keywords")
    parser.add_argument("--model", default="hrr-fc", choices=["fc", "hrr-fc"])
    parser.add_argument("--log", default="benchmarks/results/tune_hrr.jsonl")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seeds", type=lambda text: [int(seed) for seed in text.split(",")], default=[0],
                        help="comma-separated seeds; every trial runs once per seed (e.g. 0,1,2)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for trial in args.trials:
        p1 = []
        for seed in args.seeds:
            result = run_trial(args.dataset, args.model, json.loads(trial) | {"seed": seed})
            p1.append(result["val"]["P@1"])
            line = json.dumps(result)
            print(line, flush=True)
            log = Path(args.log)
            previous = log.read_text(encoding="utf-8") if log.exists() else ""
            atomic_write_text(log, previous + line + "\n")
        print(f"{trial}: mean validation P@1 {statistics.mean(p1):.2f} over seeds {args.seeds}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

"""Does refitting on all training rows (``refit=True``) help? Checked without the test set:
10 % of the TRAIN split (seeded, per seed) is held out as a pseudo-test; on the rest, the
standard protocol (select the epoch on a validation split carved from it, keep that
model) is compared with the refit protocol (then retrain on all of it with the same
schedule, stopping at that epoch; ``XMCClassifier(refit=True)``), both scored on the
held-out rows (``refit_P@5``: the refit network's P@5). ``both`` is a diagnostic: the pseudo-test P@1 of the two networks' mean score
(the selection network, which refit otherwise discards, kept as a second ensemble member).

Usage:
    python benchmarks/tuning/refit_check.py delicious --models hrr-fc fc --seeds 0 1 2
    python benchmarks/tuning/refit_check.py delicious --models hrr-fc --overrides '{"dim": 256}'
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from holoxmc.data import load
from holoxmc.estimator import MODELS, XMCClassifier, preset_params
from holoxmc.metrics import evaluate_scores
from holoxmc.train import split_validation

#: Seed offset of the pseudo-test split, so that it differs from the validation split.
_OUTER_SEED = 1000


def check(dataset: str, model: str, seed: int, overrides: dict | None = None) -> dict:
    train = load(dataset, "train")
    inner, outer = split_validation(train.X.shape[0], 0.1, _OUTER_SEED + seed)
    X, Y = train.X[inner], train.Y[inner]
    params = preset_params(dataset, model) | (overrides or {}) | {"progress": False, "seed": seed}
    X_outer, Y_outer = train.X[outer], train.Y[outer]
    scores, mean_score = {}, 0
    for refit in (False, True):
        clf = XMCClassifier(**(params | {"refit": refit})).fit(X, Y)
        metrics = clf.evaluate(X_outer, Y_outer)
        scores["refit" if refit else "standard"] = round(metrics["P@1"], 2)
        mean_score = mean_score + clf.decision_function(X_outer) / 2
    scores["refit_P@5"] = round(metrics["P@5"], 2)  # the last network's: refit's
    scores["both"] = round(evaluate_scores(mean_score, Y_outer, ks=(1,))["P@1"], 2)
    return {"dataset": dataset, "model": model, "seed": seed, "best_epoch": clf.fit_result_.best_epoch} | scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--models", nargs="+", default=["hrr-fc", "fc"], choices=[m for m in MODELS if m != "solar"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--overrides", type=json.loads, default={}, help="JSON XMCClassifier keywords over the preset")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for model in args.models:
        for seed in args.seeds:
            print(json.dumps(check(args.dataset, model, seed, args.overrides) | {"overrides": args.overrides}), flush=True)


if __name__ == "__main__":
    sys.exit(main())

"""Does ranking labels by the mean score of several networks (``XMCClassifier(n_models=N)``)
beat one network? Checked without the test set, as ``refit_check.py`` does: 10 % of the
TRAIN split (seeded per seed) is held out as a pseudo-test, the ensemble is fitted on the
rest with the dataset's preset, and the pseudo-test P@1 of the ensemble is reported next to
that of each member alone (member ``m`` is the network ``seed + 100·m`` trains alone, so
member 0 is the single-network preset of that seed).

``--shared-code`` is a diagnostic, not a library option: every member's HRR label code is
drawn from member 0's seed (patched at run time), so only the networks differ; it tells how
much of an ensemble's gain comes from its members' independent codes.

Usage:
    python benchmarks/tuning/ensemble_check.py bibtex --models hrr-fc fc --seeds 16 17 18 19 20 21 22 23
    python benchmarks/tuning/ensemble_check.py bibtex --models hrr-fc --shared-code
    python benchmarks/tuning/ensemble_check.py bibtex --models hrr-fc --overrides '{"hidden": [512], "dim": 400}'
    # → one JSON line per model and seed: member P@1s, ensemble P@1, fit seconds
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

import holoxmc.heads.hrr
from holoxmc.codes.hrr import HRRLabelCode
from holoxmc.data import load
from holoxmc.estimator import MODELS, XMCClassifier, preset_params
from holoxmc.train import evaluate_topk, split_validation

from refit_check import _OUTER_SEED


def check(dataset: str, model: str, seed: int, n_models: int, overrides: dict | None = None) -> dict:
    train = load(dataset, "train")
    inner, outer = split_validation(train.X.shape[0], 0.1, _OUTER_SEED + seed)
    params = preset_params(dataset, model) | (overrides or {}) | {"progress": False, "seed": seed, "n_models": n_models}
    started = time.perf_counter()
    clf = XMCClassifier(**params).fit(train.X[inner], train.Y[inner])
    fit_seconds = time.perf_counter() - started
    X_outer, Y_outer = train.X[outer], train.Y[outer]
    members = [evaluate_topk(member, X_outer, Y_outer, ks=(1,))["P@1"] for member in clf.network_.networks]
    return {"dataset": dataset, "model": model, "seed": seed, "members_P@1": [round(p, 2) for p in members],
            "ensemble_P@1": round(clf.evaluate(X_outer, Y_outer)["P@1"], 2), "fit_s": round(fit_seconds, 1)}


def share_member_zero_code(seed: int) -> None:
    """Make every HRR head built from now on draw its label code from ``seed``."""

    class SharedCode(HRRLabelCode):
        def __init__(self, *args, seed: int = 0, **kwargs) -> None:
            super().__init__(*args, seed=shared_seed, **kwargs)

    shared_seed = seed
    holoxmc.heads.hrr.HRRLabelCode = SharedCode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--models", nargs="+", default=["hrr-fc", "fc"], choices=[m for m in MODELS if m != "solar"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[16, 17, 18, 19, 20, 21, 22, 23])
    parser.add_argument("--n-models", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shared-code", action="store_true", help="diagnostic: all members use member 0's code")
    parser.add_argument("--overrides", type=json.loads, default={},
                        help="JSON object of XMCClassifier keywords replacing the preset's")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for model in args.models:
        for seed in args.seeds:
            if args.shared_code:
                share_member_zero_code(seed)
            extra = {"variant": "members share member 0's code"} if args.shared_code else {}
            if args.overrides:
                extra["overrides"] = args.overrides
            line = check(args.dataset, model, seed, args.n_models, args.overrides) | extra
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    sys.exit(main())

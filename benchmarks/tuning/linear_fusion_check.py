"""Debtags, fifth round (docs/tuning.md): a linear one-vs-rest SVM beside HRR-FC.

On ``refit_check``'s pseudo-test (10 % of TRAIN held out per seed; the test split is never
loaded), the HRR-FC Debtags preset and scikit-learn's ``OneVsRestClassifier(LinearSVC(C=1))``
are fitted on the same rows and scored alone and fused (each model's scores standardised per
row, then summed; no weight tuned). Labels without a training positive keep ``-inf``.

Usage:
    python benchmarks/tuning/linear_fusion_check.py --seeds 0 1 2 --threads 2
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import torch
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import LinearSVC

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier, preset_params
from holoxmc.metrics import evaluate, top_k
from holoxmc.train import split_validation

#: refit_check's offset of the pseudo-test split's seed.
_OUTER_SEED = 1000


def standardised(scores: np.ndarray) -> np.ndarray:
    return (scores - scores.mean(1, keepdims=True)) / (scores.std(1, keepdims=True) + 1e-12)


def check(seed: int) -> dict:
    train = load("debtags", "train")
    inner, outer = split_validation(train.X.shape[0], 0.1, _OUTER_SEED + seed)
    X, Y, X_out, Y_out = train.X[inner], train.Y[inner], train.X[outer], train.Y[outer]
    started = time.perf_counter()
    clf = XMCClassifier(**preset_params("debtags", "hrr-fc") | {"progress": False, "seed": seed}).fit(X, Y)
    hrr = np.asarray(clf.decision_function(X_out), dtype=np.float64)
    hrr_seconds, started = time.perf_counter() - started, time.perf_counter()
    seen = np.asarray(Y.sum(0)).ravel() > 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # liblinear's convergence warnings
        svm = OneVsRestClassifier(LinearSVC(C=1.0)).fit(X, Y[:, seen].toarray())
    margins = svm.decision_function(X_out)
    svm_seconds = time.perf_counter() - started
    linear = np.full(hrr.shape, -np.inf)
    linear[:, seen] = margins
    fused = standardised(hrr)
    fused[:, seen] += standardised(margins)
    fused[:, ~seen] = -np.inf
    row: dict = {"seed": seed, "fit_seconds": {"hrr-fc": round(hrr_seconds, 1), "linear-svm": round(svm_seconds, 1)}}
    for name, scores in (("hrr-fc", hrr), ("linear-svm", linear), ("fused", fused)):
        metrics = evaluate(top_k(scores, 5), Y_out, ks=(1, 3, 5))
        row[name] = {key: round(metrics[key], 2) for key in ("P@1", "P@3", "P@5")}
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for seed in args.seeds:
        print(json.dumps(check(seed)), flush=True)


if __name__ == "__main__":
    main()

"""Platt scaling of ``predict``'s rule, as fitted before and after the standardised fit
(``holoxmc.models.thresholds._platt``): the map each gives on a set's validation rows, the
rule each then chooses there, and the samples-F1 of ``predict``'s label sets on the test split.

For each set: the re-rank model (its defaults) fitted on the training split less a seeded 10 %,
which chooses the rule twice, once with each Platt fit (the earlier one: scikit-learn's
``LogisticRegression(C=1e6)`` on the raw confidences and weights; where it falls, the cuts
rank the rows' probabilities again, as the library then did), then both rules' label sets of
the test rows scored against their labels. Nothing else of the model differs.

Run: HOLOXMC_DATA=/work/shared/data python benchmarks/platt_check.py --sets bibtex delicious realistic-10k \\
         [--out benchmarks/results/platt_check.jsonl]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

from panel import load_set  # noqa: E402

from holoxmc.estimator import XMCClassifier  # noqa: E402
from holoxmc.models import thresholds  # noqa: E402


def raw_platt(pairs):  # noqa: ANN001, ANN201 (the fit before the change, for comparison)
    """The earlier Platt fit: ``LogisticRegression(C=1e6)`` on raw confidences and weights."""
    from sklearn.linear_model import LogisticRegression

    x, y, w = (np.concatenate([p[i] for p in pairs]) for i in range(3))
    if x.size == 0 or y.min() == y.max():
        return None
    fit = LogisticRegression(C=1e6).fit(x[:, None], y, sample_weight=w)
    a, b = float(fit.coef_[0, 0]), float(fit.intercept_[0])
    return (a, b) if math.isfinite(a) and math.isfinite(b) else None


def old_candidates(model, X, n_labels: int):  # noqa: ANN001, ANN201
    """The cuts' candidates as the library ranked them with the earlier fit: from the rule's
    map where it rises, else from the rows' probabilities scored again (a falling map)."""
    import torch

    ranked = thresholds._ranked_candidates

    def candidates(tops, rule):  # noqa: ANN001, ANN202
        if rule.a >= 0:
            return ranked(tops, rule)
        parts = []
        for rows, block in thresholds.probability_blocks(model, X, rule, n_labels, 1024):
            top = torch.topk(block, min(thresholds.RULE_MAX_SET, n_labels), dim=1)
            width = top.values.shape[1]
            parts.append((np.repeat(rows, width), top.indices.reshape(-1).numpy(), top.values.reshape(-1).numpy(),
                          np.tile(np.arange(width), len(rows)), top.values[:, 0].numpy()))
        return tuple(np.concatenate([part[i] for part in parts]) for i in range(5))
    return candidates


def check(name: str) -> dict:
    train, test = load_set(name)
    n = train.X.shape[0]
    held = np.zeros(n, bool)
    held[np.random.default_rng(0).choice(n, max(1, n // 10), replace=False)] = True
    clf = XMCClassifier(head="rerank", progress=False).fit(train.X[~held], train.Y[~held])
    X_val, Y_val = clf._check_X(train.X[held]), sp.csr_matrix(train.Y[held])
    X_test, Y_test = clf._check_X(test.X), sp.csr_matrix(test.Y != 0, dtype=np.int64)
    out: dict = {"set": name, "labels": int(train.Y.shape[1])}
    fits = {"before": raw_platt, "after": thresholds._platt}
    ranked = thresholds._ranked_candidates
    for which, platt in fits.items():
        thresholds._platt = platt
        if which == "before":
            thresholds._ranked_candidates = old_candidates(clf.model_, X_val, clf.n_labels_)
        try:
            started = time.perf_counter()
            rule = thresholds.fit_label_rule(clf.model_, X_val, Y_val, clf.n_labels_, seed=0, source="X_val")
            seconds = time.perf_counter() - started
        finally:
            thresholds._platt, thresholds._ranked_candidates = fits["after"], ranked
        sets = thresholds.label_sets(clf.model_, X_test, rule, clf.n_labels_, 1024)
        out[which] = {"a": rule.a, "b": rule.b, "rule": {"threshold": rule.threshold, "relative": rule.relative,
                                                         "top1_fallback": rule.top1_fallback, "top_k": rule.top_k},
                      "val_f1": rule.f1, "test_f1": thresholds.samples_f1(sets, Y_test), "rule_seconds": seconds}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["bibtex", "delicious", "realistic-10k"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    for name in args.sets:
        record = check(name)
        print(json.dumps(record), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()

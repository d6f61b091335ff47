"""``XMCClassifier.predict``'s default rule on real test splits: the label sets it gives
against the other ways of making label sets, by samples-F1 (scikit-learn's
``f1_score(Y, P, average="samples", zero_division=0)``) and the mean set size, and how
calibrated ``predict_proba`` is (mean probability against the share of present labels,
expected calibration error over 10 bins).

The rule is chosen inside ``fit`` on validation rows (the ``val_fraction`` share, or
``--X-val``: a seeded 10 % of the training rows given as ``X_val``), never on the test split;
the other rows of the table are references (top-1, top-k with k the training mean, the
old ``predict_above`` default cut at 0.5 of the row's best).

Usage:
    HOLOXMC_DATA=/work/shared/data python benchmarks/label_sets.py --datasets bibtex delicious --heads linear rerank
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier
from holoxmc.models.thresholds import samples_f1
from holoxmc.train import split_validation


def sets_of(indices: np.ndarray, n_labels: int) -> sp.csr_matrix:
    """The CSR 0/1 sets of top-k indices (``-1`` left out)."""
    rows = np.repeat(np.arange(indices.shape[0]), indices.shape[1])
    keep = indices.ravel() >= 0
    return sp.csr_matrix((np.ones(keep.sum(), np.int64), (rows[keep], indices.ravel()[keep])),
                         shape=(indices.shape[0], n_labels))


def calibration(proba: np.ndarray, Y: sp.csr_matrix) -> tuple[float, float, float]:
    """``(mean probability, share of present labels, expected calibration error)``."""
    truth = Y.toarray() > 0
    bins = np.minimum((proba * 10).astype(int), 9).ravel()
    p, t = proba.ravel(), truth.ravel()
    ece = sum(abs(p[bins == b].mean() - t[bins == b].mean()) * (bins == b).mean() for b in range(10) if (bins == b).any())
    return float(p.mean()), float(t.mean()), float(ece)


def run(name: str, head: str, given_val: bool) -> None:
    train, test = load(name, "train"), load(name, "test")
    X, Y = train.X, train.Y
    fit_args: tuple = ()
    if given_val:
        rest, held = split_validation(X.shape[0], 0.1, 0)
        X, Y, fit_args = X[rest], Y[rest], (X[held], Y[held])
    started = time.perf_counter()
    clf = XMCClassifier(head=head, progress=False).fit(X, Y, *fit_args)
    fit_seconds = time.perf_counter() - started
    rule = clf.label_rule_
    Y_test = sp.csr_matrix(test.Y != 0, dtype=np.int64)
    L = clf.n_labels_
    mean_labels = max(1, int(round(train.Y.nnz / train.Y.shape[0])))
    started = time.perf_counter()
    rows = {"predict (the rule)": clf.predict(test.X)}
    predict_seconds = time.perf_counter() - started
    from dataclasses import replace
    for fallback in (False, True):
        clf.label_rule_ = replace(rule, top1_fallback=fallback)
        rows[f"  same cut, fallback={fallback}"] = clf.predict(test.X)
    clf.label_rule_ = rule
    rows["top-1"] = sets_of(clf.predict_topk(test.X, 1)[0], L)
    rows[f"top-{mean_labels} (training mean)"] = sets_of(clf.predict_topk(test.X, mean_labels)[0], L)
    rows["predict_above(0.5, relative)"] = clf.predict_above(test.X, 0.5)
    print(f"\n{name} {head} (rule rows: {rule.source}, {rule.rows}) fit {fit_seconds:.1f} s, predict "
          f"{predict_seconds:.2f} s; rule: Platt a={rule.a:.3f} b={rule.b:.3f}, threshold {rule.threshold} "
          f"({'of the row best' if rule.relative else 'absolute'}), top_k {rule.top_k}, "
          f"top-1 fallback {rule.top1_fallback}, validation samples-F1 {rule.f1:.2f}")
    print(f"{'label sets':34s} {'test samples-F1':>15s} {'labels/row':>10s}")
    for label, sets in rows.items():
        print(f"{label:34s} {samples_f1(sp.csr_matrix(sets != 0, dtype=np.int64), Y_test):15.2f} "
              f"{sets.nnz / sets.shape[0]:10.2f}")
    mean_p, share, ece = calibration(clf.predict_proba(test.X), test.Y)
    print(f"predict_proba: mean {mean_p:.4f} vs share of present labels {share:.4f}; ECE (10 bins) {ece:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["bibtex", "delicious"])
    parser.add_argument("--heads", nargs="+", default=["linear"])
    parser.add_argument("--X-val", action="store_true", help="give 10 %% of the training rows as X_val")
    args = parser.parse_args()
    for name in args.datasets:
        for head in args.heads:
            run(name, head, args.X_val)


if __name__ == "__main__":
    main()

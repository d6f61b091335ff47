"""Adding labels to a fitted model (``XMCClassifier.add_labels``) against fitting every label
again: fit seconds and test P@1 / P@5, for the linear and re-rank models.

The model first fits on the training rows with the first ``1 - new`` share of the labels,
then ``add_labels`` appends the rest (trained on the same rows); the reference fits every
label at once with the same settings. The linear model runs with a fixed ``C`` (the default
``C`` carves a validation share, so its labels train on fewer rows than ``add_labels``'
do). Each row of the output is one fit; figures are medians of ``--repeats``.

Usage:
    python benchmarks/incremental.py --rows 20000 --labels 2000 --features 5000 --new 0.1 \
        --out benchmarks/results/incremental.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import scipy.sparse as sp

from holoxmc.data import make_realistic
from holoxmc.estimator import XMCClassifier


def run(head: str, options: dict, X, Y, Xt, Yt, split: int, repeats: int) -> list[dict]:
    rows = []
    for how in ("every label at once", "then add_labels"):
        seconds, add_seconds, metrics = [], [], {}
        for _ in range(repeats):
            clf = XMCClassifier(head=head, head_options=options or None, progress=False)
            started = time.perf_counter()
            if how == "every label at once":
                clf.fit(X, Y)
                seconds.append(time.perf_counter() - started)
            else:
                clf.fit(X, Y[:, :split])
                seconds.append(time.perf_counter() - started)
                started = time.perf_counter()
                clf.add_labels(X, Y[:, split:])
                add_seconds.append(time.perf_counter() - started)
            metrics = clf.evaluate(Xt, Yt, ks=(1, 5))
        rows.append({"head": head, "how": how, "fit_s": statistics.median(seconds),
                     "add_labels_s": statistics.median(add_seconds) if add_seconds else None,
                     "P@1": metrics["P@1"], "P@5": metrics["P@5"]})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--labels", type=int, default=2000)
    parser.add_argument("--features", type=int, default=5000)
    parser.add_argument("--new", type=float, default=0.1, help="share of the labels added later")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", default=None, help="append the rows as JSON lines here")
    args = parser.parse_args()
    train, test = make_realistic(args.rows, args.labels, args.features, seed=args.seed)
    Y, Yt = sp.csr_matrix(train.Y), sp.csr_matrix(test.Y)
    split = int(round(args.labels * (1 - args.new)))
    machine = {"load": os.getloadavg()[0], "cpus": os.cpu_count()}
    rows = run("linear", {"C": 0.3}, train.X, Y, test.X, Yt, split, args.repeats)
    rows += run("rerank", {}, train.X, Y, test.X, Yt, split, args.repeats)
    for row in rows:
        row |= {"rows": args.rows, "labels": args.labels, "added": args.labels - split, "seed": args.seed} | machine
        print(json.dumps(row))
        if args.out:
            with open(args.out, "a") as out:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

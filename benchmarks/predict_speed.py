"""Top-5 ``predict_topk`` ms per row of one model on a test split, to compare source trees.

The model (``XMCClassifier(head=...)`` at its defaults) is fitted once; then ``model_.predict_topk``
of the first 1, 10, 100 rows and of the whole split, median (and min) of ``--repeats``; the
whole split's labels and scores are saved to ``--save`` (``.npz``), so that two trees' answers
can be compared. Run it once per tree (``PYTHONPATH`` choosing the tree).

Usage:
    PYTHONPATH=src HOLOXMC_DATA=../shared/data python benchmarks/predict_speed.py --model rerank --save this.npz
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="bibtex")
    parser.add_argument("--model", default="rerank")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--save", help="write the whole split's top-5 (indices, scores) to this .npz")
    args = parser.parse_args()
    train, test = load(args.dataset, "train"), load(args.dataset, "test")
    started = time.perf_counter()
    model = XMCClassifier(head=args.model).fit(train.X, train.Y).model_
    print(f"{args.model} on {args.dataset}: fitted in {time.perf_counter() - started:.1f} s", flush=True)
    X = test.X
    model.predict_topk(X[:10], 5)
    for rows in (1, 10, 100, X.shape[0]):
        seconds = []
        for _ in range(args.repeats):
            begun = time.perf_counter()
            indices, scores = model.predict_topk(X[:rows], 5)
            seconds.append(time.perf_counter() - begun)
        print(f"rows {rows}: median {1e3 * statistics.median(seconds) / rows:.4f}, min {1e3 * min(seconds) / rows:.4f} "
              "ms per row", flush=True)
    if args.save:
        np.savez(args.save, indices=indices, scores=scores)


if __name__ == "__main__":
    main()

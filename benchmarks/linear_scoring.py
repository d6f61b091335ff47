"""The linear one-vs-rest model's two scoring paths, side by side on real test splits:
top-5 over the whole test split with the weights as a dense table read by
``embedding_bag`` (what ``LinearModel`` does while ``D · L`` fits
``DENSE_SCORING_ENTRIES``) against scipy's sparse product ``X @ W`` (what it does above).
One model per set, trained once with a fixed ``C`` (the measurement is of scoring, not of
accuracy); the two paths alternate, median of ``--repeats``, and the share of rows whose
top-5 the two paths rank alike (over every repeat) is printed beside the times.

Usage:
    python benchmarks/linear_scoring.py --datasets bibtex delicious debtags --repeats 7 --threads 2
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch

import holoxmc.models.linear.model as linear
from holoxmc.data import load
from holoxmc.models.linear.fit import LinearConfig, fit_linear


def top5_seconds(model: linear.LinearModel, X, dense: bool) -> tuple[float, np.ndarray]:
    """Seconds for top-5 over ``X`` with the dense table (``dense``) or the sparse product."""
    linear.DENSE_SCORING_ENTRIES = 2**62 if dense else 0
    started = time.perf_counter()
    indices, _ = model.predict(X, k=5)
    return time.perf_counter() - started, indices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["bibtex", "delicious", "debtags"])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
          f"{args.threads} threads, medians of {args.repeats}")
    print("| dataset | D × L | stored weights | dense table ms/pt | sparse product ms/pt | sparse / dense |")
    print("|---|---|---|---|---|---|")
    for name in args.datasets:
        train, test = load(name, "train"), load(name, "test")
        model, _ = fit_linear(train.X, train.Y, LinearConfig(C=1.0))
        top5_seconds(model, test.X[:256], dense=True)  # builds the dense table once, outside the timing
        times: dict[bool, list[float]] = {True: [], False: []}
        answers: dict[bool, list[np.ndarray]] = {True: [], False: []}
        for _ in range(args.repeats):
            for dense in (True, False):
                seconds, indices = top5_seconds(model, test.X, dense)
                times[dense].append(seconds)
                answers[dense].extend(indices)
        agree = float(np.mean([np.array_equal(a, b) for a, b in zip(answers[True], answers[False])]))
        ms = {dense: 1e3 * statistics.median(times[dense]) / test.X.shape[0] for dense in times}
        print(f"| {name} | {model.n_features:,} × {model.n_labels:,} | {model.weights.nnz:,} | {ms[True]:.4f} | "
              f"{ms[False]:.4f} | {ms[False] / ms[True]:.1f}× (top-5 alike on {100 * agree:.2f} % of rows) |", flush=True)


if __name__ == "__main__":
    main()

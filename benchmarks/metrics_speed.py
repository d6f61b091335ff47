"""Speed of holoxmc.metrics at XMC scale: 100,000 points, L = 670,091, top-5.

Times ``evaluate`` (P/nDCG/PSP/PSnDCG@1..5, raw and normalised PSP), the streaming
``MetricAccumulator`` over batches of 4,096 rows, and ``inverse_propensity``; median of
``--repeats``. Goal: ``evaluate`` < 2 s. ``--napkinxc`` adds napkinXC's P@k and PSP@k on
the same input, for reference.

Usage:
    .venv/bin/python benchmarks/metrics_speed.py [--points 100000] [--labels 670091] [--repeats 5] [--napkinxc]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import scipy.sparse as sp

from holoxmc.metrics import MetricAccumulator, evaluate, inverse_propensity


def instance(n_points: int, n_labels: int, seed: int = 0) -> tuple[sp.csr_matrix, np.ndarray]:
    """Random true labels (1 + Poisson(4.45) per row, as Amazon-670K) and top-5 predictions
    that hit a true label in first place about half of the time."""
    rng = np.random.default_rng(seed)
    rows = np.repeat(np.arange(n_points), 1 + rng.poisson(4.45, n_points))
    Y = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, rng.integers(0, n_labels, len(rows)))),
                      shape=(n_points, n_labels))
    Y.sum_duplicates()
    Y.data[:] = 1
    first = np.where(rng.random(n_points) < 0.5, Y.indices[Y.indptr[:-1]], rng.integers(0, n_labels, n_points))
    topk = (first[:, None] + np.arange(5) * 7919) % n_labels
    return Y, topk


def median_time(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--labels", type=int, default=670_091)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--napkinxc", action="store_true", help="also time napkinXC (one run each)")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared with other jobs), numpy {np.__version__}")
    Y, topk = instance(args.points, args.labels)
    w = inverse_propensity(Y, 0.6, 2.6)

    def streamed() -> dict[str, float]:
        accumulator = MetricAccumulator(inv_prop=w)
        for start in range(0, args.points, 4096):
            accumulator.update(topk[start:start + 4096], Y[start:start + 4096])
        return accumulator.result()

    full = evaluate(topk, Y, w)
    assert streamed() == full, "streaming must equal the full-set value exactly"
    print(f"{args.points} points, L={args.labels}, top-5; P@1 {full['P@1']:.2f}, PSP@1 {full['PSP@1']:.2f}")
    print(f"evaluate (all 30 values)            {median_time(lambda: evaluate(topk, Y, w), args.repeats):7.3f} s   goal < 2 s")
    print(f"MetricAccumulator, batches of 4096  {median_time(streamed, args.repeats):7.3f} s")
    print(f"inverse_propensity                  {median_time(lambda: inverse_propensity(Y), args.repeats):7.3f} s")
    if args.napkinxc:
        import napkinxc.metrics as nm

        predictions = topk.tolist()
        print(f"napkinXC precision_at_k             {median_time(lambda: nm.precision_at_k(Y, predictions, 5), 1):7.3f} s")
        print(f"napkinXC psprecision_at_k           {median_time(lambda: nm.psprecision_at_k(Y, predictions, w, 5), 1):7.3f} s")
    print(f"median of {args.repeats} runs")


if __name__ == "__main__":
    main()

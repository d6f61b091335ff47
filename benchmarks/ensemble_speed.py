"""Wall-clock fit of an ensemble (``n_models``) with its networks trained one after the other
in this process, or as jobs in parallel worker processes (``workers``), interleaved and
repeated; the median of each. Every network's weights are the same either way when each
job gets the thread count this process had (see ``tests/test_estimator.py``); here the
in-process fit uses all cores and each of W workers ``cores // W``, as the library does.

Usage:
    python benchmarks/ensemble_speed.py bibtex --workers 1 2 3 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier, preset_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--model", default="hrr-fc", choices=["hrr-fc", "fc"])
    parser.add_argument("--n-models", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    train = load(args.dataset, "train")
    params = preset_params(args.dataset, args.model) | {"n_models": args.n_models, "progress": False}
    seconds: dict[int, list[float]] = {w: [] for w in args.workers}
    for _ in range(args.repeats):
        for workers in args.workers:
            started = time.perf_counter()
            XMCClassifier(**params | {"workers": workers}).fit(train.X, train.Y)
            seconds[workers].append(time.perf_counter() - started)
            print(json.dumps({"workers": workers, "fit_s": round(seconds[workers][-1], 2)}), flush=True)
    base = statistics.median(seconds[args.workers[0]])
    print(json.dumps({
        "dataset": args.dataset, "model": args.model, "n_models": args.n_models, "cores": os.cpu_count(),
        "torch": torch.__version__, "median_fit_s": {w: round(statistics.median(s), 2) for w, s in seconds.items()},
        "speedup_over_first": {w: round(base / statistics.median(s), 2) for w, s in seconds.items()},
    }))


if __name__ == "__main__":
    sys.exit(main())

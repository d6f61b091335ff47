"""Optimisation step time of the default models, without the trainer's batch building:
``steps`` training batches are prepared once, then each model runs Adam (fused, as the
trainer does) over all of them, models interleaved per repeat; the median process time
per step is printed. It isolates the network's own cost from the epoch loop's noise.

Usage:
    python benchmarks/step_time.py delicious --repeats 7 --steps 150
    python benchmarks/step_time.py delicious --variants '{"ranking": 1.0}' '{}'   # HRR head options
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch

from holoxmc.data import load
from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.estimator import NETWORK_FACTORIES, XMCClassifier, preset_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--variants", nargs="*", default=[],
                        help="extra HRR-FC runs: JSON head_options replacing the preset's")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train = load(args.dataset, "train")
    batch_size = 64
    batches = [(SparseBatch.from_csr(train.X[i : i + batch_size]), LabelBatch.from_csr(train.Y[i : i + batch_size]))
               for i in range(0, batch_size * args.steps, batch_size)]
    runs = {"fc": preset_params(args.dataset, "fc"), "hrr-fc": preset_params(args.dataset, "hrr-fc")}
    for variant in args.variants:
        runs[f"hrr-fc {variant}"] = runs["hrr-fc"] | {"head_options": json.loads(variant)}
    models = {}
    for name, params in runs.items():
        clf = XMCClassifier(**params)
        network = NETWORK_FACTORIES[clf.head](clf, train.Y.shape[1], train.X.shape[1])
        models[name] = (network, torch.optim.Adam(network.parameters(), lr=1e-3, fused=True))
    ms_per_step: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(args.repeats):
        for name, (network, optimizer) in models.items():
            started = time.process_time()
            for x, y in batches:
                optimizer.zero_grad(set_to_none=True)
                network.loss(x, y).backward()
                optimizer.step()
            ms_per_step[name].append(1000 * (time.process_time() - started) / len(batches))
    for name, times in ms_per_step.items():
        print(f"{name}: {statistics.median(times):.2f} ms/step (median of {args.repeats}; "
              f"{', '.join(f'{t:.2f}' for t in times)})")


if __name__ == "__main__":
    sys.exit(main())

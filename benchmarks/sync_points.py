"""Where a training step waits for the GPU: runs a few optimisation steps of each preset
model under ``torch.cuda.set_sync_debug_mode("warn")`` and prints every place that
synchronised the host with the device (each costs the host its lead over the GPU).

Usage:
    python benchmarks/sync_points.py delicious --steps 3      # on a machine with CUDA
"""

from __future__ import annotations

import argparse
import collections
import traceback
import warnings

import torch

from holoxmc.data import load
from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.estimator import XMCClassifier, preset_params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--models", nargs="+", default=["fc", "hrr-fc"])
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    device = torch.device("cuda")
    train = load(args.dataset, "train")
    batches = [(SparseBatch.from_csr(train.X[i : i + 64]).to(device), LabelBatch.from_csr(train.Y[i : i + 64]).to(device))
               for i in range(0, 64 * args.steps, 64)]
    for model in args.models:
        clf = XMCClassifier(**preset_params(args.dataset, model))
        network = clf.new_network(train.Y.shape[1], train.X.shape[1]).to(device)
        optimizer = torch.optim.Adam(network.parameters(), lr=1e-3, fused=True)
        places: collections.Counter[str] = collections.Counter()

        def record(message, category, filename, lineno, file=None, line=None) -> None:
            frames = [f for f in traceback.extract_stack() if "holoxmc" in f.filename or "torch/optim" in f.filename]
            places[" <- ".join(f"{f.filename.split('/')[-1]}:{f.lineno}" for f in reversed(frames[-3:]))] += 1

        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.showwarning = record
            for x, y in batches:
                optimizer.zero_grad(set_to_none=True)
                network.loss(x, y).backward()
                optimizer.step()
        torch.cuda.set_sync_debug_mode("default")
        print(f"{model}: {sum(places.values()) / args.steps:.1f} synchronisations per step")
        for place, count in places.most_common():
            print(f"  {count / args.steps:.1f}  {place}")


if __name__ == "__main__":
    main()

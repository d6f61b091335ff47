"""Training epochs with and without freed memory kept mapped (``TrainConfig.reuse_memory``,
``holoxmc.train.heap.reuse_freed_memory``).

The setting changes the state of the process's heap, which outlives a run: a run with it
off, made after one with it on in the same process, finds the heap already grown and
measures neither case. So every run here is a fresh process (a worker started by this
script) training ``--epochs`` epochs; the configurations alternate, run after run, with
``reuse_memory`` on and off, so load from other jobs hits both alike. Reported per
configuration: median seconds per epoch (optimisation only) over every epoch of every
repeat, median kernel (system) seconds and minor page faults per run, and the speed-up.

Sets:

* ``debtags``: FC and HRR-FC at the Debtags preset width (1×2048; input table
  19,749 × 2,048 floats = 162 MB) with dense Adam, and HRR-FC with sparse updates;
* ``large``: Table 3's synthetic L = 200,000 set (2,000 points, D = 20,000), FC and HRR-FC
  (d' = 3000), library defaults (the FC output layer is 512 × 200,000 floats = 410 MB);
* ``bibtex``: the FC and HRR-FC presets (tables of at most 15 MB: a control).

Usage:
    python benchmarks/heap_reuse.py --threads 2 --repeats 3
    # → benchmarks/results/heap_reuse.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys

import torch

from holoxmc.cli.train import train_params
from holoxmc.presets import dataset_preset
from holoxmc.data import load, make_synthetic
from holoxmc.estimator import XMCClassifier
from holoxmc.io import atomic_write_json
from holoxmc.train import Trainer

from hrr_vs_dense import timing_config

OUT = "benchmarks/results/heap_reuse.json"
SETS = ("debtags", "large", "bibtex")


def configurations(name: str) -> tuple[dict[str, dict], object]:
    """``(XMCClassifier params by label, training set)`` of one benchmark set."""
    if name == "large":
        train, _ = make_synthetic(2_000, 200_000, 20_000, n_test=0, seed=0, name="synthetic-L200000")
        return {"fc": {"head": "dense"}, "hrr-fc": {"head": "hrr", "dim": 3000}}, train
    train = load(name, "train")
    params = {model: train_params(name, model, {}, preset=dataset_preset(name)) for model in ("fc", "hrr-fc")}
    if name == "debtags":
        params = {"fc, dense Adam": params["fc"] | {"sparse_updates": False},
                  "hrr-fc, dense Adam": params["hrr-fc"] | {"sparse_updates": False},
                  "hrr-fc, sparse updates": params["hrr-fc"] | {"sparse_updates": True}}
    return params, train


def worker(name: str, label: str, reuse: bool, epochs: int) -> dict:
    """Train one configuration for ``epochs`` epochs in this (fresh) process."""
    params, train = configurations(name)
    clf = XMCClassifier(**params[label])
    network = clf.new_network(train.Y.shape[1], train.X.shape[1])
    config = timing_config(clf, epochs=epochs, seed=0, reuse_memory=reuse)
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = Trainer(config).fit(network, train.X, train.Y)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return {"epoch_seconds": result.epoch_seconds, "system_seconds": after.ru_stime - before.ru_stime,
            "minor_faults": after.ru_minflt - before.ru_minflt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2, help="epochs per run")
    parser.add_argument("--worker", nargs=3, metavar=("SET", "LABEL", "REUSE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        name, label, reuse = args.worker
        print(json.dumps(worker(name, label, reuse == "on", args.epochs)))
        return
    rows = []
    for name in args.sets:
        labels = list(configurations(name)[0])
        runs: dict[tuple[str, str], list[dict]] = {(label, reuse): [] for label in labels for reuse in ("off", "on")}
        for repeat in range(args.repeats):
            for label, reuse in runs:
                command = [sys.executable, __file__, "--threads", str(args.threads), "--epochs", str(args.epochs),
                           "--worker", name, label, reuse]
                runs[label, reuse].append(json.loads(subprocess.run(command, check=True, capture_output=True,
                                                                    text=True).stdout.splitlines()[-1]))
        for label in labels:
            median = {reuse: {
                "epoch_seconds": statistics.median(s for run in runs[label, reuse] for s in run["epoch_seconds"]),
                "system_seconds": statistics.median(run["system_seconds"] for run in runs[label, reuse]),
                "minor_faults": statistics.median(run["minor_faults"] for run in runs[label, reuse]),
            } for reuse in ("off", "on")}
            row = {"set": name, "model": label, **median,
                   "speedup": median["off"]["epoch_seconds"] / median["on"]["epoch_seconds"],
                   "runs": {reuse: runs[label, reuse] for reuse in ("off", "on")}}
            rows.append(row)
            off, on = median["off"], median["on"]
            print(f"| {name} | {label} | {off['epoch_seconds']:.2f} | {on['epoch_seconds']:.2f} | {row['speedup']:.2f}x | "
                  f"{off['system_seconds']:.1f} → {on['system_seconds']:.1f} | "
                  f"{off['minor_faults']:,.0f} → {on['minor_faults']:,.0f} |", flush=True)
    atomic_write_json(OUT, {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores", "torch": torch.__version__,
        "threads": args.threads, "repeats": args.repeats, "epochs_per_run": args.epochs, "rows": rows,
    })


if __name__ == "__main__":
    main()

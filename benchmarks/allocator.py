"""Training epochs under five memory-allocator settings, side by side in one run.

Settings (each run is a fresh process, so no run inherits another's heap):

* ``glibc``: glibc's malloc as it comes (``TrainConfig.reuse_memory=False``);
* ``mallopt``: ``reuse_memory=True``, i.e. :func:`holoxmc.train.heap.reuse_freed_memory`
  (freed large blocks stay mapped while training);
* ``jemalloc`` / ``tcmalloc``: that allocator preloaded with ``LD_PRELOAD``
  (Debian: ``apt-get install libjemalloc2 libtcmalloc-minimal4``), ``reuse_memory=False``;
* ``keep-grads``: glibc default, gradient buffers kept between steps
  (``optimizer.zero_grad(set_to_none=False)`` instead of the trainer's ``set_to_none=True``).

Models: FC and HRR-FC with the library's presets (``holoxmc train`` defaults) on Debtags
and Delicious, the first ``--rows`` training rows (the per-step allocations depend on the
layer sizes, not on the number of rows, so a subset keeps them and shortens the run).
Repeats are interleaved (every setting once, then again), so load from other jobs hits all
settings alike. Reported per model and setting: the median seconds per epoch over every
epoch of every repeat, and the median peak resident memory per run.

Usage:
    python benchmarks/allocator.py --threads 2 --repeats 3
    # → benchmarks/results/allocator.json and a markdown table on stdout
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
from pathlib import Path

import torch

from holoxmc.cli.train import train_params
from holoxmc.presets import dataset_preset
from holoxmc.data import load
from holoxmc.estimator import XMCClassifier
from holoxmc.io import atomic_write_json
from holoxmc.train import Trainer
from hrr_vs_dense import timing_config

OUT = "benchmarks/results/allocator.json"
MODELS = ("fc", "hrr-fc")
SETS = ("debtags", "delicious")
LIBRARIES = {
    "jemalloc": "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
    "tcmalloc": "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4",
}
SETTINGS = ("glibc", "mallopt", "jemalloc", "tcmalloc", "keep-grads")


def keep_gradient_buffers() -> None:
    """Make every ``zero_grad`` zero the gradients in place instead of dropping them."""
    zero_grad = torch.optim.Optimizer.zero_grad

    def in_place(self: torch.optim.Optimizer, set_to_none: bool = True) -> None:
        zero_grad(self, set_to_none=False)

    torch.optim.Optimizer.zero_grad = in_place  # type: ignore[method-assign]


def worker(name: str, model: str, setting: str, epochs: int, rows: int) -> dict:
    """Train one model for ``epochs`` epochs under ``setting`` in this (fresh) process."""
    if setting == "keep-grads":
        keep_gradient_buffers()
    train = load(name, "train")
    X, Y = train.X[:rows], train.Y[:rows]
    clf = XMCClassifier(**train_params(name, model, {}, preset=dataset_preset(name)))
    network = clf.new_network(Y.shape[1], X.shape[1])
    config = timing_config(clf, epochs=epochs, seed=0, reuse_memory=setting == "mallopt")
    result = Trainer(config).fit(network, X, Y)
    maps = Path("/proc/self/maps").read_text()
    return {
        "epoch_seconds": result.epoch_seconds,
        "sparse_updates": result.sparse_updates,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "preloaded": setting not in LIBRARIES or Path(LIBRARIES[setting]).name in maps,
    }


def run_one(args: argparse.Namespace, name: str, model: str, setting: str) -> dict:
    """One worker process; its result dictionary."""
    env = dict(os.environ)
    if setting in LIBRARIES:
        env["LD_PRELOAD"] = LIBRARIES[setting]
    command = [sys.executable, __file__, "--threads", str(args.threads), "--epochs", str(args.epochs),
               "--rows", str(args.rows), "--worker", name, model, setting]
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    result = json.loads(done.stdout.splitlines()[-1])
    if not result["preloaded"]:
        raise RuntimeError(f"{setting} was not loaded by the worker")
    return result


def summarise(runs: list[dict]) -> dict:
    return {
        "epoch_seconds": statistics.median(s for run in runs for s in run["epoch_seconds"]),
        "max_rss_mb": statistics.median(run["max_rss_mb"] for run in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--cells", nargs="+", metavar="SET:MODEL", help="these pairs instead of sets × models")
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2, help="epochs per run")
    parser.add_argument("--rows", type=int, default=4000, help="training rows used (the first ones)")
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--worker", nargs=3, metavar=("SET", "MODEL", "SETTING"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.worker:
        name, model, setting = args.worker
        print(json.dumps(worker(name, model, setting, args.epochs, args.rows)))
        return
    cells = [(name, model) for name in args.sets for model in args.models]
    if args.cells:
        cells = [tuple(cell.split(":")) for cell in args.cells]
    runs: dict[tuple[str, str, str], list[dict]] = {(*cell, s): [] for cell in cells for s in args.settings}
    for repeat in range(args.repeats):
        for key in runs:
            runs[key].append(run_one(args, *key))
            print(f"{key}: {json.dumps(runs[key][-1])}", file=sys.stderr, flush=True)
        report(args, cells, runs, repeat + 1)  # a cut-short run keeps its finished repeats


def report(args: argparse.Namespace, cells: list, runs: dict[tuple[str, str, str], list[dict]], repeats: int) -> None:
    """Print the markdown table and write the JSON of the ``repeats`` repeats finished."""
    rows = []
    print("| set | model | " + " | ".join(f"{s} s/epoch (peak MB)" for s in args.settings) + " |")
    print("|---|---|" + "---|" * len(args.settings))
    for name, model in cells:
        medians = {s: summarise(runs[name, model, s]) for s in args.settings}
        rows.append({"set": name, "model": model, "median": medians,
                     "runs": {s: runs[name, model, s] for s in args.settings}})
        print(f"| {name} | {model} | " + " | ".join(
            f"{m['epoch_seconds']:.2f} ({m['max_rss_mb']:.0f})" for m in medians.values()) + " |", flush=True)
    atomic_write_json(args.out, {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "torch": torch.__version__, "threads": args.threads, "repeats": repeats,
        "epochs_per_run": args.epochs, "rows": args.rows, "libraries": LIBRARIES, "results": rows,
    })


if __name__ == "__main__":
    main()

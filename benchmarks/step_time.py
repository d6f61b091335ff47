"""Optimisation step time of the default models, without the trainer's batch building:
``steps`` training batches are prepared once (on ``--device``), then each model runs Adam
(fused, as the trainer does) over all of them, models interleaved per repeat; the median
time per step is printed: process time on one CPU thread, wall time with more threads
(process time would add the threads' times up) and after a device synchronise on a GPU.
Freed CPU memory stays mapped while timing, as it does in the trainer
(``holoxmc.train.heap.reuse_freed_memory``). It isolates the network's own cost from the epoch loop's noise.

Usage:
    python benchmarks/step_time.py delicious --repeats 7 --steps 150
    python benchmarks/step_time.py delicious --variants '{"ranking": 1.0}' '{}'   # HRR head options
    python benchmarks/step_time.py bibtex --hrr-params '{"hidden": [1024]}'       # other HRR-FC keywords
    python benchmarks/step_time.py delicious --device cuda --compile --launches     # on a GPU
    python benchmarks/step_time.py delicious --torch-dropout   # also each model with nn.Dropout
    python benchmarks/step_time.py bibtex --hrr-params '{"batch_size": 256}'  # µs/row compares batch sizes
    python benchmarks/step_time.py delicious --bfloat16   # also each model with bfloat16 steps (autocast)

Each run steps through batches of its own ``batch_size`` (the presets': 64), covering the
same training rows, so µs/row (time per step / batch size) is what an epoch costs per row.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from holoxmc.data import load
from holoxmc.data.batch import LabelBatch, SparseBatch
from holoxmc.estimator import XMCClassifier, preset_params
from holoxmc.train.heap import reuse_freed_memory
from holoxmc.train.trainer import training_autocast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--variants", nargs="*", default=[],
                        help="extra HRR-FC runs: JSON head_options replacing the preset's")
    parser.add_argument("--hrr-params", nargs="*", default=[],
                        help="extra HRR-FC runs: JSON XMCClassifier keywords over the preset")
    parser.add_argument("--fc-params", nargs="*", default=[],
                        help="extra FC runs: JSON XMCClassifier keywords over the preset")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--compile", action="store_true",
                        help="also time every model with its loss under torch.compile(dynamic=True)")
    parser.add_argument("--launches", action="store_true", help="count GPU kernel launches per step (profiler)")
    parser.add_argument("--torch-dropout", action="store_true",
                        help="also time every model with torch's nn.Dropout instead of the backbone's own")
    parser.add_argument("--bfloat16", action="store_true",
                        help="also time every model with its steps under bfloat16 autocast (precision='bfloat16')")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    train = load(args.dataset, "train")
    rows = min(64 * args.steps, train.X.shape[0])

    def prepared(batch_size: int) -> list[tuple[SparseBatch, LabelBatch]]:
        return [(SparseBatch.from_csr(train.X[i : min(i + batch_size, rows)]).to(device),
                 LabelBatch.from_csr(train.Y[i : min(i + batch_size, rows)]).to(device))
                for i in range(0, rows, batch_size)]

    batches_of: dict[int, list[tuple[SparseBatch, LabelBatch]]] = {}
    runs = {"fc": preset_params(args.dataset, "fc"), "hrr-fc": preset_params(args.dataset, "hrr-fc")}
    for variant in args.variants:
        runs[f"hrr-fc {variant}"] = runs["hrr-fc"] | {"head_options": json.loads(variant)}
    for params in args.hrr_params:
        runs[f"hrr-fc {params}"] = runs["hrr-fc"] | json.loads(params)
    for params in args.fc_params:
        runs[f"fc {params}"] = runs["fc"] | json.loads(params)
    models: dict[str, tuple[Callable, torch.optim.Optimizer, list]] = {}
    for name, params in runs.items():
        for compiled in (False, True) if args.compile else (False,):
            for torch_dropout in (False, True) if args.torch_dropout else (False,):
                for bfloat16 in (False, True) if args.bfloat16 else (False,):
                    clf = XMCClassifier(**params)
                    batch_size = clf.setting("batch_size")
                    batches = batches_of.setdefault(batch_size, prepared(batch_size))
                    network = clf.new_network(train.Y.shape[1], train.X.shape[1]).to(device)
                    if torch_dropout:
                        network.backbone.dropout = torch.nn.Dropout(network.backbone.dropout.p)
                    loss = torch.compile(network.loss, dynamic=True) if compiled else network.loss
                    if bfloat16:
                        loss = bfloat16_steps(loss, device.type)
                    label = (name + (" compiled" if compiled else "") + (" nn.Dropout" if torch_dropout else "")
                             + (" bfloat16" if bfloat16 else ""))
                    models[label] = (loss, torch.optim.Adam(network.parameters(), lr=1e-3, fused=True), batches)

    def clock() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            return time.perf_counter()
        return time.process_time() if args.threads == 1 else time.perf_counter()

    def one_pass(loss: Callable, optimizer: torch.optim.Optimizer, batches: list) -> float:
        started = clock()
        for x, y in batches:
            optimizer.zero_grad(set_to_none=True)
            loss(x, y).backward()
            optimizer.step()
        return clock() - started

    ms_per_step: dict[str, list[float]] = {name: [] for name in models}
    with reuse_freed_memory(device.type == "cpu"):
        for name, (loss, optimizer, batches) in models.items():  # warm-up; compiles the compiled ones
            print(f"{name}: first pass {one_pass(loss, optimizer, batches):.1f} s", flush=True)
        for _ in range(args.repeats):
            for name, (loss, optimizer, batches) in models.items():
                ms_per_step[name].append(1000 * one_pass(loss, optimizer, batches) / len(batches))
    for name, times in ms_per_step.items():
        steps = len(models[name][2])
        print(f"{name}: {statistics.median(times):.2f} ms/step, "
              f"{1000 * statistics.median(times) * steps / rows:.1f} µs/row (median of {args.repeats}; "
              f"{', '.join(f'{t:.2f}' for t in times)})")
    if args.launches:
        for name, (loss, optimizer, batches) in models.items():
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as trace:
                one_pass(loss, optimizer, batches)
            events = trace.key_averages()
            launches = sum(e.count for e in events if e.key.startswith("cudaLaunchKernel"))
            busy_ms = sum(e.self_device_time_total for e in events) / 1000
            print(f"{name}: {launches / len(batches):.0f} kernel launches and {busy_ms / len(batches):.3f} ms "
                  "of GPU time per step")


def bfloat16_steps(loss: Callable, device_type: str) -> Callable:
    """``loss`` under the autocast of the trainer's ``precision="bfloat16"`` steps."""
    def mixed(x, y):
        with training_autocast("bfloat16", device_type):
            return loss(x, y)
    return mixed


if __name__ == "__main__":
    sys.exit(main())

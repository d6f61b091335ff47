"""Speed of the dense output layer vs the HRR output layer, side by side in one run.

For each label-space size L it times, as the median of repeats on the same inputs:

* ``head train``: forward + loss + backward of the head alone on a ``(B, 512)`` input;
* ``FC net step``: a full training step of the paper's FC network (sparse input →
  512 → 512 → head) with Adam, the unit of an epoch;
* ``top-5``: decoding the top 5 labels of the batch (forward of the whole network,
  no gradient).

Ratios are dense time / HRR time (> 1: HRR faster). Labels per point and input sizes
follow the datasets the sizes stand for: Bibtex (L = 159, D = 1,836, 2.4 labels),
Delicious (L = 983, D = 500, 19 labels), and a Delicious-200K-like synthetic set
(L = 200,000, 75 labels, D = 20,000).

``--code circulant`` gives the HRR head the circulant label code (decoding by FFT).

Usage:
    .venv/bin/python benchmarks/heads_speed.py [--repeats 9] [--sizes 159 983 200000] [--threads N] [--clock cpu]
    .venv/bin/python benchmarks/heads_speed.py --sizes 983 200000 --code circulant
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
import torch

from holoxmc.backbones import build_network
from holoxmc.data.batch import LabelBatch, SparseBatch

# L → (labels per point, input features D) of the dataset each size stands for.
WORKLOADS = {159: (2.4, 1836), 983: (19.0, 500), 200_000: (75.0, 20_000)}


def random_labels(batch: int, n_labels: int, per_point: float, rng: np.random.Generator) -> LabelBatch:
    """``batch`` rows of Poisson(``per_point``) distinct labels each (at least one)."""
    counts = np.clip(rng.poisson(per_point, batch), 1, n_labels)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    indices = np.concatenate([np.sort(rng.choice(n_labels, c, replace=False)) for c in counts])
    Y = sp.csr_matrix((np.ones(len(indices), np.float32), indices, indptr), shape=(batch, n_labels))
    return LabelBatch.from_csr(Y)


def random_batch(batch: int, n_labels: int, n_features: int, per_point: float,
                 rng: np.random.Generator) -> tuple[SparseBatch, LabelBatch]:
    labels = random_labels(batch, n_labels, per_point, rng)
    density = min(1.0, 60 / n_features)
    X = sp.random(batch, n_features, density=density, format="csr", random_state=rng, dtype=np.float32)
    return SparseBatch.from_csr(X), labels


def measure(n_labels: int, batch: int, dim: int, repeats: int,
            clock: Callable[[], float] = time.perf_counter, code: str = "random") -> dict[str, dict[str, float]]:
    """Median milliseconds per task and head; the two heads alternate inside every repeat
    so that load from other processes hits both alike."""
    per_point, n_features = WORKLOADS.get(n_labels, (5.0, 20_000))
    x, labels = random_batch(batch, n_labels, n_features, per_point, np.random.default_rng(0))
    h = torch.randn(batch, 512, generator=torch.Generator().manual_seed(0))
    tasks: dict[str, dict[str, Callable[[], object]]] = {}
    for head in HEADS:
        options = {"dim": dim, "code": code} if head == "hrr" else {}
        network = build_network("fc", head, n_features=n_features, n_labels=n_labels, **options)
        optimizer = torch.optim.Adam(network.parameters(), lr=1e-3)

        def head_train(network=network) -> None:
            network.train()
            network.head.zero_grad(set_to_none=True)
            network.head.loss(network.head(h), labels).backward()

        def network_step(network=network, optimizer=optimizer) -> None:
            network.train()
            optimizer.zero_grad(set_to_none=True)
            network.loss(x, labels).backward()
            optimizer.step()

        def top5(network=network) -> None:
            network.eval()
            with torch.no_grad():
                network.topk(x, 5)

        tasks[head] = {"head_train_ms": head_train, "step_ms": network_step, "top5_ms": top5}
    times = {head: {task: [] for task in TASKS} for head in tasks}
    for task in TASKS:  # top-5 last and unbroken: decoding reuses weights between calls
        for repeat in range(repeats + 2):  # two warm-up rounds
            for head in (HEADS if repeat % 2 else HEADS[::-1]):  # alternate who goes first
                start = clock()
                tasks[head][task]()
                if repeat >= 2:
                    times[head][task].append(clock() - start)
    return {
        head: {task: 1e3 * statistics.median(values) for task, values in by_task.items()}
        for head, by_task in times.items()
    }


TASKS = ("head_train_ms", "step_ms", "top5_ms")
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
HEADS = ("dense", "hrr")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[159, 983, 200_000])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--dim", type=int, default=400)
    parser.add_argument("--code", choices=["random", "circulant"], default="random", help="the HRR label code")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall: elapsed time; cpu: this process's CPU time, which on a shared "
                             "machine with --threads 1 leaves out the time other jobs hold the core")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"# {platform.machine()}, {os.cpu_count()} CPUs (shared), torch {torch.__version__}, "
          f"{args.threads} threads, {args.clock} clock; B={args.batch}, d'={args.dim}, {args.code} code, "
          f"median of {args.repeats}")
    header = ("L", "D", "dense head ms", "HRR head ms", "ratio", "FC step ms", "HRR-FC step ms", "ratio",
              "FC top-5 ms", "HRR-FC top-5 ms", "ratio")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for n_labels in args.sizes:
        r = measure(n_labels, args.batch, args.dim, args.repeats, CLOCKS[args.clock], args.code)
        row = [f"{n_labels:,}", f"{WORKLOADS.get(n_labels, (0, 20_000))[1]:,}"]
        for task in TASKS:
            dense, hrr = r["dense"][task], r["hrr"][task]
            row += [f"{dense:.2f}", f"{hrr:.2f}", f"{dense / hrr:.2f}×"]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()

"""HRR label codes at millions of labels: memory and speed of the random and the circulant
code, cached and not, side by side in one run.

For each configuration it builds an ``HRRHead`` (512 inputs, d' = ``--dim``) and reports:

* ``build s``: constructing the head (drawing the code, building the key cache if any);
* ``code MB``: what the head keeps for its code (buffers plus the code's own tensors);
* ``step ms``: forward + loss + backward of the head on a ``(B, 512)`` input with
  ``--labels-per-point`` labels per row (Amazon-670K: 5.45), median of ``--repeats``;
* ``top-5 ms``: decoding the batch's top 5 labels over all L, median of ``--repeats``.

The configurations alternate inside every repeat, so load from other processes hits all
of them alike.

Usage:
    .venv/bin/python benchmarks/code_scale.py --labels 670091 --repeats 5 --threads 1
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from heads_speed import random_labels
from holoxmc.heads.hrr import HRRHead

CONFIGS = {
    "random, cached": {"code": "random"},
    "random, uncached": {"code": "random", "cache_codes": False},
    "circulant, cached": {"code": "circulant"},
    "circulant, uncached": {"code": "circulant", "cache_codes": False},
}


def code_megabytes(head: HRRHead) -> float:
    tensors = list(head.buffers()) + [t for t in (head.code.group_spectra, head.code._group_vectors) if t is not None]
    return sum(t.numel() * t.element_size() for t in tensors) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=int, default=670_091)
    parser.add_argument("--dim", type=int, default=400)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--labels-per-point", type=float, default=5.45)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    labels = random_labels(args.batch, args.labels, args.labels_per_point, np.random.default_rng(0))
    h = torch.randn(args.batch, 512, generator=torch.Generator().manual_seed(0))
    heads: dict[str, HRRHead] = {}
    built: dict[str, float] = {}
    for name in args.configs:
        start = time.perf_counter()
        heads[name] = HRRHead(512, args.labels, dim=args.dim, **CONFIGS[name])
        built[name] = time.perf_counter() - start

    def step(head: HRRHead) -> None:
        head.zero_grad(set_to_none=True)
        head.loss(head(h), labels).backward()

    def top5(head: HRRHead) -> None:
        with torch.no_grad():
            head.topk(head(h), 5)

    tasks: dict[str, Callable[[HRRHead], None]] = {"step": step, "top-5": top5}
    times = {name: {task: [] for task in tasks} for name in heads}
    for repeat in range(args.repeats + 1):  # one warm-up round
        for name, head in heads.items():
            for task, run in tasks.items():
                start = time.perf_counter()
                run(head)
                if repeat:
                    times[name][task].append(time.perf_counter() - start)
    print(f"# {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, {args.threads} threads; "
          f"L = {args.labels:,}, d' = {args.dim}, B = {args.batch}, {args.labels_per_point} labels per row, "
          f"median of {args.repeats}")
    print("| code | build s | code MB | step ms | top-5 ms |")
    print("|---|---|---|---|---|")
    for name, head in heads.items():
        step_ms, top5_ms = (1e3 * statistics.median(times[name][task]) for task in tasks)
        print(f"| {name} | {built[name]:.2f} | {code_megabytes(head):,.1f} | {step_ms:.1f} | {top5_ms:.1f} |",
              flush=True)


if __name__ == "__main__":
    main()

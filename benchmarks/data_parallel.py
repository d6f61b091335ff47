"""Data-parallel training (torch.distributed) of FC and HRR-FC: seconds per epoch in one
process and with N ranks, and the gradient bytes each rank exchanges per step.

The ranks split every batch and average their gradients before each Adam step
(``holoxmc.distributed.data_parallel``), so what crosses between them per step is every
weight's gradient: with a dense output layer that includes L × hidden floats, with the
HRR head d' × hidden. The default set is Table 3's synthetic L = 200,000 one.

One process uses all ``--ranks × --threads-per-rank`` threads; each rank uses
``--threads-per-rank``. The two phases run one after the other (models interleaved
within each), so the machine's load can differ between them; medians of ``--repeats``.

Usage:
    python benchmarks/data_parallel.py --ranks 2 --repeats 3
    python benchmarks/data_parallel.py --dataset delicious --ranks 2 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hrr_vs_dense import side_by_side

from holoxmc.cli.train import train_params
from holoxmc.presets import dataset_preset
from holoxmc.data import load, make_synthetic
from holoxmc.estimator import XMCClassifier

MODELS = ("fc", "hrr-fc")


def training_set(args: argparse.Namespace):
    if args.dataset == "synthetic-large":
        return make_synthetic(args.points, args.labels, 20_000, n_test=0, seed=0)[0]
    return load(args.dataset, "train")


def model_params(args: argparse.Namespace) -> dict[str, dict]:
    if args.dataset == "synthetic-large":
        return {"fc": {"head": "dense"}, "hrr-fc": {"head": "hrr", "dim": args.dim}}
    return {model: train_params(args.dataset, model, {}, preset=dataset_preset(args.dataset)) for model in MODELS}


def epoch_seconds(args: argparse.Namespace) -> dict[str, dict]:
    """Per model: seconds of each timed epoch (``hrr_vs_dense.side_by_side``: models
    interleaved; the first round warms up and is dropped) and gradient MB per step."""
    train = training_set(args)
    params = {model: p | {"progress": False} for model, p in model_params(args).items()}
    seconds = side_by_side(params, train.X, train.Y, args.repeats + 1, device=args.device)["epoch_seconds"]
    gradient_mb = {}
    for model, p in params.items():
        clf = XMCClassifier(**p)
        network = clf.new_network(train.Y.shape[1], train.X.shape[1])
        gradient_mb[model] = sum(w.numel() * w.element_size() for w in network.parameters() if w.requires_grad) / 2**20
    return {model: {"seconds": seconds[model][1:], "gradient_mb_per_step": gradient_mb[model]} for model in params}


def _rank(rank: int, args: argparse.Namespace, init_file: str, out: str) -> None:
    torch.set_num_threads(args.threads_per_rank)
    backend = "nccl" if args.device.startswith("cuda") else "gloo"
    if backend == "nccl":
        args.device = f"cuda:{rank}"
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank, world_size=args.ranks)
    try:
        result = epoch_seconds(args)
        if rank == 0:
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="synthetic-large", help="a registry name, or synthetic-large")
    parser.add_argument("--labels", type=int, default=200_000)
    parser.add_argument("--points", type=int, default=2_000)
    parser.add_argument("--dim", type=int, default=3000, help="HRR d' on the synthetic set")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--threads-per-rank", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (nccl, one GPU per rank)")
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the figures")
    args = parser.parse_args()

    torch.set_num_threads(args.ranks * args.threads_per_rank)
    single = epoch_seconds(args)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "ranks.json"
        mp.spawn(_rank, args=(args, str(Path(folder) / "init"), str(out)), nprocs=args.ranks, join=True)
        ranked = json.loads(out.read_text())

    rows = []
    for model in MODELS:
        one, many = statistics.median(single[model]["seconds"]), statistics.median(ranked[model]["seconds"])
        rows.append({"model": model, "gradient_mb_per_step": single[model]["gradient_mb_per_step"],
                     "one_process_s": one, "ranks_s": many, "speedup": one / many,
                     "one_process_all": single[model]["seconds"], "ranks_all": ranked[model]["seconds"]})
    summary = {"machine": f"{platform.machine()}, {torch.get_num_threads()} threads; torch {torch.__version__}",
               "dataset": args.dataset, "ranks": args.ranks, "threads_per_rank": args.threads_per_rank,
               "device": args.device, "rows": rows}
    if args.dataset == "synthetic-large":
        summary |= {"labels": args.labels, "points": args.points, "dim": args.dim}
    if args.out:
        args.out.write_text(json.dumps(summary, indent=1))
    print(f"{summary['dataset']}; 1 process × {args.ranks * args.threads_per_rank} threads vs "
          f"{args.ranks} ranks × {args.threads_per_rank} ({args.device}); medians of {args.repeats}\n")
    print("| model | gradient MB per step | 1 process s/epoch | ranks s/epoch | 1 process / ranks |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['model']} | {row['gradient_mb_per_step']:.1f} | {row['one_process_s']:.2f} | "
              f"{row['ranks_s']:.2f} | {row['speedup']:.2f}× |")


if __name__ == "__main__":
    main()

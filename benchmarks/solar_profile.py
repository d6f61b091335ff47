"""Where one SOLAR chunk's epoch goes: timers around each part of a training step, a torch
profiler table of the heaviest operators, and one validation pass, for one chunk built
exactly as ``fit_solar`` builds it (row normalisation, the chunk's feature hash and network,
the trainer's choice of sparse updates and its optimisers).

A step is split into: data (``input_batch`` + ``label_batch``), backbone forward (the input
layer's ``EmbeddingBag``, which also runs the sparse-update catch-up hook, and the hidden
layers), output (the B-wide layer and its BCE; with the sampled loss, the gathered
columns), backward, and each optimiser's step. ``--steps`` steps are timed (after
``--warmup`` untimed ones) and extrapolated to an epoch; the validation pass is timed on
``--val-rows`` rows and extrapolated to the whole validation split. With several
``--options``, the configurations' steps alternate in one process, so that a shared
machine's load weighs on each alike. One JSON line per configuration is appended to ``--out``.

Usage:
    python benchmarks/solar_profile.py realistic-670k --steps 150 --threads 2 \
        --out benchmarks/results/solar_profile.jsonl
    python benchmarks/solar_profile.py realistic-670k --steps 40 --options '{"prior_bias": true}' \
        '{"prior_bias": true, "loss": "sampled"}' --out benchmarks/results/solar_profile.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from holoxmc.data import load
from holoxmc.data.batch import input_batch, label_batch
from holoxmc.models.solar.codes import chunk_seed
from holoxmc.models.solar.config import SolarConfig, chunk_network, feature_hash, normalized_rows
from holoxmc.models.solar.fit import prepare_chunk_network
from holoxmc.models.solar.head import bucket_matrix
from holoxmc.train.inference import evaluate_topk
from holoxmc.train.optim import build_optimizers, choose_sparse_updates, sparse_update_tables, watching
from holoxmc.train.streaming import epoch_order
from holoxmc.train.trainer import split_validation


def _timed(clock: dict[str, float], name: str):
    class _Timer:
        def __enter__(self):
            self.start = time.perf_counter()

        def __exit__(self, *exc):
            clock[name] += time.perf_counter() - self.start

    return _Timer()


def _step(network, optimizers, X, Y, rows, clock) -> float:
    with _timed(clock, "data"):
        x, y = input_batch(X, rows), label_batch(Y, rows)
    with _timed(clock, "backbone_forward"):
        h = network.backbone(x)
    with _timed(clock, "output_forward_and_loss"):
        loss = network.head.training_loss(h, y)
    for optimizer in optimizers:
        optimizer.zero_grad(set_to_none=True)
    with _timed(clock, "backward"):
        loss.backward()
    for optimizer in optimizers:
        with _timed(clock, f"step_{type(optimizer).__name__}"):
            optimizer.step()
    return float(loss.detach())


def _arm(options_text: str, train, chunk: int) -> dict:
    """One configuration to time: its config, network, optimisers and batches."""
    options = json.loads(options_text)
    train_options = options.pop("train", {})
    config = SolarConfig(**options)
    config = replace(config, train=replace(config.train, **train_options))
    return {"text": options_text, "config": config.resolved(n_labels=train.Y.shape[1], n_features=train.X.shape[1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="a dataset name (e.g. realistic-670k, realistic-100k, delicious)")
    parser.add_argument("--chunk", type=int, default=0)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--profile-steps", type=int, default=20, help="steps under torch.profiler (0: none)")
    parser.add_argument("--val-rows", type=int, default=4096)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--options", nargs="+", default=["{}"],
                        help="SolarConfig fields as JSON, e.g. '{\"loss\": \"sampled\"}'; several: their steps "
                             "alternate in one process (the same load for all), one record each")
    parser.add_argument("--out", default=None, help="append one JSON line per configuration here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    times: dict[str, float] = {}
    begun = time.perf_counter()
    train = load(args.data, "train")
    times["load_s"] = time.perf_counter() - begun
    arms = [_arm(text, train, args.chunk) for text in args.options]
    config = arms[0]["config"]  # the data preparation of the first (the others must not change it)
    begun = time.perf_counter()
    X = normalized_rows(train.X) if config.normalize_rows else train.X
    fit_rows, val_rows = split_validation(X.shape[0], config.train.val_fraction, config.seed)
    X, Y, X_val, Y_val = X[fit_rows], train.Y[fit_rows], X[val_rows], train.Y[val_rows]
    code = config.label_code(Y.shape[1])
    hasher = feature_hash(config, X.shape[1], args.chunk)
    if hasher is not None:
        X, X_val = hasher.transform(X), hasher.transform(X_val)
    Y_val_buckets = bucket_matrix(Y_val, code.buckets[args.chunk], config.n_buckets)
    times["prepare_s"] = time.perf_counter() - begun

    device = torch.device("cpu")
    for arm in arms:
        cfg = arm["config"]
        network = chunk_network(cfg, train.X.shape[1], code.buckets[args.chunk], args.chunk)
        tc = replace(cfg.train, seed=chunk_seed(cfg.seed, args.chunk, "train"))
        tc = prepare_chunk_network(network, cfg, X, Y, tc)  # prior bias; sparse updates for the sampled loss
        order = epoch_order(X, np.arange(X.shape[0]), tc.seed, 0)
        sparse = choose_sparse_updates(tc.sparse_updates, network, X, order, tc.batch_size,
                                       weight_decay=tc.weight_decay, device=device, world=1)
        optimizers = build_optimizers(network, sparse_update_tables(network, sparse), lr=tc.lr,
                                      weight_decay=tc.weight_decay, device=device)
        network.train()
        arm.update(network=network, optimizers=optimizers, tc=tc, sparse=sparse, clock=defaultdict(float),
                   losses=[], seconds=0.0, steps_per_epoch=math.ceil(X.shape[0] / tc.batch_size),
                   batches=[order[i * tc.batch_size:(i + 1) * tc.batch_size]
                            for i in range(args.warmup + args.steps)])
    for step in range(args.warmup + args.steps):
        for arm in arms:  # round robin: every configuration sees the same load
            with watching(arm["optimizers"], arm["network"]):
                begun = time.perf_counter()
                clock = arm["clock"] if step >= args.warmup else defaultdict(float)
                loss = _step(arm["network"], arm["optimizers"], X, Y, arm["batches"][step], clock)
                if step >= args.warmup:
                    arm["seconds"] += time.perf_counter() - begun
                    arm["losses"].append(loss)
    for arm in arms:
        arm["table"] = None
        if args.profile_steps:
            with watching(arm["optimizers"], arm["network"]), torch.profiler.profile(
                    activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                for rows in arm["batches"][args.warmup: args.warmup + args.profile_steps]:
                    _step(arm["network"], arm["optimizers"], X, Y, rows, defaultdict(float))
            arm["table"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
            print(arm["text"], "\n", arm["table"])
        begun = time.perf_counter()
        for optimizer in arm["optimizers"]:
            flush = getattr(optimizer, "flush", None)
            if flush is not None:
                flush()
        arm["flush_s"] = time.perf_counter() - begun
        n_val = min(args.val_rows, X_val.shape[0])
        begun = time.perf_counter()
        val = evaluate_topk(arm["network"], X_val[:n_val], Y_val_buckets[:n_val], ks=(1, 3, 5),
                            batch_size=arm["tc"].eval_batch_size)
        val_seconds = time.perf_counter() - begun
        per_step = {name: seconds / args.steps for name, seconds in arm["clock"].items()}
        cfg, steps_per_epoch = arm["config"], arm["steps_per_epoch"]
        record = {
            "data": args.data, "chunk": args.chunk, "options": json.loads(arm["text"]),
            "compared_with": [a["text"] for a in arms if a is not arm],
            "n_train": int(X.shape[0]), "n_val": int(X_val.shape[0]), "input_dim": int(X.shape[1]),
            "n_buckets": cfg.n_buckets, "hidden": list(cfg.hidden), "batch_size": arm["tc"].batch_size,
            "sparse_updates": arm["sparse"], "steps_timed": args.steps, "steps_per_epoch": steps_per_epoch,
            "ms_per_step": {name: round(1e3 * s, 2) for name, s in per_step.items()},
            "ms_per_step_total": round(1e3 * arm["seconds"] / args.steps, 2),
            "epoch_s_extrapolated": round(arm["seconds"] / args.steps * steps_per_epoch, 1),
            "epoch_s_by_part": {name: round(s * steps_per_epoch, 1) for name, s in per_step.items()},
            "val_pass_s_extrapolated": round(val_seconds / n_val * X_val.shape[0], 1),
            "val_bucket_P@1_after_steps": round(val["P@1"], 2),
            "loss_first_last": [arm["losses"][0], arm["losses"][-1]], "flush_s": round(arm["flush_s"], 1),
            **{k: round(v, 1) for k, v in times.items()},
            "threads": args.threads, "load_avg": os.getloadavg(),
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
            "torch": torch.__version__, "machine": platform.machine(), "profile_top_ops": arm["table"],
        }
        print(json.dumps({k: v for k, v in record.items() if k != "profile_top_ops"}, indent=1))
        if args.out:
            with Path(args.out).open("a") as f:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()

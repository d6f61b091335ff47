"""Top-5 inference at L = 670,091: SOLAR (K chunk models + inverted index) against a dense
output layer over all L labels with the same hidden size, side by side in one run (median of
repeats, alternating, same torch threads and batch size, one untimed warm-up each; the
1-minute load average before and after the timed loop is recorded). The SOLAR model is
trained on a subsample of the synthetic Amazon-670K-like preset (N given by
``--train-points``; its precision is reported as measured, it is not comparable with the
full set). The dense network is timed with its initial weights: its cost does not depend on
them.

Usage:
    python benchmarks/solar_speed.py --train-points 20000 --chunks 8 --buckets 10000 --eval-chunks 4
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from holoxmc.backbones import FCBackbone, Network
from holoxmc.data import load
from holoxmc.heads.dense import DenseHead
from holoxmc.io import atomic_write_json
from holoxmc.metrics import evaluate
from holoxmc.train.inference import predict_topk
from holoxmc.models.solar.fit import SolarConfig, fit_solar
from holoxmc.train.trainer import TrainConfig, split_validation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-points", type=int, default=30_000)
    parser.add_argument("--test-points", type=int, default=2_000)
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--buckets", type=int, default=10_000)
    parser.add_argument(
        "--eval-chunks", type=int, default=None, help="time the model of the first K' trained chunks (exactly the K' model)"
    )
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--feature-dim", type=int, default=2**15)
    parser.add_argument("--top-buckets", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--timed-points", type=int, default=1_000)
    parser.add_argument("--predict-batch", type=int, default=250)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--run-dir", default="runs/solar_speed_670k")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    options = dict(preset="amazon-670k-like", n_points=args.train_points, n_test=args.test_points)
    train, test = load("synthetic", **options), load("synthetic", split="test", **options)
    fit_rows, val_rows = split_validation(len(train), 0.1, 0)
    config = SolarConfig(
        n_chunks=args.chunks, n_buckets=args.buckets, hidden=(args.hidden,), feature_dim=args.feature_dim,
        top_buckets=args.top_buckets,
        train=TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=2e-3, progress=False),
    )
    start = time.perf_counter()
    solar = fit_solar(
        train.X[fit_rows], train.Y[fit_rows], config, Path(args.run_dir),
        X_val=train.X[val_rows], Y_val=train.Y[val_rows], workers=args.workers,
    )
    train_seconds = time.perf_counter() - start
    if args.eval_chunks is not None:
        solar = solar.first_chunks(args.eval_chunks)
    dense = Network(FCBackbone(train.n_features, (args.hidden,)), DenseHead(args.hidden, train.n_labels)).eval()

    X = test.X[: args.timed_points]
    # warm-up, untimed: SOLAR stacks its K chunk networks into batched tensors on first use
    predict_topk(dense, X[: args.predict_batch], 5, batch_size=args.predict_batch)
    solar.predict(X[: args.predict_batch], 5, batch_size=args.predict_batch)
    load_before = os.getloadavg()
    timings: dict[str, list[float]] = {"dense": [], "solar": []}
    for _ in range(args.repeats):  # alternate so both see the same machine load
        start = time.perf_counter()
        predict_topk(dense, X, 5, batch_size=args.predict_batch)
        timings["dense"].append(time.perf_counter() - start)
        start = time.perf_counter()
        solar.predict(X, 5, batch_size=args.predict_batch)
        timings["solar"].append(time.perf_counter() - start)
    load_after = os.getloadavg()
    ms = {name: 1000 * statistics.median(t) / X.shape[0] for name, t in timings.items()}
    indices, _, candidates = solar.predict(test.X, 5)
    metrics = evaluate(indices, test.Y)
    result = {
        "L": train.n_labels,
        "D": train.n_features,
        "train_points": int(len(fit_rows)),
        "test_points": int(test.X.shape[0]),
        "config": solar.config.to_dict(),
        "solar_train_seconds_this_call": round(train_seconds, 1),
        "dense_ms_per_point": round(ms["dense"], 3),
        "solar_ms_per_point": round(ms["solar"], 3),
        "speedup": round(ms["dense"] / ms["solar"], 2),
        "timings_seconds": timings,
        "solar_test": {k: round(metrics[k], 2) for k in ("P@1", "P@3", "P@5")},
        "candidates_per_point": round(float(candidates.mean()), 1),
        "machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads; 2-core CPU shared with other jobs",
        "load_average_1min_before_after": [round(load_before[0], 2), round(load_after[0], 2)],
    }
    print(
        f"L={train.n_labels} hidden={args.hidden}: dense top-5 {ms['dense']:.3f} ms/pt, "
        f"SOLAR (K={solar.config.n_chunks}, B={solar.config.n_buckets}, m={solar.config.top_buckets}) "
        f"{ms['solar']:.3f} ms/pt -> {result['speedup']}x; SOLAR test {result['solar_test']}, "
        f"{result['candidates_per_point']} candidates/pt"
    )
    if args.out:
        atomic_write_json(args.out, result)


if __name__ == "__main__":
    main()

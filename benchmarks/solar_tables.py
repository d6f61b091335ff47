"""SOLAR paper tables on one dataset: Table 2 (scoring schemes), Table 3 (min_freq vs
candidates per point and precision) and the K half of Table 6 (first K' chunks of one run —
chunks are independent, so this is exactly the K' model). Run with different ``--buckets``
for the B half of Table 6.

Model selection and tuning use a validation split carved from train (``--eval val``); the
test set is only scored with ``--eval test``.

Usage:
    python benchmarks/solar_tables.py delicious --chunks 8 --eval test --workers 2
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from holoxmc.data import load
from holoxmc.io import atomic_write_json
from holoxmc.metrics import evaluate, inverse_propensity
from holoxmc.models.solar.fit import SolarConfig, SolarModel, fit_solar
from holoxmc.train.trainer import TrainConfig, split_validation

KEYS = ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")


def score(model: SolarModel, X, Y, inv_prop, **options) -> dict[str, float]:
    start = time.perf_counter()
    indices, _, candidates = model.predict(X, 5, **options)
    seconds = time.perf_counter() - start
    metrics = evaluate(indices, Y, inv_prop=inv_prop)
    row = {key: round(metrics[key], 2) for key in KEYS}
    row["candidates_per_point"] = round(float(candidates.mean()), 1)
    row["predict_ms_per_point"] = round(1000 * seconds / X.shape[0], 3)
    return row


def markdown(title: str, first: str, rows: list[tuple[str, dict]]) -> str:
    columns = list(rows[0][1])
    lines = [f"**{title}**", "", "| " + " | ".join([first, *columns]) + " |", "|" + "---|" * (len(columns) + 1)]
    lines += ["| " + " | ".join([label, *(str(r[c]) for c in columns)]) + " |" for label, r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--chunks", type=int, default=8)
    parser.add_argument("--buckets", type=int, default=None)
    parser.add_argument("--hidden", type=int, nargs="+", default=[512])
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--feature-dim", type=int, default=None)
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--top-buckets", type=int, default=10)
    parser.add_argument("--no-normalize", action="store_true", help="keep feature rows as loaded")
    parser.add_argument("--method", default="balanced", choices=["balanced", "murmur"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--eval", choices=["val", "test"], default="val")
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--out", default=None, help="JSON results file")
    args = parser.parse_args()

    train = load(args.dataset)
    X, Y = train.X, train.Y
    train_rows, val_rows = split_validation(X.shape[0], 0.1, args.seed)
    X_fit, Y_fit, X_val, Y_val = X[train_rows], Y[train_rows], X[val_rows], Y[val_rows]
    if args.eval == "test":
        test = load(args.dataset, split="test")
        X_eval, Y_eval = test.X, test.Y
    else:
        X_eval, Y_eval = X_val, Y_val
    config = SolarConfig(
        n_chunks=args.chunks, n_buckets=args.buckets, hidden=tuple(args.hidden), dropout=args.dropout,
        feature_dim=args.feature_dim, normalize_rows=not args.no_normalize, top_buckets=args.top_buckets, code_method=args.method, seed=args.seed,
        train=TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, progress=False),
    )
    tag = f"{args.dataset}_K{args.chunks}_B{args.buckets}_h{'x'.join(map(str, args.hidden))}_e{args.epochs}"
    run_dir = Path(args.run_dir or f"runs/solar_{tag}{'_raw' if args.no_normalize else ''}")
    start = time.perf_counter()
    model = fit_solar(X_fit, Y_fit, config, run_dir, X_val=X_val, Y_val=Y_val, workers=args.workers)
    train_wall = time.perf_counter() - start
    inv_prop = inverse_propensity(Y)
    K, d = model.config.n_chunks, model.config.min_freq

    scoring = [(s, score(model, X_eval, Y_eval, inv_prop, scoring=s)) for s in ("prob", "logprob", "logit")]
    freqs = sorted({1, 2, max(1, K // 4), max(1, K // 2), K})
    min_freq = [(str(f), score(model, X_eval, Y_eval, inv_prop, min_freq=f)) for f in freqs]
    ks = [k for k in (1, 2, 4, 8, 16, 32) if k <= K]
    chunks = [(str(k), score(model.first_chunks(k), X_eval, Y_eval, inv_prop)) for k in ks]
    done = [json.loads((run_dir / f"chunk_{k:03d}" / "done.json").read_text()) for k in range(K)]
    result = {
        "dataset": args.dataset,
        "eval": args.eval,
        "config": model.config.to_dict(),
        "train_wall_seconds_this_call": round(train_wall, 1),
        "chunk_train_seconds": [round(c["train_seconds"], 1) for c in done],
        "machine": f"{platform.machine()} {torch.get_num_threads()} torch threads; 2-core CPU shared with other jobs",
        "table2_scoring": dict(scoring),
        "table3_min_freq": dict(min_freq),
        "table6_chunks": dict(chunks),
    }
    B, m = model.config.n_buckets, model.config.top_buckets
    print(f"{args.dataset} ({args.eval}), K={K}, B={B}, m={m}, hidden={list(model.config.hidden)}")
    print(markdown(f"Table 2: scoring (min_freq={d})", "scoring", scoring))
    print(markdown("Table 3: min_freq", "min_freq", min_freq))
    print(markdown(f"Table 6: first K chunks (B={B})", "K", chunks))
    if args.out:
        atomic_write_json(args.out, result)


if __name__ == "__main__":
    main()

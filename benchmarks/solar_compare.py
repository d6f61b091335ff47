"""SOLAR settings side by side on one data set, in one run: each configuration is fitted in a
fresh run directory (one after another, same threads) and scored, and one JSON line per
configuration is appended to ``--out`` (fit seconds, P@1/3/5, Recall@100 where asked, the
chunks' epochs and validation bucket P@1).

``--eval val`` holds out 10 % of the training rows (seeded) and scores them: settings are
chosen this way, on sets other than the ones reported. ``--eval test`` fits on all training
rows and scores the test split.

Usage:
    python benchmarks/solar_compare.py realistic-10k --eval val --threads 2 \
        --configs '{"prior_bias": false}' '{"prior_bias": true}' --out benchmarks/results/solar_tuning.jsonl
    python benchmarks/solar_compare.py delicious --eval test --configs '{}' '{"loss": "sampled"}'
    python benchmarks/solar_compare.py var-100k --generate '{"n_points": 30000, ...}' --eval val --configs ...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from holoxmc.data import load, make_realistic
from holoxmc.metrics import evaluate
from holoxmc.models.solar.fit import SolarConfig, fit_solar
from holoxmc.train.trainer import split_validation


def config_of(options: dict) -> SolarConfig:
    """A :class:`SolarConfig` from JSON options (``train`` holds :class:`TrainConfig` fields)."""
    options = dict(options)
    train = options.pop("train", {})
    if "hidden" in options:
        options["hidden"] = tuple(options["hidden"])
    config = SolarConfig(**options)
    return replace(config, train=replace(config.train, progress=False, **train))


def recall_at(indices: np.ndarray, Y, k: int) -> float:
    """Mean over rows with labels of the share of their labels among the top ``k``."""
    Y = Y.tocsr()
    hits = [len(set(indices[i, :k].tolist()) & set(Y.indices[Y.indptr[i]:Y.indptr[i + 1]].tolist()))
            / (Y.indptr[i + 1] - Y.indptr[i]) for i in range(Y.shape[0]) if Y.indptr[i + 1] > Y.indptr[i]]
    return 100.0 * float(np.mean(hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", help="a registry name, or the name of a --generate set")
    parser.add_argument("--generate", default=None,
                        help="make_realistic's knobs as JSON (a set of its own, used for choosing): DATA names it")
    parser.add_argument("--configs", nargs="+", required=True, help="SolarConfig options as JSON, one per fit")
    parser.add_argument("--eval", choices=["val", "test"], default="val")
    parser.add_argument("--max-eval", type=int, default=None, help="score only the first N evaluation rows")
    parser.add_argument("--recall", action="store_true", help="also Recall@100 (top 100 per row)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--run-root", default=None, help="keep the run directories here (default: a temporary one)")
    parser.add_argument("--label", default="", help="free text stored with every line")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    generated = make_realistic(**json.loads(args.generate), name=args.data) if args.generate else None
    train = generated[0] if generated else load(args.data, "train")
    if args.eval == "val":
        fit_rows, val_rows = split_validation(train.X.shape[0], 0.1, 0)
        X, Y, X_eval, Y_eval = train.X[fit_rows], train.Y[fit_rows], train.X[val_rows], train.Y[val_rows]
    else:
        test = generated[1] if generated else load(args.data, "test")
        X, Y, X_eval, Y_eval = train.X, train.Y, test.X, test.Y
    if args.max_eval:
        X_eval, Y_eval = X_eval[: args.max_eval], Y_eval[: args.max_eval]
    root = Path(args.run_root or tempfile.mkdtemp(prefix="solar_compare_"))
    for number, text in enumerate(args.configs):
        config = config_of(json.loads(text))
        run_dir = root / f"config_{number}"
        shutil.rmtree(run_dir, ignore_errors=True)
        load_before = os.getloadavg()[0]
        begun = time.perf_counter()
        model = fit_solar(X, Y, config, run_dir, workers=args.workers)
        fit_seconds = time.perf_counter() - begun
        begun = time.perf_counter()
        k = 100 if args.recall else 5
        indices, _, candidates = model.predict(X_eval, k=k)
        predict_seconds = time.perf_counter() - begun
        metrics = evaluate(indices[:, :5], Y_eval)
        done = [json.loads((run_dir / f"chunk_{c:03d}" / "done.json").read_text()) for c in range(config.n_chunks)]
        record = {
            "data": args.data, "generate": json.loads(args.generate) if args.generate else None, "eval": args.eval, "n_eval": int(X_eval.shape[0]), "options": json.loads(text),
            "label": args.label, "fit_s": round(fit_seconds, 1), "train_s": round(sum(d["train_seconds"] for d in done), 1),
            "predict_ms_per_row": round(1e3 * predict_seconds / X_eval.shape[0], 3),
            **{m: round(metrics[m], 2) for m in ("P@1", "P@3", "P@5")},
            "Recall@100": round(recall_at(indices, Y_eval, 100), 2) if args.recall else None,
            "candidates_per_row": round(float(np.mean(candidates)), 1),
            "best_epochs": [d["best_epoch"] for d in done],
            "epochs_run": [len(d["epoch_seconds"]) for d in done],
            "val_bucket_P@1": [round(d["val_bucket_P@1"], 2) for d in done if d["val_bucket_P@1"] is not None],
            "load_avg_start_end": [load_before, os.getloadavg()[0]], "threads": args.threads,
        }
        print(json.dumps(record), flush=True)
        if args.out:
            with Path(args.out).open("a") as f:
                f.write(json.dumps(record) + "\n")
        if not args.run_root:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

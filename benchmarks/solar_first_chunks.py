"""Score the model made of a SOLAR run folder's first K chunks, for each K asked, on a test
split: what a K-chunk run with the same seed trains (chunks are independent), read from a
folder whose later chunks never finished (a run stopped for time) or to see what each chunk
adds. The folder's ``solar.json`` gives the settings; ``min_freq`` follows the library's rule for each K.

Usage:
    python benchmarks/solar_first_chunks.py RUN_DIR realistic-100k --chunks 4 5 6 --max-test 1000 \
        --out benchmarks/results/solar_scale.jsonl
    python benchmarks/solar_first_chunks.py RUN_DIR realistic-100k --chunks 8 --max-test 3000 --list 100
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from holoxmc.data import load
from holoxmc.metrics import evaluate
from holoxmc.models.solar.config import DONE_FILE, SolarConfig, chunk_dir
from holoxmc.models.solar.model import SolarModel
from solar_compare import recall_at  # this folder is on the path of a script run from it


def first_chunks(run: Path, k: int) -> SolarModel:
    """The model of ``run``'s chunks ``0..k-1`` (each must have finished: its ``done.json``),
    its ``min_freq`` by the library's rule for ``k`` chunks."""
    meta = json.loads((run / "solar.json").read_text())
    unfinished = [c for c in range(k) if not (chunk_dir(run, c) / DONE_FILE).is_file()]
    if unfinished:
        raise SystemExit(f"{chunk_dir(run, unfinished[0])}: not finished")
    config = replace(SolarConfig.from_dict(meta["config"]), n_chunks=k, min_freq=None)
    config = config.resolved(n_labels=meta["n_labels"], n_features=meta["n_features"])
    model = SolarModel(config, config.label_code(meta["n_labels"]), meta["n_features"])
    model._load_chunks(run)
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("data")
    parser.add_argument("--chunks", nargs="+", type=int, required=True)
    parser.add_argument("--max-test", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--list", type=int, default=5,
                        help="labels asked of each row; P@1-5 are read from the head of that list")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    test = load(args.data, "test")
    X, Y = (test.X, test.Y) if args.max_test is None else (test.X[: args.max_test], test.Y[: args.max_test])
    for k in args.chunks:
        model = first_chunks(args.run_dir, k)
        begun = time.perf_counter()
        indices, _, candidates = model.predict(X, k=max(5, args.list))
        seconds = time.perf_counter() - begun
        metrics = evaluate(indices, Y)
        done = [json.loads((chunk_dir(args.run_dir, c) / DONE_FILE).read_text()) for c in range(k)]
        record = {"data": args.data, "model": "holoxmc-solar", "chunks": k, "n_test": int(X.shape[0]),
                  "label": args.label, "loss": model.config.loss, "n_buckets": model.config.n_buckets,
                  **{m: round(metrics[m], 2) for m in ("P@1", "P@3", "P@5")},
                  **({"list": args.list} if args.list != 5 else {}),
                  **({"Recall@100": round(recall_at(indices, Y, 100), 2)} if args.list >= 100 else {}),
                  f"top{max(5, args.list)}_ms_per_point": round(1e3 * seconds / X.shape[0], 3), "threads": args.threads,
                  "candidates_per_row": round(float(np.mean(candidates)), 1),
                  "chunk_train_s": [round(d["train_seconds"], 1) for d in done],
                  "best_epochs": [d["best_epoch"] for d in done],
                  "val_bucket_P@1": [round(d["val_bucket_P@1"], 2) for d in done if d["val_bucket_P@1"] is not None],
                  "load": os.getloadavg()[0]}
        print(json.dumps(record), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()

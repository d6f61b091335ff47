"""The re-rank model's dense paths against its compiled ones below 30,000 labels: the default
fit (``XMCClassifier()``) of each set with ``holoxmc.models.rerank.model.DENSE_UP_TO`` at
its value and at 0 (every L on the compiled shortlists and margins: ``product_top``,
``label_margins``, and the per-label weights kept as rows only), side by side in one process,
the repeats interleaved; fit seconds, test P@1 / P@5 and top-5 milliseconds per row.

Run: HOLOXMC_DATA=/work/shared/data python benchmarks/dense_cutoff.py --sets bibtex delicious realistic-10k \\
         --repeats 2 [--out benchmarks/results/dense_cutoff.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from panel import load_set  # noqa: E402

from holoxmc.estimator import XMCClassifier  # noqa: E402
from holoxmc.metrics import precision_at_k  # noqa: E402
from holoxmc.models.rerank import model as rerank_model  # noqa: E402

DEFAULT = rerank_model.DENSE_UP_TO


def run(train, test, cutoff: int) -> dict:  # noqa: ANN001
    rerank_model.DENSE_UP_TO = cutoff
    try:
        started = time.perf_counter()
        clf = XMCClassifier(progress=False).fit(train.X, train.Y)
        fit_s = time.perf_counter() - started
        started = time.perf_counter()
        top = clf.predict_topk(test.X, 5)
        predict_ms = 1000 * (time.perf_counter() - started) / test.X.shape[0]
    finally:
        rerank_model.DENSE_UP_TO = DEFAULT
    return {"fit_s": fit_s, "predict_ms": predict_ms, "P@1": precision_at_k(test.Y, top, k=1),
            "P@5": precision_at_k(test.Y, top, k=5), "head": clf.head_}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["bibtex", "delicious", "realistic-10k"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    tiny_train, tiny_test = load_set("mlc-tiny")
    run(tiny_train, tiny_test, 0)  # the kernels compiled (or read from numba's cache) before timing
    for name in args.sets:
        train, test = load_set(name)
        runs: dict[str, list[dict]] = {"dense": [], "compiled": []}
        for _ in range(args.repeats):
            runs["dense"].append(run(train, test, DEFAULT))
            runs["compiled"].append(run(train, test, 0))
        record = {"set": name, "labels": int(train.Y.shape[1]), "load_avg": os.getloadavg()[0],
                  "date": time.strftime("%Y-%m-%d %H:%M")}
        for path, results in runs.items():
            record[path] = {"fit_s": statistics.median(r["fit_s"] for r in results),
                            "predict_ms": statistics.median(r["predict_ms"] for r in results),
                            "P@1": results[0]["P@1"], "P@5": results[0]["P@5"], "head": results[0]["head"],
                            "all_fit_s": [round(r["fit_s"], 2) for r in results]}
        print(json.dumps(record), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()

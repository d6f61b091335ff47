"""Two paths of the re-rank model's scoring, each the default fit (``XMCClassifier()``) of each
set side by side in one process, the repeats interleaved; fit seconds, test P@1 / P@5 and
top-5 milliseconds per row:

* ``--compare cutoff`` (the default): below 30,000 labels, its dense paths against its compiled
  ones, ``holoxmc.models.rerank.model.DENSE_UP_TO`` at its value and at 0 (every L on the
  compiled shortlists and margins, ``product_top`` and ``label_margins``, the per-label
  weights kept as rows only);
* ``--compare products``: its dense ``rows x L`` products (every label's retriever scores and
  margins) by the compiled loop (``dense_product``, where ``COMPILED_PRODUCT`` says) against
  scipy's products at every size.

Run: HOLOXMC_DATA=/work/shared/data python benchmarks/dense_cutoff.py --sets bibtex delicious realistic-10k
         --repeats 2 [--compare products] [--out benchmarks/results/dense_cutoff.jsonl]
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

#: ``--compare`` choice: (the module constant, its other value, the names of the two paths).
COMPARED = {"cutoff": ("DENSE_UP_TO", 0, ("dense", "compiled")),
            "products": ("COMPILED_PRODUCT", {"entries": 1 << 62, "labels": 1 << 62}, ("compiled", "scipy"))}


def run(train, test, name: str, value: object) -> dict:  # noqa: ANN001
    default = getattr(rerank_model, name)
    setattr(rerank_model, name, value)
    try:
        started = time.perf_counter()
        groups = getattr(train, "groups", None)  # as panel.py and `holoxmc train` fit
        clf = XMCClassifier(progress=False).fit(train.X, train.Y, **({} if groups is None else {"groups": groups}))
        fit_s = time.perf_counter() - started
        started = time.perf_counter()
        top = clf.predict_topk(test.X, 5)
        predict_ms = 1000 * (time.perf_counter() - started) / test.X.shape[0]
    finally:
        setattr(rerank_model, name, default)
    return {"fit_s": fit_s, "predict_ms": predict_ms, "P@1": precision_at_k(test.Y, top, k=1),
            "P@5": precision_at_k(test.Y, top, k=5), "head": clf.head_}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["bibtex", "delicious", "realistic-10k"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--compare", choices=list(COMPARED), default="cutoff")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    constant, other, (first, second) = COMPARED[args.compare]
    default = getattr(rerank_model, constant)
    tiny_train, tiny_test = load_set("mlc-tiny")
    for value in (0, 1 << 62):  # the kernels compiled (or read from numba's cache) before timing
        run(tiny_train, tiny_test, "DENSE_UP_TO", value)
        run(tiny_train, tiny_test, "COMPILED_PRODUCT", {"entries": value, "labels": value})
    for name in args.sets:
        train, test = load_set(name)
        runs: dict[str, list[dict]] = {first: [], second: []}
        for _ in range(args.repeats):
            runs[first].append(run(train, test, constant, default))
            runs[second].append(run(train, test, constant, other))
        record = {"set": name, "labels": int(train.Y.shape[1]), "compare": args.compare,
                  "load_avg": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d %H:%M")}
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

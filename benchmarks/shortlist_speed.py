"""The re-rank model's sparse PIFA shortlists and margins, the paths before 2026-11-30
(scipy's product then a selection in Python, ``sparse_row_top``; the margins as a gathered
copy of the weight rows times a row-repeated copy of ``X``) against the compiled kernels
(:mod:`holoxmc.models.rerank.kernels`), side by side in one process.

The retriever is built as :func:`~holoxmc.models.rerank.fit.fit_rerank` builds it (unit rows,
the pruned PIFA index of ``RerankConfig().postings`` labels a feature, its column blocks, the
shortlist of :func:`shortlist_rule`); the first ``--rows`` training rows are scored by both
paths at each thread count, the repeats interleaved, and the medians reported with a check
that both give the same labels and scores. One JSON line is appended to ``--out``.

Usage:
    python benchmarks/shortlist_speed.py realistic-670k --rows 8192 --repeats 3 \\
        --out benchmarks/results/shortlist_speed.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np
import scipy.sparse as sp

from holoxmc.data import load
from holoxmc.models.rerank import model as rerank_model
from holoxmc.models.rerank.fit import RerankConfig, pifa_index, shortlist_rule
from holoxmc.models.rerank.model import RerankModel
from holoxmc.models.rerank.model import BLOCK_ENTRIES
from holoxmc.sparse import cost_chunks, in_threads, l2_rows, sparse_row_top


def scipy_shortlists(model: RerankModel, X: sp.csr_matrix, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """The path before the kernel: each chunk's CSR product, then ``sparse_row_top``."""
    n, k = X.shape[0], model.shortlist
    labels, scores = np.empty((n, k), np.int64), np.empty((n, k), np.float32)
    cost = np.bincount(np.repeat(np.arange(n), np.diff(X.indptr)), weights=model._postings[X.indices], minlength=n)

    def chunk(span: tuple[int, int]) -> None:
        start, stop = span
        labels[start:stop], scores[start:stop] = sparse_row_top(model.index_product(X[start:stop]), k)
    in_threads(chunk, list(cost_chunks(cost, rerank_model.SPARSE_CHUNK_ENTRIES)), threads)
    return labels, scores


def scipy_margins(model: RerankModel, X: sp.csr_matrix, labels: np.ndarray) -> np.ndarray:
    """The margins' path before the kernel (one thread; the bias added)."""
    n, s = labels.shape
    out = np.zeros((n, s), np.float32)
    cost = np.diff(model.weight_rows.indptr)[labels].sum(axis=1) + s * np.diff(X.indptr)
    for start, stop in cost_chunks(cost, BLOCK_ENTRIES):
        W = model.weight_rows[labels[start:stop].ravel()]
        R = X[np.repeat(np.arange(start, stop), s)]
        out[start:stop] = np.asarray(W.multiply(R).sum(axis=1), dtype=np.float32).reshape(stop - start, s)
    return out + model.bias[labels]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out")
    args = parser.parse_args()
    train = load(args.data, "train")
    X, Y = l2_rows(sp.csr_matrix(train.X, dtype=np.float32)), sp.csr_matrix(train.Y)
    start = time.perf_counter()
    config = RerankConfig()
    shortlist = shortlist_rule(Y.shape[1], Y.nnz / Y.shape[0])
    centroids = pifa_index(X, Y, config.postings).T
    model = RerankModel(centroids, centroids.T, np.zeros(Y.shape[1], np.float32), shortlist, 0.0)
    del centroids
    index_s = time.perf_counter() - start
    R = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)[:args.rows]
    model._sparse_shortlists(R[:16], 1)  # the kernel compiled (or read from numba's cache) before timing
    listed = model._sparse_shortlists(R, 1)[0]
    model.margins(R[:16], listed[:16], threads=1)
    paths = {"scipy": lambda t: scipy_shortlists(model, R, t), "kernel": lambda t: model._sparse_shortlists(R, t),
             "margins_scipy": lambda t: scipy_margins(model, R, listed),
             "margins_kernel": lambda t: model.margins(R, listed, threads=t)}
    if Y.shape[1] <= rerank_model.DENSE_UP_TO:  # the path the model takes there: dense rows x L blocks, one thread
        paths["dense"] = lambda t: model.shortlists(R, threads=t)
    seconds: dict[str, list[float]] = {f"{name}@{t}": [] for name in paths for t in args.threads}
    results = {}
    for _ in range(args.repeats):
        for t in args.threads:
            for name, run in paths.items():
                begin = time.perf_counter()
                results[name] = run(t)
                seconds[f"{name}@{t}"].append(time.perf_counter() - begin)
    same = all(np.array_equal(a, b) for a, b in zip(results["scipy"], results["kernel"]))
    dense_scores_close = bool(np.allclose(results["dense"][1], results["kernel"][1], rtol=1e-5, atol=1e-6)) \
        if "dense" in results else None
    margins_close = bool(np.allclose(results["margins_scipy"], results["margins_kernel"], rtol=1e-5, atol=1e-6))
    line = {"data": args.data, "rows": R.shape[0], "labels": Y.shape[1], "shortlist": shortlist,
            "postings": config.postings, "index_blocks": len(model._index), "index_s": round(index_s, 1),
            "postings_read_per_row": round(float(model._postings[R.indices].sum()) / R.shape[0], 1),
            "ms_per_1000_rows": {key: round(1000 * statistics.median(v) / R.shape[0] * 1000, 1)
                                 for key, v in seconds.items()},
            "seconds": {key: [round(s, 2) for s in v] for key, v in seconds.items()},
            "same_labels_and_scores": same, "margins_within_float32_rounding": margins_close,
            "dense_path_scores_within_rounding": dense_scores_close,
            "margins_kernel_path": "kernel" if Y.shape[1] > rerank_model.DENSE_UP_TO
            else "the model's dense rows x L margins (L <= DENSE_UP_TO)",
            "margins_scipy_path": "one thread at every thread count (as before the kernel)", "load_avg": os.getloadavg(), "machine": platform.machine(),
            "date": time.strftime("%Y-%m-%d")}
    print(json.dumps(line, indent=1))
    if args.out:
        with open(args.out, "a") as f:
            f.write(json.dumps(line) + "\n")


if __name__ == "__main__":
    main()

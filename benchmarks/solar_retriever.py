"""SOLAR's inverted-index candidates as the re-rank model's retriever, against its PIFA shortlist
(issue 48, item 4): on one test split, each retriever's Recall@k of its top ``k`` candidates,
and the P@1 / P@5 of the re-rank model's per-label scorers over each candidate set (alone, and
mixed with the retriever's score at the re-rank model's own ``alpha``, chosen on validation
rows; nothing here is chosen on the test rows).

The SOLAR model is a finished run folder (``RUN_DIR``, e.g. the one ``benchmarks/scaling.py``
or ``holoxmc train --model solar --out RUN_DIR`` wrote); the re-rank model is fitted here at the
library's defaults (:func:`~holoxmc.models.rerank.fit.fit_rerank`) on the training rows less a
seeded validation share (SOLAR's ``val_fraction``, 10 %), which chooses its ``alpha``.

Usage:
    python benchmarks/solar_retriever.py RUN_DIR realistic-100k --max-test 2000 --recall-k 100 \
        --out benchmarks/results/solar_scale.jsonl
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch

from holoxmc.data import load
from holoxmc.models.rerank.fit import RerankConfig, fit_rerank
from holoxmc.metrics import evaluate
from holoxmc.models.solar.model import SolarModel
from holoxmc.sparse import l2_rows
from holoxmc.train.trainer import split_validation


def reranked(model: Any, X: sp.csr_matrix, labels: np.ndarray, retriever: np.ndarray, alpha: float) -> np.ndarray:
    """``labels`` (``-1`` = none) ordered by ``alpha * sigmoid(scorer) + (1 - alpha) * retriever``."""
    safe = np.where(labels < 0, 0, labels)
    mixed = alpha * model.rescore(X, safe) + (1.0 - alpha) * retriever
    mixed[labels < 0] = -np.inf
    order = np.argsort(-mixed, axis=1, kind="stable")
    return np.take_along_axis(labels, order, axis=1)


def measure(name: str, model: Any, X: sp.csr_matrix, Y: sp.csr_matrix, labels: np.ndarray, scores: np.ndarray,
            k: int, seconds: float) -> dict[str, Any]:
    """The retriever's Recall@k and P@k, then the re-rank scorers' P@k over its candidates."""
    retrieved = evaluate(labels, Y, recall_ks=(k,))
    record: dict[str, Any] = {"retriever": name, f"Recall@{k}": round(retrieved[f"Recall@{k}"], 2),
                              "retriever_P@1": round(retrieved["P@1"], 2), "retriever_P@5": round(retrieved["P@5"], 2),
                              "retrieve_ms_per_point": round(1e3 * seconds / X.shape[0], 3),
                              "candidates_per_row": round(float((labels >= 0).sum(1).mean()), 1)}
    for tag, alpha in (("scorers", 1.0), ("mixed", model.alpha)):
        metrics = evaluate(reranked(model, X, labels, scores, alpha), Y)
        record[f"{tag}_P@1"], record[f"{tag}_P@5"] = round(metrics["P@1"], 2), round(metrics["P@5"], 2)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("data")
    parser.add_argument("--max-test", type=int, default=None)
    parser.add_argument("--recall-k", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train, test = load(args.data, "train"), load(args.data, "test")
    X, Y = (test.X, test.Y) if args.max_test is None else (test.X[: args.max_test], test.Y[: args.max_test])
    X = sp.csr_matrix(X, dtype=np.float32)
    solar = SolarModel.load(args.run_dir)
    fit_rows, val_rows = split_validation(train.X.shape[0], solar.config.train.val_fraction, solar.config.seed)
    begun = time.perf_counter()
    rerank = fit_rerank(train.X[fit_rows], train.Y[fit_rows], RerankConfig(), train.X[val_rows], train.Y[val_rows])
    fit_seconds = time.perf_counter() - begun
    k = args.recall_k
    unit = l2_rows(X)
    wide = copy.copy(rerank)
    wide.shortlist = k  # the PIFA retriever's top k (the model proposes rerank.shortlist)
    begun = time.perf_counter()
    pifa_labels, pifa_scores = wide.shortlists(unit)
    pifa_seconds = time.perf_counter() - begun
    begun = time.perf_counter()
    solar_labels, solar_scores, _ = solar.predict(X, k=k)
    solar_seconds = time.perf_counter() - begun
    solar_scores = np.where(solar_labels < 0, 0.0, solar_scores).astype(np.float32)
    common = {"data": args.data, "n_test": int(X.shape[0]), "rerank_shortlist": rerank.shortlist,
              "rerank_alpha": rerank.alpha, "rerank_fit_s": round(fit_seconds, 1), "solar_chunks": solar.config.n_chunks,
              "solar_buckets": solar.config.n_buckets, "threads": args.threads, "load": os.getloadavg()[0]}
    default = evaluate(rerank.predict_topk(X, 5)[0], Y)
    records = [{**common, "retriever": f"pifa (the re-rank model as fitted, shortlist {rerank.shortlist})",
                "mixed_P@1": round(default["P@1"], 2), "mixed_P@5": round(default["P@5"], 2)},
               {**common, **measure("pifa", rerank, unit, Y, pifa_labels, pifa_scores, k, pifa_seconds)},
               {**common, **measure("solar", rerank, unit, Y, solar_labels, solar_scores, k, solar_seconds)}]
    for record in records:
        print(json.dumps(record), flush=True)
        if args.out:
            with args.out.open("a") as f:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()

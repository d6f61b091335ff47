"""Frequent labels on every re-rank shortlist, measured on validation rows only
(docs/results/model-gap.md, docs/tuning.md): the re-rank model's ``frequent_labels``.

The ``f`` most frequent training labels are on every training shortlist (their scorers train
against every row) and on every prediction shortlist (with their retriever score, as any
label's): ``RerankConfig(frequent_labels=f)``; ``f = 0`` is the model without them and
``--f -1`` the library's rule (``frequent_labels=None``,
:func:`holoxmc.models.rerank.fit.frequent_labels_rule`). (The first runs, before the setting
existed, patched the same two steps into ``fit_rerank`` from this script; the setting was built
to do what the patch did.)

Protocol per set: the TRAINING file only, split by ``split_validation`` (groups where the set
has them, a seeded row split otherwise) into report (10 %), then alpha (10 % of all) and fit
(the rest); ``fit_rerank(X_fit, Y_fit, RerankConfig(frequent_labels=f), X_alpha, Y_alpha)`` for each ``f``;
P@1/3/5, the P@5 points of each label band (the labels' counts in the fit rows) and the
shortlist recall on the report rows, and paired counts against the first ``f`` (report rows
whose top 1 turned right / wrong, top-5 hits won / lost). ``--seeds``: more splits. The test
file is never read.

Command (one JSON line per (set, f) appended to ``--out``)::

    OMP_NUM_THREADS=2 MKL_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 HOLOXMC_DATA=/work/shared/data \
        python benchmarks/frequent_labels.py --sets reuters appstream debtags bibtex delicious --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

import holoxmc.models.rerank.fit as rfit
from holoxmc.data import load
from holoxmc.data.groups import check_groups
from holoxmc.models.rerank.model import RerankModel
from holoxmc.train.trainer import split_validation

REAL = Path("~/.cache/holoxmc/realdata").expanduser()
SETS = {"reuters": REAL / "reuters", "appstream": REAL / "appstream", "debtags": REAL / "debtags",
        "bibtex": "bibtex", "delicious": "delicious"}
BANDS = ((0, 0), (1, 2), (3, 9), (10, 99), (100, None))


def report(model: RerankModel, X: sp.csr_matrix, Y: sp.csr_matrix, counts: np.ndarray) -> dict:
    parts = [model.shortlist_scores(X[start:start + model.batch_rows()])
             for start in range(0, X.shape[0], model.batch_rows())]  # a repeated label: -1, -inf
    labels, mixed = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    Y = sp.csr_matrix(Y, dtype=bool)
    rows = np.repeat(np.arange(len(labels)), labels.shape[1])
    hit_all = np.asarray(Y[rows, np.maximum(labels, 0).ravel()]).reshape(labels.shape) & (labels >= 0)
    listed = hit_all & np.isfinite(mixed)
    order = np.argsort(-mixed, axis=1, kind="stable")[:, :5]
    top, hit = np.take_along_axis(labels, order, 1), np.take_along_axis(hit_all, order, 1)
    out = {f"P@{k}": round(100 * hit[:, :k].sum() / (k * len(top)), 2) for k in (1, 3, 5)}
    out["hits"] = hit
    out["shortlist_recall"] = round(100 * listed.sum() / max(Y.nnz, 1), 2)
    for lo, hi in BANDS:
        band = (counts >= lo) & (counts <= (np.inf if hi is None else hi))
        out[f"P@5_points_{lo}+" if hi is None else f"P@5_points_{lo}-{hi}"] = round(100 * (hit & band[top]).sum() / (5 * len(top)), 2)
    return out


def run_set(name: str, fs: list[int], out: Path, command: str, seed: int) -> None:
    base = None  # the first f's report hits: paired counts of each f against it
    data = load(SETS[name], "train", cache_dir=Path("/tmp/panel-cache"))
    X, Y = sp.csr_matrix(data.X, dtype=np.float32), sp.csr_matrix(data.Y, dtype=np.float32)
    groups = getattr(data, "groups", None)
    codes = None if groups is None else check_groups(groups, X.shape[0])
    rest, rep = split_validation(X.shape[0], 0.1, seed, codes)
    fit, alpha = split_validation(len(rest), 0.1 / 0.9, seed + 1, None if codes is None else codes[rest])
    fit, alpha = rest[fit], rest[alpha]
    counts = np.asarray(Y[fit].getnnz(axis=0))
    for asked in fs:
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        config = rfit.RerankConfig(frequent_labels=None if asked < 0 else asked)
        model = rfit.fit_rerank(X[fit], Y[fit], config, X[alpha], Y[alpha])
        fit_s = time.perf_counter() - t0
        scored = report(model, X[rep], Y[rep], counts)
        hit = scored.pop("hits")
        base = hit if base is None else base
        paired = {"vs_f": fs[0], "P@1_rows_won": int((hit[:, 0] & ~base[:, 0]).sum()),
                  "P@1_rows_lost": int((base[:, 0] & ~hit[:, 0]).sum()),
                  "top5_hits_won": int(np.maximum(hit.sum(1) - base.sum(1), 0).sum()),
                  "top5_hits_lost": int(np.maximum(base.sum(1) - hit.sum(1), 0).sum())}
        f = int(model.always.size)
        row = {"set": name, "split_seed": seed, "f": f, **({"f_rule": "base rate"} if asked < 0 else {}),
               "rows": {"fit": len(fit), "alpha": len(alpha), "report": len(rep)},
               "grouped": codes is not None, "L": Y.shape[1], "D": X.shape[1], "shortlist": model.shortlist,
               "head_min_count": int(counts[model.always].min()) if f else None, "alpha": model.alpha,
               "fit_s": round(fit_s, 1), **scored, "paired": paired,
               "command": command, "load": [load0, os.getloadavg()[0]]}
        print(json.dumps(row), flush=True)
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=["reuters", "appstream", "debtags"], choices=list(SETS))
    parser.add_argument("--f", nargs="+", type=int, default=[0, 5, 10, 20],
                        help="head sizes; -1: the library's rule (frequent_labels=None)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="split seeds (report: s, alpha: s + 1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "frequent_labels.jsonl")
    args = parser.parse_args(argv)
    command = " ".join(["python benchmarks/frequent_labels.py", *(argv if argv is not None else sys.argv[1:])])
    for seed in args.seeds:
        for name in args.sets:
            run_set(name, args.f, args.out, command, seed)


if __name__ == "__main__":
    main()

"""Frequent labels on every re-rank shortlist: a validation-only measurement of a proposed
change (docs/results/model-gap.md), made without touching ``src/``.

Proposal: the ``f`` most frequent training labels ("head") are on EVERY training shortlist (so
their scorers train against every row) and on every prediction shortlist (with their retriever
score, computed as for any label). ``f = 0`` is the model as it is.

What this script patches, only inside its own process and only while ``HEAD`` is set:

1. ``holoxmc.models.rerank.fit.training_shortlists`` (looked up by ``fit_rerank`` at call
   time): the original ``(n, size)`` shortlists get the ``f`` head labels appended as ``f``
   more columns. A head label already on a row's shortlist is then there twice, which
   ``_membership`` ignores (it reads only the pattern), so each head scorer trains on every
   fit row.
2. ``RerankModel.shortlists`` (the class method; used by the fit's alpha choice and by the
   scoring below): when it returns the ordinary ``(n, s)`` shortlist, ``f`` columns are
   appended: the head labels with their retriever scores (``index_product`` column plus the
   prior, as ``retriever_scores`` computes them; the default model has no kNN). The training
   shortlists slice ``[:, :size]`` off the front, so they are unchanged by this patch. A head
   label already on the shortlist appears twice with the same scores: harmless for the fit's
   P@1 alpha choice, and removed (its second copy scored ``-inf``) by :func:`scores` here.

Protocol per set: the TRAINING file only, split by ``split_validation`` (groups where the set
has them, a seeded row split otherwise) into report (10 %), then alpha (10 % of all) and fit
(the rest); ``fit_rerank(X_fit, Y_fit, RerankConfig(), X_alpha, Y_alpha)`` for each ``f``;
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
from holoxmc.sparse import l2_rows
from holoxmc.train.trainer import split_validation

REAL = Path("~/.cache/holoxmc/realdata").expanduser()
SETS = {"reuters": REAL / "reuters", "appstream": REAL / "appstream", "debtags": REAL / "debtags",
        "bibtex": "bibtex", "delicious": "delicious"}
BANDS = ((0, 0), (1, 2), (3, 9), (10, 99), (100, None))
HEAD: np.ndarray | None = None  # the head labels while a patched fit or scoring runs

_training_shortlists = rfit.training_shortlists
_shortlists = RerankModel.shortlists


def training_shortlists(retriever, X, **kw):
    out = _training_shortlists(retriever, X, **kw)
    if HEAD is None or not len(HEAD):
        return out
    return np.hstack([out, np.broadcast_to(HEAD.astype(out.dtype), (out.shape[0], len(HEAD)))])


def shortlists(self, X, exclude=None, **kw):
    labels, scores = _shortlists(self, X, exclude, **kw)
    if HEAD is None or not len(HEAD) or labels.shape[1] != self.shortlist:  # inner batches: patched already
        return labels, scores
    head = np.asarray(self.index_product(X)[:, HEAD].toarray(), np.float32) + self.prior[HEAD]
    return (np.hstack([labels, np.broadcast_to(HEAD, (len(labels), len(HEAD)))]),
            np.hstack([scores, head]).astype(np.float32))


rfit.training_shortlists = training_shortlists
RerankModel.shortlists = shortlists


def scores(model: RerankModel, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """Each row's (deduplicated) shortlist labels and mixed scores (``-inf``: a second copy)."""
    parts = []
    for start in range(0, X.shape[0], model.batch_rows()):
        rows = l2_rows(X[start:start + model.batch_rows()])
        labels, retr = model.shortlists(rows)
        mixed = model.mix(model.rescore(rows, labels), retr)
        s = model.shortlist
        dup = (labels[:, s:, None] == labels[:, None, :s]).any(-1)
        mixed[:, s:][dup] = -np.inf
        parts.append((labels, mixed))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def report(model: RerankModel, X: sp.csr_matrix, Y: sp.csr_matrix, counts: np.ndarray) -> dict:
    labels, mixed = scores(model, X)
    Y = sp.csr_matrix(Y, dtype=bool)
    hit_all = np.asarray(Y[np.repeat(np.arange(len(labels)), labels.shape[1]), labels.ravel()]).reshape(labels.shape)
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


def base_rate_f(counts: np.ndarray, rows: int) -> int:
    """``f`` of the base-rate rule (``--f -1``): the library's
    :func:`holoxmc.models.rerank.fit.frequent_labels_rule` at the shortlist
    :func:`~holoxmc.models.rerank.fit.shortlist_rule` gives (labels more often right than an
    average shortlist entry).

    Example:
        >>> base_rate_f(np.array([60, 30] + [1] * 98), 100)  # 1.88 labels a row, shortlist 50: >= 3.76 %
        2
    """
    per_row = counts.sum() / max(rows, 1)
    return rfit.frequent_labels_rule(counts, rows, rfit.shortlist_rule(len(counts), per_row))


def run_set(name: str, fs: list[int], out: Path, command: str, seed: int) -> None:
    global HEAD
    base = None  # the first f's report hits: paired counts of each f against it
    data = load(SETS[name], "train", cache_dir=Path("/tmp/panel-cache"))
    X, Y = sp.csr_matrix(data.X, dtype=np.float32), sp.csr_matrix(data.Y, dtype=np.float32)
    groups = getattr(data, "groups", None)
    codes = None if groups is None else check_groups(groups, X.shape[0])
    rest, rep = split_validation(X.shape[0], 0.1, seed, codes)
    fit, alpha = split_validation(len(rest), 0.1 / 0.9, seed + 1, None if codes is None else codes[rest])
    fit, alpha = rest[fit], rest[alpha]
    counts = np.asarray(Y[fit].getnnz(axis=0))
    ranked = np.argsort(-counts, kind="stable")
    for asked in fs:
        f = asked if asked >= 0 else base_rate_f(counts, len(fit))
        HEAD = ranked[:f].astype(np.int64)
        load0, t0 = os.getloadavg()[0], time.perf_counter()
        # the library's own rule off: HEAD, patched in above, is the only always-listed set
        model = rfit.fit_rerank(X[fit], Y[fit], rfit.RerankConfig(frequent_labels=0), X[alpha], Y[alpha])
        fit_s = time.perf_counter() - t0
        scored = report(model, X[rep], Y[rep], counts)
        hit = scored.pop("hits")
        base = hit if base is None else base
        paired = {"vs_f": fs[0], "P@1_rows_won": int((hit[:, 0] & ~base[:, 0]).sum()),
                  "P@1_rows_lost": int((base[:, 0] & ~hit[:, 0]).sum()),
                  "top5_hits_won": int(np.maximum(hit.sum(1) - base.sum(1), 0).sum()),
                  "top5_hits_lost": int(np.maximum(base.sum(1) - hit.sum(1), 0).sum())}
        row = {"set": name, "split_seed": seed, "f": f, **({"f_rule": "base rate"} if asked < 0 else {}), "rows": {"fit": len(fit), "alpha": len(alpha), "report": len(rep)},
               "grouped": codes is not None, "L": Y.shape[1], "D": X.shape[1], "shortlist": model.shortlist,
               "head_min_count": int(counts[HEAD].min()) if f else None, "alpha": model.alpha,
               "fit_s": round(fit_s, 1), **scored, "paired": paired,
               "command": command, "load": [load0, os.getloadavg()[0]]}
        HEAD = None
        print(json.dumps(row), flush=True)
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=["reuters", "appstream", "debtags"], choices=list(SETS))
    parser.add_argument("--f", nargs="+", type=int, default=[0, 5, 10, 20],
                        help="head sizes; -1: the base-rate rule (base_rate_f)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="split seeds (report: s, alpha: s + 1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "frequent_labels.jsonl")
    args = parser.parse_args(argv)
    command = " ".join(["python benchmarks/frequent_labels.py", *(argv if argv is not None else sys.argv[1:])])
    for seed in args.seeds:
        for name in args.sets:
            run_set(name, args.f, args.out, command, seed)


if __name__ == "__main__":
    main()

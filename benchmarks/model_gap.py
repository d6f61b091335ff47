"""Where holoxmc's re-rank model loses to omikuji on identical features (issue 49, item 4):
a diagnosis, not a choice of settings.

For one real text set and one featurisation (``--features``, default ``words``: the
libraries' usual best P@5 in docs/results/panel.md), the train/test TF-IDF matrices are
built exactly as ``benchmarks/panel.py --features`` gives them to the libraries
(:data:`benchmarks.panel.FEATURISATIONS`, ``holoxmc.data.load`` of the raw-text folder, fitted
on the training texts); then, on those same matrices:

* ``holoxmc-default``: ``XMCClassifier(progress=False)``, i.e. the default ``head="auto"``,
  fitted with the file's ``groups`` (its validation split keeps a group on one side). Where
  it keeps the re-rank model (``head_ == "rerank"``), its served
  :class:`~holoxmc.models.rerank.model.RerankModel` is taken apart on the test split: the
  retriever's shortlist recall at the model's shortlist size (overall and per label-frequency
  band), the P@5 a perfect re-scorer of that shortlist would reach, and P@1/P@3/P@5 with
  the mix weight ``alpha`` replaced by each of :data:`ALPHAS` (0: the retriever alone, 1:
  the per-label scorers alone). The validation rows that chose ``alpha`` are scored the same
  way (P@1, P@5 per alpha, with the selection-run model that chose it, captured as it is
  finished on every row: no extra fit, nothing in the fit changed).
* ``omikuji``: its default hyper-parameters, trained as ``benchmarks/baselines.py`` trains it
  (the same input file, ``n_threads=--threads``), its top-5 (the panel's figures) and its
  top-``s`` (``s`` the re-rank shortlist size) for a recall comparable to the shortlist's.

The model's own mix (its chosen ``alpha``) is also ranked over other candidate sets than its
shortlist (up to ``DENSE_UP_TO`` labels, where the model computes every label's retriever
score and margin anyway): every label, the shortlist plus the ten most frequent training
labels, the shortlist plus the scorers' own top 5; on the test split (diagnosis only) and on
the validation rows that chose ``alpha`` (with the selection-run model).

For each model: P@1/P@3/P@5 (``holoxmc.metrics.evaluate``, as the panel), and per band of
the labels' *training* counts (:data:`BANDS`): the test label occurrences, each model's
recall of them in its top 5, the points of P@5 its correct top-5 predictions in the band
make (they sum to P@5), the share of its correct top-5 predictions in the band and the share
of all its top-5 slots spent on the band. After both, the labels omikuji ranks correctly in
its top 5 and the re-rank model does not: how many lie inside the re-rank shortlist (then the
scorers or the mix lost them) or outside it (the retriever did).

The alpha sweep is read on the TEST split as a diagnosis only: nothing may be chosen from it
(choices are made on validation splits, leave-one-set-out).

One JSON line per (set, model) is appended to ``--out`` with the command and the load
average; each set's predictions are kept in ``--keep`` (``.npz``) for further looks.

Run it with OMP_NUM_THREADS / MKL_NUM_THREADS / OPENBLAS_NUM_THREADS set to ``--threads``.

Usage:
    nice -n 19 python benchmarks/model_gap.py --sets reuters --threads 2 --cache-dir /tmp/panel-cache
    nice -n 19 python benchmarks/model_gap.py --sets appstream debtags --features words
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from baselines import omikuji_top, omikuji_train  # noqa: E402
from panel import load_set  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "model_gap.jsonl"
#: the real raw-text sets with a group field, built by benchmarks/realdata/build_*.py
SETS = ("reuters", "appstream", "debtags")
#: label-frequency bands: (name, least, most) training count, inclusive
BANDS = (("0 (unseen)", 0, 0), ("1-2", 1, 2), ("3-9", 3, 9), ("10-99", 10, 99), ("100+", 100, np.inf))
#: the mix weights of the sweep (those the fit chooses among: holoxmc.models.rerank.fit.ALPHAS)
ALPHAS = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
MODELS = ("omikuji", "holoxmc-default")


def load_pair(name: str, features: str, cache_dir: Path | None) -> tuple[Any, Any]:
    """``(train, test)`` of a realdata set under a panel featurisation (groups kept), read by
    the panel's own loader (its ``debtags-grouped`` is this script's ``debtags``)."""
    return load_set({"debtags": "debtags-grouped"}.get(name, name), features, cache_dir)


def band_of(counts: np.ndarray) -> np.ndarray:
    """``(L,)`` band index of each label by its training count."""
    out = np.empty(len(counts), np.int64)
    for b, (_, lo, hi) in enumerate(BANDS):
        out[(counts >= lo) & (counts <= hi)] = b
    return out


def hits_matrix(top: np.ndarray, Y: sp.csr_matrix) -> np.ndarray:
    """``(n, k)`` booleans: whether each predicted label is one of the row's true labels (-1: no)."""
    rows = np.repeat(np.arange(top.shape[0]), top.shape[1])
    cols = top.ravel()
    ok = cols >= 0
    out = np.zeros(top.size, bool)
    out[ok] = np.asarray(Y[rows[ok], cols[ok]]).ravel() != 0
    return out.reshape(top.shape)


def band_table(top5: np.ndarray, Y: sp.csr_matrix, bands: np.ndarray) -> dict[str, dict[str, float]]:
    """Per band: test occurrences, recall@5, P@5 points, share of hits, share of top-5 slots."""
    Y = sp.csr_matrix(Y)
    n = Y.shape[0]
    hit = hits_matrix(top5, Y)
    occurrences = np.bincount(bands[Y.indices], minlength=len(BANDS))
    predicted = top5[top5 >= 0]
    hit_labels = top5[hit]
    hits = np.bincount(bands[hit_labels], minlength=len(BANDS))
    slots = np.bincount(bands[predicted], minlength=len(BANDS))
    out = {}
    for b, (name, _, _) in enumerate(BANDS):
        out[name] = {"test_occurrences": int(occurrences[b]),
                     "recall@5": 100.0 * hits[b] / occurrences[b] if occurrences[b] else None,
                     "P@5_points": 100.0 * hits[b] / (5 * n),
                     "share_of_hits": 100.0 * hits[b] / max(hits.sum(), 1),
                     "share_of_slots": 100.0 * slots[b] / max(slots.sum(), 1)}
    return out


def recall_in(lists: np.ndarray, Y: sp.csr_matrix, bands: np.ndarray) -> dict[str, Any]:
    """Share (%) of the true test label occurrences inside ``lists`` (``(n, s)``), overall and
    per band, and the P@5 a perfect re-scorer of those lists would reach."""
    Y = sp.csr_matrix(Y)
    hit = hits_matrix(lists, Y)
    inside = np.bincount(bands[lists[hit]], minlength=len(BANDS))
    occurrences = np.bincount(bands[Y.indices], minlength=len(BANDS))
    bound = np.minimum(hit.sum(axis=1), 5).sum() / (5 * Y.shape[0])
    return {"size": int(lists.shape[1]), "recall": 100.0 * inside.sum() / max(Y.nnz, 1),
            "recall_by_band": {name: (100.0 * inside[b] / occurrences[b] if occurrences[b] else None)
                               for b, (name, _, _) in enumerate(BANDS)},
            "perfect_rescorer_P@5": 100.0 * bound}


def metrics(top: np.ndarray, Y: sp.csr_matrix, inv_prop: np.ndarray) -> dict[str, float]:
    from holoxmc.metrics import evaluate

    m = evaluate(top, Y, inv_prop=inv_prop, ks=(1, 3, 5))
    return {k: float(m[k]) for k in ("P@1", "P@3", "P@5", "PSP@5")}


def rerank_parts(model: Any, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(shortlist labels, retriever scores, re-rank scores)``, each ``(n, s)``, of the rows of
    ``X`` as :meth:`RerankModel.predict_topk` computes them (unit rows, batch by batch)."""
    from holoxmc.sparse import l2_rows

    X = sp.csr_matrix(X, dtype=np.float32)
    step = max(1, min(1024, model.batch_rows()))
    labels, retriever, rerank = [], [], []
    for start in range(0, X.shape[0], step):
        rows = l2_rows(X[start:start + step])
        short, scores = model.shortlists(rows)
        labels.append(short)
        retriever.append(scores)
        rerank.append(model.rescore(rows, short))
    return np.concatenate(labels), np.concatenate(retriever), np.concatenate(rerank)


def top_at(alpha: float, labels: np.ndarray, retriever: np.ndarray, rerank: np.ndarray, k: int = 5) -> np.ndarray:
    """Top-``k`` labels by ``alpha * rerank + (1 - alpha) * retriever`` (the model's mix and tie order)."""
    mixed = (alpha * rerank + (1.0 - alpha) * retriever).astype(np.float32)
    order = np.argsort(-mixed, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(labels, order, axis=1)


def alpha_sweep(parts: tuple[np.ndarray, np.ndarray, np.ndarray], Y: sp.csr_matrix, inv_prop: np.ndarray,
                bands: np.ndarray) -> dict[str, Any]:
    out = {}
    for alpha in ALPHAS:
        top = top_at(alpha, *parts)
        row = metrics(top, Y, inv_prop)
        row["P@5_points_by_band"] = {name: v["P@5_points"] for name, v in band_table(top, Y, bands).items()}
        out[f"{alpha:g}"] = row
    return out


#: labels added to the served shortlist in the "most frequent" variant (a diagnosis: not chosen)
FREQUENT = 10


def shortlist_variants(model: Any, X: sp.csr_matrix, Y: sp.csr_matrix, counts: np.ndarray, inv_prop: np.ndarray,
                       bands: np.ndarray) -> dict[str, Any]:
    """The model's mix at its ``alpha`` over other candidate sets than its shortlist (the dense
    ``rows x L`` retriever scores and margins, which the model computes anyway up to
    ``DENSE_UP_TO`` labels): the served shortlist (the check), every label, the shortlist
    plus the :data:`FREQUENT` most frequent training labels, and the shortlist plus the
    scorers' own top 5. Per variant: P@k, P@5 points by band, the recall of the candidates."""
    from holoxmc.sparse import l2_rows, top_columns

    X = sp.csr_matrix(X, dtype=np.float32)
    step = max(1, model.dense_batch_rows())
    S_parts, R_parts = [], []
    for start in range(0, X.shape[0], step):
        rows = l2_rows(X[start:start + step])
        S_parts.append(model.retriever_scores(rows))
        R_parts.append(1.0 / (1.0 + np.exp(-model._dense_margins(rows))))
    S, R = np.concatenate(S_parts), np.concatenate(R_parts).astype(np.float32)
    n, n_labels = S.shape
    mixed = (model.alpha * R + (1.0 - model.alpha) * S).astype(np.float32)
    served = np.zeros((n, n_labels), bool)
    np.put_along_axis(served, top_columns(S, model.shortlist), True, axis=1)
    frequent = served.copy()
    frequent[:, np.argsort(-counts, kind="stable")[:FREQUENT]] = True
    own = served.copy()
    np.put_along_axis(own, top_columns(R, 5), True, axis=1)
    out: dict[str, Any] = {}
    for name, allowed in (("served shortlist", served), ("every label", np.ones_like(served)),
                          (f"shortlist + {FREQUENT} most frequent labels", frequent),
                          ("shortlist + scorers' top 5", own)):
        top = top_columns(np.where(allowed, mixed, -np.inf), 5)
        Yc = sp.csr_matrix(Y)
        rows = np.repeat(np.arange(n), np.diff(Yc.indptr))
        inside = allowed[rows, Yc.indices]
        row = metrics(top, Y, inv_prop)
        row["candidates_per_row"] = float(allowed.sum(axis=1).mean())
        row["candidate_recall"] = 100.0 * inside.mean() if len(inside) else None
        row["P@5_points_by_band"] = {b: v["P@5_points"] for b, v in band_table(top, Y, bands).items()}
        out[name] = row
    return out


def fit_omikuji(X: sp.csr_matrix, Y: sp.csr_matrix, threads: int) -> Any:
    """omikuji as benchmarks/baselines.py trains it (its progress bars, written to the
    process's stderr, are dropped)."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        return omikuji_train(X, Y, threads)
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class FinishSpy:
    """Records what ``head="auto"`` hands to :func:`~holoxmc.models.rerank.fit.absorb_rows`
    (the selection-run model, fitted on the rows outside ``held``, whose validation rows
    chose ``alpha``) and passes the call on unchanged."""

    def __init__(self) -> None:
        self.seen: dict[str, Any] = {}

    def __enter__(self) -> "FinishSpy":
        import holoxmc.models.rerank.fit as fit_module

        self.module, self.original = fit_module, fit_module.absorb_rows

        def spy(model: Any, X: Any, Y: Any, held: np.ndarray, *args: Any, **kwargs: Any) -> Any:
            self.seen = {"model": model, "X": X, "Y": Y, "held": np.asarray(held, bool)}
            return self.original(model, X, Y, held, *args, **kwargs)
        fit_module.absorb_rows = spy
        return self

    def __exit__(self, *exc: Any) -> None:
        self.module.absorb_rows = self.original


def run_set(name: str, args: argparse.Namespace, command: str) -> None:
    import torch

    torch.set_num_threads(args.threads)
    from holoxmc.metrics import inverse_propensity

    started = time.perf_counter()
    train, test = load_pair(name, args.features, args.cache_dir)
    load_seconds = time.perf_counter() - started
    Y_train, Y_test = sp.csr_matrix(train.Y), sp.csr_matrix(test.Y)
    counts = np.asarray(Y_train.getnnz(axis=0)).ravel()
    bands = band_of(counts)
    inv_prop = inverse_propensity(Y_train)
    shape = {"n_train": len(train), "n_test": len(test), "n_labels": train.n_labels, "n_features": train.n_features,
             "labels_by_band": {n: int((bands == b).sum()) for b, (n, _, _) in enumerate(BANDS)},
             "groups": None if train.groups is None else len(set(train.groups))}
    base = {"set": name, "features": args.features, "shape": shape, "command": command,
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {args.threads} threads",
            "date": time.strftime("%Y-%m-%d %H:%M"), "featurise_s": load_seconds}
    print(json.dumps({"set": name, "shape": shape, "featurise_s": round(load_seconds, 1)}), flush=True)
    keep: dict[str, np.ndarray] = {}

    def write(row: dict[str, Any]) -> None:
        print(json.dumps(row), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a") as out:
            out.write(json.dumps(row) + "\n")

    omikuji_top5 = None
    shortlist_size = None
    if "omikuji" in args.models:
        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        model = fit_omikuji(train.X, Y_train, args.threads)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        omikuji_top5 = omikuji_top(model, test.X, 5)
        predict_ms = 1000 * (time.perf_counter() - t0) / len(test)
        keep["omikuji_top5"] = omikuji_top5
        row = base | {"model": "omikuji", "settings": "omikuji.Model.default_hyper_param()",
                      "fit_s": fit_s, "predict_ms_per_point": predict_ms,
                      "load": [load_before, os.getloadavg()[0]], **metrics(omikuji_top5, Y_test, inv_prop),
                      "bands": band_table(omikuji_top5, Y_test, bands)}
        # top-s for a recall comparable to the re-rank shortlist's (s: the shortlist rule of the set)
        from holoxmc.models.rerank.fit import shortlist_rule

        shortlist_size = shortlist_rule(train.n_labels, Y_train.nnz / Y_train.shape[0])
        wide = omikuji_top(model, test.X, shortlist_size)
        keep["omikuji_wide"] = wide
        row["top_s_recall"] = recall_in(wide, Y_test, bands)
        del model
        write(row)

    if "holoxmc-default" in args.models:
        from holoxmc.estimator import XMCClassifier
        from holoxmc.models.rerank.model import DENSE_UP_TO

        load_before = os.getloadavg()[0]
        t0 = time.perf_counter()
        with FinishSpy() as spy:
            clf = XMCClassifier(progress=False).fit(train.X, Y_train, groups=train.groups)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        top5 = clf.predict_topk(test.X, 5)[0]
        predict_ms = 1000 * (time.perf_counter() - t0) / len(test)
        keep["holoxmc_top5"] = top5
        row = base | {"model": "holoxmc-default", "settings": "XMCClassifier(progress=False).fit(X, Y, groups=train.groups)",
                      "head_": clf.head_, "selection": [t.as_dict() for t in clf.selection_],
                      "groups_": clf.groups_.as_dict(), "validation_": clf.validation_,
                      "fit_s": fit_s, "predict_ms_per_point": predict_ms, "load": [load_before, os.getloadavg()[0]],
                      **metrics(top5, Y_test, inv_prop), "bands": band_table(top5, Y_test, bands)}
        if clf.head_ == "rerank":
            model = clf.rerank_
            parts = rerank_parts(model, clf._check_X(test.X))
            keep["shortlists"] = parts[0]
            check = top_at(model.alpha, *parts)
            row |= {"alpha_chosen": model.alpha, "shortlist": model.shortlist,
                    "sweep_reproduces_predict": bool(np.array_equal(check, top5)),
                    "shortlist_recall": recall_in(parts[0], Y_test, bands),
                    "test_alpha_sweep_diagnosis_only": alpha_sweep(parts, Y_test, inv_prop, bands)}
            if model.n_labels <= DENSE_UP_TO:
                row["test_candidate_variants_diagnosis_only"] = shortlist_variants(
                    model, clf._check_X(test.X), Y_test, counts, inv_prop, bands)
            if spy.seen:  # the selection-run model and the validation rows that chose alpha
                seen = spy.seen
                held = seen["held"]
                chooser = seen["model"]
                X_val, Y_val = sp.csr_matrix(seen["X"])[held], sp.csr_matrix(seen["Y"])[held]
                val_parts = rerank_parts(chooser, X_val)
                row["validation_alpha_curve"] = {
                    "rows": int(held.sum()), "alpha_chosen_there": chooser.alpha,
                    "shortlist_recall": recall_in(val_parts[0], Y_val, bands)["recall"],
                    "by_alpha": {f"{a:g}": {k: v for k, v in metrics(top_at(a, *val_parts), Y_val, inv_prop).items()
                                            if k in ("P@1", "P@5")} for a in ALPHAS}}
                row["stage_seconds_selection_run"] = dict(chooser.fit_seconds)
                if chooser.n_labels <= DENSE_UP_TO:
                    fit_counts = np.asarray(sp.csr_matrix(seen["Y"])[~held].getnnz(axis=0)).ravel()
                    row["validation_candidate_variants"] = shortlist_variants(
                        chooser, X_val, Y_val, fit_counts, inv_prop, band_of(fit_counts))
            if omikuji_top5 is not None:
                row["vs_omikuji"] = versus(omikuji_top5, top5, parts[0], Y_test, bands)
        write(row)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(args.keep / f"{name}-{args.features}.npz", counts=counts, **keep)


def versus(theirs: np.ndarray, ours: np.ndarray, shortlists: np.ndarray, Y: sp.csr_matrix,
           bands: np.ndarray) -> dict[str, Any]:
    """The (row, label) pairs one model ranks correctly in its top 5 and the other does not, per
    band, and where omikuji's extra hits lie against the re-rank shortlist."""
    Y = sp.csr_matrix(Y)
    out: dict[str, Any] = {}
    theirs_hit, ours_hit = hits_matrix(theirs, Y), hits_matrix(ours, Y)
    pairs_theirs = {(int(i), int(theirs[i, j])) for i, j in zip(*np.nonzero(theirs_hit))}
    pairs_ours = {(int(i), int(ours[i, j])) for i, j in zip(*np.nonzero(ours_hit))}
    only_theirs, only_ours = pairs_theirs - pairs_ours, pairs_ours - pairs_theirs
    in_short = {(i, label) for i, label in only_theirs if label in set(shortlists[i].tolist())}
    for b, (name, _, _) in enumerate(BANDS):
        t = [p for p in only_theirs if bands[p[1]] == b]
        out[name] = {"omikuji_only": len(t), "rerank_only": sum(1 for p in only_ours if bands[p[1]] == b),
                     "omikuji_only_inside_shortlist": sum(1 for p in t if p in in_short)}
    out["total"] = {"omikuji_only": len(only_theirs), "rerank_only": len(only_ours),
                    "omikuji_only_inside_shortlist": len(in_short),
                    "net_P@5_points": 100.0 * (len(only_ours) - len(only_theirs)) / (5 * Y.shape[0])}
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", choices=SETS, default=["reuters"])
    parser.add_argument("--features", default="words", choices=["words", "words+pairs-100k", "words+pairs+chars"])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cache-dir", type=Path, default=None, help="keep featurised splits here (holoxmc.data.load)")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--keep", type=Path, default=Path(tempfile.gettempdir()) / "model_gap",
                        help="folder for each set's predictions (.npz)")
    args = parser.parse_args(argv)
    command = " ".join(["python benchmarks/model_gap.py", *(argv if argv is not None else sys.argv[1:])])
    for name in args.sets:
        run_set(name, args, command)


if __name__ == "__main__":
    main()

"""Shortlist recall of candidate retrievers for the shortlist-and-re-rank model (issue 32 item 3).

The training split of a ``make_realistic`` set is cut into fitting rows and validation rows
(a seeded 20% share; the test split is never read). Each retriever proposes ``k`` labels per
validation row; recall@k is the share of the validation rows' true labels that the shortlist
holds, pooled over rows; the ceiling is the share of those labels seen in the fitting rows (no
retriever built from them can propose another). A retriever scores label ``l`` for a unit row
``x`` as ``x · c_l + w_knn * v_l(x) + w_prior * f_l``:

* ``c_l``: the PIFA centroid (L2-normalised mean row of ``l``'s positives);
* ``v_l(x)``: the vote of the ``knn`` fitting rows nearest ``x`` by cosine (summed cosine of
  the neighbours holding ``l`` over the summed cosine of all of them);
* ``f_l = log(1 + n_l) / log(1 + max n)``, ``n_l`` the label's count in the fitting rows.

Rows of the table are (w_knn, w_prior) pairs, with ``pifa`` alone as (0, 0) and ``knn`` alone
as PIFA weighted 0. Memory is bounded by row batches (no dense ``N x N`` or ``N x L``).

``--retrievers`` instead compares the retrievers of ``RerankConfig(retriever=...)`` as the
model builds them: ``pifa`` (``x · c_l`` over the labels of each feature's ``postings``
largest weights, 1000 by default; ``postings=0``: exact, over all labels) against ``clusters``
(balanced label clusters, a linear scorer per cluster, the labels of the ``beam`` best
clusters), with their fit seconds (centroids, postings pruning, clusters and cluster scorers)
and scoring seconds per 1000 rows.

Usage:
    python benchmarks/rerank.py --preset realistic-10k
    python benchmarks/rerank.py --preset realistic-10k --retrievers pifa retriever=clusters,beam=10
    python benchmarks/rerank.py --preset realistic-100k --points 20000   # fewer rows
    python benchmarks/rerank.py --preset realistic-670k --max-val 2000 --retrievers postings=0 postings=1000
    python benchmarks/rerank.py --preset realistic-100k --val-share 0.1 --phases   # where a fit's time goes
    python benchmarks/rerank.py --preset realistic-670k --max-val 8192 --chunks 1048576 4194304 16777216
    python benchmarks/rerank.py --preset realistic-670k --max-val 8192 --index-blocks 1048576 131072 65536 32768
    python benchmarks/rerank.py --make 20000 10000 20000 2     # panel.py's realistic-10k train split
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.data import load, make_realistic
from holoxmc.models.rerank.model import RerankModel
from holoxmc.sparse import l2_rows, top_columns
from holoxmc.models.rerank.fit import pifa_centroids

KS = (50, 100, 200)
#: (name, PIFA weight, kNN weight, prior weight)
VARIANTS = (("pifa", 1.0, 0.0, 0.0), ("pifa+prior0.1", 1.0, 0.0, 0.1), ("pifa+prior0.3", 1.0, 0.0, 0.3),
            ("knn", 0.0, 1.0, 0.0), ("pifa+knn0.5", 1.0, 0.5, 0.0), ("pifa+knn1", 1.0, 1.0, 0.0),
            ("pifa+knn2", 1.0, 2.0, 0.0), ("pifa+knn1+prior0.1", 1.0, 1.0, 0.1))


def split_rows(n: int, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (fitting rows, validation rows) of ``n``."""
    order = np.random.default_rng(seed).permutation(n)
    cut = int(round(n * (1 - share)))
    return np.sort(order[:cut]), np.sort(order[cut:])


def recall(shortlists: np.ndarray, Y: sp.csr_matrix, k: int) -> float:
    """Pooled share of the true labels of ``Y``'s rows found in the first ``k`` shortlisted."""
    hit = sum(np.isin(Y.indices[Y.indptr[i]:Y.indptr[i + 1]], shortlists[i, :k]).sum() for i in range(Y.shape[0]))
    return hit / max(Y.nnz, 1)


def recall_cells(shortlists: np.ndarray, Y: sp.csr_matrix, ceiling: float) -> list[str]:
    """A table row's ``recall@k (/ceiling)`` cells, one per k of ``KS``."""
    return [f"{value:.3f} ({value / ceiling:.2f})" for value in (recall(shortlists, Y, k) for k in KS)]


def parse_settings(text: str) -> dict[str, float | int | str]:
    """``"shortlist=100,C=1,retriever=clusters"`` as ``{"shortlist": 100, "C": 1.0, "retriever":
    "clusters"}`` (integers stay integers, words stay words)."""
    out: dict[str, float | int | str] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        if key == "retriever":
            out[key] = value
        else:
            out[key] = int(value) if value.lstrip("-").isdigit() and key not in ("C", "cluster_weight") else float(value)
    return out


def retriever_table(specs: list[str], X: sp.csr_matrix, Y: sp.csr_matrix, Xv: sp.csr_matrix, Yv: sp.csr_matrix,
                    ceiling: float, workers: int) -> None:
    """Recall@k (/ceiling), fit seconds and scoring seconds per 1000 validation rows of each
    retriever setting (``pifa``, or RerankConfig fields such as ``retriever=clusters,beam=10``;
    ``linear``: a reference, not a retriever the model offers: the linear one-vs-rest model's
    top labels over all L, what a row's best labels are by per-label SVMs trained on every
    fitting row, at a cost of rows x L)."""
    from holoxmc.models.rerank.fit import RerankConfig, fit_matcher, pifa_index

    print("| retriever | fit s | " + " | ".join(f"recall@{k} (/ceiling)" for k in KS) + " | s per 1000 rows |")
    print("|---|---|" + "---|" * (len(KS) + 1))
    for text in specs:
        if text == "linear":
            _linear_row(X, Y, Xv, Yv, ceiling, workers)
            continue
        config = RerankConfig(**parse_settings("" if text == "pifa" else text))  # type: ignore[arg-type]
        started = time.perf_counter()
        if config.retriever == "clusters":
            centroids = pifa_centroids(X, Y)
            matcher = fit_matcher(X, Y, centroids, config, workers=workers)
        else:  # the PIFA retriever's index, as the fit prunes it
            centroids, matcher = pifa_index(X, Y, config.postings).T, None
        fit_s = time.perf_counter() - started
        model = RerankModel(centroids, sp.csr_matrix((X.shape[1], Y.shape[1]), dtype=np.float32),
                            np.zeros(Y.shape[1], np.float32), max(KS), 0.0, matcher=matcher)
        started = time.perf_counter()
        step = model.batch_rows()
        short = np.concatenate([model.shortlists(Xv[start:start + step])[0] for start in range(0, Xv.shape[0], step)])
        seconds = time.perf_counter() - started
        row = recall_cells(short, Yv, ceiling)
        extra = "" if matcher is None else f" (C={matcher.n_clusters}, beam at k=200: {model.matcher.beam})"
        print(f"| {text}{extra} | {fit_s:.1f} | " + " | ".join(row) + f" | {1000 * seconds / Xv.shape[0]:.2f} |",
              flush=True)


def _linear_row(X: sp.csr_matrix, Y: sp.csr_matrix, Xv: sp.csr_matrix, Yv: sp.csr_matrix, ceiling: float,
                workers: int) -> None:
    """The retriever table's ``linear`` row: holoxmc's linear model (its default C, no
    validation split), every label scored."""
    from holoxmc.models.linear.fit import DEFAULT_C_GRID, LinearConfig, fit_linear

    started = time.perf_counter()
    model, _ = fit_linear(X, Y, LinearConfig(C=DEFAULT_C_GRID[0]), val_fraction=0.0, refit=False, workers=workers)
    fit_s = time.perf_counter() - started
    started = time.perf_counter()
    short = model.predict_topk(Xv, min(max(KS), Y.shape[1]))[0]  # recall reads at most L ranks
    seconds = time.perf_counter() - started
    row = recall_cells(short, Yv, ceiling)
    print(f"| linear one-vs-rest, all L (reference) | {fit_s:.1f} | " + " | ".join(row)
          + f" | {1000 * seconds / Xv.shape[0]:.2f} |", flush=True)


def margins_table(repeats: int = 5) -> None:
    """Seconds of a shortlist's margins (1000 rows x 50 labels, random sparse weights of 60
    nonzeros per label, rows of 100, D = 60,000): the dense ``rows x L`` product then a gather,
    against :meth:`RerankModel.margins`' row-by-row sparse dot products; medians of ``repeats``."""
    import holoxmc.models.rerank.model as rerank_module

    rerank_module.DENSE_UP_TO = 0  # time the row-by-row path at every L
    rng = np.random.default_rng(0)

    def rand(rows: int, cols: int, per: int) -> sp.csr_matrix:
        return sp.csr_matrix((rng.standard_normal(rows * per).astype(np.float32), rng.integers(0, cols, rows * per),
                              np.arange(0, rows * per + 1, per)), shape=(rows, cols))

    print("| L | dense product + gather, ms | row-by-row dot products, ms |")
    print("|---|---|---|")
    for n_labels in (10_000, 100_000):
        model = RerankModel(rand(n_labels, 60_000, 6), rand(n_labels, 60_000, 60).T, np.zeros(n_labels, np.float32),
                            50, 0.5)
        X, labels = l2_rows(rand(1000, 60_000, 100)), rng.integers(0, n_labels, size=(1000, 50))
        step, dense, pairs = model.dense_batch_rows(), [], []
        W = sp.csr_matrix(model.weights)  # the dense path's (D, L) CSR, converted outside the timer
        for _ in range(repeats):
            started = time.perf_counter()
            reference = np.concatenate([np.take_along_axis((X[a:a + step] @ W).toarray(),
                                                           labels[a:a + step], 1) for a in range(0, 1000, step)])
            dense.append(time.perf_counter() - started)
            started = time.perf_counter()
            got = model.margins(X, labels)
            pairs.append(time.perf_counter() - started)
            assert np.allclose(reference, got, atol=1e-5)
        print(f"| {n_labels} | {1000 * np.median(dense):.1f} | {1000 * np.median(pairs):.1f} |", flush=True)


def fit_table(settings: list[str], X: sp.csr_matrix, Y: sp.csr_matrix, Xv: sp.csr_matrix, Yv: sp.csr_matrix,
              workers: int) -> None:
    """Fit on ``(X, Y)`` with each setting, score on the validation rows: P@1, P@5, seconds."""
    from holoxmc.metrics import evaluate, pad_predictions
    from holoxmc.models.linear.fit import LinearConfig, fit_linear
    from holoxmc.models.rerank.fit import RerankConfig, fit_rerank

    half = Xv.shape[0] // 2  # alpha is chosen on the first half, the scores are of the second
    print("| settings | alpha | val P@1 | val P@5 | fit s | top-5 ms/pt |")
    print("|---|---|---|---|---|---|")
    for text in settings:
        started = time.perf_counter()
        if text.startswith("linear"):  # the one-vs-all linear model, for comparison (C fixed, no refit)
            linear = LinearConfig(**parse_settings(text.partition(",")[2]))  # type: ignore[arg-type]
            model: Any = fit_linear(X, Y, linear, workers=workers)[0]
            model.alpha = "-"
        else:
            model = fit_rerank(X, Y, RerankConfig(**parse_settings(text)), Xv[:half], Yv[:half], workers=workers)
        fit_s = time.perf_counter() - started
        started = time.perf_counter()
        top, _ = model.predict_topk(Xv[half:], 5)
        ms = 1000 * (time.perf_counter() - started) / (Xv.shape[0] - half)
        m = evaluate(pad_predictions(top, 5), Yv[half:], ks=(1, 5))
        print(f"| {text} | {model.alpha} | {m['P@1']:.2f} | {m['P@5']:.2f} | {fit_s:.1f} | {ms:.2f} |",
              flush=True)


def phase_table(X: sp.csr_matrix, Y: sp.csr_matrix, Xv: sp.csr_matrix, Yv: sp.csr_matrix, workers: int) -> None:
    """Seconds and resident memory of each phase of one default re-rank fit (fitting rows,
    alpha on the validation rows), from timers wrapped around the fit's own functions."""
    import resource
    import threading

    import holoxmc.models.rerank.fit as fit_module

    def resident_mb() -> float:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS"))

    peak = [0.0]

    def sample() -> None:
        while True:
            peak[0] = max(peak[0], resident_mb())
            time.sleep(0.05)

    threading.Thread(target=sample, daemon=True).start()
    print("| phase | s | peak MB in this process |")
    print("|---|---|---|")

    def timed(name: str) -> None:
        inner = getattr(fit_module, name)

        def run(*args: Any, **kwargs: Any) -> Any:
            outer, started = peak[0], time.perf_counter()
            peak[0] = resident_mb()
            out = inner(*args, **kwargs)
            print(f"| {name} | {time.perf_counter() - started:.1f} | {peak[0]:.0f} |", flush=True)
            peak[0] = max(outer, peak[0])  # an enclosing phase keeps its own peak
            return out
        setattr(fit_module, name, run)

    for name in ("pifa_index", "training_shortlists", "_membership", "run_jobs", "_weights", "_choose_alpha"):
        timed(name)
    started = time.perf_counter()
    fit_module.fit_rerank(X, Y, fit_module.RerankConfig(), Xv, Yv, workers=workers)
    print(f"| whole fit | {time.perf_counter() - started:.1f} | "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} |")


def sweep_table(constant: str, values: list[int], X: sp.csr_matrix, Y: sp.csr_matrix, Xv: sp.csr_matrix,
                repeats: int = 2) -> None:
    """Seconds per 1000 validation rows of the sparse PIFA shortlist (default postings) for
    each value of ``holoxmc.models.rerank.model.<constant>`` (``SPARSE_CHUNK_ENTRIES``: the cap on a
    chunk's products; ``INDEX_BLOCK_LABELS``: the index's column blocks), in this process,
    repeats interleaved, the model built anew for each value; the shortlists' scores must not
    change (labels may, among ties)."""
    import holoxmc.models.rerank.model as rerank_module
    from holoxmc.models.rerank.fit import RerankConfig, pifa_index

    index, default = pifa_index(X, Y, RerankConfig().postings), getattr(rerank_module, constant)
    seconds: dict[int, list[float]] = {value: [] for value in values}
    reference = None
    for _ in range(repeats):
        for value in values:
            setattr(rerank_module, constant, value)
            model = RerankModel(index.T, sp.csr_matrix((X.shape[1], Y.shape[1]), dtype=np.float32),
                                np.zeros(Y.shape[1], np.float32), max(KS), 0.0)
            started = time.perf_counter()
            scores = np.concatenate([model.shortlists(Xv[start:start + 1024])[1] for start in range(0, Xv.shape[0], 1024)])
            seconds[value].append(1000 * (time.perf_counter() - started) / Xv.shape[0])
            reference = scores if reference is None else reference
            assert np.array_equal(scores, reference)
            del model
    setattr(rerank_module, constant, default)
    print(f"| {constant} | s per 1000 rows (median) | each repeat |")
    print("|---|---|---|")
    for value in values:
        print(f"| {value:,} | {np.median(seconds[value]):.2f} | " + ", ".join(f"{second:.2f}" for second in seconds[value])
              + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="realistic-10k")
    parser.add_argument("--points", type=int, help="training rows (the preset's when left out)")
    parser.add_argument("--make", type=int, nargs=4, metavar=("POINTS", "LABELS", "FEATURES", "SEED"),
                        help="make_realistic with default knobs instead of a preset (benchmarks/panel.py's sets)")
    parser.add_argument("--knn", type=int, nargs="+", default=[50])
    parser.add_argument("--val-share", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-val", type=int, help="keep the first N validation rows only")
    parser.add_argument("--fit", nargs="+", metavar="KEY=VALUE,...",
                        help="instead of recall: fit the re-rank model with each of these settings on the fitting "
                             "rows and score it on the validation rows (e.g. shortlist=100,C=1 knn=50; "
                             "linear,C=0.3: the one-vs-all linear model)")
    parser.add_argument("--retrievers", nargs="+", metavar="pifa|linear|KEY=VALUE,...",
                        help="instead of the kNN/prior table: recall, fit and scoring time of each retriever "
                             "(pifa, linear: the one-vs-rest reference, or e.g. retriever=clusters,beam=10,cluster_weight=1)")
    parser.add_argument("--margins", action="store_true",
                        help="only time a shortlist's margins, dense product against row-by-row (no data set)")
    parser.add_argument("--phases", action="store_true",
                        help="instead of recall: seconds and memory of each phase of one default fit "
                             "(training_shortlists: threads of this process; run_jobs: the label blocks' jobs)")
    parser.add_argument("--chunks", type=int, nargs="+", metavar="PRODUCTS",
                        help="instead of recall: seconds of the sparse PIFA shortlist per cap on a chunk's products")
    parser.add_argument("--index-blocks", type=int, nargs="+", metavar="LABELS",
                        help="instead of recall: seconds of the sparse PIFA shortlist per width of the index's "
                             "column blocks")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repeats of --chunks / --index-blocks")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.margins:
        margins_table()
        return
    options = {"n_points": args.points} if args.points else {}
    if args.make:
        points, labels, features, seed = args.make
        train, _ = make_realistic(points, labels, features, n_test=1, seed=seed)
        args.preset = f"make_realistic{tuple(args.make)}"
    else:
        train = load(args.preset, "train", **options)
    fit, val = split_rows(train.X.shape[0], args.val_share, args.seed)
    X, Y = l2_rows(train.X[fit]), sp.csr_matrix(train.Y[fit], dtype=np.float32)
    val = val[:args.max_val]
    Xv, Yv = l2_rows(train.X[val]), sp.csr_matrix(train.Y[val])
    counts = np.asarray((Y > 0).sum(axis=0)).ravel()
    ceiling = (counts > 0)[Yv.indices].mean()
    prior = (np.log1p(counts) / np.log1p(max(counts.max(), 1))).astype(np.float32)
    print(f"{args.preset}: L={Y.shape[1]} fitting rows={X.shape[0]} validation rows={Xv.shape[0]} "
          f"D={X.shape[1]} ceiling={ceiling:.3f}")
    if args.fit:
        fit_table(args.fit, X, Y, Xv, Yv, args.workers)
        return
    if args.phases:
        phase_table(X, Y, Xv, Yv, args.workers)
        return
    if args.chunks:
        sweep_table("SPARSE_CHUNK_ENTRIES", args.chunks, X, Y, Xv, args.repeats)
        return
    if args.index_blocks:
        sweep_table("INDEX_BLOCK_LABELS", args.index_blocks, X, Y, Xv, args.repeats)
        return
    if args.retrievers:
        retriever_table(args.retrievers, X, Y, Xv, Yv, ceiling, args.workers)
        return
    centroids = pifa_centroids(X, Y)  # the kNN / prior table's exact PIFA
    print("| retriever | knn | " + " | ".join(f"recall@{k} (/ceiling)" for k in KS) + " | s per 1000 rows |")
    print("|---|---|" + "---|" * (len(KS) + 1))
    for knn in args.knn:
        model = RerankModel(centroids, sp.csr_matrix((X.shape[1], Y.shape[1]), dtype=np.float32),
                            np.zeros(Y.shape[1], np.float32), max(KS), 0.0, neighbours=X, neighbour_labels=Y,
                            knn=knn, knn_weight=1.0)
        step = model.batch_rows()
        parts: dict[str, list[np.ndarray]] = {name: [] for name, *_ in VARIANTS}
        seconds = {"pifa": 0.0, "knn": 0.0}
        for start in range(0, Xv.shape[0], step):
            rows = Xv[start:start + step]
            started = time.perf_counter()
            P = np.asarray(model.index_product(rows).toarray(), dtype=np.float32)
            seconds["pifa"] += time.perf_counter() - started
            started = time.perf_counter()
            V = model.knn_votes(rows).toarray()
            seconds["knn"] += time.perf_counter() - started
            for name, a, b, c in VARIANTS:
                parts[name].append(top_columns(a * P + b * V + c * prior, max(KS)))  # a copy: no (rows, L) base kept
        for name, *_ in VARIANTS:
            short = np.concatenate(parts[name])
            cost = seconds["knn" if name == "knn" else "pifa"] + (seconds["knn"] if "knn" in name[4:] else 0.0)
            row = recall_cells(short, Yv, ceiling)
            print(f"| {name} | {knn if 'knn' in name else '-'} | " + " | ".join(row)
                  + f" | {1000 * cost / Xv.shape[0]:.2f} |", flush=True)


if __name__ == "__main__":
    main()

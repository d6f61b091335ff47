"""Re-rank model: liblinear (the old per-label solver) against the hand-written dual coordinate
descent solver (``holoxmc.models.linear.dcd``) at one and two threads (issue 52, item 2).

Each fit runs in a fresh child process, interleaved: for every repeat, every set, every
(solver, threads) pair. The old code is the ``src`` of ``--old-ref`` (``git archive``); its
only parallel path for label blocks is worker processes, so "old, 2 threads" is ``workers=2``
(and two threads for the training shortlists). The new code is this checkout's ``src`` with
``torch.set_num_threads(threads)`` and ``workers=1`` (label blocks and shortlists on that many
threads of one process). Default :class:`~holoxmc.models.rerank.fit.RerankConfig`, no
validation split (``alpha`` = 0.25); the fit's wall seconds (data loading and imports left
out), its CPU seconds (all threads and worker processes: on a machine shared with other jobs
the wall seconds of two threads say little, the CPU seconds say whether the work grew), test
P@1 and P@5, and a digest of the weights and biases (the same model at any thread
count shows as one digest). One numba warm-up child runs first, so the compiled solver is
in numba's cache; each child then fits 200 rows untimed (``warmup_s``: for dcd, mostly
reading the compiled solver from that cache, a cost paid once per process) before the timed fit.

``--linear`` adds the linear one-vs-rest model's per-label solver, in this process: every
Bibtex label on all rows at the linear model's settings (C = 0.3, tol = 1e-4, unit rows),
liblinear against dcd at one thread and dcd on two threads, medians of the repeats.

Usage:
    HOLOXMC_DATA=/work/shared/data PYTHONPATH=src python benchmarks/rerank_solver.py \\
        --sets bibtex realistic-10k --repeats 3 --linear

Writes one JSON line per fit and one per (set, solver, threads) summary to
``benchmarks/results/rerank_solver.jsonl`` (``--out``), and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results" / "rerank_solver.jsonl"


def child(set_name: str, threads: int, workers: int) -> dict[str, Any]:
    """One fit of the re-rank model with the ``holoxmc`` on ``sys.path``: seconds, P@k, digest."""
    import numpy as np
    import scipy.sparse as sp
    import torch

    from holoxmc.data import load
    from holoxmc.metrics import evaluate, pad_predictions
    from holoxmc.models.rerank.fit import RerankConfig, fit_rerank

    torch.set_num_threads(threads)
    train, test = load(set_name, "train"), load(set_name, "test")
    started = time.perf_counter()
    warm = fit_rerank(train.X[:200], train.Y[:200], RerankConfig(shortlist=5, alpha=0.5))  # numba's cache read
    warmup = time.perf_counter() - started
    del warm
    cpu = time.process_time() + _children_cpu()
    started = time.perf_counter()
    model = fit_rerank(train.X, train.Y, RerankConfig(), workers=workers)
    seconds = time.perf_counter() - started
    cpu = time.process_time() + _children_cpu() - cpu
    torch.set_num_threads(1)  # scoring alike for both solvers
    indices, _ = model.predict_topk(test.X, 5)
    metrics = evaluate(pad_predictions(indices, 5), sp.csr_matrix(test.Y), ks=(1, 5))
    weights = sp.csc_matrix(model.weights)
    digest = hashlib.sha256()
    for array in (weights.indptr, weights.indices, weights.data, model.bias):
        digest.update(np.ascontiguousarray(array).tobytes())
    return {"seconds": seconds, "cpu_s": cpu, "warmup_s": warmup, "P@1": metrics["P@1"], "P@5": metrics["P@5"], "digest": digest.hexdigest()[:16],
            "weights": int(weights.nnz)}


def _children_cpu() -> float:
    """CPU seconds of this process's finished children (worker processes)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_child(src: Path, set_name: str, threads: int, workers: int) -> dict[str, Any]:
    """:func:`child` in a fresh process with ``src`` first on its path."""
    env = dict(os.environ, PYTHONPATH=str(src))
    command = [sys.executable, __file__, "--child", set_name, str(threads), str(workers)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"child {command} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def old_source(ref: str, folder: Path) -> Path:
    """``src`` of git ``ref`` of this repository, extracted under ``folder``."""
    archive = folder / "old.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), ref, "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def load_average() -> float:
    return os.getloadavg()[0]


def linear_solvers(repeats: int) -> list[dict[str, Any]]:
    """Seconds of every Bibtex label's SVM on all unit rows at the linear model's settings:
    liblinear (one thread: its generator is per process), dcd on one and two threads; and the
    largest difference of the two solvers' primal objectives relative to liblinear's."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    import scipy.sparse as sp
    from sklearn.preprocessing import normalize

    from holoxmc.data import load
    from holoxmc.models.linear.dcd import fit_label_dcd, label_seed
    from holoxmc.models.linear.fit import LinearConfig, direct_liblinear_works, fit_label

    assert direct_liblinear_works()
    train = load("bibtex", "train")
    X = sp.csr_matrix(normalize(sp.csr_matrix(train.X, dtype=np.float64)))
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    Y = sp.csc_matrix(train.Y)
    config = LinearConfig(C=0.3)
    labels = [y for y in (Y[:, j].toarray().ravel().astype(np.float64) for j in range(Y.shape[1])) if 0 < y.sum() < len(y)]

    def objective(w: np.ndarray, b: float, y: np.ndarray) -> float:
        loss = np.maximum(0.0, 1.0 - np.where(y > 0, 1.0, -1.0) * (X @ w + b))
        return float(0.5 * (w @ w + b * b) + config.C * np.sum(loss**2))

    def dcd(j: int) -> tuple[np.ndarray, float, bool]:
        return fit_label_dcd(X, labels[j], config.C, tol=config.tol, max_iter=config.max_iter, seed=label_seed(0, j))

    dcd(0)  # compiled (or read from the cache) outside the timing
    times: dict[str, list[float]] = {"liblinear": [], "dcd-1": [], "dcd-2": []}
    cpu: dict[str, list[float]] = {name: [] for name in times}

    def clock(name: str, started: float, cpu_started: float) -> None:
        times[name].append(time.perf_counter() - started)
        cpu[name].append(time.process_time() - cpu_started)

    for _ in range(repeats):
        started, cpu_started = time.perf_counter(), time.process_time()
        old = [fit_label(X, y, config.C, config) for y in labels]
        clock("liblinear", started, cpu_started)
        started, cpu_started = time.perf_counter(), time.process_time()
        new = [dcd(j) for j in range(len(labels))]
        clock("dcd-1", started, cpu_started)
        started, cpu_started = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(2) as pool:
            threaded = list(pool.map(dcd, range(len(labels))))
        clock("dcd-2", started, cpu_started)
        assert all(np.array_equal(a[0], b[0]) for a, b in zip(new, threaded))
    gap = max(abs(objective(n[0], n[1], y) - objective(o[0], o[1], y)) / objective(o[0], o[1], y)
              for n, o, y in zip(new, old, labels))
    return [{"kind": "linear", "set": "bibtex", "labels": len(labels), "solver": name, "C": config.C,
             "tol": config.tol, "seconds": times[name], "median_s": statistics.median(times[name]),
             "cpu_s": cpu[name], "median_cpu_s": statistics.median(cpu[name]),
             "max_relative_objective_difference": gap} for name in times]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["bibtex", "realistic-10k"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--old-ref", default="729a21c", help="git ref whose src trains with liblinear")
    parser.add_argument("--linear", action="store_true", help="also time the linear model's per-label solvers")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    lines: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as folder:
        sources = {"liblinear": old_source(args.old_ref, Path(folder)), "dcd": ROOT / "src"}
        run_child(sources["dcd"], args.sets[0], 1, 1)  # numba's cache filled before the timed fits
        runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
        for repeat in range(args.repeats):
            for set_name in args.sets:
                for solver, threads in [(s, t) for t in args.threads for s in sources]:
                    workers = threads if solver == "liblinear" else 1
                    load_before = load_average()
                    result = run_child(sources[solver], set_name, threads, workers)
                    line = {"kind": "fit", "set": set_name, "solver": solver, "threads": threads, "workers": workers,
                            "repeat": repeat, "load_1min": round(load_before, 2), "commit": commit,
                            "old_ref": args.old_ref} | result
                    print(json.dumps(line), flush=True)
                    lines.append(line)
                    runs.setdefault((set_name, solver, threads), []).append(line)
    print("\n| set | solver | threads | median fit s | median CPU s | runs s | P@1 | P@5 | digests |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (set_name, solver, threads), mine in runs.items():
        summary = {"kind": "summary", "set": set_name, "solver": solver, "threads": threads,
                   "median_s": statistics.median(r["seconds"] for r in mine),
                   "median_cpu_s": statistics.median(r["cpu_s"] for r in mine),
                   "P@1": mine[0]["P@1"], "P@5": mine[0]["P@5"], "digests": sorted({r["digest"] for r in mine}),
                   "commit": commit}
        lines.append(summary)
        seconds = ", ".join(f"{r['seconds']:.2f}" for r in mine)
        print(f"| {set_name} | {solver} | {threads} | {summary['median_s']:.2f} | {summary['median_cpu_s']:.2f} | {seconds} | {summary['P@1']:.2f} | "
              f"{summary['P@5']:.2f} | {' '.join(summary['digests'])} |")
    if args.linear:
        for line in linear_solvers(args.repeats):
            line["commit"] = commit
            print(json.dumps(line))
            lines.append(line)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as handle:
        for line in lines:
            handle.write(json.dumps(line) + "\n")
    print(f"wrote {len(lines)} lines to {args.out}")


if __name__ == "__main__":
    main()

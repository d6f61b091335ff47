"""Scaling study (issue 32 item 4): fit seconds, peak memory, top-5 ms/point, P@1 and P@5
against L on the realistic preset, for holoxmc's models and napkinXC / omikuji / PECOS side
by side in one run.

For each ``--labels`` value the set is :data:`holoxmc.data.realistic.REALISTIC_PRESETS`'
preset of that L (``realistic-10k``, ``-100k``, ``-670k``, ``-3m``: 10000, 100000, 670091,
3000000); any other L is make_realistic at the 100K preset's ratios (0.73 training points and
0.6 features per label). Every (L, model) cell runs in a process of its own under a wall-clock
limit (``--timeout``) and a resident-memory limit (``--memory-gb``: the process tree's summed
``VmRSS``, polled from ``/proc``); the child reports its stage (``generate``, ``fit``,
``predict``, ``score``) and when it got there, so a cell that cannot run records why (time,
memory, an error), the stage where it stopped and how long it had been in it
(``stage_seconds``); the cell's log (kept when it stops) holds the libraries' own progress. A row's memory: ``peak_rss_mb`` (the cell process's
``ru_maxrss``), and the tree's polled peaks, ``peak_tree_mb`` (summed PSS: a page several
processes share counts once) and ``peak_tree_rss_mb`` (summed resident sizes); the table shows
the larger of the first two (:func:`peak_mb`). Top-5 is timed ``--predict-repeats`` times.

Writes ``--out`` (JSON, merged with an existing file cell by cell), a Markdown table next to
it (``.md``) and a PNG plot (``.png``: fit seconds, peak memory, top-5 ms/point and P@1
against L, one line per model).

Usage:
    python benchmarks/scaling.py --labels 10000 100000 --models holoxmc-linear napkinxc-plt omikuji
    python benchmarks/scaling.py --labels 10000 100000 670000 3000000   # every model, long
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

OUT = ROOT / "benchmarks" / "results" / "scaling.json"
HOLOXMC = {"holoxmc-default": {}, "holoxmc-linear": {"head": "linear"}, "holoxmc-hrr": {"head": "hrr"},
           "holoxmc-dense": {"head": "dense"}, "holoxmc-solar": {"head": "solar"},
           "holoxmc-rerank": {"head": "rerank"}}
BASELINES = ("napkinxc-plt", "omikuji", "pecos-xrlinear")
#: holoxmc models whose label blocks train as parallel jobs: they get ``--threads`` worker
#: processes, as the libraries get ``--threads`` threads (the networks get torch threads).
JOB_MODELS = ("holoxmc-linear", "holoxmc-rerank", "holoxmc-solar")  # label blocks or chunks as jobs
MODELS = (*HOLOXMC, *BASELINES)
PRESET_OF_L = {10_000: "realistic-10k", 100_000: "realistic-100k", 670_000: "realistic-670k",
               670_091: "realistic-670k", 3_000_000: "realistic-3m"}
STAGE = "stage: "


def set_arguments(n_labels: int, knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """make_realistic arguments of the scaling set at ``n_labels``, with ``knobs`` (other
    make_realistic keywords: a variant whose knobs no preset was tuned on) over them.

    Example:
        >>> set_arguments(100_000)["n_points"]
        73000
        >>> set_arguments(20_000)["n_points"], set_arguments(20_000)["n_features"]
        (14600, 12000)
    """
    from holoxmc.data.realistic import REALISTIC_PRESETS

    if n_labels in PRESET_OF_L:
        return dict(REALISTIC_PRESETS[PRESET_OF_L[n_labels]]) | (knobs or {})
    base = REALISTIC_PRESETS["realistic-100k"]
    scale = n_labels / base["n_labels"]
    return {**base, "n_labels": n_labels, "n_points": max(10, round(base["n_points"] * scale)),
            "n_test": max(2, round(base["n_test"] * scale)), "n_features": max(10, round(base["n_features"] * scale)),
            **(knobs or {})}


def stage(name: str) -> None:
    """Tell the parent which stage this child has reached, and when (epoch seconds)."""
    print(f"{STAGE}{name} {time.time():.1f}", flush=True)


def last_stage(lines: list[str], now: float) -> dict[str, Any]:
    """The stage a stopped child had reached, from its log's last stage line, and how many
    seconds it had spent in it by ``now`` (``stage_seconds``, left out for lines without a time).

    Example:
        >>> last_stage(["stage: generate 100.0", "x", "stage: fit 160.5"], now=200.0)
        {'stage': 'fit', 'stage_seconds': 39.5}
        >>> last_stage([], now=1.0)
        {'stage': 'start'}
    """
    marks = [mark for line in lines if line.startswith(STAGE) and (mark := line[len(STAGE):].split())]
    if not marks:
        return {"stage": "start"}
    name, *at = marks[-1]
    return {"stage": name, **({"stage_seconds": round(now - float(at[0]), 1)} if at else {})}


#: Facts of the fitted model that a cell's row records beside its measures (:func:`weight_facts`).
MODEL_FACTS: dict[str, Any] = {}


def weight_facts(weight_rows: Any) -> dict[str, Any]:
    """How many weights the re-rank model's labels kept, from its ``(L, D)`` CSR
    ``weight_rows`` (no copy): the most a label has, and how many labels stand at the default
    cap (:func:`holoxmc.models.rerank.fit.label_weights_rule`), which is where the cap has bitten
    (or a label's pruned weights number exactly that many).

    Example:
        >>> import scipy.sparse as sp
        >>> weight_facts(sp.csr_matrix(([1.0, 2.0, 3.0], ([0, 0, 2], [0, 1, 1])), shape=(4, 5)))
        {'weights_per_label_max': 2, 'labels_at_weight_cap': 0, 'weight_cap': 125000000}
    """
    from holoxmc.models.rerank.fit import label_weights_rule

    counts = np.diff(weight_rows.indptr)
    cap = label_weights_rule(weight_rows.shape[0])
    return {"weights_per_label_max": int(counts.max(initial=0)), "labels_at_weight_cap": int((counts == cap).sum()),
            "weight_cap": cap}


def model_fit(model: str, threads: int, model_options: dict[str, Any] | None = None) -> Any:
    """The ``baselines.measure`` fit function of ``model``, reporting its fit and predict stages
    (``model_options``: more ``XMCClassifier`` arguments for a holoxmc model)."""
    import baselines

    if model in HOLOXMC:
        from holoxmc.estimator import XMCClassifier

        def fit_holoxmc(X: Any, Y: Any) -> Any:
            from holoxmc.timing import recording

            jobs = {"workers": threads} if model in JOB_MODELS else {}
            with recording() as stages:  # each fit's stage seconds (benchmarks/fit_profile.py reads the same)
                arguments = {"progress": False, **HOLOXMC[model], **jobs, **(model_options or {})}  # options win
                clf = XMCClassifier(**arguments).fit(X, Y)
            MODEL_FACTS.update(model_options=model_options or {}, stages=stages, selection=[t.as_dict() for t in getattr(clf, "selection_", [])])
            if clf.head_ == "rerank":
                MODEL_FACTS.update(weight_facts(clf.model_.weight_rows))
            return lambda X_test: clf.predict_topk(X_test, k=5)[0]
        inner = fit_holoxmc
    else:
        inner = {"napkinxc-plt": partial(baselines.napkinxc_model, verbose=True), "omikuji": baselines.omikuji_model,
                 "pecos-xrlinear": partial(baselines.pecos_model, verbose=True)}[model](threads)

    def fit(X: Any, Y: Any) -> Any:
        stage("fit")
        predict = inner(X, Y)

        def staged(X_test: Any) -> Any:
            stage("predict")
            return predict(X_test)
        return staged
    return fit


def run_child(n_labels: int, model: str, threads: int, max_test: int | None = None, repeats: int = 1,
              knobs: dict[str, Any] | None = None, model_options: dict[str, Any] | None = None) -> None:
    """Generate the set, fit and score one model in this process (on the first ``max_test``
    test rows, all by default; top-5 timed ``repeats`` times, the median reported); print the
    row as JSON."""
    import torch

    torch.set_num_threads(threads)
    from baselines import measure

    from holoxmc.data import Dataset, make_realistic

    stage("generate")
    started = time.perf_counter()
    train, test = make_realistic(**set_arguments(n_labels, knobs), name=f"realistic-L{n_labels}")
    generate_s = time.perf_counter() - started
    if max_test is not None:
        test = Dataset(test.X[:max_test], test.Y[:max_test], test.name)
    row = measure(model_fit(model, threads, model_options), train, test, repeats)
    stage("score")
    shape = {"n_train": len(train), "n_test": len(test), "n_features": train.n_features}
    print(json.dumps({"row": {**row, "generate_seconds": generate_s, **MODEL_FACTS}, "shape": shape}), flush=True)


def tree_mb(pid: int) -> tuple[float, float]:
    """Memory of ``pid`` and its children in MB (zeros once gone): the sums of their
    proportional set sizes (``Pss``: a page several of them map, such as the arrays workers
    share or a library's code, counts once) and of their resident sizes (``VmRSS``: such a
    page counts in each). Where ``/proc`` has no ``smaps_rollup``, the resident size stands
    for both."""
    pss = rss = 0.0
    for each in [pid, *_children(pid)]:
        values = {}
        for name, key in (("status", "VmRSS:"), ("smaps_rollup", "Pss:")):
            try:
                lines = Path(f"/proc/{each}/{name}").read_text().splitlines()
            except OSError:
                continue
            values.update({key: int(line.split()[1]) / 1024 for line in lines if line.startswith(key)})
        rss += values.get("VmRSS:", 0.0)
        pss += values.get("Pss:", values.get("VmRSS:", 0.0))
    return pss, rss


def peak_mb(row: dict[str, Any]) -> float:
    """A cell's peak memory: its process's ``ru_maxrss``, or its process tree's sampled PSS
    peak (worker processes included, :func:`tree_mb`) where that is larger."""
    return max(row["peak_rss_mb"], row.get("peak_tree_mb", 0.0))


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def run_cell(n_labels: int, model: str, args: argparse.Namespace) -> dict[str, Any]:
    """One (L, model) cell in a fresh process under the time and memory limits."""
    if model in HOLOXMC and HOLOXMC[model].get("head") not in (None, *_heads()):
        return {"error": f"not run: holoxmc has no head={HOLOXMC[model].get('head')!r}", "stage": "start"}
    python = str(args.pecos_python) if model == "pecos-xrlinear" else sys.executable
    if model == "pecos-xrlinear" and not args.pecos_python.exists():
        return {"error": f"not run: no PECOS environment at {args.pecos_python}", "stage": "start"}
    threads = str(args.threads)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
    command = [python, str(Path(__file__).resolve()), "--child", str(n_labels), model, "--threads", threads,
               *(["--max-test", str(args.max_test)] if args.max_test is not None else []),
               "--predict-repeats", str(args.predict_repeats), "--knobs", json.dumps(args.knobs),
               "--model-options", json.dumps(args.model_options)]
    log = args.out.with_suffix(f".L{n_labels}.{model}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    load = [round(os.getloadavg()[0], 2)]
    with open(log, "w") as stdout:
        child = subprocess.Popen(command, stdout=stdout, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT)
        reason, peaks = _watch(child, args.timeout, args.memory_gb * 1024)
    stopped = time.time()
    load.append(round(os.getloadavg()[0], 2))
    lines = log.read_text().splitlines()
    if reason is None and child.returncode == 0 and lines and lines[-1].startswith("{"):
        log.unlink()
        cell = json.loads(lines[-1])
        cell["row"]["peak_tree_mb"], cell["row"]["peak_tree_rss_mb"] = (round(peak, 1) for peak in peaks)
        return {**cell, "load": load}
    if reason is None:
        reason = f"exit {child.returncode}: {(lines or ['no output'])[-1][:200]}"
    return {"error": reason, **last_stage(lines, stopped), "load": load}


def _heads() -> tuple[str, ...]:
    from holoxmc.models.registry import HEADS

    return tuple(HEADS)


def _watch(child: subprocess.Popen, timeout: float, memory_mb: float) -> tuple[str | None, tuple[float, float]]:
    """Wait for ``child``; kill it past ``timeout`` seconds or when its process tree's resident
    sum (:func:`tree_mb`, polled every half second) passes ``memory_mb``: why, if killed, and
    the largest PSS and resident sums polled."""
    started, peaks = time.monotonic(), (0.0, 0.0)
    while child.poll() is None:
        elapsed = time.monotonic() - started
        pss, resident = tree_mb(child.pid)
        peaks = (max(peaks[0], pss), max(peaks[1], resident))
        if elapsed > timeout or resident > memory_mb:
            child.kill()
            child.wait()
            return (f"time limit: not finished within {timeout:.0f} s" if elapsed > timeout else
                    f"memory limit: {resident:.0f} MB resident > {memory_mb:.0f} MB"), peaks
        time.sleep(0.5)
    return None, peaks


def table(results: dict[str, Any]) -> str:
    """The Markdown table of every cell in ``results``."""
    lines = ["| L | N train / test | model | fit s | peak MB | top-5 ms/pt | P@1 | P@5 | load |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(results["cells"], key=int):
        for model, cell in results["cells"][key].items():
            shape = cell.get("shape") or _planned_shape(int(key))
            size = f"{shape['n_train']} / {shape['n_test']}"
            row = cell.get("row")
            load = "-".join(f"{value:.1f}" for value in cell.get("load", [])) or "?"
            if row is None:
                spent = f", {cell['stage_seconds']:,.0f} s in" if "stage_seconds" in cell else ""
                lines.append(f"| {int(key):,} | {size} | {model} | {cell['error']} (stopped at: {cell['stage']}"
                             f"{spent}) ||||| {load} |")
                continue
            lines.append(f"| {int(key):,} | {size} | {model} | {row['fit_seconds']:.1f} | {peak_mb(row):.0f} | "
                         f"{row['predict_ms_per_point']:.3f} | {row['P@1']:.2f} | {row['P@5']:.2f} | {load} |")
    return "\n".join(lines)


def _planned_shape(n_labels: int) -> dict[str, int]:
    """The split sizes a cell at ``n_labels`` generates (for cells that stopped before saying)."""
    arguments = set_arguments(n_labels)
    return {"n_train": arguments["n_points"], "n_test": arguments["n_test"]}


def plot(results: dict[str, Any], path: Path) -> None:
    """Fit seconds, peak MB, top-5 ms/point and P@1 against L, one line per model (skipped,
    said on stdout, where matplotlib is not installed: e.g. PECOS's own environment)."""
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed here: no {path}", flush=True)
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("fit_seconds", "fit s", True), ("peak_mb", "peak MB", True),
              ("predict_ms_per_point", "top-5 ms/point", True), ("P@1", "P@1", False))
    figure, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    models = sorted({m for cells in results["cells"].values() for m in cells})
    for axis, (key, label, log) in zip(axes, panels):
        for model in models:
            points = sorted((int(L), peak_mb(cells[model]["row"]) if key == "peak_mb" else cells[model]["row"][key])
                            for L, cells in results["cells"].items() if "row" in cells.get(model, {}))
            if points:
                axis.plot(*zip(*points), marker="o", label=model)
        axis.set_xscale("log")
        if log:
            axis.set_yscale("log")
        axis.set_xlabel("L")
        axis.set_title(label)
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def merge(results: dict[str, Any], others: list[dict[str, Any]]) -> None:
    """Join the cells and runs of ``others`` into ``results`` (a later file's cell wins).

    Example:
        >>> mine = {"cells": {"10": {"a": {"row": 1}}}, "runs": ["x"]}
        >>> merge(mine, [{"cells": {"10": {"b": {"row": 2}}, "20": {"a": {"row": 3}}}, "runs": ["y"]}])
        >>> sorted(mine["cells"]), sorted(mine["cells"]["10"]), mine["runs"]
        (['10', '20'], ['a', 'b'], ['x', 'y'])
    """
    for other in others:
        for key, cells in other["cells"].items():
            results["cells"].setdefault(key, {}).update(cells)
        results.setdefault("runs", []).extend(run for run in other.get("runs", []) if run not in results["runs"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", nargs="+", type=int, default=[10_000, 100_000, 670_000, 3_000_000])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds for one cell")
    parser.add_argument("--memory-gb", type=float, default=16.0, help="resident memory limit of one cell")
    parser.add_argument("--max-test", type=int, default=None, help="score the first N test rows only")
    parser.add_argument("--predict-repeats", type=int, default=3,
                        help="time the top-5 of the test rows this many times; the median is reported")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--pecos-python", type=Path, default=ROOT / ".venv-pecos" / "bin" / "python")
    parser.add_argument("--merge", nargs="+", type=Path, default=[],
                        help="result files of other runs whose cells join --out (run no cell)")
    parser.add_argument("--knobs", type=json.loads, default={},
                        help="make_realistic keywords over every L's set (a variant: JSON, e.g. '{\"noise\": 0.7}')")
    parser.add_argument("--model-options", type=json.loads, default={},
                        help="more XMCClassifier arguments of the holoxmc models (JSON, e.g. "
                             "'{\"hidden\": [128], \"head_options\": {\"feature_dim\": 32768}}')")
    parser.add_argument("--child", nargs=2, metavar=("L", "MODEL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_child(int(args.child[0]), args.child[1], args.threads, args.max_test, args.predict_repeats, args.knobs,
                  args.model_options)
        return
    from holoxmc.io import atomic_write_json, atomic_write_text

    results = json.loads(args.out.read_text()) if args.out.exists() else {"cells": {}}
    if args.merge:
        merge(results, [json.loads(path.read_text()) for path in args.merge])
        atomic_write_json(args.out, results)
        args.labels = []
    else:
        command = " ".join(["python benchmarks/scaling.py", *(argv if argv is not None else sys.argv[1:])])
        limits = {"timeout_s": args.timeout, "memory_gb": args.memory_gb, "threads": args.threads,
                  "max_test": args.max_test, "predict_repeats": args.predict_repeats, "knobs": args.knobs,
                  "model_options": args.model_options}
        results.setdefault("runs", []).append({"command": command, "limits": limits})
    for n_labels in args.labels:
        for model in args.models:
            cell = run_cell(n_labels, model, args)
            results["cells"].setdefault(str(n_labels), {})[model] = cell
            print(json.dumps({"L": n_labels, "model": model, **cell}), flush=True)
            atomic_write_json(args.out, results)
    atomic_write_text(args.out.with_suffix(".md"), table(results) + "\n")
    plot(results, args.out.with_suffix(".png"))
    print(table(results))


if __name__ == "__main__":
    main()

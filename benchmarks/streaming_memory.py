"""Peak memory of training and scoring in memory vs from shard stores, side by side.

The data (a :func:`~holoxmc.data.make_realistic` set, by default ``realistic-100k``'s
shape, ``--n-points`` / ``--n-test`` / ``--n-labels`` to change it) is generated once and written both as the
``.npz`` cache (``save_npz``) and as shard stores (``write_shards``). Then, in a fresh
process each, alternating: load it (``load_npz``, or ``open_shards``), train HRR-FC for one
epoch (the library's defaults, validation share included; ``--hidden`` and ``--dim`` change
the network) and evaluate the test split.
Each process reports its peak resident memory (``VmHWM`` of ``/proc/self/status``: this
process's own high-water mark, which ``getrusage`` is not in a child of a large parent, as
it keeps the parent's size at the fork) after loading, after fitting and at the end, and
``/usr/bin/time -f %M`` runs each process for a second reading of its peak.

Usage:
    PYTHONPATH=src .venv/bin/python benchmarks/streaming_memory.py [--n-points 73000] [--n-test 23000]
        [--n-labels 100000] [--hidden 512,512] [--dim 400] [--rows-per-shard 8192] [--repeats 1] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from holoxmc.data import load_npz, make_realistic, open_shards, save_npz, write_shards
from holoxmc.data.realistic import REALISTIC_PRESETS


def peak_mib() -> float:
    """This process's peak resident memory so far, MiB (``VmHWM``, in kB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prepare(work: Path, n_points: int, n_test: int, n_labels: int, rows_per_shard: int) -> dict[str, float]:
    """Generate the set and write it as ``.npz`` files and as shard stores, unless present."""
    if (work / "done.json").exists():
        return json.loads((work / "done.json").read_text())
    start = time.perf_counter()
    preset = {**REALISTIC_PRESETS["realistic-100k"], "n_points": n_points, "n_test": n_test, "n_labels": n_labels}
    train, test = make_realistic(**preset, name="realistic-100k")
    for split, dataset in (("train", train), ("test", test)):
        save_npz(dataset, work / f"{split}.npz")
        write_shards(dataset, work / split, rows_per_shard)
    facts = {"seconds": time.perf_counter() - start, "train_rows": len(train), "test_rows": len(test),
             "train_X_nnz": train.X.nnz, "n_features": train.n_features, "n_labels": train.n_labels,
             "npz_mib": sum((work / f"{s}.npz").stat().st_size for s in ("train", "test")) / 2**20,
             "shard_mib": sum(f.stat().st_size for s in ("train", "test") for f in (work / s).iterdir()) / 2**20}
    (work / "done.json").write_text(json.dumps(facts))
    return facts


def run(mode: str, work: Path, hidden: tuple[int, ...], dim: int) -> dict[str, float]:
    """Load, train one epoch, evaluate; the peaks along the way (in this process)."""
    from holoxmc.estimator import XMCClassifier

    start = time.perf_counter()
    if mode == "memory":
        train, test = load_npz(work / "train.npz"), load_npz(work / "test.npz")
    else:
        train, test = open_shards(work / "train"), open_shards(work / "test")
    loaded = peak_mib()
    clf = XMCClassifier(head="hrr", hidden=hidden, dim=dim, epochs=1, seed=0, progress=False).fit(train.X, train.Y)
    fitted, fit_end = peak_mib(), time.perf_counter()
    metrics = clf.evaluate(test.X, test.Y, ks=(1, 5))
    return {"loaded_mib": loaded, "fitted_mib": fitted, "peak_mib": peak_mib(), "P@1": metrics["P@1"],
            "P@5": metrics["P@5"], "fit_s": fit_end - start, "total_s": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-points", type=int, default=REALISTIC_PRESETS["realistic-100k"]["n_points"])
    parser.add_argument("--n-test", type=int, default=REALISTIC_PRESETS["realistic-100k"]["n_test"])
    parser.add_argument("--n-labels", type=int, default=REALISTIC_PRESETS["realistic-100k"]["n_labels"])
    parser.add_argument("--hidden", default="512,512", help="hidden widths, comma-separated")
    parser.add_argument("--dim", type=int, default=400)
    parser.add_argument("--rows-per-shard", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--work", type=Path, help="where the data is written (default: a temporary folder)")
    parser.add_argument("--child", choices=("memory", "shards"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run(args.child, args.work, tuple(int(h) for h in args.hidden.split(",")), args.dim)))
        return
    work = args.work or Path(tempfile.mkdtemp(prefix="holoxmc-stream-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPU cores (shared), load {os.getloadavg()[0]:.2f}")
    facts = prepare(work, args.n_points, args.n_test, args.n_labels, args.rows_per_shard)
    print(f"data: {json.dumps(facts)}")
    results: dict[str, list[dict[str, float]]] = {"memory": [], "shards": []}
    for _ in range(args.repeats):
        for mode in results:
            command = [sys.executable, __file__, "--child", mode, "--work", str(work), "--hidden", args.hidden,
                       "--dim", str(args.dim)]
            timed = Path("/usr/bin/time").exists()
            done = subprocess.run(["/usr/bin/time", "-f", "%M", *command] if timed else command, check=True,
                                  capture_output=True, text=True)
            results[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
            if timed:
                results[mode][-1]["time_%M_mib"] = int(done.stderr.strip().splitlines()[-1]) / 1024
            print(f"{mode}: {results[mode][-1]}", flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")
    print("| | in memory (.npz) | from shards | ratio |\n|---|---:|---:|---:|")
    for key in ("loaded_mib", "fitted_mib", "peak_mib", "time_%M_mib", "fit_s", "total_s", "P@1", "P@5"):
        if any(key not in r for mode in results for r in results[mode]):
            continue
        memory, shards = (statistics.median(r[key] for r in results[mode]) for mode in results)
        ratio = f"{shards / memory:.2f}" if memory else "-"
        print(f"| {key} | {memory:.1f} | {shards:.1f} | {ratio} |")


if __name__ == "__main__":
    main()

"""HRR-FC vs FC, as measured here (HRR paper Tables 1-3 and inference time).

* Table 1: test P@1/3/5 and PSP@1/3/5 of FC and HRR-FC on Bibtex and Delicious, each
  with its DEFAULT configuration (``holoxmc train DATA --model {fc,hrr-fc}`` presets).
* Table 2: output-layer and whole-network parameter reduction of HRR-FC vs FC.
* Table 3: seconds per training epoch, FC and HRR-FC side by side in one process
  (epochs interleaved FC, HRR, FC, HRR, ...; median of ``--repeats``), on each dataset
  and on a synthetic L = 200,000 set from ``holoxmc.data.make_synthetic``.
* Inference: top-5 milliseconds per test point (whole test set, batches of 1024), FC and
  HRR-FC interleaved in the same process as the epochs, median of ``--repeats``.

Usage:
    python benchmarks/hrr_vs_dense.py        # everything; writes benchmarks/results/hrr_vs_dense/
    python benchmarks/hrr_vs_dense.py --datasets delicious --models hrr-fc --parts table1
    # each part is cached as one JSON file (report-DATA-MODEL, timing-DATA, large) and reused
    python benchmarks/hrr_vs_dense.py --device cuda --out DIR   # everything on a GPU
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from holoxmc.cli.train import train_params
from holoxmc.presets import dataset_preset
from holoxmc.data import load, make_synthetic
from holoxmc.cli.report import fit_and_report
from holoxmc.estimator import XMCClassifier
from holoxmc.io import atomic_write_json, atomic_write_text
from holoxmc.train import TrainConfig, Trainer, predict_topk

MODELS = ("fc", "hrr-fc")


def side_by_side(
    params_by_model: dict[str, dict], X, Y, repeats: int, X_test=None, device: str = "cpu"
) -> dict[str, dict[str, list[float]]]:
    """Optimisation seconds of one epoch per model and, given ``X_test``, top-5 prediction
    milliseconds per test point; every repeat runs each model once, in turn, so load
    from other processes hits all models alike."""
    seconds: dict[str, list[float]] = {model: [] for model in params_by_model}
    predict_ms: dict[str, list[float]] = {model: [] for model in params_by_model}
    networks = {}
    for model, params in params_by_model.items():
        clf = XMCClassifier(**params)
        networks[model] = (clf.new_network(Y.shape[1], X.shape[1]), clf)
    for repeat in range(repeats):
        for model, (network, clf) in networks.items():
            config = timing_config(clf, epochs=1, seed=repeat, device=device)
            seconds[model].append(Trainer(config).fit(network, X, Y).epoch_seconds[0])
            if X_test is not None:
                predict_topk(network, X_test[:64], k=5, device=device)  # warm-up (an HRR head folds its decoder here)
                started = time.perf_counter()
                predict_topk(network, X_test, k=5, device=device)  # returns host arrays: the GPU has finished
                predict_ms[model].append(1000.0 * (time.perf_counter() - started) / X_test.shape[0])
    return {"epoch_seconds": seconds} | ({"predict_ms_per_point": predict_ms} if X_test is not None else {})


def timing_config(clf: XMCClassifier, epochs: int, seed: int, **options) -> TrainConfig:
    """The estimator's optimisation settings for timed epochs: a constant learning rate,
    nothing held out; ``options`` are further ``TrainConfig`` fields."""
    return TrainConfig(epochs=epochs, batch_size=clf.setting("batch_size"), lr=clf.setting("lr"), schedule="none",
                       sparse_updates=clf.sparse_updates, val_fraction=0.0, seed=seed, progress=False, **options)


def reduction(fc: int, hrr: int) -> float:
    return 100.0 * (fc - hrr) / fc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*", default=["bibtex", "delicious"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--parts", nargs="+", default=["table1", "timing", "large"],
                        choices=["table1", "timing", "large"], help="what to (re)compute; cached parts are reused")
    parser.add_argument("--repeats", type=int, default=5, help="timed epochs (and predictions) per model for Table 3")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads (default: torch's choice); 1 is steadier on a shared machine")
    parser.add_argument("--large-labels", type=int, default=200_000)
    parser.add_argument("--large-points", type=int, default=2_000)
    parser.add_argument("--large-dim", type=int, default=3000, help="d' on the large set (paper: 3000)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ... (every model and timing runs there)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/hrr_vs_dense"),
                        help="folder of the per-part JSON files and the rendered tables")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    out: Path = args.out

    for name in args.datasets:
        if "table1" in args.parts:
            train, test = load(name, "train"), load(name, "test")
            for model in args.models:
                path = out / f"report-{name}-{model}.json"
                if reuse(path):
                    continue
                params = train_params(name, model, {"device": args.device}, preset=dataset_preset(name)) | {"progress": False}
                print(f"[{name}] training {model} with {params}", flush=True)
                report = fit_and_report(XMCClassifier(**params), train.X, train.Y, test.X, test.Y)
                report["params_used"] = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
                atomic_write_json(path, report)
                print(f"[{name}] {model}: P@1 {report['test']['P@1']:.2f}", flush=True)
        if "timing" in args.parts and not reuse(out / f"timing-{name}.json"):
            train, test = load(name, "train"), load(name, "test")
            params = {m: train_params(name, m, {"device": args.device}) | {"progress": False} for m in MODELS}
            print(f"[{name}] timing epochs and top-5 prediction side by side", flush=True)
            atomic_write_json(out / f"timing-{name}.json", {
                "threads": torch.get_num_threads(),
                **side_by_side(params, train.X, train.Y, args.repeats, X_test=test.X, device=args.device),
            })

    if "large" in args.parts and not reuse(out / "large.json"):
        train, _ = make_synthetic(args.large_points, args.large_labels, 20_000, n_test=0, seed=0,
                                  name=f"synthetic-L{args.large_labels}")
        params = {
            "fc": {"head": "dense", "progress": False},
            "hrr-fc": {"head": "hrr", "dim": args.large_dim, "progress": False},
        }
        print(f"[large] timing epochs on {train.n_labels} labels, {len(train)} points", flush=True)
        atomic_write_json(out / "large.json", {
            "labels": train.n_labels, "points": len(train), "features": train.n_features, "dim": args.large_dim,
            "threads": torch.get_num_threads(),
            **side_by_side(params, train.X, train.Y, args.repeats, device=args.device),
        })

    results = collect(out, args.device)
    atomic_write_json(out / "summary.json", results)
    markdown = render(results)
    atomic_write_text(out / "tables.md", markdown)
    print(markdown)


def reuse(path: Path) -> bool:
    """Whether a cached part exists (and will be reused: say so, it may predate the code)."""
    if path.exists():
        print(f"reusing {path} (delete it to measure again)", flush=True)
    return path.exists()


def paired(fc: list[float], hrr: list[float]) -> str:
    """Median of the per-repeat FC / HRR ratios and in how many repeats HRR-FC was faster."""
    ratios = [a / b for a, b in zip(fc, hrr)]
    return f"{statistics.median(ratios):.2f}x, {sum(r > 1 for r in ratios)} of {len(ratios)}"


def collect(out: Path, device: str = "cpu") -> dict:
    """Gather every cached part under ``out``."""
    where = f"{platform.machine()}, {os.cpu_count()} cores"
    if torch.device(device).type == "cuda":
        where = f"{torch.cuda.get_device_name(torch.device(device))} ({where})"
    results: dict = {
        "machine": where,
        "torch": torch.__version__,
        "datasets": {},
    }
    for path in sorted(out.glob("report-*.json")):
        model = "hrr-fc" if path.stem.endswith("-hrr-fc") else "fc"
        name = path.stem.removeprefix("report-").removesuffix(f"-{model}")
        results["datasets"].setdefault(name, {"reports": {}})["reports"][model] = json.loads(path.read_text())
    for path in sorted(out.glob("timing-*.json")):
        name = path.stem.removeprefix("timing-")
        results["datasets"].setdefault(name, {"reports": {}}).update(json.loads(path.read_text()))
    if (out / "large.json").exists():
        results["large"] = json.loads((out / "large.json").read_text())
    return results


def render(results: dict) -> str:
    lines = [f"Machine: {results['machine']}; torch {results['torch']}.", ""]
    lines += ["Table 1 (test, percent; default configurations)", "",
              "| dataset | model | P@1 | P@3 | P@5 | PSP@1 | PSP@3 | PSP@5 |", "|---|---|---|---|---|---|---|---|"]
    complete = {name: e for name, e in results["datasets"].items() if set(e["reports"]) == set(MODELS)}
    for name, entry in complete.items():
        for model in MODELS:
            t = entry["reports"][model]["test"]
            lines.append(f"| {name} | {model} | " + " | ".join(f"{t[k]:.2f}" for k in
                         ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")) + " |")
    lines += ["", "Table 2 (parameters)", "",
              "| dataset | FC output | HRR output | output reduction | FC total | HRR total | network reduction |",
              "|---|---|---|---|---|---|---|"]
    for name, entry in complete.items():
        fc, hrr = entry["reports"]["fc"]["params"], entry["reports"]["hrr-fc"]["params"]
        lines.append(f"| {name} | {fc['output_layer']:,} | {hrr['output_layer']:,} | "
                     f"{reduction(fc['output_layer'], hrr['output_layer']):.1f}% | {fc['total']:,} | {hrr['total']:,} | "
                     f"{reduction(fc['total'], hrr['total']):.1f}% |")
    lines += ["", "Table 3 (seconds per training epoch and top-5 ms per test point, medians of interleaved repeats)", "",
              "FC / HRR is the ratio of the medians; paired: the median of the per-repeat ratios, and in how many "
              "repeats HRR-FC was faster", "",
              "| set | FC s/epoch | HRR-FC s/epoch | FC / HRR | paired | FC ms/pt | HRR ms/pt | FC / HRR | paired |",
              "|---|---|---|---|---|---|---|---|---|"]
    timed = [(name, entry) for name, entry in results["datasets"].items() if "epoch_seconds" in entry]
    if "large" in results:
        large = results["large"]
        timed.append((f"synthetic L={large['labels']:,} ({large['points']:,} pts, d'={large['dim']})", large))
    for name, entry in timed:
        name += f", {entry['threads']} thread(s)" if "threads" in entry else ""
        cells = []
        for measure, digits in (("epoch_seconds", 2), ("predict_ms_per_point", 4)):
            if measure not in entry:
                cells.append("- | - | - | -")
                continue
            fc, hrr = (statistics.median(entry[measure][m]) for m in MODELS)
            cells.append(f"{fc:.{digits}f} | {hrr:.{digits}f} | {fc / hrr:.2f}x | {paired(*(entry[measure][m] for m in MODELS))}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

"""HRR-FC vs FC, as measured here (HRR paper Tables 1-3 and inference time).

* Table 1: test P@1/3/5 and PSP@1/3/5 of FC and HRR-FC on Bibtex and Delicious, each
  with its DEFAULT configuration (``holoxmc train DATA --model {fc,hrr-fc}`` presets).
* Table 2: output-layer and whole-network parameter reduction of HRR-FC vs FC.
* Table 3: seconds per training epoch, FC and HRR-FC side by side in one process
  (epochs interleaved FC, HRR, FC, HRR, ...; median of ``--repeats``), on each dataset
  and on a synthetic L = 200,000 set from ``holoxmc.data.make_synthetic``.
* Inference: top-5 milliseconds per test point (whole test set, batches of 1024).

Usage:
    python benchmarks/hrr_vs_dense.py                 # everything, writes benchmarks/results/
    python benchmarks/hrr_vs_dense.py --skip-large    # without the L = 200,000 timing
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from holoxmc.cli.train import train_params
from holoxmc.data import load, make_synthetic
from holoxmc.estimator import NETWORK_FACTORIES, XMCClassifier, fit_and_report
from holoxmc.io import atomic_write_json, atomic_write_text
from holoxmc.train import TrainConfig, Trainer

MODELS = ("fc", "hrr-fc")


def epoch_seconds_side_by_side(params_by_model: dict[str, dict], X, Y, repeats: int) -> dict[str, list[float]]:
    """Optimisation seconds of one epoch per model, epochs interleaved across models."""
    seconds: dict[str, list[float]] = {model: [] for model in params_by_model}
    networks = {}
    for model, params in params_by_model.items():
        clf = XMCClassifier(**params)
        networks[model] = (NETWORK_FACTORIES[clf.head](clf, Y.shape[1], X.shape[1]), clf)
    for repeat in range(repeats):
        for model, (network, clf) in networks.items():
            config = TrainConfig(epochs=1, batch_size=clf.batch_size, lr=clf.lr, schedule="none",
                                 val_fraction=0.0, seed=repeat, progress=False)
            seconds[model].append(Trainer(config).fit(network, X, Y).epoch_seconds[0])
    return seconds


def reduction(fc: int, hrr: int) -> float:
    return 100.0 * (fc - hrr) / fc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["bibtex", "delicious"])
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs per model for Table 3")
    parser.add_argument("--large-labels", type=int, default=200_000)
    parser.add_argument("--large-points", type=int, default=2_000)
    parser.add_argument("--large-dim", type=int, default=3000, help="d' on the large set (paper: 3000)")
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--out", default="benchmarks/results/hrr_vs_dense")
    args = parser.parse_args()

    results: dict = {
        "machine": f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads; "
        "2-core CPU shared with other jobs",
        "torch": torch.__version__,
        "datasets": {},
    }
    for name in args.datasets:
        train, test = load(name, "train"), load(name, "test")
        entry: dict = {"reports": {}, "params": {}}
        for model in MODELS:
            params = train_params(name, model, {})
            params["progress"] = False
            entry["params"][model] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}
            print(f"[{name}] training {model} with {params}", flush=True)
            entry["reports"][model] = fit_and_report(XMCClassifier(**params), train.X, train.Y, test.X, test.Y)
            print(f"[{name}] {model}: P@1 {entry['reports'][model]['test']['P@1']:.2f}", flush=True)
        timing_params = {m: entry["params"][m] | {"hidden": tuple(entry["params"][m]["hidden"]),
                                                   "propensity": tuple(entry["params"][m]["propensity"])}
                         for m in MODELS}
        entry["epoch_seconds"] = epoch_seconds_side_by_side(timing_params, train.X, train.Y, args.repeats)
        results["datasets"][name] = entry

    if not args.skip_large:
        train, _ = make_synthetic(args.large_points, args.large_labels, 20_000, n_test=0, seed=0,
                                  name=f"synthetic-L{args.large_labels}")
        params = {
            "fc": {"head": "dense", "progress": False},
            "hrr-fc": {"head": "hrr", "dim": args.large_dim, "progress": False},
        }
        print(f"[large] timing epochs on {train.n_labels} labels, {len(train)} points", flush=True)
        started = time.perf_counter()
        results["large"] = {
            "labels": train.n_labels, "points": len(train), "features": train.n_features, "dim": args.large_dim,
            "epoch_seconds": epoch_seconds_side_by_side(params, train.X, train.Y, args.repeats),
        }
        print(f"[large] done in {time.perf_counter() - started:.0f}s", flush=True)

    atomic_write_json(f"{args.out}.json", results)
    markdown = render(results)
    atomic_write_text(f"{args.out}.md", markdown)
    print(markdown)


def render(results: dict) -> str:
    lines = [f"Machine: {results['machine']}; torch {results['torch']}.", ""]
    lines += ["Table 1 (test, percent; default configurations)", "",
              "| dataset | model | P@1 | P@3 | P@5 | PSP@1 | PSP@3 | PSP@5 |", "|---|---|---|---|---|---|---|---|"]
    for name, entry in results["datasets"].items():
        for model in MODELS:
            t = entry["reports"][model]["test"]
            lines.append(f"| {name} | {model} | " + " | ".join(f"{t[k]:.2f}" for k in
                         ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")) + " |")
    lines += ["", "Table 2 (parameters)", "",
              "| dataset | FC output | HRR output | output reduction | FC total | HRR total | network reduction |",
              "|---|---|---|---|---|---|---|"]
    for name, entry in results["datasets"].items():
        fc, hrr = entry["reports"]["fc"]["params"], entry["reports"]["hrr-fc"]["params"]
        lines.append(f"| {name} | {fc['output_layer']:,} | {hrr['output_layer']:,} | "
                     f"{reduction(fc['output_layer'], hrr['output_layer']):.1f}% | {fc['total']:,} | {hrr['total']:,} | "
                     f"{reduction(fc['total'], hrr['total']):.1f}% |")
    lines += ["", "Table 3 (seconds per training epoch, median of interleaved repeats) and inference", "",
              "| set | FC s/epoch | HRR-FC s/epoch | FC / HRR | FC ms/pt | HRR ms/pt |", "|---|---|---|---|---|---|"]
    for name, entry in results["datasets"].items():
        fc, hrr = (statistics.median(entry["epoch_seconds"][m]) for m in MODELS)
        ms = [entry["reports"][m]["predict_ms_per_point"] for m in MODELS]
        lines.append(f"| {name} | {fc:.2f} | {hrr:.2f} | {fc / hrr:.2f}x | {ms[0]:.3f} | {ms[1]:.3f} |")
    if "large" in results:
        large = results["large"]
        fc, hrr = (statistics.median(large["epoch_seconds"][m]) for m in MODELS)
        lines.append(f"| synthetic L={large['labels']:,} ({large['points']:,} pts, d'={large['dim']}) | "
                     f"{fc:.2f} | {hrr:.2f} | {fc / hrr:.2f}x | - | - |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()

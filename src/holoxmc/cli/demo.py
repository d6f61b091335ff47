"""``holoxmc demo`` (the ``make demo`` job): FC vs HRR-FC on the default synthetic set.

Trains both models with the same backbone and prints one comparison table: P@1/3/5,
PSP@1/3/5, parameters (whole network and output layer), seconds per epoch and top-5
inference milliseconds per point.
"""

from __future__ import annotations

import argparse
import statistics
import sys

__all__ = ["register", "comparison_table"]

DEMO_MODELS = ("fc", "hrr-fc")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``demo`` to the ``holoxmc`` parser."""
    demo = subparsers.add_parser(
        "demo",
        help="train FC and HRR-FC on the synthetic default set and compare them",
        description="Trains FC and HRR-FC on holoxmc.data.load('synthetic') and prints a comparison table.",
    )
    demo.add_argument("--epochs", type=int, default=4, help="epochs per model (default 4)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--device", default="cpu")
    demo.add_argument("--quiet", action="store_true", help="no progress output")
    demo.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    from holoxmc.cli.train import train_params
    from holoxmc.data import load
    from holoxmc.cli.report import fit_and_report
    from holoxmc.estimator import XMCClassifier

    train, test = load("synthetic", "train"), load("synthetic", "test")
    print(
        f"synthetic: {len(train)} train / {len(test)} test points, "
        f"{train.n_features} features, {train.n_labels} labels",
        file=sys.stderr,
    )
    reports = {}
    for model in DEMO_MODELS:
        params = train_params("synthetic", model, {"epochs": args.epochs, "seed": args.seed, "device": args.device})
        params["progress"] = False if args.quiet else None
        if not args.quiet:
            print(f"training {model} ({args.epochs} epochs) ...", file=sys.stderr)
        reports[model] = fit_and_report(XMCClassifier(**params), train.X, train.Y, test.X, test.Y)
    print(comparison_table(reports))
    return 0


def comparison_table(reports: dict[str, dict]) -> str:
    """One row per model: P@1/3/5, PSP@1/3/5, parameters, s/epoch, ms/point."""
    columns = ["P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5"]
    header = f"{'model':<8}" + "".join(f"{c:>8}" for c in columns)
    header += f"{'params':>12}{'out-layer':>12}{'s/epoch':>9}{'ms/pt':>8}"
    lines = [header, "-" * len(header)]
    for model, report in reports.items():
        row = f"{model:<8}" + "".join(f"{report['test'][c]:>8.2f}" for c in columns)
        row += f"{report['params']['total']:>12,}{report['params']['output_layer']:>12,}"
        row += f"{statistics.median(report['epoch_seconds']):>9.2f}{report['predict_ms_per_point']:>8.3f}"
        lines.append(row)
    return "\n".join(lines)

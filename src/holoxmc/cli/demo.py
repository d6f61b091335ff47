"""``holoxmc demo`` (the ``make demo`` job): FC vs HRR-FC on the default synthetic set.

Trains both models with the same backbone, each with its own epochs and learning rate
(:data:`DEMO_SETTINGS`), and prints one comparison table: the settings, P@1/3/5, PSP@1/3/5,
parameters (whole network and output layer), seconds per epoch, seconds per model, top-5
inference milliseconds per point, and whether the model converged: whether its P@1 on the
validation rows the trainer holds out of the training split (never the test split) had
stopped rising before the last epoch. A model still rising is marked under-trained, so the
table does not pass an under-trained model off as a weaker one.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time

from holoxmc.cli import positive_int

__all__ = ["register", "comparison_table", "DEMO_SETTINGS"]

_LOG = logging.getLogger(__name__)

DEMO_MODELS = ("fc", "hrr-fc")
#: Per model, the epochs and learning rate of the demo (``--epochs`` overrides the epochs),
#: chosen on the synthetic training split's validation rows by
#: ``benchmarks/tuning/demo_sweep.py`` (docs/tuning.md, "Demo settings"). The table's
#: ``converged`` column reports, per run, whether they sufficed.
DEMO_SETTINGS: dict[str, dict[str, float | int]] = {
    "fc": {"epochs": 12, "lr": 1e-2},
    "hrr-fc": {"epochs": 6, "lr": 1e-3},
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``demo`` to the ``holoxmc`` parser."""
    demo = subparsers.add_parser(
        "demo",
        help="train FC and HRR-FC on the synthetic default set and compare them",
        description="Trains FC and HRR-FC on holoxmc.data.load('synthetic'), each with the epochs and learning "
                    "rate it converges with on the validation rows (see DEMO_SETTINGS), and prints a comparison "
                    "table.",
    )
    demo.add_argument("--epochs", type=positive_int, default=None,
                      help="epochs for every model (default: each model's own, see the table)")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--device", default="cpu")
    demo.set_defaults(run=run_demo)


def run_demo(args: argparse.Namespace) -> int:
    """Train the demo's models with :data:`DEMO_SETTINGS` (``--epochs`` overrides the
    epochs) and print their table; every argument is checked before any work."""
    from holoxmc.cli.train import train_params
    from holoxmc.data import load
    from holoxmc.cli.report import fit_and_report
    from holoxmc.devices import check_device
    from holoxmc.estimator import XMCClassifier

    if args.seed < 0:
        from holoxmc.errors import InputError

        raise InputError(f"--seed must be >= 0, got {args.seed}")
    check_device(args.device)
    settings = {model: DEMO_SETTINGS[model] | ({"epochs": args.epochs} if args.epochs else {}) for model in DEMO_MODELS}
    params = {model: train_params("synthetic", model, settings[model] | {"seed": args.seed, "device": args.device})
              | {"progress": False if args.quiet else None} for model in DEMO_MODELS}
    classifiers = {model: XMCClassifier(**params[model]) for model in DEMO_MODELS}
    train, test = load("synthetic", "train"), load("synthetic", "test")
    _LOG.info(f"synthetic: {len(train)} train / {len(test)} test points, "
              f"{train.n_features} features, {train.n_labels} labels")
    reports = {}
    for model, clf in classifiers.items():
        _LOG.info(f"training {model} ({settings[model]['epochs']} epochs, lr {settings[model]['lr']:g}) ...")
        started = time.perf_counter()
        reports[model] = fit_and_report(clf, train.X, train.Y, test.X, test.Y)
        reports[model]["settings"] = settings[model]
        reports[model]["seconds"] = time.perf_counter() - started
        reports[model]["converged"] = converged(clf.fit_result_.history)
        _LOG.info(f"{model}: {reports[model]['seconds']:.1f} s")
    print(comparison_table(reports))
    return 0


def converged(history: list[dict]) -> str:
    """``"yes"`` when the validation P@1 of ``history`` (the trainer's per-epoch entries)
    peaked before the last epoch, else ``"no: still rising"`` (more epochs or a larger lr
    would likely help); ``"?"`` without validation metrics.

    Example:
        >>> converged([{"val": {"P@1": 50.0}}, {"val": {"P@1": 49.0}}])
        'yes'
    """
    scores = [entry["val"]["P@1"] for entry in history if "val" in entry]
    if len(scores) < 2:
        return "?"
    return "yes" if max(scores) > scores[-1] or scores[-1] <= scores[-2] else "no: still rising"


def comparison_table(reports: dict[str, dict]) -> str:
    """One row per model: epochs, lr, P@1/3/5, PSP@1/3/5, parameters, s/epoch, training
    and scoring seconds (``seconds``), ms/point. Columns a report lacks are left out."""
    columns = ["P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5"]
    with_settings = all("settings" in report for report in reports.values())
    with_seconds = all("seconds" in report for report in reports.values())
    header = f"{'model':<8}" + (f"{'epochs':>7}{'lr':>7}" if with_settings else "")
    header += "".join(f"{c:>8}" for c in columns)
    header += f"{'params':>12}{'out-layer':>12}{'s/epoch':>9}" + (f"{'seconds':>9}" if with_seconds else "")
    header += f"{'ms/pt':>8}" + ("  converged" if all("converged" in r for r in reports.values()) else "")
    lines = [header, "-" * len(header)]
    for model, report in reports.items():
        row = f"{model:<8}"
        if with_settings:
            row += f"{report['settings']['epochs']:>7}{report['settings']['lr']:>7g}"
        row += "".join(f"{report['test'][c]:>8.2f}" for c in columns)
        row += f"{report['params']['total']:>12,}{report['params']['output_layer']:>12,}"
        row += f"{statistics.median(report['epoch_seconds']):>9.2f}"
        row += f"{report['seconds']:>9.1f}" if with_seconds else ""
        row += f"{report['predict_ms_per_point']:>8.3f}"
        row += f"  {report['converged']}" if "converged" in report else ""
        lines.append(row)
    return "\n".join(lines)

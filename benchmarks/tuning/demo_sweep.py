"""The demo's per-model epochs and learning rate, chosen on the VALIDATION rows the trainer
holds out of the synthetic training split (never its test split): for each model and
learning rate, one run of ``--max-epochs`` epochs records the validation P@1 after every
epoch; the table lists the best epoch and its P@1.

Run: PYTHONPATH=src python benchmarks/tuning/demo_sweep.py [--max-epochs 8] [--lrs 1e-3 3e-3 1e-2] [--models fc]

The learning-rate schedule is cosine over ``--max-epochs``, so a shorter run's curve is not
exactly this curve cut short; the demo's settings were checked by running the demo.
"""

from __future__ import annotations

import argparse
import time

from holoxmc.cli.demo import DEMO_MODELS
from holoxmc.cli.train import train_params
from holoxmc.data import load
from holoxmc.estimator import XMCClassifier


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-epochs", type=int, default=8)
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3, 3e-3, 1e-2])
    parser.add_argument("--models", nargs="+", choices=DEMO_MODELS, default=list(DEMO_MODELS))
    args = parser.parse_args()
    train = load("synthetic", "train")
    print(f"{'model':<8}{'lr':>8}  val P@1 per epoch{'':<40}best epoch  best val P@1  seconds")
    for model in args.models:
        for lr in args.lrs:
            params = train_params("synthetic", model, {"epochs": args.max_epochs, "lr": lr, "seed": 0})
            started = time.perf_counter()
            clf = XMCClassifier(**params | {"progress": False}).fit(train.X, train.Y)
            seconds = time.perf_counter() - started
            curve = [entry["val"]["P@1"] for entry in clf.fit_result_.history if "val" in entry]
            best = max(range(len(curve)), key=lambda i: curve[i])
            print(f"{model:<8}{lr:>8g}  {' '.join(f'{p:5.1f}' for p in curve):<57}{best + 1:>10}"
                  f"{curve[best]:>13.2f}{seconds:>9.1f}", flush=True)


if __name__ == "__main__":
    main()

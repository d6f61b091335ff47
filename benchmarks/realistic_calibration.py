"""Calibrate make_realistic's noise against the tree libraries (issue 32 item 1).

For each knob setting, generate the TRAINING split of a realistic preset (or of the scaling
study's L at the 100K preset's ratios), hold out its last ``--holdout`` share of rows as a
validation split, fit one library on the rest and score P@1 / P@5 on the held-out rows. The
test split is never generated, so a setting is chosen without looking at it. One JSON line per
(setting, model), with the load average at the start and the end of the fit.

Usage:
    python benchmarks/realistic_calibration.py --labels 100000 --models napkinxc-plt \
        --knobs '{"noise": 0.93}' '{"noise": 0.85}'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def validation_split(n_labels: int, knobs: dict, holdout: float, scale: float, seed: int, max_validation: int):
    """The (fit, validation) pair cut from the training split of the set at ``n_labels``: the
    first ``1 - holdout`` of the rows, then at most ``max_validation`` of the rest."""
    from scaling import set_arguments

    from holoxmc.data import Dataset, make_realistic

    arguments = {**set_arguments(n_labels), **knobs}
    arguments["n_points"] = max(10, round(arguments["n_points"] * scale))
    arguments["n_test"] = 0
    train, _ = make_realistic(**arguments, seed=seed, name=f"realistic-L{n_labels}")
    cut = round(len(train) * (1 - holdout))
    return (Dataset(train.X[:cut], train.Y[:cut], train.name), Dataset(train.X[cut:cut + max_validation], train.Y[cut:cut + max_validation], train.name),
            arguments)


def _announced(fit, model: str):
    """``fit`` that says on stderr when it is done (predicting can take longer than fitting)."""
    def announced(X, Y):
        started = time.perf_counter()
        predict = fit(X, Y)
        print(f"{model}: fit in {time.perf_counter() - started:.1f} s, load {os.getloadavg()[0]:.2f}",
              file=sys.stderr, flush=True)
        return predict
    return announced


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=int, default=100_000)
    parser.add_argument("--models", nargs="+", default=["napkinxc-plt"],
                        choices=["napkinxc-plt", "omikuji", "pecos-xrlinear"])
    parser.add_argument("--knobs", nargs="+", type=json.loads, default=[{}], help="JSON RealisticConfig fields")
    parser.add_argument("--holdout", type=float, default=0.2)
    parser.add_argument("--scale", type=float, default=1.0, help="share of the preset's training rows")
    parser.add_argument("--max-validation", type=int, default=4_000, help="scored held-out rows at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import baselines
    import numpy as np

    for knobs in args.knobs:
        fit_part, validation, arguments = validation_split(args.labels, knobs, args.holdout, args.scale, args.seed,
                                                            args.max_validation)
        seen = np.asarray(fit_part.Y.sum(axis=0)).ravel() > 0
        rows = validation.Y.tocsr()
        for model in args.models:
            fit = {"napkinxc-plt": baselines.napkinxc_model, "omikuji": baselines.omikuji_model,
                   "pecos-xrlinear": baselines.pecos_model}[model](args.threads)
            load_before = os.getloadavg()[0]
            row = baselines.measure(_announced(fit, model), fit_part, validation)
            print(json.dumps({"L": args.labels, "knobs": knobs, "model": model, "n_fit": len(fit_part),
                              "n_validation": len(validation), "n_features": fit_part.n_features,
                              "validation_labels_seen_share": float(seen[rows.indices].mean()),
                              **{k: round(v, 3) for k, v in row.items()},
                              "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
                              "time": time.strftime("%H:%M:%S")}), flush=True)


if __name__ == "__main__":
    main()

"""Where a default fit's time goes on a small set, old defaults against new, side by side
(issue 31, item 5).

Sets: ``mlc`` (the issue's set: sklearn ``make_multilabel_classification``, 4,000 rows, 300
features, 120 labels, ``n_labels=4``, seed 0; the first 3,200 rows train, the last 800 test)
and ``bibtex`` (its train and test splits). Models: ``XMCClassifier(head=...)`` with no other
setting (the library defaults) and the same with the old defaults given explicitly. The runs
alternate old and new, ``--repeats`` times; the table gives medians.

Breakdown: linear: seconds of the liblinear fits on the carved split (every C of the grid),
of the refit, and the rest (validation scoring, calibration, conversions); networks: training
epochs (selection phase), the per-epoch validation passes (timed around the trainer's
``evaluate_topk``), the refit's epochs, and the rest (setup, data). ``P@1`` is on the test rows.

``--wait-policy`` instead times the new default fit of each model in fresh processes with
``OMP_WAIT_POLICY`` empty (libgomp's default: an idle thread spins before it sleeps, what torch
did before holoxmc's import set the variable; libgomp prints that the empty value is invalid
and keeps its default) and ``PASSIVE``, alternating, ``--repeats`` times each.

Usage:
    python benchmarks/fit_speed.py --sets mlc bibtex --models linear --repeats 3
    python benchmarks/fit_speed.py --sets mlc --models hrr dense --repeats 3
    python benchmarks/fit_speed.py --sets mlc --models hrr --repeats 2 --wait-policy
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import make_multilabel_classification

import holoxmc.train.trainer as trainer_module
from holoxmc.data import load
from holoxmc.estimator import XMCClassifier

#: The settings the library defaults replaced (issue 31), per head.
OLD_DEFAULTS: dict[str, dict[str, Any]] = {
    "linear": {"head_options": {"C_grid": [0.1, 0.3, 1.0, 3.0]}},
    "hrr": {"batch_size": 64, "lr": 1e-3, "epochs": 20},
    "dense": {"batch_size": 64, "lr": 1e-3, "epochs": 20},
}


def dataset(name: str) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """``(X_train, Y_train, X_test, Y_test)``."""
    if name == "mlc":
        X, Y = make_multilabel_classification(n_samples=4000, n_features=300, n_classes=120, n_labels=4,
                                              allow_unlabeled=False, random_state=0)
        X, Y = sp.csr_matrix(X.astype(np.float32)), sp.csr_matrix(Y.astype(np.float32))
        return X[:3200], Y[:3200], X[3200:], Y[3200:]
    train, test = load(name, "train"), load(name, "test")
    return train.X, train.Y, test.X, test.Y


class _ValidationTimer:
    """Adds up the seconds of the trainer's per-epoch validation passes while installed."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.original = trainer_module.evaluate_topk

    def __enter__(self) -> "_ValidationTimer":
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return self.original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        trainer_module.evaluate_topk = timed
        return self

    def __exit__(self, *exc: object) -> None:
        trainer_module.evaluate_topk = self.original


def one_fit(head: str, version: str, data: tuple[Any, ...]) -> dict[str, Any]:
    """Fit once; the total and its parts in seconds, and the test P@1."""
    X, Y, X_test, Y_test = data
    params = OLD_DEFAULTS[head] if version == "old" else {}
    clf = XMCClassifier(head=head, progress=False, **params)
    with _ValidationTimer() as validation:
        started = time.perf_counter()
        clf.fit(X, Y)
        total = time.perf_counter() - started
    row: dict[str, Any] = {"head": head, "version": version, "total": total}
    result = clf.fit_result_
    if head == "linear":
        fits = result.history
        row["fits"] = len(fits)
        row["carved fits"] = sum(f["seconds"] for f in fits if not f.get("refit"))
        row["refit"] = sum(f["seconds"] for f in fits if f.get("refit"))
        row["chosen C"] = fits[-1]["C"] if fits[-1].get("refit") else max(fits, key=lambda f: f["val"]["P@1"])["C"]
    else:
        row["epochs"] = sum(h["seconds"] for h in result.history)
        row["validation"] = validation.seconds
        row["refit"] = result.refit.train_seconds if result.refit is not None else 0.0
        row["best epoch"] = result.best_epoch
    row["rest"] = total - sum(row.get(k, 0.0) for k in ("carved fits", "epochs", "validation", "refit"))
    row["P@1"] = clf.evaluate(X_test, Y_test, ks=(1,))["P@1"]
    return row


def wait_policies(sets: list[str], models: list[str], repeats: int) -> None:
    """Each model's new default fit in a fresh process per OpenMP wait policy, alternating."""
    for name in sets:
        for head in models:
            seconds: dict[str, list[float]] = {"": [], "PASSIVE": []}
            for _ in range(repeats):
                for policy in seconds:
                    done = subprocess.run(
                        [sys.executable, __file__, "--sets", name, "--models", head, "--repeats", "1", "--only-new"],
                        env=os.environ | {"OMP_WAIT_POLICY": policy}, capture_output=True, text=True, check=True)
                    row = json.loads(next(line for line in done.stdout.splitlines() if '"version"' in line))
                    seconds[policy].append(row["total"])
                    print(json.dumps({"set": name, "head": head, "OMP_WAIT_POLICY": policy, "total": row["total"]}),
                          flush=True)
            print(f"| {name} | {head} | " + " | ".join(f"{policy or 'default'} {statistics.median(values):.2f}"
                                                       for policy, values in seconds.items()) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=["mlc", "bibtex"])
    parser.add_argument("--models", nargs="+", default=["linear", "hrr", "dense"], choices=sorted(OLD_DEFAULTS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wait-policy", action="store_true", help="time ACTIVE against PASSIVE OpenMP waiting")
    parser.add_argument("--only-new", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.wait_policy:
        wait_policies(args.sets, args.models, args.repeats)
        return
    import torch  # after holoxmc, whose import sets torch's OpenMP wait policy

    print(json.dumps({"python": platform.python_version(), "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))
    for name in args.sets:
        data = dataset(name)
        one_fit("linear", "new", data)  # warm-up: imports and first-call costs out of the timings
        for head in args.models:
            runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
            for _ in range(args.repeats):
                for version in ("new",) if args.only_new else ("old", "new"):
                    row = one_fit(head, version, data)
                    runs[version].append(row)
                    print(json.dumps({"set": name} | row), flush=True)
            for version, rows in runs.items():
                if not rows:
                    continue
                keys = [k for k in rows[0] if isinstance(rows[0][k], float)]
                medians = {k: round(statistics.median(r[k] for r in rows), 2) for k in keys}
                print(f"| {name} | {head} | {version} | " + " | ".join(f"{k} {v}" for k, v in medians.items()) + " |",
                      flush=True)


if __name__ == "__main__":
    main()

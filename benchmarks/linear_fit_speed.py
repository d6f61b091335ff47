"""Linear one-vs-rest fit time: LinearSVC per label (old path) against the direct liblinear call.

Run: ``PYTHONPATH=src python benchmarks/linear_fit_speed.py [--repeats 3] [--labels-10k 500]``;
prints one Markdown row per set (medians of the repeats, old and new side by side in one run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))


def sets(labels_10k: int) -> dict[str, tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]]:
    """(X, Y, X_test, Y_test) per set; realistic-10k keeps its first ``labels_10k`` labels."""
    from panel import load_set

    from holoxmc.data import load

    out = {}
    for name in ("bibtex", "mlc-3k"):
        train, test = load_set(name)
        out[name] = (train.X, train.Y, test.X, test.Y)
    train = load("realistic-10k", "train")
    out[f"realistic-10k ({labels_10k} labels)"] = (train.X, train.Y[:, :labels_10k], None, None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--labels-10k", type=int, default=500)
    args = parser.parse_args()
    from holoxmc.metrics import evaluate
    from holoxmc.models.linear import fit as linear

    config = linear.LinearConfig(C=0.3)
    print("| set | rows x features | labels | old s (LinearSVC) | new s (direct) | speed-up | old P@1 | new P@1 |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (X, Y, X_test, Y_test) in sets(args.labels_10k).items():
        times: dict[bool, list[float]] = {False: [], True: []}
        p1 = {}
        for _ in range(args.repeats):
            for direct in (False, True):
                original = linear.direct_liblinear_works
                linear.direct_liblinear_works = (lambda d=direct: d)  # type: ignore[assignment]
                try:
                    started = time.perf_counter()
                    model, _ = linear.fit_linear(X, Y, config)
                    times[direct].append(time.perf_counter() - started)
                finally:
                    linear.direct_liblinear_works = original  # type: ignore[assignment]
                if X_test is not None:
                    p1[direct] = evaluate(model.predict(X_test, k=1)[0], Y_test, ks=(1,))["P@1"]
        old, new = statistics.median(times[False]), statistics.median(times[True])
        print(f"| {name} | {X.shape[0]} x {X.shape[1]} | {Y.shape[1]} | {old:.2f} | {new:.2f} | {old / new:.2f}x "
              f"| {p1.get(False, float('nan')):.4f} | {p1.get(True, float('nan')):.4f} |", flush=True)


if __name__ == "__main__":
    main()

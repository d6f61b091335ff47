"""Load time of holoxmc's validated XML-repository reader vs plain scikit-learn.

Baseline: ``load_svmlight_file(f, multilabel=True, zero_based=True, n_features=D)`` on the
same file with its header line skipped (the least work that reads the format, no checks).
holoxmc: ``read_xml_repo(path)`` (same parser plus header/index/NaN/duplicate validation and
the binary label matrix). Runs alternate, median of ``--repeats``; goal: ratio <= 1.2.

Usage:
    .venv/bin/python benchmarks/data_load.py [--repeats 7] [--synthetic-points 200000]
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file

from holoxmc.data import make_synthetic
from holoxmc.data.readers import read_xml_repo, write_xml_repo

SHARED = Path(os.environ.get("HOLOXMC_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")


def plain_sklearn(path: Path) -> None:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        n_features = int(f.readline().split()[1])
        load_svmlight_file(f, multilabel=True, zero_based=True, n_features=n_features, dtype=np.float32)


def timed(function, path: Path) -> float:
    start = time.perf_counter()
    function(path)
    return time.perf_counter() - start


def compare(path: Path, repeats: int) -> tuple[float, float]:
    baseline, ours = [], []
    for _ in range(repeats):
        baseline.append(timed(plain_sklearn, path))
        ours.append(timed(read_xml_repo, path))
    return statistics.median(baseline), statistics.median(ours)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--synthetic-points", type=int, default=200_000,
                        help="also time an Amazon-670K-like synthetic file of this many points (0: skip)")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPU cores (shared with other jobs), "
          f"Python {platform.python_version()}, numpy {np.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        delicious = SHARED / "Delicious" / "delicious_train.txt.gz"
        if delicious.exists():
            plain = Path(tmp) / "delicious_train.txt"
            plain.write_bytes(gzip.decompress(delicious.read_bytes()))
            files += [("Delicious train (.txt.gz)", delicious), ("Delicious train (.txt)", plain)]
        else:
            print(f"(Delicious not found at {delicious}; skipped)")
        if args.synthetic_points:
            train, _ = make_synthetic(args.synthetic_points, 670_091, 135_909, n_test=0, labels_per_point=5.45)
            synthetic = Path(tmp) / "synthetic.txt"
            write_xml_repo(synthetic, train.X, train.Y)
            files.append((f"synthetic {args.synthetic_points} pts, L=670,091 (.txt)", synthetic))
        print(f"{'file':<48}{'MB':>8}{'sklearn s':>11}{'holoxmc s':>11}{'ratio':>8}")
        for label, path in files:
            baseline, ours = compare(path, args.repeats)
            size = path.stat().st_size / 1e6
            print(f"{label:<48}{size:>8.1f}{baseline:>11.3f}{ours:>11.3f}{ours / baseline:>8.2f}")
    print(f"median of {args.repeats} alternating runs each; goal: ratio <= 1.2")


if __name__ == "__main__":
    main()

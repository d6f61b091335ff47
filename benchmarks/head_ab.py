"""The preset HRR head of this checkout against the same head at an earlier commit, in one
process: the earlier ``src/holoxmc`` is exported with ``git archive`` into a temporary
folder as the package ``holoxmc_base`` (imports renamed), both heads are built from the
dataset preset, and a head step (forward, loss, backward; no optimiser) alternates
between them over the same batches. Prints the medians and the paired ratio.

Usage:
    python benchmarks/head_ab.py 9b5eece --dataset delicious --threads 2 --repeats 15
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import torch

from holoxmc.data import load


def export_package(commit: str, into: Path) -> None:
    """``src/holoxmc`` at ``commit`` as ``into/holoxmc_base``, its imports renamed."""
    archive = subprocess.run(["git", "archive", "--format=tar", commit, "src/holoxmc"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package = into / "holoxmc_base"
    (into / "src" / "holoxmc").rename(package)
    for path in package.rglob("*.py"):
        path.write_text(re.sub(r"\bholoxmc\b", "holoxmc_base", path.read_text()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commit", help="the earlier commit")
    parser.add_argument("--dataset", default="delicious")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--batches", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    labels_csr = load(args.dataset, "train").Y
    with tempfile.TemporaryDirectory() as folder:
        export_package(args.commit, Path(folder))
        sys.path.insert(0, folder)
        heads = {}
        for tag, package in (("earlier", "holoxmc_base"), ("this", "holoxmc")):
            estimator = importlib.import_module(f"{package}.estimator")
            batch = importlib.import_module(f"{package}.data.batch")
            clf = estimator.XMCClassifier(**estimator.preset_params(args.dataset, "hrr-fc"))
            head = clf.new_network(labels_csr.shape[1], 1).head
            labels = [batch.LabelBatch.from_csr(labels_csr[i : i + 64]) for i in range(0, 64 * args.batches, 64)]
            heads[tag] = (head, labels)
        inputs = [torch.randn(64, heads["this"][0].in_features, generator=torch.Generator().manual_seed(i))
                  for i in range(args.batches)]

        def step(head, labels) -> float:
            start = time.perf_counter()
            for h, y in zip(inputs, labels):
                head.zero_grad(set_to_none=True)
                head.loss(head(h), y).backward()
            return 1e3 * (time.perf_counter() - start) / len(labels)

        for pair in heads.values():  # warm-up
            step(*pair)
        times = {tag: [] for tag in heads}
        for _ in range(args.repeats):
            for tag, pair in heads.items():
                times[tag].append(step(*pair))
    ratios = [a / b for a, b in zip(times["earlier"], times["this"])]
    print(f"# {args.dataset} HRR-FC preset head, {args.threads} thread(s), {args.batches} batches of 64, "
          f"median of {args.repeats}")
    for tag in heads:
        print(f"{tag}: {statistics.median(times[tag]):.3f} ms per head step")
    print(f"earlier / this, paired: {statistics.median(ratios):.3f} (this faster in "
          f"{sum(r > 1 for r in ratios)} of {len(ratios)})")


if __name__ == "__main__":
    sys.exit(main())

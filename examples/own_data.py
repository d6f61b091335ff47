"""Your own data, end to end: write svmlight files, train, evaluate, predict.

A tiny multi-label set (600 rows, 300 features, 40 labels) is written into a temporary
folder in the multi-label svmlight format (``3,17 5:1.0 9:0.5``: labels, then
``feature:value`` pairs), as your own files would be. The folder is then used twice: from
Python (``holoxmc.load``, ``holoxmc.XMCClassifier``) and through the command line, called
here in-process with ``holoxmc.cli.main`` (in a shell: ``holoxmc train DIR --model linear
--out RUN`` and so on).

Run: ``python examples/own_data.py`` (seconds).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from sklearn.metrics import f1_score

from holoxmc import XMCClassifier, load
from holoxmc.cli import main as holoxmc


def write_svmlight(path: Path, rows: int, rng: np.random.Generator) -> None:
    """Rows whose labels follow their features: label j fires features 7j..7j+6, plus noise."""
    lines = []
    for _ in range(rows):
        labels = sorted(int(j) for j in rng.choice(40, size=rng.integers(1, 4), replace=False))
        features = {int(f) for j in labels for f in rng.integers(7 * j, 7 * j + 7, size=3)}
        features |= {int(f) for f in rng.integers(0, 300, size=4)}
        pairs = " ".join(f"{f}:{rng.uniform(0.5, 1.0):.3f}" for f in sorted(features))
        lines.append(",".join(map(str, labels)) + " " + pairs)
    path.write_text("\n".join(lines) + "\n")


def main(folder: Path) -> None:
    rng = np.random.default_rng(0)
    write_svmlight(folder / "train.txt", 500, rng)  # 'train' in the name: the training split
    write_svmlight(folder / "test.txt", 100, rng)   # 'test' in the name: the test split

    # Python: load the folder, fit one model, score it on the test rows.
    train, test = load(folder), load(folder, split="test")
    print(f"train {train.X.shape}, test {test.X.shape}")
    clf = XMCClassifier(head="linear", seed=0).fit(train.X, train.Y)
    metrics = clf.evaluate(test.X, test.Y)            # P@k, nDCG@k, PSP@k, PSnDCG@k in percent
    print({name: round(metrics[name], 2) for name in ("P@1", "P@3", "nDCG@3", "PSP@3")})
    indices, scores = clf.predict_topk(test.X[:2], 3)  # the 3 best label ids per row, best first
    print("top-3 label ids of two rows:", indices.tolist())
    sets = clf.predict(test.X)                         # label sets: a CSR (n, L) 0/1 indicator
    print(f"label sets: samples-F1 {f1_score(test.Y, sets, average='samples'):.3f}, "
          f"{sets.getnnz(axis=1).mean():.2f} labels a row")
    assert metrics["P@1"] > 50, "the linear model should learn this set"

    # The command line on the same folder (each call returns the exit code: 0, or 2 for bad input).
    run, out = folder / "runs" / "linear", folder / "top3.txt"
    assert holoxmc(["data", "info", str(folder)]) == 0
    assert holoxmc(["train", str(folder), "--model", "linear", "--out", str(run), "-q"]) == 0
    assert holoxmc(["evaluate", str(run), str(folder), "-q"]) == 0
    assert holoxmc(["predict", str(run), str(folder / "test.txt"), "--top-k", "3", "--output", str(out)]) == 0
    print("first line of top3.txt:", out.read_text().splitlines()[0])


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="holoxmc-own-data-") as tmp:
        main(Path(tmp))

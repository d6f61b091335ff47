"""Label names and label sets: raw texts with named labels, then thresholds.

Writes a tiny raw-text set as JSON lines (``{"id", "text", "labels": ["sports", ...]}``),
the format whose label names holoxmc keeps: ``holoxmc.load`` fits a TF-IDF encoder on the
training texts and reads the names into ``Dataset.label_names``. Then:

1. top-k labels and label sets by name (``predict_topk(..., names=True)``, ``predict_labels``),
   and with ``holoxmc predict --label-names``;
2. label sets cut relative to each row's best label: ``predict_above`` with a threshold chosen
   by ``tune_threshold`` on validation rows held out of the training rows (never the test rows).

Run: ``python examples/labels_and_thresholds.py`` (seconds).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from holoxmc import XMCClassifier, load
from holoxmc.cli import main as holoxmc
from holoxmc.metrics import label_set_f1

TOPICS = {
    "sports": "match goal team league score coach player season",
    "politics": "election vote parliament minister policy campaign law",
    "science": "experiment theory physics cell molecule research data",
    "music": "album song band concert guitar melody singer",
    "travel": "flight hotel beach city passport museum trip",
    "food": "recipe bake flavour kitchen dinner spice bread",
}


def write_jsonl(path: Path, rows: int, rng: np.random.Generator) -> None:
    """Texts mixing the words of one to three topics; the topics are the labels."""
    names = sorted(TOPICS)
    with path.open("w") as f:
        for i in range(rows):
            labels = [names[j] for j in rng.choice(len(names), size=rng.integers(1, 4), replace=False)]
            words = [w for name in labels for w in rng.choice(TOPICS[name].split(), 3)]
            words += list(rng.choice(" ".join(TOPICS.values()).split(), 3))  # words of other topics
            f.write(json.dumps({"id": i, "text": " ".join(rng.permutation(words)), "labels": labels}) + "\n")


def main(folder: Path) -> None:
    rng = np.random.default_rng(0)
    write_jsonl(folder / "train.jsonl", 400, rng)
    write_jsonl(folder / "test.jsonl", 80, rng)
    train, test = load(folder), load(folder, split="test")   # TF-IDF fitted on train.jsonl only
    names = np.asarray(train.label_names)
    print("labels:", names.tolist())

    # Hold validation rows out of the training rows: thresholds are chosen there.
    order = np.random.default_rng(1).permutation(train.X.shape[0])
    fit_rows, val_rows = order[:320], order[320:]
    clf = XMCClassifier(head="linear", seed=0).fit(train.X[fit_rows], train.Y[fit_rows], classes=names)

    best, _ = clf.predict_topk(test.X[:3], 2, names=True)   # names, as the model was fitted with them
    sets = clf.predict_labels(test.X[:3])                     # predict()'s label sets, as names
    for text, top2, labels in zip(test.texts[:3], best, sets):
        print(f"{text[:40]!r:44} -> top-2: {list(top2)}, label set: {list(labels)}")

    threshold, table = clf.tune_threshold(train.X[val_rows], train.Y[val_rows], metric="micro-F1")
    print("validation micro-F1 by threshold:", {t: round(s["micro-F1"], 3) for t, s in table.items()})
    sets = clf.predict_above(test.X, threshold)        # CSR (n, L): each row's own label set
    print(f"chosen threshold {threshold}; test micro-F1 {label_set_f1(sets, test.Y)['micro-F1']:.3f}; "
          f"{sets.getnnz(axis=1).mean():.2f} labels a text (truth {test.Y.getnnz(axis=1).mean():.2f})")
    print("label set of the first test text:", names[sets[0].indices].tolist())

    # The command line keeps the names too: the run saves its text encoder.
    run, out = folder / "run", folder / "named.txt"
    assert holoxmc(["train", str(folder), "--model", "linear", "--out", str(run), "-q"]) == 0
    assert holoxmc(["predict", str(run), str(folder / "test.jsonl"), "--label-names", "--top-k", "2",
                    "--output", str(out)]) == 0
    print("holoxmc predict --label-names:", out.read_text().splitlines()[0])
    assert holoxmc(["predict", str(run), str(folder / "test.jsonl"), "--label-names", "--threshold", "0.5",
                    "--output", str(out)]) == 0
    print("holoxmc predict --threshold 0.5:", out.read_text().splitlines()[0])


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="holoxmc-labels-") as tmp:
        main(Path(tmp))

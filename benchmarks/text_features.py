"""Which TF-IDF features raw text gets by default, chosen leave-one-set-out on grouped
validation splits (never a test split).

For every real text set, the training file's texts are split into fitting and validation
rows with whole groups on one side (the file's ``group`` field; Debtags, which has none: its
near-duplicate groups); each candidate featurisation's encoder is fitted on the fitting
texts only, a model trains on them, and the validation rows score it (P@1, P@5). The choice
for set S is the candidate with the best mean validation P@1 over the *other* sets.

Usage:
    HOLOXMC_DATA=/work/shared/data python benchmarks/text_features.py \
        --datasets debtags ~/.cache/holoxmc/realdata/reuters ~/.cache/holoxmc/realdata/appstream \
        --out benchmarks/results/text_features.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from holoxmc.data import TextEncoder, load
from holoxmc.data.groups import check_groups, near_duplicate_groups
from holoxmc.data.text import labels_to_csr
from holoxmc.data.readers import JsonlRecords
from holoxmc.estimator import XMCClassifier
from holoxmc.train import split_validation

#: name -> TextEncoder.fit keywords (featurisations of holoxmc.data.text.TEXT_FEATURES, and variants).
CANDIDATES = {
    "words": {"text_features": "words"},
    "words+pairs": {"text_features": "words+pairs"},
    "words+pairs, 100K": {"text_features": "words+pairs", "max_features": 100_000},
    "words+pairs+chars": {"text_features": "words+pairs+chars"},
    "words+pairs+chars, 100K": {"text_features": "words+pairs+chars", "max_features": 100_000},
}


def _records(texts: list[str], labels: list[list[str]]) -> JsonlRecords:
    return JsonlRecords(texts, labels, list(range(1, len(texts) + 1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", required=True)
    parser.add_argument("--head", default="rerank")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None)
    parser.add_argument("--candidates", nargs="+", choices=list(CANDIDATES), default=list(CANDIDATES),
                        help="the featurisations to run (the choice is among those run)")
    args = parser.parse_args()
    rows = []
    for name in args.datasets:
        train = load(name, "train", text_features="words")  # groups found as in the first run (words)
        names = train.label_names
        labels = [[names[j] for j in row.indices] for row in train.Y]
        codes = check_groups(train.groups, len(train)) if train.groups is not None \
            else near_duplicate_groups(train.X, 0.9)
        fit_rows, val_rows = split_validation(len(train), 0.2, args.seed, codes)
        for candidate in args.candidates:
            options = CANDIDATES[candidate]
            started = time.perf_counter()
            encoder = TextEncoder.fit([train.texts[i] for i in fit_rows], names, **options)
            X_fit, X_val = (encoder.features([train.texts[i] for i in rows]) for rows in (fit_rows, val_rows))
            Y_fit, Y_val = (labels_to_csr(_records([train.texts[i] for i in rows], [labels[i] for i in rows]), names, name)
                            for rows in (fit_rows, val_rows))
            clf = XMCClassifier(head=args.head, progress=False, seed=args.seed).fit(X_fit, Y_fit)
            metrics = clf.evaluate(X_val, Y_val, ks=(1, 5))
            row = {"dataset": os.path.basename(os.path.normpath(name)), "candidate": candidate, "head": args.head,
                   "features": int(X_fit.shape[1]), "val_P@1": metrics["P@1"], "val_P@5": metrics["P@5"],
                   "val_rows": int(len(val_rows)), "groups": "field" if train.groups is not None else "near-duplicates",
                   "seconds": time.perf_counter() - started, "load": os.getloadavg()[0],
                   "date": time.strftime("%Y-%m-%d")}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.out:
                with open(args.out, "a") as out:
                    out.write(json.dumps(row) + "\n")
    sets = sorted({row["dataset"] for row in rows})
    for held in sets:
        others = [s for s in sets if s != held]
        means = {c: np.mean([r["val_P@1"] for r in rows if r["candidate"] == c and r["dataset"] in others])
                 for c in args.candidates}
        print(f"leave out {held}: choose {max(means, key=means.get)!r} ({', '.join(f'{c} {m:.2f}' for c, m in means.items())})")


if __name__ == "__main__":
    main()

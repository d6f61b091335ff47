"""How much the validation P@1 a fit reports overrates its test P@1, with the validation
split grouped (near-duplicate rows, or the data's own groups, kept on one side) and without
(a random row split, ``duplicate_cosine=None``).

Every set is read as a new user would (``holoxmc.data.load``: the registry's files, raw
texts through the default TF-IDF); the test split is the set's own (Debtags: by Debian
source package; the built sets of ``benchmarks/realdata``: by group). Nothing is chosen on
a test split: this only reports the gap.

Usage:
    HOLOXMC_DATA=/work/shared/data python benchmarks/validation_gap.py --datasets debtags bibtex delicious \
        --heads auto linear --out benchmarks/results/validation_gap.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import time

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["debtags", "bibtex", "delicious"])
    parser.add_argument("--heads", nargs="+", default=["auto", "linear"])
    parser.add_argument("--group-field", default="group", help="the JSON-lines group field of raw-text sets")
    parser.add_argument("--out", default=None, help="append the rows as JSON lines here")
    args = parser.parse_args()
    for name in args.datasets:
        train, test = load(name, "train"), load(name, "test")
        for head in args.heads:
            for grouping in ("grouped", "random rows"):
                settings = {"duplicate_cosine": None} if grouping == "random rows" else {}
                groups = train.groups if grouping == "grouped" else None
                started = time.perf_counter()
                clf = XMCClassifier(head=head, progress=False, **settings).fit(train.X, train.Y, groups=groups)
                seconds = time.perf_counter() - started
                test_p1 = clf.score(test.X, test.Y)
                validation = clf.validation_ or {}
                row = {"dataset": name, "head": head, "split": grouping, "groups": clf.groups_.as_dict(),
                       "winner": clf.head_, "validation_P@1": validation.get("P@1"), "validation_rows": validation.get("rows"),
                       "test_P@1": test_p1, "gap": None if not validation else validation["P@1"] - test_p1,
                       "fit_s": seconds, "load": os.getloadavg()[0]}
                print(json.dumps(row), flush=True)
                if args.out:
                    with open(args.out, "a") as out:
                        out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()

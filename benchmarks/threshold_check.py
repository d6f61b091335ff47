"""Label sets by a threshold (``XMCClassifier.predict_above``): absolute against relative
cuts, on a pseudo-test carved from the training split (the test split is never loaded).

For each dataset, 10 % of the training rows (``split_validation`` with ``--seed``) are
held out; FC and HRR-FC are fitted on the rest with the presets ``holoxmc train DATA``
uses, and their confidences on the held-out rows (HRR: the cosine; FC: the probability)
are cut at each ``--thresholds`` value, absolutely (``confidence > t``) and relative to
each row's best label (``confidence > t · best``). Reported (``holoxmc.metrics.label_set_f1``):
micro-F1 and example-based F1 (the mean over rows of each row's F1; a row with no true and
no predicted label counts 100) in percent, the labels predicted per row, and the held-out
P@1 (a check on the fits).

With ``--tune``, instead: the fits hold out a further 10 % of their rows as a validation
split, ``XMCClassifier.tune_threshold`` picks the relative cut (0.1, 0.2, …, 0.9) that scores
best there by micro-F1, and the held-out rows score that cut against the default 0.5 · best
of the same fit (lines in ``results/threshold_tuning.jsonl``).

Usage:
    HOLOXMC_DATA=../shared/data python benchmarks/threshold_check.py --datasets bibtex delicious --threads 2
    HOLOXMC_DATA=../shared/data python benchmarks/threshold_check.py --datasets bibtex delicious --tune
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier, preset_params
from holoxmc.metrics import label_set_f1
from holoxmc.train.trainer import split_validation

RESULTS = Path(__file__).parent / "results" / "threshold_check.jsonl"
TUNING_RESULTS = Path(__file__).parent / "results" / "threshold_tuning.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["bibtex", "delicious"])
    parser.add_argument("--models", nargs="+", default=["fc", "hrr-fc"])
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    parser.add_argument("--seed", type=int, default=12345, help="the pseudo-test's split seed")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tune", action="store_true", help="tuned cut against the default (see above)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{platform.machine()}, {os.cpu_count()} cores, {args.threads} threads, torch {torch.__version__}")
    if args.tune:
        tuned_against_default(args)
        return
    print("| dataset | model | held-out P@1 | cut | micro-F1 | example F1 | labels per row |")
    print("|---|---|---|---|---|---|---|")
    for name in args.datasets:
        train = load(name, "train")
        kept, held = split_validation(train.X.shape[0], 0.1, args.seed)
        Y_held = train.Y[held]
        for model in args.models:
            started = time.perf_counter()
            clf = XMCClassifier(**preset_params(name, model) | {"progress": False}).fit(train.X[kept], train.Y[kept])
            p_at_1 = clf.evaluate(train.X[held], Y_held, ks=(1,))["P@1"]
            for relative in (False, True):
                for threshold in args.thresholds:
                    found = clf.predict_above(train.X[held], threshold, relative=relative)
                    f1 = label_set_f1(found, Y_held)
                    micro, example, per_row = f1["micro-F1"], f1["example-F1"], f1["labels per point"]
                    cut = f"> {threshold} · best" if relative else f"> {threshold}"
                    print(f"| {name} | {model} | {p_at_1:.2f} | {cut} | {micro:.2f} | {example:.2f} | {per_row:.2f} |",
                          flush=True)
                    record = {"dataset": name, "model": model, "seed": args.seed, "threads": args.threads,
                              "held_out_p_at_1": p_at_1, "threshold": threshold, "relative": relative,
                              "micro_f1": micro, "example_f1": example, "labels_per_row": per_row,
                              "labels_per_row_true": float(Y_held.sum() / Y_held.shape[0]),
                              "fit_and_cut_seconds": time.perf_counter() - started}
                    with RESULTS.open("a") as out:
                        out.write(json.dumps(record) + "\n")


def tuned_against_default(args: argparse.Namespace) -> None:
    """The ``--tune`` rows: a cut tuned on a validation split against the default cut."""
    print("| dataset | model | tuned cut | micro-F1 tuned / default | example F1 tuned / default |")
    print("|---|---|---|---|---|")
    for name in args.datasets:
        train = load(name, "train")
        kept, held = split_validation(train.X.shape[0], 0.1, args.seed)
        fit_part, val_part = split_validation(len(kept), 0.1, args.seed + 1)
        fit_rows, val_rows = kept[fit_part], kept[val_part]
        for model in args.models:
            clf = XMCClassifier(**preset_params(name, model) | {"progress": False})
            clf.fit(train.X[fit_rows], train.Y[fit_rows])
            tuned, _ = clf.tune_threshold(train.X[val_rows], train.Y[val_rows])
            tuned_f1, default_f1 = (label_set_f1(clf.predict_above(train.X[held], t), train.Y[held])
                                    for t in (tuned, 0.5))
            print(f"| {name} | {model} | {tuned} · best | {tuned_f1['micro-F1']:.2f} / {default_f1['micro-F1']:.2f} | "
                  f"{tuned_f1['example-F1']:.2f} / {default_f1['example-F1']:.2f} |", flush=True)
            record = {"dataset": name, "model": model, "seed": args.seed, "threads": args.threads,
                      "tuned_threshold": tuned, "tuned": tuned_f1, "default": default_f1}
            with TUNING_RESULTS.open("a") as out:
                out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()

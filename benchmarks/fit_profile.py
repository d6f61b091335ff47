"""Where the default fit's time goes (``XMCClassifier()``, ``head="auto"``), stage by stage,
and what loading its data file costs the first and the second time (issue 52).

Each set runs in two fresh processes: the first times three loads of the set's svmlight /
XML-repository text file (``load(path)`` parsing it, ``load(path, cache_dir=C)`` parsing and
writing the ``.npz`` cache, and again reading the cache); the second reads the cache, fits the
library default and reports the stages:

* the re-rank candidate's and the refit's stages, from the fitted models' ``fit_seconds``
  (:class:`holoxmc.timing.Stopwatch` laps in :func:`~holoxmc.models.rerank.fit.fit_rerank`,
  collected by :func:`holoxmc.timing.recording`: ``prepare``, ``pifa_index``, ``retriever``,
  ``training_shortlists``, ``memberships``, ``label_fits``, ``alpha``);
* the FC candidate's seconds and epochs (``selection_``);
* the refit (the winner on every row) and the rest (checks, auto's split);
* the process's peak resident memory (``ru_maxrss``) and the data's shape.

Sets: ``bibtex``, ``delicious`` (``$HOLOXMC_DATA``) and variants of the realistic generator
(:func:`holoxmc.data.make_realistic`) with knobs other than any tuned preset's (noise, Zipf
exponents, words a row, topics): they only time the fit, and no setting is chosen on them.
``var-670k`` is not defined: on this 2-core machine a default fit at L = 670K takes over an hour.

Usage:
    HOLOXMC_DATA=/work/shared/data python benchmarks/fit_profile.py --sets bibtex var-10k \\
        --out benchmarks/results/fit_profile.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: Realistic-generator variants: ``(make_realistic keywords)``; none is a tuned preset's knobs.
VARIANTS: dict[str, dict[str, Any]] = {
    "var-1k": {"n_points": 4_000, "n_test": 500, "n_labels": 1_000, "n_features": 5_000, "zipf_exponent": 0.9,
               "noise": 0.7, "doc_length": 50.0, "n_topics": 60, "labels_per_point": 3.0, "seed": 11},
    "var-3k": {"n_points": 6_000, "n_test": 500, "n_labels": 3_000, "n_features": 10_000, "zipf_exponent": 0.8,
               "noise": 0.8, "doc_length": 70.0, "n_topics": 120, "labels_per_point": 4.0, "seed": 12},
    "var-10k": {"n_points": 8_000, "n_test": 500, "n_labels": 10_000, "n_features": 20_000, "zipf_exponent": 0.8,
                "noise": 0.7, "doc_length": 40.0, "n_topics": 400, "labels_per_point": 5.0, "seed": 13},
    "var-30k": {"n_points": 12_000, "n_test": 500, "n_labels": 30_000, "n_features": 30_000, "zipf_exponent": 0.75,
                "noise": 0.75, "doc_length": 45.0, "n_topics": 1_000, "labels_per_point": 4.5, "seed": 14},
    "var-100k": {"n_points": 30_000, "n_test": 500, "n_labels": 100_000, "n_features": 50_000,
                 "zipf_exponent": 0.8, "noise": 0.75, "doc_length": 45.0, "n_topics": 4_000,
                 "labels_per_point": 5.0, "word_exponent": 1.1, "seed": 15},
}
#: Real sets: their training file under ``$HOLOXMC_DATA``.
FILES = {"bibtex": "Bibtex/bibtex_train.txt.gz", "delicious": "Delicious/delicious_train.txt.gz"}


def source_file(name: str, folder: Path) -> Path:
    """The set's training file: a real set's, or the variant written as XML-repository text."""
    if name in FILES:
        return Path(os.environ.get("HOLOXMC_DATA", "")) / FILES[name]
    from holoxmc.data import make_realistic
    from holoxmc.data.readers import write_xml_repo

    path = folder / f"{name}_train.txt"
    if not path.exists():
        train, _ = make_realistic(**VARIANTS[name], name=name)
        write_xml_repo(path, train.X, train.Y)
    return path


def time_loads(path: Path, cache: Path) -> dict[str, float]:
    """Seconds of a plain load, a first cached load (parse and write) and a second (read)."""
    from holoxmc.data import load

    out = {}
    for key, kwargs in (("parse_s", {}), ("first_cached_s", {"cache_dir": cache}),
                        ("second_cached_s", {"cache_dir": cache})):
        started = time.perf_counter()
        load(path, **kwargs)
        out[key] = time.perf_counter() - started
    return out


def shape(dataset: Any) -> dict[str, int]:
    return {"rows": dataset.X.shape[0], "features": dataset.X.shape[1], "nnz": int(dataset.X.nnz),
            "labels": dataset.Y.shape[1], "label_nnz": int(dataset.Y.nnz)}


def profile_fit(path: Path, cache: Path, head: str) -> dict[str, Any]:
    """Load from the cache, fit the default (or ``head``) and return its stages."""
    from holoxmc.data import load
    from holoxmc.estimator import XMCClassifier
    from holoxmc.timing import recording

    train = load(path, cache_dir=cache)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    clf = XMCClassifier(head=head, progress=False)
    started = time.perf_counter()
    with recording() as fits:
        clf.fit(train.X, train.Y)
    total = time.perf_counter() - started
    trials = [t.as_dict() for t in getattr(clf, "selection_", [])]
    return {"head": head, "head_": clf.head_, "fit_s": total, "trials": trials, "rerank_fits": fits,
            "shortlist": getattr(clf.model_, "shortlist", None),
            "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "rss_before_fit_bytes": rss_before, **shape(train)}


def child(args: argparse.Namespace) -> None:
    path, cache = Path(args.path), Path(args.cache)
    result = time_loads(path, cache) if args.child == "load" else profile_fit(path, cache, args.head)
    print(json.dumps(result))


def run_child(kind: str, path: Path, cache: Path, head: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, "--path", str(path), "--cache", str(cache), "--head", head]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _units(record: dict[str, Any]) -> dict[str, list[tuple[list[float], float]]]:
    """Per term of :func:`holoxmc.limits.estimate_fit`'s model, ``(units, measured seconds)``
    of each fit in ``record``: the re-rank candidate and refit, each rule and the FC epochs."""
    from holoxmc.limits import rerank_shortlists

    n, nnz, labels, label_nnz = record["rows"], record["nnz"], record["labels"], record["label_nnz"]
    per_row = nnz / n
    held = max(1, int(round(n * 0.1))) if record["head"] == "auto" else 0
    rerank = [laps for name, laps in record["rerank_fits"] if name == "rerank"]
    fits = [(name, laps) for name, laps in record["rerank_fits"] if name.startswith("fit ")]
    out: dict[str, list[tuple[list[float], float]]] = {"retrieval": [], "label_fits": [], "rule": [], "fc_epoch": []}
    sizes = [n - held, n] if len(rerank) == 2 else [n]
    for laps, rows in zip(rerank, sizes):
        alpha_rows = min(held, 10_000) if rows < n else 0
        if labels <= 30_000:  # past it the sparse shortlist's coefficient is measured, not fitted (limits.py)
            out["retrieval"].append(([(rows + alpha_rows) * labels], laps["training_shortlists"] + laps["alpha"]))
        _, train_shortlist = rerank_shortlists(rows, labels, int(label_nnz * rows / n))
        problems = rows * train_shortlist + label_nnz * rows / n + 30 * labels
        rest = sum(v for k, v in laps.items() if k not in ("training_shortlists", "alpha"))
        out["label_fits"].append(([1.0, per_row * problems, labels], rest))
    rule_rows = ([held] * (len(fits) - 1) + [n] if _refit(record) else [held] * len(fits)) if record["head"] == "auto" \
        else [n]
    for (name, laps), rows in zip(fits, rule_rows):
        read = min(rows, 20_000, max(100, (1 << 26) // labels))
        out["rule"].append(([read * labels, min(read * labels, 1_000_000)], laps["label_rule"]))
        if name == "fit dense" and rows == held:
            trial = next(t for t in record["trials"] if t["model"] == "fc")
            epochs = int(trial["note"].split("epoch ")[1].split()[0]) if "epoch" in trial["note"] else 20
            out["fc_epoch"].append(([(n - held) * (per_row + 512 + labels)], laps["model"] / epochs))
    return out


def _set_bytes(record: dict[str, Any]) -> float:
    """The terms of :func:`holoxmc.limits.estimate_fit`'s memory model set from the arrays'
    types (X's entries, the training shortlists, the FC parameters when that candidate ran)."""
    from holoxmc.limits import FIT_BYTES, rerank_shortlists

    _, train_shortlist = rerank_shortlists(record["rows"], record["labels"], record["label_nnz"])
    fc = any(t["model"] == "fc" and t["val_p1"] is not None for t in record["trials"])
    params = (record["features"] * 512 + 512 * 512 + 512 * record["labels"]) if fc else 0
    return (FIT_BYTES["nnz"] * record["nnz"] + FIT_BYTES["shortlist"] * record["rows"] * train_shortlist
            + FIT_BYTES["fc_param"] * params)


def calibrate(path: Path, held_out: list[str]) -> None:
    """Fit :data:`holoxmc.limits.FIT_SECONDS` on the records of ``path`` not in ``held_out``
    (non-negative least squares of relative error per term), then print the estimate against
    every record's measured fit."""
    import numpy as np
    from scipy.optimize import nnls

    from holoxmc.limits import FIT_BYTES, estimate_fit

    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    names = {"retrieval": ["retrieval"], "label_fits": ["fixed", "label_fits", "per_label"],
             "rule": ["rule", "rule_pairs"], "fc_epoch": ["fc_epoch"]}
    points: dict[str, list[tuple[list[float], float]]] = {key: [] for key in names}
    for record in records:
        if record["set"] not in held_out:
            for key, values in _units(record).items():
                points[key] += values
    for key, values in points.items():
        if values:
            A = np.array([u for u, _ in values]) / np.array([[t] for _, t in values])
            coefficients, _ = nnls(A, np.ones(len(values)))
            print(key, dict(zip(names[key], coefficients.tolist())))
    fitted = [r for r in records if r["set"] not in held_out]
    base = FIT_BYTES["base"]  # the rest: peak - base - set terms = labels x L ** exponent, fitted in logs
    exponent, log_scale = np.polyfit(np.log([r["labels"] for r in fitted]),
                                     np.log([r["peak_rss_bytes"] - base - _set_bytes(r) for r in fitted]), 1)
    print("memory", {"base": base, "labels": float(np.exp(log_scale)), "exponent": float(exponent)})
    for record in records:
        shape = {k: record[k] for k in ("rows", "features", "nnz", "labels", "label_nnz")}
        estimate = estimate_fit(**shape, head=record["head"])
        assert estimate is not None
        print(f"{record['set']:<10} {'held out' if record['set'] in held_out else 'fitted':<9} measured "
              f"{record['fit_s']:7.1f} s  estimate {estimate.seconds:7.1f} s "
              f"ratio {estimate.seconds / record['fit_s']:.2f}  peak {record['peak_rss_bytes'] / 2**30:.2f} GiB, "
              f"estimate {estimate.peak_bytes / 2**30:.2f}  winner {record['head_']}")


def _refit(record: dict[str, Any]) -> bool:
    """Whether the record's winner was refit on every row: one ``fit`` more than the candidates
    that ran (records from before the winner was finished instead)."""
    fits = sum(name.startswith("fit ") for name, _ in record["rerank_fits"])
    return fits > sum(trial["val_p1"] is not None for trial in record["trials"])


def _winner_text(record: dict[str, Any]) -> tuple[str, float]:
    """How the winner became a model of every row, and its seconds: the finishing step
    (``finish <head>`` laps), a refit (one ``fit`` more than the candidates that ran: its model
    and rule), or a finish that records predate (its seconds in "other")."""
    finished = [laps for name, laps in record["rerank_fits"] if name.startswith("finish ")]
    fits = [laps for name, laps in record["rerank_fits"] if name.startswith("fit ")]
    if finished:
        return f"finished {finished[-1]['model']:.1f}", finished[-1]["model"]
    if _refit(record):
        return f"refit {fits[-1]['model']:.1f} / rule {fits[-1]['label_rule']:.1f}", fits[-1]["model"] + fits[-1][
            "label_rule"]
    return "finished (not timed: in other)", 0.0


def table(path: Path) -> None:
    """Markdown rows of the records of ``path``: seconds per stage of the default fit."""
    print("| set | rows | D | L | fit s | re-rank candidate: retrieval / label fits / rest / rule | FC candidate "
          "| winner on every row | other | first load (parse + cache) | second load (cache) | peak GiB | load avg |")
    print("|---|---:|---:|---:|---:|---|---|---|---:|---:|---:|---:|---:|")
    for line in path.read_text().splitlines():
        r = json.loads(line)
        candidate = next(laps for name, laps in r["rerank_fits"] if name == "rerank")
        first = next(laps for name, laps in r["rerank_fits"] if name.startswith("fit "))
        retrieval = candidate["training_shortlists"] + candidate["alpha"]
        rest = first["model"] - retrieval - candidate["label_fits"]
        fc = next((t for t in r["trials"] if t["model"] == "fc"), None)
        fc_text = "skipped" if fc is None or fc["val_p1"] is None else f"{fc['seconds']:.1f}" + (
            f" ({fc['note'].split('chosen')[0].strip('; ') or '20 epochs'})")
        winner, winner_s = _winner_text(r)
        other = r["fit_s"] - sum(t["seconds"] for t in r["trials"]) - winner_s
        print(f"| {r['set']} | {r['rows']:,} | {r['features']:,} | {r['labels']:,} | {r['fit_s']:.1f} "
              f"| {retrieval:.1f} / {candidate['label_fits']:.1f} / {rest:.1f} / {first['label_rule']:.1f} "
              f"| {fc_text} | {winner} | {other:.1f} "
              f"| {_seconds(r, 'first_cached_s', 2)} | {_seconds(r, 'second_cached_s', 3)} "
              f"| {r['peak_rss_bytes'] / 2**30:.2f} "
              f"| {r['load_avg_before']:.1f}-{r['load_avg_after']:.1f} |")


def _seconds(record: dict[str, Any], key: str, digits: int) -> str:
    """A load's seconds, or ``-`` for a record run with ``--no-loads``."""
    return f"{record[key]:.{digits}f}" if key in record else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["bibtex", "var-10k"], choices=[*FILES, *VARIANTS])
    parser.add_argument("--head", default="auto", help="the model fitted (default: the library default, auto)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/fit_profile.jsonl"))
    parser.add_argument("--no-loads", action="store_true", help="skip timing the loads")
    parser.add_argument("--calibrate", type=Path, metavar="JSONL",
                        help="fit the estimate's coefficients on the records of JSONL (no fits run) and compare")
    parser.add_argument("--table", type=Path, metavar="JSONL", help="print JSONL's records as a Markdown table")
    parser.add_argument("--held-out", nargs="*", default=["bibtex", "delicious", "var-100k"],
                        help="sets --calibrate only checks on")
    parser.add_argument("--child", choices=["load", "fit"], help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    if args.table:
        return table(args.table)
    if args.calibrate:
        return calibrate(args.calibrate, args.held_out)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.sets:
            path, cache = source_file(name, Path(folder)), Path(folder) / f"cache-{name}"
            record: dict[str, Any] = {"set": name, "file": path.name, "file_bytes": path.stat().st_size,
                                      "load_avg_before": os.getloadavg()[0]}
            record |= {} if args.no_loads else run_child("load", path, cache, args.head)
            record |= run_child("fit", path, cache, args.head)
            record |= {"load_avg_after": os.getloadavg()[0], "python": platform.python_version(),
                       "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M")}
            print(json.dumps(record), flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            with args.out.open("a") as f:
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()

"""``head="auto"``'s winner finished on every row without a second fit, against the refit it replaced.

For each set: the default estimator with the FC candidate skipped (``time_budget`` below the
re-rank model's time, so both variants pick the re-rank model), once as it ships (the selection
run's model finished on the held-out rows: :func:`holoxmc.models.rerank.fit.absorb_rows`) and
once with the re-rank family's ``finish`` removed (a second fit on every row, the old way), side
by side in one process; test P@1 / P@5 and fit seconds, medians of ``--repeats``.

    HOLOXMC_DATA=../shared/data python benchmarks/auto_finish.py --sets bibtex delicious debtags \\
        mlc-3k mlc-16k realistic-1k realistic-10k reuters appstream --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from panel import QUICK_SETS, REALDATA_SETS, SETS, load_set  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "auto_finish.jsonl"


def run(set_name: str, finish: bool) -> dict:
    """One fit of the default (FC skipped) with or without the finishing step."""
    from holoxmc.metrics import evaluate
    from holoxmc.estimator import XMCClassifier
    from holoxmc.models import registry

    rerank = registry.family("rerank")
    if not finish:
        registry.FAMILIES._built["rerank"] = replace(rerank, finish=None)  # the old way: refit
    try:
        train, test = load_set(set_name)
        clf = XMCClassifier(progress=False, time_budget=1e-9)
        begun = time.perf_counter()
        clf.fit(train.X, train.Y)
        seconds = time.perf_counter() - begun
        top = clf.predict_topk(test.X, k=5)[0]
    finally:
        registry.FAMILIES._built["rerank"] = rerank
    scores = evaluate(top, test.Y, ks=(1, 5))
    return {"set": set_name, "finish": finish, "P@1": scores["P@1"], "P@5": scores["P@5"], "fit_seconds": seconds,
            "note": clf.selection_[0].note}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=[*SETS, *REALDATA_SETS, *QUICK_SETS])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    run("mlc-tiny", True)  # imports and one-time checks out of the first timing
    load = os.getloadavg()[0]
    with args.out.open("a") as out:
        for name in args.sets:
            rows = {finish: [run(name, finish) for _ in range(args.repeats)] for finish in (False, True)}
            for finish, runs in rows.items():
                record = {"set": name, "finish": finish, "repeats": len(runs), "load": round(load, 1),
                          **{key: statistics.median(r[key] for r in runs) for key in ("P@1", "P@5", "fit_seconds")},
                          "note": runs[0]["note"]}
                out.write(json.dumps(record) + "\n")
                out.flush()
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()

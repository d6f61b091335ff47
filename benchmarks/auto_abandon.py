"""The default's FC candidate with and without ``abandon_below`` (the leader's validation P@1).

For each set: ``head="auto"`` at its defaults (the 60 s budget), once as it ships (the FC
candidate stops once its validation P@1 cannot reach the re-rank model's) and once without
that stop (the old way: it trains until its epochs or the budget end), side by side in one
process; the candidates' validation P@1, seconds and notes, the model kept, test P@1 / P@5
and fit seconds.

    HOLOXMC_DATA=../shared/data python benchmarks/auto_abandon.py --sets bibtex delicious mlc-3k realistic-1k
    HOLOXMC_DATA=../shared/data python benchmarks/auto_abandon.py --sets delicious --only-shipped --time-budget 1e6
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from panel import QUICK_SETS, REALDATA_SETS, SETS, load_set  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "auto_abandon.jsonl"


def run(set_name: str, abandon: bool, time_budget: float = 60.0) -> dict:
    """One default fit, the FC candidate told the leader's score or not."""
    from holoxmc import auto
    from holoxmc.estimator import XMCClassifier
    from holoxmc.metrics import evaluate

    limits = auto._limits
    if not abandon:
        auto._limits = lambda keywords, remaining, leader: {  # type: ignore[assignment]
            key: value for key, value in limits(keywords, remaining, leader).items() if key != "abandon_below"}
    try:
        train, test = load_set(set_name)
        clf = XMCClassifier(progress=False, time_budget=time_budget)
        begun = time.perf_counter()
        clf.fit(train.X, train.Y)
        seconds = time.perf_counter() - begun
    finally:
        auto._limits = limits
    scores = evaluate(clf.predict_topk(test.X, k=5)[0], test.Y, ks=(1, 5))
    return {"set": set_name, "abandon": abandon, "time_budget": time_budget, "kept": clf.head_,
            "P@1": scores["P@1"], "P@5": scores["P@5"],
            "fit_seconds": seconds, "load": round(os.getloadavg()[0], 1),
            "trials": [trial.as_dict() for trial in clf.selection_]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["bibtex", "delicious", "mlc-3k", "realistic-1k"],
                        choices=[*SETS, *REALDATA_SETS, *QUICK_SETS])
    parser.add_argument("--time-budget", type=float, default=60.0, help="the default's budget (1e6: FC never cut)")
    parser.add_argument("--only-shipped", action="store_true", help="only the run with abandon_below")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    run("mlc-tiny", True)  # imports and one-time checks out of the first timing
    with args.out.open("a") as out:
        for name in args.sets:
            for abandon in (True,) if args.only_shipped else (False, True):
                record = run(name, abandon, args.time_budget)
                out.write(json.dumps(record) + "\n")
                out.flush()
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()

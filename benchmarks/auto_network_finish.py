"""``head="auto"``'s network winner finished with one epoch on every row, against the refit it
replaced and against keeping the selection run's network as it is.

For each set and seed: the FC candidate as ``head="auto"`` trains it (its defaults, on the
training rows less auto's seeded validation share, choosing its best epoch there; no time
budget, so every run trains its 20 epochs whatever the machine's load), then, from that one
selection run, three winners on every row, side by side in one process:

* ``finish``: what ships: one more epoch from the best epoch's weights on every row, at the
  learning rate the schedule had at that epoch, annealed to zero
  (:func:`holoxmc.models.registry._finish_network`);
* ``refit``: the old way: a second training from scratch on every row for the best epoch's
  number of epochs (:func:`holoxmc.auto.refit_settings`);
* ``keep``: the selection run's network untouched (trained on 90 % of the rows).

Test P@1 / P@5 (every test row) and the seconds each step took.

    HOLOXMC_DATA=../shared/data python benchmarks/auto_network_finish.py --sets delicious bibtex mlc-3k \\
        realistic-1k --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from panel import QUICK_SETS, REALDATA_SETS, SETS, load_set  # noqa: E402

OUT = ROOT / "benchmarks" / "results" / "auto_network_finish.jsonl"


def _scores(clf: object, test: object) -> dict[str, float]:
    from holoxmc.metrics import evaluate

    top = clf.predict_topk(test.X, k=5)[0]
    scores = evaluate(top, test.Y, ks=(1, 5))
    return {"P@1": round(float(scores["P@1"]), 2), "P@5": round(float(scores["P@5"]), 2)}


def run(set_name: str, seed: int) -> dict:
    """One selection run of the FC candidate and its three winners on every row."""
    from holoxmc import auto
    from holoxmc.estimator import XMCClassifier
    from holoxmc.models import registry

    train, test = load_set(set_name)
    clf = XMCClassifier(progress=False, seed=seed)
    held = auto._held_rows(clf, train.X)
    shared = {key: value for key, value in clf.get_params().items() if key in auto.SHARED_SETTINGS - {"time_budget"}}
    params = shared | {"head": "dense"}
    candidate = auto._candidate(clf, params)
    begun = time.perf_counter()
    candidate.fit(train.X[~held], train.Y[~held], train.X[held], train.Y[held])
    record = {"set": set_name, "seed": seed, "selection_s": round(time.perf_counter() - begun, 1),
              "best_epoch": int(candidate.fit_results_[0].best_epoch), "keep": _scores(candidate, test)}
    dense = registry.family("dense")
    for how in ("finish", "refit"):
        if how == "refit":
            registry.FAMILIES._built["dense"] = replace(dense, finish=None)
        try:
            begun = time.perf_counter()
            winner, note = auto._finish(clf, copy.deepcopy(candidate), train.X, train.Y, held, params, None)
            record[f"{how}_s"] = round(time.perf_counter() - begun, 1)
        finally:
            registry.FAMILIES._built["dense"] = dense
        record[how] = _scores(winner, test)
        record[f"{how}_note"] = note
    return record


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["delicious", "bibtex", "mlc-3k", "realistic-1k"],
                        choices=[*SETS, *REALDATA_SETS, *QUICK_SETS])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    with args.out.open("a") as out:
        for name in args.sets:
            for seed in args.seeds:
                load = os.getloadavg()[0]
                record = run(name, seed) | {"load": round(load, 1), "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}
                out.write(json.dumps(record) + "\n")
                out.flush()
                print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()

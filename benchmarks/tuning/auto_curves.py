"""Validation curves of ``head="auto"``'s candidates on the unseen-data panel's sets: what a
rule that stops a losing network early (successive halving) would keep and save.

For each set, the candidates train exactly as ``fit_auto`` trains them (the linear model, then
HRR-FC and FC at their library defaults (``--candidates``; ``fit_auto`` tried all three when this ran), on the training rows less the estimator's seeded
validation share) and every epoch's validation P@1 is written out, with each candidate's
seconds. Only training rows are read: the test split is never scored here.

Run: PYTHONPATH=src python benchmarks/tuning/auto_curves.py --sets mlc-3k bibtex ... [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from panel import load_set  # noqa: E402

from holoxmc.estimator import XMCClassifier  # noqa: E402
from holoxmc.models.auto import _validation_split  # noqa: E402

#: What was measured: the linear model and both networks, each at its library defaults.
MEASURED = {"linear": {"head": "linear"}, "rerank": {"head": "rerank"}, "hrr-fc": {"head": "hrr"},
            "fc": {"head": "dense"}}


def curves(name: str, candidates: list[str]) -> dict:
    """``{candidate: {"seconds", "val_p1", "curve"}}`` of one panel set's training split."""
    train, _ = load_set(name)
    auto = XMCClassifier(progress=False)
    X_fit, Y_fit, X_val, Y_val = _validation_split(auto, train.X, train.Y)
    out = {}
    for model in candidates:
        keywords = MEASURED[model]
        started = time.perf_counter()
        clf = XMCClassifier(progress=False, **keywords).fit(X_fit, Y_fit, X_val, Y_val)
        seconds = time.perf_counter() - started
        curve = [entry["val"]["P@1"] for entry in clf.fit_result_.history if "val" in entry]
        out[model] = {"seconds": seconds, "val_p1": clf.score(X_val, Y_val), "curve": curve}
        print(name, model, f"{seconds:.1f} s", f"val P@1 {out[model]['val_p1']:.2f}",
              " ".join(f"{p:.1f}" for p in curve), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sets", nargs="+", required=True)
    parser.add_argument("--candidates", nargs="+", choices=list(MEASURED), default=list(MEASURED))
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/auto_curves.json"))
    args = parser.parse_args()
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    for name in args.sets:
        results[name] = curves(name, args.candidates)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

"""Start-up of ``holoxmc predict`` for a linear and a re-rank run, against another source tree.

A tiny XML-repository set (200 / 50 rows, D = 30, L = 10, ``make_synthetic(..., seed=0)``, as
the tests' ``tiny`` set) is trained once per model by ``holoxmc train`` of the ``--base`` tree
(so both trees read the same run folders); then ``python -m holoxmc predict RUN test.txt
--output OUT`` is timed (wall clock of the whole process) for each tree in turn, ``--repeats``
times, and the median is printed with the ``uptime`` load before and after. The predictions
the two trees write are compared byte for byte.

Usage:
    python benchmarks/cli_startup.py --base /path/to/base/src --repeats 5   # this tree: src/
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1] / "src"
MODELS = ("linear", "rerank")


def _python(src: Path, *args: str, quiet: bool = True) -> None:
    subprocess.run([sys.executable, *args], env=dict(os.environ, PYTHONPATH=str(src)), check=True,
                   stdout=subprocess.DEVNULL if quiet else None, stderr=subprocess.DEVNULL if quiet else None)


def _load() -> str:
    return ", ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=Path, required=True, help="the other tree's src folder (e.g. a checkout of 0.2.0)")
    parser.add_argument("--src", type=Path, default=HERE, help="this tree's src folder")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    trees = {"base": args.base.resolve(), "this": args.src.resolve()}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        _python(trees["base"], "-c", "from pathlib import Path\n"
                "from holoxmc.data import make_synthetic\n"
                "from holoxmc.data.readers import write_xml_repo\n"
                "train, test = make_synthetic(200, 10, 30, n_test=50, seed=0)\n"
                f"write_xml_repo(Path({str(work)!r}) / 'tiny' / 'tiny_train.txt', train.X, train.Y)\n"
                f"write_xml_repo(Path({str(work)!r}) / 'tiny' / 'tiny_test.txt', test.X, test.Y)\n")
        for model in MODELS:
            _python(trees["base"], "-m", "holoxmc", "train", str(work / "tiny"), "--model", model, "--out",
                    str(work / model), "--quiet")
        print(f"load average before: {_load()}")
        seconds: dict[tuple[str, str], list[float]] = {(tree, model): [] for tree in trees for model in MODELS}
        for _ in range(args.repeats):
            for model in MODELS:
                for tree, src in trees.items():
                    started = time.perf_counter()
                    _python(src, "-m", "holoxmc", "predict", str(work / model), str(work / "tiny" / "tiny_test.txt"),
                            "--output", str(work / f"{tree}-{model}.txt"))
                    seconds[tree, model].append(time.perf_counter() - started)
        print(f"load average after: {_load()}")
        print("| model | base s (median) | this tree s (median) | runs base | runs this tree | same output |")
        print("|---|---|---|---|---|---|")
        for model in MODELS:
            same = (work / f"base-{model}.txt").read_bytes() == (work / f"this-{model}.txt").read_bytes()
            runs = {tree: " ".join(f"{s:.2f}" for s in seconds[tree, model]) for tree in trees}
            print(f"| {model} | {statistics.median(seconds['base', model]):.2f} | "
                  f"{statistics.median(seconds['this', model]):.2f} | {runs['base']} | {runs['this']} | {same} |")


if __name__ == "__main__":
    main()

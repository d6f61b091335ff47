"""``holoxmc reproduce [--quick] [--only NAME ...] --out DIR``: every table and figure of the
HRR and SOLAR papers that the data here allows, each paper's own model (preset ``paper``)
beside the library's tuned presets and the papers' reported numbers; Markdown, CSV and
PNG per experiment and an index ``DIR/README.md`` (see :mod:`holoxmc.experiments.reproduce`).

``HOLOXMC_REPRODUCE_TINY=1`` (or the hidden ``--tiny``) swaps the data for small synthetic
sets and every size for a toy one: the tests run every experiment that way in seconds.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from holoxmc.cli import positive_int
from holoxmc.errors import InputError

__all__ = ["register", "run_reproduce", "EXPERIMENT_NAMES"]

#: The registry's names, repeated here so that ``--help`` imports neither torch nor numpy
#: (tests check it equals ``holoxmc.experiments.reproduce.EXPERIMENTS``).
EXPERIMENT_NAMES: tuple[str, ...] = (
    "hrr_table1", "hrr_table2", "hrr_table3", "hrr_table4", "hrr_table5", "hrr_table7", "hrr_capacity",
    "hrr_fig2", "hrr_fig8", "solar_table2", "solar_table3", "solar_table6",
)
TINY_ENV = "HOLOXMC_REPRODUCE_TINY"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``reproduce`` command to the ``holoxmc`` parser."""
    parser = subparsers.add_parser(
        "reproduce", help="regenerate the HRR and SOLAR papers' tables and figures on the data here",
        description="Runs every experiment (or those of --only) and writes DIR/<name>.md, .csv, .png and "
                    "DIR/README.md. Experiments: " + ", ".join(EXPERIMENT_NAMES) + ".",
    )
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    parser.add_argument("--quick", action="store_true",
                        help="capped epochs and grids: under 15 minutes on 2 CPU cores")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these experiments")
    parser.add_argument("--seed", type=int, default=0, help="seed of every model (default 0)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    parser.add_argument("--threads", type=positive_int, metavar="N",
                        help="torch threads (default: torch's choice); 1 is steadier on a shared machine")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(run=run_reproduce)


def run_reproduce(args: argparse.Namespace) -> int:
    """Check the arguments, run the experiments, print the index; exit 1 if one failed."""
    unknown = [name for name in args.only or () if name not in EXPERIMENT_NAMES]
    if unknown:
        raise InputError(f"--only: unknown experiment {unknown[0]!r}; choose from: {', '.join(EXPERIMENT_NAMES)}")
    if args.seed < 0:
        raise InputError(f"--seed must be >= 0, got {args.seed}")
    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} exists and is not a folder")
    from holoxmc.devices import check_device
    from holoxmc.experiments.reproduce import run_experiments

    check_device(args.device)
    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    tiny = args.tiny or os.environ.get(TINY_ENV, "") not in ("", "0")
    command = "holoxmc " + shlex.join(sys.argv[1:]) if sys.argv[1:2] == ["reproduce"] else "holoxmc reproduce"
    summary = run_experiments(args.out, args.only, quick=args.quick, tiny=tiny, seed=args.seed,
                              device=args.device, command=command,
                              say=lambda message: print(message, file=sys.stderr, flush=True))
    print((args.out / "README.md").read_text(encoding="utf-8"))
    return 1 if any(entry["status"] != "ran" for entry in summary.values()) else 0

"""``holoxmc experiment …``: the papers' evidence experiments.

``holoxmc experiment capacity --out DIR [--quick] [--seed S]`` runs the HRR paper's Fig. 1 and
App. D.1–D.2 capacity measurements (see :mod:`holoxmc.experiments.capacity`) and writes
``DIR/capacity.json``, CSVs and PNG plots, all or nothing; DIR is checked before the run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from holoxmc.errors import InputError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``experiment`` command group to the ``holoxmc`` parser."""
    parser = subparsers.add_parser(
        "experiment", help="run the papers' evidence experiments (HRR capacity, ...)"
    )
    experiments = parser.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    capacity = experiments.add_parser(
        "capacity",
        help="HRR paper Fig. 1 and App. D: responses and binding capacity of HRR, MAP-C, VTB",
        description="Writes DIR/capacity.json (nested: fig1.*, capacity.*, fig7.*), CSVs and PNGs.",
    )
    capacity.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    capacity.add_argument(
        "--quick", action="store_true", help="smaller sizes: about a minute on 2 CPU cores"
    )
    capacity.add_argument("--seed", type=int, default=0, help="master random seed (default 0)")
    capacity.set_defaults(run=run_capacity_command)


def run_capacity_command(args: argparse.Namespace) -> int:
    """Check the arguments and the output folder, run the capacity experiment, write its
    outputs (all or nothing), print the headline table."""
    from holoxmc.experiments.capacity import (
        CapacityConfig,
        output_folder,
        run_capacity,
        summary_table,
        write_capacity_outputs,
    )

    if args.seed < 0:
        raise InputError(f"--seed must be >= 0, got {args.seed}")
    if args.out.exists() and not args.out.is_dir():
        raise InputError(f"--out {args.out} exists and is not a directory")
    config = CapacityConfig.quick() if args.quick else CapacityConfig.full()
    with output_folder(args.out) as out:
        results = run_capacity(
            config, seed=args.seed, progress=lambda message: print(message, file=sys.stderr)
        )
        written = write_capacity_outputs(results, out)
    print(summary_table(results))
    print(f"\nwrote {len(written)} files to {args.out}")
    return 0

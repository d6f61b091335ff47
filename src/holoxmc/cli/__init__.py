"""The ``holoxmc`` command line. Each subcommand lives in its own module of this package
and exposes ``register(subparsers)``; errors of the :class:`HoloxmcError` family, and
``OSError`` naming a file (unreadable, a folder where a file was expected, ...), print one
line and exit 2, without a traceback."""

from __future__ import annotations

import argparse
import importlib
import sys

from holoxmc import __version__
from holoxmc.errors import HoloxmcError

# Modules of this package that add subcommands, in --help order.
COMMAND_MODULES: tuple[str, ...] = ("experiment", "data", "train", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="holoxmc",
        description="Extreme multi-label classification with HRR and SOLAR label codes.",
    )
    parser.add_argument("--version", action="version", version=f"holoxmc {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"holoxmc.cli.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except HoloxmcError as exc:
        print(f"holoxmc: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        if exc.filename is None:
            raise
        print(f"holoxmc: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("holoxmc: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""The ``holoxmc`` command line. Each subcommand lives in its own module of this package
and exposes ``register(subparsers)``; errors of the :class:`HoloxmcError` family, and
``OSError`` naming a file (unreadable, a folder where a file was expected, ...), print one
line and exit 2, without a traceback; so do wrong arguments. Ctrl-C prints
``holoxmc: interrupted`` and exits 130, SIGTERM ``holoxmc: terminated`` and 143 (worker
processes are ended either way, and the run folder's lock is released).

Every command takes ``-v/--verbose`` (debug messages) and ``-q/--quiet`` (warnings and
errors only, no progress bars); messages go to stderr through Python's :mod:`logging`
(logger ``holoxmc``), results to stdout. Progress bars are shown only on a terminal; without
one, training logs one line per epoch.

Only the standard library is imported to build the parser: ``holoxmc --help`` and
``holoxmc train --help`` do not import torch or numpy.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

from holoxmc import __version__
from holoxmc.errors import HoloxmcError

__all__ = ["main", "build_parser", "finite_float", "positive_int", "non_negative_int"]

# Modules of this package that add subcommands, in --help order.
COMMAND_MODULES: tuple[str, ...] = ("experiment", "reproduce", "data", "train", "demo")


class _UsageError(Exception):
    """A wrong command line, raised instead of argparse's usage-and-exit."""


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that ``finally`` blocks and pools clean up."""


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` (and so every subparser) whose errors are one line, exit 2."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def finite_float(text: str) -> float:
    """argparse type: a finite number (``inf`` and ``nan`` are refused).

    Example:
        >>> finite_float("1e-3")
        0.001
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1.

    Example:
        >>> positive_int("4")
        4
    """
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return value


def _all_parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``parser`` and every subparser below it, each once."""
    yield parser
    seen: set[int] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield from _all_parsers(sub)


def _add_logging_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("-v", "--verbose", action="store_true", default=False, help="also debug messages")
    group.add_argument("-q", "--quiet", action="store_true", default=False,
                       help="only warnings and errors; no progress bars")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="holoxmc",
        description="Extreme multi-label classification with HRR and SOLAR label codes.",
    )
    parser.add_argument("--version", action="version", version=f"holoxmc {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(f"holoxmc.cli.{name}").register(subparsers)
    for sub in list(_all_parsers(parser))[1:]:
        if not any(isinstance(action, argparse._SubParsersAction) for action in sub._actions):
            _add_logging_options(sub)
    return parser


def _configure_logging(verbose: bool, quiet: bool) -> logging.Handler:
    """Messages of the ``holoxmc`` loggers to stderr, one line each; returns the handler."""
    logger = logging.getLogger("holoxmc")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    logger.propagate = False
    return handler


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise _Terminated()


def _one_line_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      line: str | None = None) -> str:
    """A warning as the command line shows it: one line, without the source line that raised it."""
    return f"holoxmc: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    """Run the ``holoxmc`` command line on ``argv`` (default ``sys.argv[1:]``); returns the
    exit code: 0, 2 for bad input, 130 when interrupted, 143 when terminated."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    handler, formatwarning = None, warnings.formatwarning
    warnings.formatwarning = _one_line_warning
    try:
        args = build_parser().parse_args(argv)
        handler = _configure_logging(args.verbose, args.quiet)
        return int(args.run(args) or 0)
    except (HoloxmcError, _UsageError) as exc:
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
    except _Terminated:
        print("holoxmc: terminated", file=sys.stderr)
        return 143
    finally:
        warnings.formatwarning = formatwarning
        if handler is not None:
            logging.getLogger("holoxmc").removeHandler(handler)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())

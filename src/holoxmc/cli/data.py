"""``holoxmc data …``: inspect datasets.

``holoxmc data info DATA`` prints points / features / labels / labels-per-point /
points-per-label of each split of ``DATA`` (a registry name, a dataset folder or a file);
a malformed file gives one error line and exit code 2. ``holoxmc data shard DATA --out DIR``
writes each split as a shard store (:mod:`holoxmc.data.shards`).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from holoxmc.cli import positive_int
from holoxmc.data import REGISTRY, Dataset, DatasetStats, load
from holoxmc.data.readers import MAX_GZIP_RATIO
from holoxmc.data.text import DEFAULT_TEXT_FEATURES, TEXT_FEATURES, text_features_row
from holoxmc.errors import InputError

__all__ = ["register", "add_data_options", "data_options", "add_cache_options", "cache_dir", "CACHE_ENV"]

#: The environment variable naming the folder of prepared ``.npz`` splits (``--cache-dir``).
CACHE_ENV = "HOLOXMC_CACHE"


def add_data_options(parser: argparse.ArgumentParser) -> None:
    """``--data-option KEY=VALUE`` (repeatable): the ``holoxmc.data.load`` options of DATA."""
    parser.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE",
                        help="a load option of DATA, repeatable: synthetic data takes preset=amazon-670k-like "
                             "and make_synthetic's arguments (n_labels=20000, ...), raw-text sets min_df, "
                             "max_vocab, max_length, ngrams (default 2: words and word pairs; 1: words), max_features, "
                             "split-file sets split_column")
    parser.add_argument("--text-features", metavar="NAME",
                        help="how raw texts become TF-IDF features: "
                             + "; ".join(f"{name}: {row.help}" for name, row in TEXT_FEATURES.items())
                             + f" (default {DEFAULT_TEXT_FEATURES}); --data-option min_df, ngrams, max_features "
                             "override its values")


def add_cache_options(parser: argparse.ArgumentParser) -> None:
    """``--cache-dir DIR`` / ``--no-cache``: where the prepared splits of DATA are kept."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--cache-dir", type=Path, default=None, metavar="DIR",
                       help="keep each prepared split of DATA as .npz here and read it instead of parsing DATA again "
                            "while DATA's files (names, sizes, modification times) and the options are unchanged "
                            f"(default: ${CACHE_ENV}, else ~/.cache/holoxmc/prepared)")
    group.add_argument("--no-cache", action="store_true", help="parse DATA, keeping no prepared copy")


def cache_dir(args: argparse.Namespace) -> Path | None:
    """The folder of prepared splits (:func:`holoxmc.data.load`'s ``cache_dir``): ``--cache-dir``,
    else ``$HOLOXMC_CACHE``, else ``~/.cache/holoxmc/prepared``; ``None`` with ``--no-cache`` or
    where the folder cannot be made or written (a warning says so: the data are parsed instead).

    Example:
        >>> import argparse, tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> cache_dir(argparse.Namespace(cache_dir=folder, no_cache=False)) == folder
        True
        >>> cache_dir(argparse.Namespace(cache_dir=None, no_cache=True)) is None
        True
    """
    if getattr(args, "no_cache", False):
        return None
    folder = getattr(args, "cache_dir", None) or Path(os.environ.get(CACHE_ENV) or
                                                     Path.home() / ".cache" / "holoxmc" / "prepared")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        writable = os.access(folder, os.W_OK | os.X_OK)
    except OSError as exc:
        writable, reason = False, exc.strerror or type(exc).__name__
    else:
        reason = "not writable"
    if not writable:
        print(f"holoxmc: warning: cannot keep prepared data in {folder} ({reason}); parsing DATA without a cache "
              "(--cache-dir DIR chooses another folder)", file=sys.stderr)
        return None
    return folder


def data_options(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--data-option`` pairs and ``--text-features`` as ``load`` keywords; numbers
    parsed as numbers; an unknown featurisation is an :class:`InputError` before any work."""
    options: dict[str, Any] = {}
    if getattr(args, "text_features", None) is not None:
        text_features_row(args.text_features)
        options["text_features"] = args.text_features
    for pair in args.data_option:
        key, equals, text = pair.partition("=")
        if not equals or not key:
            raise InputError(f"--data-option takes KEY=VALUE, got {pair!r}")
        options[key] = _number_or_text(text)
    return options


def _number_or_text(text: str) -> int | float | str:
    for parse in (int, float):
        try:
            return parse(text)
        except ValueError:
            continue
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``data`` command group to the ``holoxmc`` parser."""
    parser = subparsers.add_parser("data", help="inspect datasets (statistics, validation)")
    commands = parser.add_subparsers(dest="data_command", metavar="COMMAND", required=True)
    info = commands.add_parser(
        "info",
        help="print points, features, labels, labels/point, points/label of each split",
        description="DATA is a registry name (bibtex, delicious, debtags, synthetic, ...), "
        "a dataset folder or a single file (XML-repo/svmlight text, .mat, .jsonl, .npz). "
        "In a folder the splits are paired by file name only, never by the folder's path: "
        "train.jsonl/test.jsonl, else the .txt[.gz] files whose name has the word train or test "
        "(bibtex_train.txt, test.txt.gz; 'latest.txt' is not a test file), else *_data.txt with "
        "*trSplit*/*tstSplit* files, else a .mat file. DATA must be a regular file or folder "
        "(a FIFO or device is refused); gzip data may expand to at most "
        f"{MAX_GZIP_RATIO} times its size.",
    )
    info.add_argument("data", metavar="DATA", help="registry name, folder or file")
    add_data_options(info)
    add_cache_options(info)
    info.set_defaults(run=run_info)
    shard = commands.add_parser(
        "shard",
        help="write each split of DATA as CSR shards that training and scoring read a shard at a time",
        description="Write OUT/train and OUT/test (or OUT/file for one data file), each a folder of .npy "
        "shards of --rows-per-shard rows and a manifest.json with their sizes and SHA-256 checksums "
        "(holoxmc.data.open_shards reads them memory-mapped). DATA is read as by 'holoxmc data info'.",
    )
    shard.add_argument("data", metavar="DATA", help="registry name, folder or file")
    shard.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder of the shard stores")
    shard.add_argument("--rows-per-shard", type=positive_int, default=65536, metavar="N",
                       help="rows per shard (default 65536)")
    add_data_options(shard)
    shard.set_defaults(run=run_shard)


def run_shard(args: argparse.Namespace) -> int:
    """Write every split of ``args.data`` as a shard store under ``args.out``."""
    from holoxmc.data.shards import write_shards

    for split, dataset in _splits_of(args.data, data_options(args), None):
        folder = write_shards(dataset, args.out / split, args.rows_per_shard)
        print(f"{split}: {len(dataset)} rows -> {folder}")
    return 0


def _splits_of(data: str, options: dict[str, Any], cache: Path | None) -> list[tuple[str, Dataset]]:
    """``(split, dataset)`` for every split ``data`` has (one entry for a single text file);
    the test split is read at the train split's widths, as ``holoxmc train`` reads it (both
    kept in, or read from, the folder ``cache`` of prepared splits, as ``holoxmc train`` does)."""
    path = Path(data)
    try:
        single_file = path.is_file() and not path.name.lower().endswith(".mat")
    except OSError:  # e.g. a path it may not look at: load names the fault
        single_file = False
    if single_file:
        return [("file", load(path, cache_dir=cache, **options))]
    train = load(data, "train", cache_dir=cache, **options)
    return [("train", train), ("test", load(data, "test", widths=(train.n_features, train.n_labels), cache_dir=cache,
                                            **options))]


def _fit_estimate_line(split: str, train: Dataset) -> str:
    """The default model's expected fit on the rows of ``split`` (:func:`holoxmc.limits.estimate_fit`).

    Example:
        >>> import scipy.sparse as sp
        >>> _fit_estimate_line("train", Dataset(sp.csr_matrix((0, 3)), sp.csr_matrix((0, 2)), "empty"))
        "default model's fit on the train split (estimated from its shape): -"
    """
    from holoxmc.limits import estimate_fit
    from holoxmc.settings import DEFAULTS

    estimate = estimate_fit(train.X.shape[0], train.X.shape[1], int(train.X.nnz), train.Y.shape[1],
                            int(train.Y.nnz), head=str(DEFAULTS["head"]))
    return (f"default model's fit on the {split} split (estimated from its shape): "
            + ("-" if estimate is None else estimate.summary()))


def run_info(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        splits = _splits_of(args.data, data_options(args), cache_dir(args))
    for warning in caught:
        print(f"holoxmc: warning: {warning.message}", file=sys.stderr)
    print(f"{args.data}")
    header = f"{'split':<10}{'points':>10}{'features':>10}{'labels':>10}{'labels/point':>14}{'points/label':>14}"
    print(header)
    rows = [(split, dataset.stats()) for split, dataset in splits]
    if len(rows) == 2:
        points = sum(s.points for _, s in rows)
        positives = sum(dataset.Y.nnz for _, dataset in splits)
        labels = rows[0][1].labels
        rows.append(("all", DatasetStats(points, rows[0][1].features, labels, positives / max(points, 1), positives / max(labels, 1))))
    for split, s in rows:
        print(f"{split:<10}{s.points:>10}{s.features:>10}{s.labels:>10}{s.labels_per_point:>14.2f}{s.points_per_label:>14.2f}")
    info = REGISTRY.get(str(args.data).lower())
    if info is not None and not Path(args.data).exists():
        features = "-" if info.n_features is None else str(info.n_features)
        print(
            f"{'published':<10}{f'{info.train_points}+{info.test_points}':>10}{features:>10}{info.n_labels:>10}"
            f"{info.labels_per_point:>14.2f}{info.points_per_label:>14.2f}  (train+test)"
        )
    print(_fit_estimate_line(*splits[0]))
    return 0

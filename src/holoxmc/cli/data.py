"""``holoxmc data …``: inspect datasets.

``holoxmc data info DATA`` prints points / features / labels / labels-per-point /
points-per-label of each split of ``DATA`` (a registry name, a dataset folder or a file);
a malformed file gives one error line and exit code 2. ``holoxmc data shard DATA --out DIR``
writes each split as a shard store (:mod:`holoxmc.data.shards`).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from holoxmc.cli import positive_int
from holoxmc.data import REGISTRY, Dataset, DatasetStats, load
from holoxmc.data.readers import MAX_GZIP_RATIO
from holoxmc.data.text import DEFAULT_TEXT_FEATURES, TEXT_FEATURES, text_features_row
from holoxmc.errors import InputError

__all__ = ["register", "add_data_options", "data_options"]


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

    for split, dataset in _splits_of(args.data, data_options(args)):
        folder = write_shards(dataset, args.out / split, args.rows_per_shard)
        print(f"{split}: {len(dataset)} rows -> {folder}")
    return 0


def _splits_of(data: str, options: dict[str, Any]) -> list[tuple[str, Dataset]]:
    """``(split, dataset)`` for every split ``data`` has (one entry for a single text file);
    the test split is read at the train split's widths, as ``holoxmc train`` reads it."""
    path = Path(data)
    try:
        single_file = path.is_file() and not path.name.lower().endswith(".mat")
    except OSError:  # e.g. a path it may not look at: load names the fault
        single_file = False
    if single_file:
        return [("file", load(path, **options))]
    train = load(data, "train", **options)
    return [("train", train), ("test", load(data, "test", widths=(train.n_features, train.n_labels), **options))]


def run_info(args: argparse.Namespace) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        splits = _splits_of(args.data, data_options(args))
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
    return 0

"""``holoxmc.data.load``: datasets by name or path, checked against published statistics.

Resolution of a name: an existing path → ``$HOLOXMC_DATA/<name>`` (or the canonical folder
name, e.g. ``Bibtex``) → ``shared/data/<Name>`` in any parent folder of the working directory
or of this package (the layout of a checkout next to ``shared/``).

Pairing rule: inside a dataset folder the files are found by their *file names* alone
(the folder's own path plays no part: ``/data/mytests/x_train.txt`` is a train file). A
name is split into words at every character that is not a letter or digit, case ignored;
in this order:

1. raw texts ``train.jsonl[.gz]`` and ``test.jsonl[.gz]`` (exactly these names);
2. feature files (XML-repository or svmlight text: ``.txt``, ``.svm``, ``.svmlight``,
   ``.libsvm``, each also gzipped as ``.gz``) with the word ``train`` or ``test`` in the name
   (``bibtex_train.txt``, ``test.svm.gz``, ``a-test.libsvm``, ``my_train.svm``; not
   ``latest.txt`` nor ``contest_train.txt`` for the test split) and not ``split`` in the name;
   a name with both words (``train_test.txt``) is an :class:`InputError`: one file is never
   both splits;
3. ``*_data.txt`` with split files named ``*trSplit*`` / ``*tstSplit*``;
4. a ``.mat`` file.

The first kind present is read; two files of that kind for one role (e.g. ``a_train.txt``
and ``b_train.txt.gz``) are an :class:`InputError` naming both.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import numbers
import os
import re
import shutil
import tempfile
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import scipy.sparse as sp

from holoxmc.data.cache import FORMAT_VERSION, load_npz, save_npz
from holoxmc.data.dataset import Dataset
from holoxmc.data.readers import (
    GROUP_FIELD,
    has_xml_repo_header,
    read_jsonl,
    read_mat,
    read_svmlight,
    read_xml_repo,
    read_xml_repo_split,
)
from holoxmc.data.realistic import REALISTIC_PRESETS, make_realistic
from holoxmc.data.synthetic import SYNTHETIC_PRESETS, make_synthetic
from holoxmc.data.text import TEXT_DEFAULTS, TextEncoder, build_label_vocabulary, labels_to_csr, read_label_vocabulary
from holoxmc.errors import DataFormatError, InputError

__all__ = [
    "DatasetInfo", "REGISTRY", "StatisticsWarning", "load", "load_text_pair", "find_dataset_dir", "text_split_file",
    "download", "fetch",
    "SPLITS",
]

SPLITS = ("train", "test")


class StatisticsWarning(UserWarning):
    """A loaded dataset differs from its published statistics."""


@dataclass(frozen=True)
class DatasetInfo:
    """Published statistics (XML repository; Debtags: its README) and where to get the files.

    ``labels_per_point`` and ``points_per_label`` are over train + test, as published.
    ``url`` is a public mirror of the repository's archive (the repository's own Google Drive
    links have stopped serving files; these are the mirrors napkinXC uses); ``sha256`` is
    ``None`` where no checksum is published (the download then reports the one it computed).
    """

    name: str
    directory: str
    train_points: int
    test_points: int
    n_features: int | None  # None: derived from text (TF-IDF vocabulary)
    n_labels: int
    labels_per_point: float
    points_per_label: float
    url: str | None = None
    sha256: str | None = None


_DRIVE = "https://drive.google.com/uc?export=download&id="
REGISTRY: dict[str, DatasetInfo] = {
    info.name: info
    for info in (
        DatasetInfo("bibtex", "Bibtex", 4880, 2515, 1836, 159, 2.40, 111.71),
        DatasetInfo("delicious", "Delicious", 12920, 3185, 500, 983, 19.03, 311.61),
        DatasetInfo("mediamill", "Mediamill", 30993, 12914, 120, 101, 4.38, 1902.15,
                    _DRIVE + "1YDlU9GTYSoydU1UYTNT8BpPkRw1BCnFw"),
        DatasetInfo("eurlex-4k", "EURLex-4K", 15539, 3809, 5000, 3993, 5.31, 25.73,
                    _DRIVE + "1xWW1UykQBTD2IorVn7V8XubJatQDScol"),
        DatasetInfo("wiki10-31k", "Wiki10-31K", 14146, 6616, 101938, 30938, 18.64, 8.52,
                    _DRIVE + "1uV-p682ggXQQTiKZyK5M6B0xJJk8_lJx"),
        DatasetInfo("amazoncat-13k", "AmazonCat-13K", 1186239, 306782, 203882, 13330, 5.04, 448.57,
                    _DRIVE + "1WvBWF9hH5ZlFcpCRhp8wLVGwdeGZXKD2"),
        DatasetInfo("delicious-200k", "Delicious-200K", 196606, 100095, 782585, 205443, 75.54, 72.29,
                    _DRIVE + "18Tb595TuGyFW--nEYGfduwS5WvSbX-sX"),
        DatasetInfo("amazon-670k", "Amazon-670K", 490449, 153025, 135909, 670091, 5.45, 3.99,
                    _DRIVE + "1PV-wbKVv6Ng1K1XM1USqNxFhaQo2qfk6"),
        DatasetInfo("debtags", "Debtags", 15668, 5034, None, 443, 3.077, 143.77),
    )
}


def _data_roots() -> list[Path]:
    """Folders that may hold dataset folders, in resolution order."""
    roots: list[Path] = []
    if os.environ.get("HOLOXMC_DATA"):
        roots.append(Path(os.environ["HOLOXMC_DATA"]))
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        for folder in (start, *start.parents):
            candidate = folder / "shared" / "data"
            if candidate.is_dir() and candidate not in roots:
                roots.append(candidate)
    return roots


def find_dataset_dir(name: str) -> Path | None:
    """The folder of registry dataset ``name``, or ``None`` (see module docstring)."""
    info = REGISTRY[name.lower()]
    for root in _data_roots():
        for folder_name in (info.name, info.directory):
            if (root / folder_name).is_dir():
                return root / folder_name
    return None


def _split_file(folder: Path, split: str, patterns: tuple[str, ...]) -> Path | None:
    """The one file of ``folder`` matching any of ``patterns`` for ``split`` (split files
    excluded), or ``None``."""
    matches = {p for pattern in patterns for p in folder.glob(pattern.format(split=split))
               if "split" not in p.name.lower()}
    return _only_file(sorted(matches), f"{split} data")


def name_words(name: str) -> list[str]:
    """The words of a file name for the pairing rule (see the module docstring).

    Example:
        >>> name_words("Bibtex_train.txt.gz"), "test" in name_words("latest_train.txt")
        (['bibtex', 'train', 'txt', 'gz'], False)
    """
    return [word for word in re.split(r"[^a-z0-9]+", name.lower()) if word]


#: Suffixes of feature files (XML-repository or svmlight text) in a dataset folder, each also gzipped.
FEATURE_SUFFIXES = (".txt", ".svm", ".svmlight", ".libsvm")


def _text_split_file(folder: Path, split: str) -> Path | None:
    """The one feature file (:data:`FEATURE_SUFFIXES`, or gzipped) of ``folder`` whose name
    has the word ``split`` (and not ``split`` in it), or ``None``."""
    suffixes = (*FEATURE_SUFFIXES, *(f"{suffix}.gz" for suffix in FEATURE_SUFFIXES))
    matches = [p for p in folder.iterdir()
               if p.name.lower().endswith(suffixes) and split in name_words(p.name)
               and "split" not in p.name.lower()]
    both = [p for p in matches if set(SPLITS) <= set(name_words(p.name))]
    if both:  # one file would be trained on and scored on: never
        raise InputError(f"{both[0]}: its name has both the words 'train' and 'test', so it would be both splits "
                         "and the model scored on the rows it trained on: rename the splits (my_train.txt, "
                         "my_test.txt), or give one file with --test FILE or --test-fraction F")
    return _only_file(sorted(matches), f"{split} data")


def _only_file(candidates: list[Path], role: str) -> Path | None:
    """The single candidate, ``None`` without one; several are an :class:`InputError`."""
    if len(candidates) > 1:
        raise InputError(f"{candidates[0].parent} has {len(candidates)} candidate {role} files "
                         f"({', '.join(p.name for p in candidates)}): keep one")
    return candidates[0] if candidates else None


#: ``(n_features, n_labels)`` a split is read at; ``None`` leaves a width to the file.
Widths = tuple[int | None, int | None]

#: ``load`` options each kind of source takes; any other option is an error, never ignored.
TEXT_OPTIONS = frozenset(TEXT_DEFAULTS)
SPLIT_FILE_OPTIONS = frozenset({"split_column"})
SYNTHETIC_OPTIONS = frozenset({"preset"} | set(inspect.signature(make_synthetic).parameters))


def _check_options(options: dict[str, Any], accepted: frozenset[str], source: str) -> None:
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise InputError(f"options {unknown} do not apply to {source} "
                         f"(it takes {', '.join(sorted(accepted)) if accepted else 'none'})")


def _load_folder(
    folder: Path, split: str, name: str, features: str, text_options: dict[str, Any], widths: Widths
) -> Dataset:
    """One split of the dataset stored in ``folder`` (format found from the file names)."""
    jsonl_train, jsonl_split = (_split_file(folder, s, ("{split}.jsonl", "{split}.jsonl.gz")) for s in ("train", split))
    if jsonl_train is not None:
        if jsonl_split is None:
            raise InputError(f"{folder} has train.jsonl but no {split}.jsonl")
        labels_file = folder / "labels.txt"
        return _load_text(jsonl_train, jsonl_split, labels_file if labels_file.exists() else None,
                          name, features, **text_options)
    _check_bag_of_words(features, name)
    text_file = _text_split_file(folder, split)
    if text_file is not None:
        _check_options(text_options, frozenset(), f"{text_file} (feature vectors)")
        return _from_matrices(_read_text_matrices(text_file, widths), name)
    split_tag = {"train": "trSplit", "test": "tstSplit"}[split]
    split_file = _only_file(sorted(p for p in folder.iterdir() if split_tag.lower() in p.name.lower()), split_tag)
    data_file = _only_file(sorted(folder.glob("*_data.txt")), "*_data.txt") if split_file else None
    if split_file is not None and data_file is not None:
        _check_options(text_options, SPLIT_FILE_OPTIONS, f"{folder} (a data file with split files)")
        return _from_matrices(read_xml_repo_split(data_file, split_file, text_options.get("split_column", 0)), name)
    mat_file = _only_file(sorted(folder.glob("*.mat")), ".mat")
    if mat_file is not None:
        _check_options(text_options, frozenset(), f"{mat_file}")
        return _from_matrices(read_mat(mat_file, split), name)
    raise InputError(f"no {split} data found in {folder} (expected a .txt, .svm, .svmlight or .libsvm file, "
                     f"gzipped or not, with the word {split} in its name, "
                     "*_data.txt + splits, .mat or jsonl)")


def _check_bag_of_words(features: str, name: str) -> None:
    if features != "tfidf":
        raise InputError(f"features={features!r} needs raw text; {name} only has bag-of-words features")


def _read_text_matrices(path: Path, widths: Widths) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """An XML-repository file (its header declares the widths) or a headerless svmlight
    file, read at ``widths`` where given (its largest indices may be smaller)."""
    return read_xml_repo(path) if has_xml_repo_header(path) else read_svmlight(path, *widths)


def _from_matrices(matrices: tuple[sp.csr_matrix, sp.csr_matrix], name: str) -> Dataset:
    return Dataset(matrices[0], matrices[1], name)


def _load_text(
    train_path: Path,
    split_path: Path,
    labels_path: Path | None,
    name: str,
    features: str,
    **text_options: Any,
) -> Dataset:
    """A raw-text split: TF-IDF (and token ids) fitted on the train file only."""
    group_field = _group_field(text_options)
    test_path = _sibling(train_path, "test")
    other = read_jsonl(test_path, group_field=group_field) if test_path and labels_path is None else None
    train, encoder = _text_encoder(train_path, labels_path, other, features, group_field, text_options)
    records = train if split_path == train_path else read_jsonl(split_path, group_field=group_field)
    return _encoded(records, encoder, split_path, name, features)


def _group_field(text_options: dict[str, Any]) -> str:
    """The ``group_field`` option of a raw-text set, taken out of ``text_options``."""
    group_field = text_options.pop("group_field", GROUP_FIELD)
    if not isinstance(group_field, str):
        raise InputError(f"group_field must be a JSON field name, got {group_field!r}")
    return group_field


def _text_encoder(train_path: Path, labels_path: Path | None, other: Any, features: str,
                  group_field: Any, text_options: dict[str, Any]) -> tuple[Any, TextEncoder]:
    """The training file's records and the :class:`TextEncoder` fitted on its texts, with the
    label vocabulary of ``labels_path``, else every label of the training file and of
    ``other`` (the test texts' records, if any)."""
    _check_options(text_options, TEXT_OPTIONS, f"{train_path} (raw texts)")
    if features not in ("tfidf", "tokens"):
        raise InputError(f"features must be 'tfidf' or 'tokens', got {features!r}")
    train = read_jsonl(train_path, group_field=group_field)
    if labels_path is not None:
        vocabulary = read_label_vocabulary(labels_path)
    else:
        vocabulary = build_label_vocabulary(train.labels, *([other.labels] if other else []))
    encoder = TextEncoder.fit(train.texts, vocabulary, tokens=features == "tokens",
                              **(TEXT_DEFAULTS | text_options))
    return train, encoder


def _encoded(records: Any, encoder: TextEncoder, path: Path, name: str, features: str) -> Dataset:
    """The :class:`Dataset` of JSON-lines ``records`` (read from ``path``) through ``encoder``."""
    return Dataset(encoder.features(records.texts), labels_to_csr(records, encoder.labels, path), name,
                   texts=records.texts, label_names=encoder.labels,
                   tokens=encoder.tokens(records.texts) if features == "tokens" else None, encoder=encoder,
                   groups=records.groups if any(group is not None for group in records.groups) else None)


def load_text_pair(train_path: str | os.PathLike, test_path: str | os.PathLike, *, features: str = "tfidf",
                   **text_options: Any) -> tuple[Dataset, Dataset]:
    """Two JSON-lines files of raw texts as ``(train, test)``, both encoded by one
    :class:`TextEncoder` fitted on the training texts (``holoxmc train TRAIN.jsonl --test
    TEST.jsonl``); the label vocabulary: ``labels.txt`` beside the training file, else every
    label of both files, most frequent first (a test label no training text has is a column
    no model ranks first: a miss, as the registry's text sets count it).

    Example:
        >>> train, test = load_text_pair("train.jsonl", "test.jsonl")  # doctest: +SKIP
        >>> train.n_features == test.n_features and train.label_names == test.label_names  # doctest: +SKIP
        True
    """
    train_path, test_path = Path(train_path), Path(test_path)
    group_field = _group_field(text_options)
    labels = train_path.with_name("labels.txt")
    test = read_jsonl(test_path, group_field=group_field)
    records, encoder = _text_encoder(train_path, labels if labels.exists() else None, test, features,
                                     group_field, text_options)
    name = train_path.name.split(".")[0]
    return (_encoded(records, encoder, train_path, name, features), _encoded(test, encoder, test_path, name, features))


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; a path that cannot be looked at is a :class:`DataFormatError`
    saying so (not "no such file")."""
    try:
        os.stat(path)
    except PermissionError:
        raise DataFormatError(path, None, "cannot read file: permission denied") from None
    except (OSError, ValueError):
        return False
    return True


def text_split_file(name_or_path: str | os.PathLike, split: str = "test") -> Path | None:
    """The ``.jsonl`` file of raw texts that :func:`load` reads for ``split`` of a text set
    (registry name, folder) or a ``.jsonl`` file itself; ``None`` for bag-of-words data."""
    path = Path(name_or_path)
    if not _exists(path):
        info = REGISTRY.get(os.fspath(name_or_path).lower())
        if info is None:
            return None
        folder = find_dataset_dir(info.name)
        if folder is None:
            raise _not_found(info)
        path = folder
    if path.is_dir():
        return _split_file(path, split, ("{split}.jsonl", "{split}.jsonl.gz"))
    return path if ".jsonl" in [s.lower() for s in path.suffixes] else None


def _not_found(info: DatasetInfo) -> InputError:
    return InputError(f"dataset {info.name} not found (looked in {[str(r) for r in _data_roots()]}); "
                      "set HOLOXMC_DATA or pass download=True")


def _sibling(train_path: Path, split: str) -> Path | None:
    candidate = train_path.with_name(train_path.name.replace("train", split, 1))
    return candidate if candidate.exists() else None


def _load_file(path: Path, split: str, features: str, text_options: dict[str, Any], widths: Widths) -> Dataset:
    """A single file: format from its name (``.mat``, ``.npz``, ``.jsonl``) or its first line."""
    name = path.name.split(".")[0]
    suffixes = [s.lower() for s in path.suffixes]
    if ".jsonl" in suffixes:
        labels_file = path.with_name("labels.txt")
        return _load_text(path, path, labels_file if labels_file.exists() else None, name, features, **text_options)
    _check_options(text_options, frozenset(), str(path))
    if suffixes[-1:] == [".npz"]:
        return load_npz(path)
    _check_bag_of_words(features, name)
    if suffixes[-1:] == [".mat"]:
        return _from_matrices(read_mat(path, split), name)
    return _from_matrices(_read_text_matrices(path, widths), name)


def _check_statistics(dataset: Dataset, info: DatasetInfo, split: str) -> None:
    """One :class:`StatisticsWarning` listing every count that differs from the published one."""
    stats = dataset.stats()
    expected = {
        "points": info.train_points if split == "train" else info.test_points,
        "features": info.n_features,
        "labels": info.n_labels,
    }
    mismatches = [
        f"{getattr(stats, key)} {key}, published {value}"
        for key, value in expected.items()
        if value is not None and getattr(stats, key) != value
    ]
    if abs(stats.labels_per_point - info.labels_per_point) > 0.1 * info.labels_per_point:
        mismatches.append(f"{stats.labels_per_point:.2f} labels/point, published {info.labels_per_point}")
    if mismatches:
        warnings.warn(f"{info.name} {split}: " + "; ".join(mismatches), StatisticsWarning, stacklevel=3)


def load(
    name_or_path: str | os.PathLike,
    split: str = "train",
    *,
    features: str = "tfidf",
    check_statistics: bool = True,
    download: bool = False,
    cache_dir: str | os.PathLike | None = None,
    widths: Widths = (None, None),
    **options: Any,
) -> Dataset:
    """Load one split of a dataset by registry name, folder or file.

    Args:
        name_or_path: a registry name (case-insensitive: ``bibtex``, ``delicious``,
            ``mediamill``, ``eurlex-4k``, ``wiki10-31k``, ``amazoncat-13k``,
            ``delicious-200k``, ``amazon-670k``, ``debtags``, ``synthetic``, the
            :data:`~holoxmc.data.realistic.REALISTIC_PRESETS` ``realistic-670k`` ...), a dataset
            folder or a single file (XML-repo/svmlight text, ``.mat``, ``.jsonl``, ``.npz``).
        split: ``"train"`` or ``"test"``.
        features: for raw-text sets, ``"tfidf"`` (``X`` only) or ``"tokens"`` (``X`` and
            ``Dataset.tokens``, padded token ids for CNN/LSTM backbones).
        check_statistics: warn (:class:`StatisticsWarning`) if a registry set differs from
            its published statistics.
        download: fetch a registry set that is not found locally (see :func:`fetch`).
        cache_dir: keep the prepared split as ``.npz`` here and reuse it while the source
            files (names, sizes, modification times) and the arguments are unchanged.
        widths: ``(n_features, n_labels)`` the split must have (``None``: any), e.g. the
            train split's when loading the test split, or a trained model's. A headerless
            svmlight file is read at these widths (a test file need not use the largest
            feature or label id); an index beyond them is a :class:`DataFormatError` naming
            the file and line; any other source must have exactly these widths
            (:class:`InputError`).
        **options: ``synthetic``: ``preset`` (``"demo"``, ``"amazon-670k-like"``) and any
            :func:`make_synthetic` argument (given ``n_points`` without ``n_test``, the test
            split has ``n_points // 5`` points, whatever the preset's); text sets: ``text_features``
            (a name of :data:`~holoxmc.data.text.TEXT_FEATURES`: ``"words"``, ``"words+pairs"``,
            the default, ``"words+pairs+chars"``), ``min_df``, ``ngrams`` (TF-IDF over runs of up to
            n words), ``max_features`` (each overriding the named featurisation's), ``max_vocab``,
            ``max_length``; split-file sets: ``split_column``. Any other option, or one the
            source does not take, is an :class:`InputError` (never silently ignored).

    Returns:
        The :class:`Dataset` split.

    Example:
        >>> train = load("synthetic", n_points=300, n_test=50, n_labels=20, n_features=40)
        >>> len(train), train.n_labels
        (300, 20)
    """
    if split not in SPLITS:
        raise InputError(f"split must be one of {SPLITS}, got {split!r}")
    given = tuple(widths)
    if len(given) != 2 or any(w is not None and (isinstance(w, bool) or not isinstance(w, numbers.Integral) or w < 1)
                               for w in given):
        raise InputError(f"widths must be (n_features, n_labels), each a positive integer or None, got {given!r}")
    widths = (None if given[0] is None else int(given[0]), None if given[1] is None else int(given[1]))
    key = os.fspath(name_or_path)
    source, build = _resolve(key, split, features, check_statistics, download, options, widths)
    if cache_dir is None:
        return _check_widths(build(), key, split, widths)
    fingerprint = hashlib.sha256(
        repr((FORMAT_VERSION, key.lower(), split, features, sorted(options.items()), sorted(TEXT_DEFAULTS.items()),
              _fingerprint(source), widths)).encode()
    ).hexdigest()[:16]
    cached = Path(cache_dir) / f"{Path(key).name.lower()}-{split}-{features}-{fingerprint}.npz"
    if cached.exists():
        return _check_widths(load_npz(cached), key, split, widths)
    dataset = _check_widths(build(), key, split, widths)
    save_npz(dataset, cached)
    return dataset


def _check_widths(dataset: Dataset, key: str, split: str, widths: Widths) -> Dataset:
    """``dataset``, once its feature and label counts equal the required ``widths``."""
    for what, found, width in zip(("features", "labels"), (dataset.n_features, dataset.n_labels), widths):
        if width is not None and found != width:
            raise InputError(f"{key}: its {split} split has {found} {what}, expected {width}")
    return dataset


def _fingerprint(source: Path | None) -> list[tuple[str, int, int]]:
    """Names, sizes and modification times of the files a dataset is read from."""
    if source is None:
        return []
    files = sorted(source.iterdir()) if source.is_dir() else [source]
    return [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file()]


def _resolve(
    key: str, split: str, features: str, check_statistics: bool, download: bool, options: dict[str, Any],
    widths: Widths,
) -> tuple[Path | None, Callable[[], Dataset]]:
    """Where ``key`` is read from (``None`` for generated data) and how to build the split."""
    if key.lower() == "synthetic":
        _check_bag_of_words(features, "synthetic")
        _check_options(options, SYNTHETIC_OPTIONS, "synthetic data")
        settings = _synthetic_settings(options)
        return None, lambda: make_synthetic(**settings)[SPLITS.index(split)]
    if key.lower() in REALISTIC_PRESETS:
        _check_bag_of_words(features, key)
        preset = {**REALISTIC_PRESETS[key.lower()], "name": key.lower(), **options}
        return None, lambda: make_realistic(**preset)[SPLITS.index(split)]
    path = Path(key)
    if _exists(path):
        if path.is_dir():
            return path, lambda: _load_folder(path, split, path.name, features, options, widths)
        return path, lambda: _load_file(path, split, features, options, widths)
    info = REGISTRY.get(key.lower())
    if info is None:
        known = ", ".join([*REGISTRY, "synthetic", *REALISTIC_PRESETS])
        raise InputError(f"{key!r} is neither an existing path nor a known dataset ({known})")
    folder = find_dataset_dir(info.name)
    if folder is None:
        if not download:
            raise _not_found(info)
        folder = fetch(info.name)

    def build() -> Dataset:
        dataset = _load_folder(folder, split, info.name, features, options, widths)
        if check_statistics:
            _check_statistics(dataset, info, split)
        return dataset

    return folder, build


def _synthetic_settings(options: dict[str, Any]) -> dict[str, Any]:
    """:func:`make_synthetic` arguments: the preset's, overridden by ``options``; a preset's
    ``n_test`` is dropped when ``options`` change ``n_points`` alone (``n_test`` then
    defaults to ``n_points // 5``)."""
    settings = dict(options)
    preset = settings.pop("preset", "demo")
    if not isinstance(preset, str) or preset not in SYNTHETIC_PRESETS:
        raise InputError(f"unknown synthetic preset {preset!r} (known: {', '.join(SYNTHETIC_PRESETS)})")
    defaults = dict(SYNTHETIC_PRESETS[preset])
    if "n_points" in settings:
        defaults.pop("n_test", None)
    return {**defaults, **settings}


def download(url: str, destination: str | os.PathLike, sha256: str | None = None, progress: bool = True) -> Path:
    """Download ``url`` to ``destination`` with ``pooch.retrieve``: progress bar, sha256 check.

    The file is fetched into a temporary folder next to ``destination`` and moved there only
    after the checksum matched, so a failed or interrupted download leaves nothing behind.
    Without ``sha256`` (no published checksum) the file is kept and a warning reports the
    sha256 it has, to pin it next time.

    Raises:
        DataFormatError: checksum mismatch, or an HTML page instead of a file.
        InputError: the server could not be reached or did not serve the file.

    Example:
        >>> download(REGISTRY["eurlex-4k"].url, "EURLex-4K.zip")  # doctest: +SKIP
        PosixPath('EURLex-4K.zip')
    """
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{destination.name}.", dir=destination.parent))
    try:
        fetched = _retrieve(url, sha256, staging / destination.name, progress)
        with open(fetched, "rb") as head:
            if head.read(512).lstrip().lower().startswith((b"<!doctype html", b"<html")):
                raise DataFormatError(url, None, "server sent an HTML page, not the file (download it by hand)")
        if sha256 is None:
            warnings.warn(f"{url}: no published checksum; sha256 of the download is {_pooch().file_hash(str(fetched))}",
                          stacklevel=2)
        os.replace(fetched, destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return destination


def _pooch() -> Any:
    """pooch, imported where a download needs it (reading local data does not)."""
    import pooch  # type: ignore[import-untyped]  # pooch ships no type information

    return pooch


def _retrieve(url: str, sha256: str | None, target: Path, progress: bool) -> Path:
    """``pooch.retrieve`` of ``url`` into ``target``; its failures as holoxmc errors."""
    pooch = _pooch()
    known_hash = None if sha256 is None else f"sha256:{sha256.lower()}"
    try:
        with _pooch_quiet(not progress):
            return Path(pooch.retrieve(url, known_hash=known_hash, fname=target.name, path=target.parent,
                                       progressbar=progress))
    except ValueError as exc:
        if "hash" in str(exc).lower():  # pooch removed the file that did not match
            raise DataFormatError(url, None, f"sha256 mismatch: {exc}") from None
        raise InputError(f"cannot download {url}: {exc}") from None
    except OSError as exc:  # requests' errors are OSErrors too
        raise InputError(f"cannot download {url}: {exc}") from None


@contextlib.contextmanager
def _pooch_quiet(quiet: bool) -> Iterator[None]:
    """Silence pooch's "Downloading ..." log lines while ``quiet``."""
    logger = _pooch().get_logger()
    level = logger.level
    if quiet:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def fetch(name: str, data_home: str | os.PathLike | None = None, *, url: str | None = None,
          sha256: str | None = None, progress: bool = True) -> Path:
    """Download and unpack registry dataset ``name`` into ``data_home/<name>``.

    Args:
        data_home: default ``$HOLOXMC_DATA``, else ``~/.cache/holoxmc``.
        url, sha256: override the registry's mirror and checksum.

    Returns:
        The dataset folder, ready for :func:`load`.
    """
    info = REGISTRY.get(name.lower())
    if info is None:
        raise InputError(f"unknown dataset {name!r}")
    url = url or info.url
    if url is None:
        raise InputError(f"{info.name} has no public download; place its files in $HOLOXMC_DATA/{info.name}")
    home = Path(data_home or os.environ.get("HOLOXMC_DATA") or Path.home() / ".cache" / "holoxmc")
    target = home / info.name
    archive = download(url, home / f"{info.name}.download", sha256 or info.sha256, progress)
    staging = Path(tempfile.mkdtemp(prefix=f".{info.name}.", dir=home))
    try:
        try:
            with zipfile.ZipFile(archive) as zipped:
                for member in zipped.namelist():
                    if not (staging / member).resolve().is_relative_to(staging.resolve()):
                        raise DataFormatError(archive, None, f"unsafe path in archive: {member!r}")
                zipped.extractall(staging)
        except zipfile.BadZipFile as exc:
            raise DataFormatError(archive, None, f"not a zip archive: {exc}") from None
        # archives hold one folder (e.g. Eurlex/); keep its content
        entries = list(staging.iterdir())
        content = entries[0] if len(entries) == 1 and entries[0].is_dir() else staging
        if target.exists():
            shutil.rmtree(target)
        os.replace(content, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        archive.unlink(missing_ok=True)
    return target

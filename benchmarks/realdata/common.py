"""Shared steps of the real-data builders: grouped split, statistics, output files and SOURCES.md.

Standard library only, so a builder runs with any Python 3.10+. Every builder produces
``<name>_train.jsonl`` / ``<name>_test.jsonl`` (one ``{"id", "text", "labels", "group"}`` object a
line; holoxmc's raw-text reader uses ``text`` and ``labels`` and ignores the rest) and a
``SOURCES.md`` beside them.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import statistics
import subprocess
from collections import Counter
from pathlib import Path
from typing import Iterable

DEFAULT_ROOT = Path("~/.cache/holoxmc/realdata").expanduser()


class UnionFind:
    """Groups of keys: two documents that share any key end up in one group."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        self.parent.setdefault(key, key)
        root = key
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[key] != root:  # path compression
            self.parent[key], key = root, self.parent[key]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)  # deterministic root: the smaller key


def grouped_split(docs: list[dict], seed: int, test_share: float = 0.2) -> tuple[list[dict], list[dict]]:
    """About ``test_share`` of the groups (seeded shuffle of the sorted group ids) go to test.

    Every document of a group is on one side; the order of documents is kept within each side.
    """
    groups = sorted({d["group"] for d in docs})
    random.Random(seed).shuffle(groups)
    test_groups = set(groups[: round(len(groups) * test_share)])
    train = [d for d in docs if d["group"] not in test_groups]
    test = [d for d in docs if d["group"] in test_groups]
    assert not {d["group"] for d in train} & {d["group"] for d in test}
    return train, test


def keep_frequent_labels(docs: list[dict], min_docs: int) -> list[dict]:
    """Drop labels on fewer than ``min_docs`` documents (whole set), then documents left without labels."""
    counts = Counter(label for d in docs for label in d["labels"])
    kept = []
    for d in docs:
        labels = [label for label in d["labels"] if counts[label] >= min_docs]
        if labels:
            kept.append(d | {"labels": labels})
    return kept


def stats(train: list[dict], test: list[dict]) -> dict:
    """Counts of the SOURCES.md table."""
    everything = train + test
    label_docs = Counter(label for d in everything for label in d["labels"])
    train_labels = {label for d in train for label in d["labels"]}
    test_occurrences = [label for d in test for label in d["labels"]]
    unseen = sum(label not in train_labels for label in test_occurrences)
    words = [len(d["text"].split()) for d in everything]
    return {
        "documents": len(everything),
        "train": len(train),
        "test": len(test),
        "labels": len(label_docs),
        "labels_in_train": len(train_labels),
        "labels_per_doc": round(sum(len(d["labels"]) for d in everything) / len(everything), 3),
        "max_labels_per_doc": max(len(d["labels"]) for d in everything),
        "docs_per_label_mean": round(sum(label_docs.values()) / len(label_docs), 2),
        "docs_per_label_median": statistics.median(label_docs.values()),
        "groups": len({d["group"] for d in everything}),
        "train_groups": len({d["group"] for d in train}),
        "test_groups": len({d["group"] for d in test}),
        "largest_group": max(Counter(d["group"] for d in everything).values()),
        "test_label_occurrences": len(test_occurrences),
        "test_occurrences_unseen_in_train_pct": round(100 * unseen / max(1, len(test_occurrences)), 2),
        "test_docs_with_an_unseen_label": sum(any(label not in train_labels for label in d["labels"]) for d in test),
        "words_per_doc_mean": round(sum(words) / len(words), 1),
        "words_per_doc_median": statistics.median(words),
    }


def write_jsonl(path: Path, docs: Iterable[dict]) -> None:
    """One JSON object a line (UTF-8, keys in a fixed order), written atomically."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for d in docs:
            fh.write(json.dumps({"id": d["id"], "text": d["text"], "labels": d["labels"], "group": d["group"]},
                                ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_table(paths: list[Path]) -> str:
    rows = ["| file | bytes | sha256 |", "| --- | --- | --- |"]
    rows += [f"| `{p.name}` | {p.stat().st_size} | `{sha256(p)}` |" for p in paths]
    return "\n".join(rows)


def stats_table(s: dict) -> str:
    rows = ["| count | value |", "| --- | --- |"]
    rows += [f"| {key.replace('_', ' ')} | {value} |" for key, value in s.items()]
    return "\n".join(rows)


def write_outputs(out: Path, name: str, train: list[dict], test: list[dict], header: str) -> dict:
    """The two JSONL files (and ``train.jsonl`` / ``test.jsonl`` links to them, the names ``holoxmc train
    FOLDER`` pairs), ``stats.json`` and ``SOURCES.md`` (``header`` + counts + checksums); prints a summary line."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}_train.jsonl", out / f"{name}_test.jsonl"]
    write_jsonl(paths[0], train)
    write_jsonl(paths[1], test)
    for split, path in zip(("train", "test"), paths):  # the folder itself loads as a dataset (train.jsonl / test.jsonl)
        link = out / f"{split}.jsonl"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(path.name)
    s = stats(train, test)
    (out / "stats.json").write_text(json.dumps(s, indent=1) + "\n")
    text = f"{header.rstrip()}\n\n## Counts\n\n{stats_table(s)}\n\n## Files\n\n{file_table(paths)}\n"
    (out / "SOURCES.md").write_text(text)
    print(f"{name}: {s['train']} train / {s['test']} test documents, {s['labels']} labels, {s['groups']} groups -> {out}")
    return s


def progress(message: str) -> None:
    print(f"\r{message}", end="", flush=True)


def apt_update(apt: Path, sources: Iterable[str], options: Iterable[str] = ()) -> None:
    """``apt-get update`` of the ``sources`` lines (``sources.list`` syntax) into ``apt/lists``,
    with a private configuration under ``apt/`` (its own source list, lists and cache
    folders; no translations), so nothing of the machine's apt setup changes; ``options``:
    more ``apt.conf`` lines."""
    for sub in ("lists/partial", "cache/archives/partial", "parts"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text("".join(f"{line}\n" for line in sources))
    (apt / "apt.conf").write_text("\n".join([
        f'Dir::Etc::parts "{apt}/parts";', f'Dir::Etc::sourcelist "{apt}/sources.list";',
        'Dir::Etc::sourceparts "/nonexistent";', f'Dir::State::Lists "{apt}/lists";',
        f'Dir::Cache "{apt}/cache";', 'Acquire::Languages "none";', 'Acquire::GzipIndexes "false";', *options, ""]))
    subprocess.run(["apt-get", "update"], check=True, env=os.environ | {"APT_CONFIG": str(apt / "apt.conf")})


def read_index(path: Path) -> bytes:
    """An apt index file's bytes (plain, ``.gz`` or ``.lz4``)."""
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes())
    if path.suffix == ".lz4":
        return subprocess.run(["lz4cat", str(path)], check=True, capture_output=True).stdout
    return path.read_bytes()

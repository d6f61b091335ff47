"""Debian AppStream (DEP-11) metadata as a grouped raw-text multi-label set (issue 49, item 3).

Source: the DEP-11 ``Components-amd64.yml.gz`` and ``Packages`` indexes of one Debian suite
(default ``trixie``; components ``main contrib non-free``), fetched by ``apt-get update`` itself
with a private configuration under ``OUT/apt/`` (its own source list, lists and cache folders; the
DEP-11 index target enabled there only), so nothing of the machine's apt setup changes. A rerun
with ``--offline`` reads the indexes already in ``OUT/apt/lists``.

Document = one AppStream component (desktop application, add-on, font, ...): text = its English
(``C``) ``Name`` + ``Summary`` + ``Description`` (the upstream metainfo text, not Debian's package
description), markup removed, whitespace collapsed. Labels = its freedesktop ``Categories``
(prefix ``cat:``) and its English ``Keywords`` (prefix ``kw:``, lower-cased, trimmed); labels on
fewer than ``--min-docs`` components are dropped, then components without a label or text.
Group = the Debian source package of the component's binary package (``Source:`` of the
``Packages`` index, else the binary name), joined (union-find) with every component of identical
normalised text (5 words or more). Split: about 20 % of the groups to test, by a seeded shuffle.

Needs PyYAML and ``apt-get`` (a Debian or Ubuntu machine).

    python benchmarks/realdata/build_appstream.py [--out DIR] [--seed 49] [--suite trixie] [--offline]
"""

from __future__ import annotations

import argparse
import hashlib
import html
import re
import sys
from datetime import date
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (DEFAULT_ROOT, UnionFind, apt_update, grouped_split, keep_frequent_labels,  # noqa: E402
                    read_index, sha256, write_outputs)

NAME = "appstream"
MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEP11 = ('Acquire::IndexTargets::deb::DEP-11 { MetaKey "$(COMPONENT)/dep11/Components-$(NATIVE_ARCHITECTURE).yml"; '
         'ShortDescription "Components-$(NATIVE_ARCHITECTURE)"; '
         'Description "$(RELEASE)/$(COMPONENT) $(NATIVE_ARCHITECTURE) DEP-11 Metadata"; '
         'KeepCompressed "true"; KeepCompressedAs "gz"; DefaultEnabled "true"; };')


def source_packages(lists: Path) -> dict[str, str]:
    """Binary package -> source package, from every ``Packages`` index."""
    sources: dict[str, str] = {}
    for path in sorted(lists.glob("*_Packages*")):
        for stanza in read_index(path).decode("utf-8", "replace").split("\n\n"):
            fields = dict(re.findall(r"^(Package|Source): (\S+)", stanza, re.M))
            if "Package" in fields:
                sources[fields["Package"]] = fields.get("Source", fields["Package"])
    return sources


def english(value) -> str:
    if isinstance(value, dict):
        value = value.get("C", value.get("en", ""))
    return value if isinstance(value, str) else ""


def clean(text: str) -> str:
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    return re.sub(r"\s+", " ", text).strip()


def components(lists: Path) -> list[dict]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = []
    for path in sorted(lists.glob("*_dep11_Components-*.yml*")):
        for entry in yaml.load_all(read_index(path), Loader=loader):
            if not isinstance(entry, dict) or "ID" not in entry or "Package" not in entry:
                continue  # the file header
            text = clean(" ".join(english(entry.get(k)) for k in ("Name", "Summary", "Description")))
            keywords = entry.get("Keywords") or {}
            keywords = keywords.get("C", []) if isinstance(keywords, dict) else []
            labels = [f"cat:{c}" for c in entry.get("Categories") or [] if isinstance(c, str)]
            labels += [f"kw:{k.strip().lower()}" for k in keywords if isinstance(k, str) and k.strip()]
            docs.append({"id": f"{entry['Package']}/{entry['ID']}", "package": entry["Package"],
                         "text": text, "labels": list(dict.fromkeys(labels))})
    return docs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_ROOT / NAME)
    parser.add_argument("--seed", type=int, default=49)
    parser.add_argument("--suite", default="trixie")
    parser.add_argument("--components", default="main contrib non-free")
    parser.add_argument("--min-docs", type=int, default=2, help="keep labels on at least this many components")
    parser.add_argument("--offline", action="store_true", help="use the indexes already in OUT/apt/lists")
    args = parser.parse_args(argv)
    out = args.out.expanduser()
    apt = out / "apt"
    if not args.offline:
        apt_update(apt.resolve() if apt.exists() else apt.absolute(),
                   [f"deb [signed-by={KEYRING}] {MIRROR} {args.suite} {args.components}"], [DEP11])
    lists = apt / "lists"
    if not any(lists.glob("*_dep11_Components-*")):
        raise SystemExit(f"no DEP-11 index in {lists}: run once without --offline")
    sources = source_packages(lists)
    entries = components(lists)
    print(f"read {len(entries)} components, {len(sources)} binary packages")
    groups = UnionFind()
    for d in entries:
        own = "source:" + sources.get(d["package"], d["package"])
        normalised = re.sub(r"[^a-z]+", " ", d["text"].lower()).strip()
        if len(normalised.split()) >= 5:
            groups.union(own, "text:" + hashlib.sha1(normalised.encode()).hexdigest())
        d["_key"] = own
    for d in entries:
        d["group"] = groups.find(d.pop("_key"))
    docs = keep_frequent_labels([d for d in entries if d["text"]], args.min_docs)
    train, test = grouped_split(docs, args.seed)
    indexes = sorted(p for p in lists.iterdir() if p.is_file() and p.name != "lock")
    release = next((p for p in indexes if p.name.endswith("InRelease")), None)
    release_date = re.search(r"^Date: (.*)$", release.read_text(errors="replace"), re.M).group(1) if release else "?"
    index_rows = "\n".join(f"| `{p.name}` | {p.stat().st_size} | `{sha256(p)}` |" for p in indexes)
    header = f"""# Debian AppStream components ({NAME})

- Source: Debian `{args.suite}` ({args.components}; amd64) DEP-11 `Components-amd64.yml.gz` and `Packages`
  indexes, fetched with `apt-get update` (private configuration in `apt/`); Release file dated {release_date}.
- Built {date.today().isoformat()} by `benchmarks/realdata/build_appstream.py --seed {args.seed} --suite {args.suite} --min-docs {args.min_docs}`.
- {len(entries)} components read; {sum(1 for d in entries if not d['text'])} without text dropped; labels on fewer
  than {args.min_docs} components dropped, then components left without a label.
- Text = English Name + Summary + Description (upstream metainfo, markup removed); labels = `cat:` freedesktop
  Categories and `kw:` English Keywords (lower-cased); group = Debian source package, joined with identical
  normalised text (5 words or more); about 20 % of the groups to test by a seeded shuffle (seed {args.seed}).

Indexes read:

| index | bytes | sha256 |
| --- | --- | --- |
{index_rows}
"""
    write_outputs(out, NAME, train, test, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

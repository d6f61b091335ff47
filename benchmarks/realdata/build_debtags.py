"""The shared Debtags set with a ``group`` field: each binary package's Debian source package.

Source: the shared ``Debtags/train.jsonl.gz`` / ``test.jsonl.gz`` (``--source-dir``, default
``$HOLOXMC_DATA/Debtags``, else ``/work/shared/data/Debtags``; one ``{"id": binary package, "text",
"labels"}`` a line, built from Debian 12 "bookworm" and split there by source package) and the
bookworm ``Packages`` indexes (component ``main``, amd64) of ``bookworm`` and ``bookworm-updates``
(``http://deb.debian.org/debian``) and ``bookworm-security`` (``http://security.debian.org/debian-security``),
fetched by ``apt-get update`` itself with a private configuration under ``OUT/apt/`` (its own source
list, lists and cache folders, as ``build_appstream.py`` does), so nothing of the machine's apt setup
changes. A rerun with ``--offline`` reads the indexes already in ``OUT/apt/lists``.

Rows, texts, labels, their order and the train/test split are the shared files', unchanged; only
``group`` is added: the ``Source:`` field of the binary package's ``Packages`` stanza, without the
version in parentheses, or the binary name when the stanza has no ``Source:`` field. An id found in
no index gets its own name as group too (the count is printed and written to ``SOURCES.md``). When
the stanzas of one binary name disagree on the source (different versions in different suites), the
stanza of the highest version (``dpkg --compare-versions``) wins; the count is reported. The build
reports (never repairs) groups with rows on both sides of the published split.

Needs ``apt-get`` and ``dpkg`` (a Debian or Ubuntu machine); standard library otherwise.

    python benchmarks/realdata/build_debtags.py [--out DIR] [--source-dir DIR] [--offline]
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_ROOT, apt_update, read_index, sha256, write_outputs  # noqa: E402

NAME = "debtags"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
#: (mirror, suite) of every index read; component main, architecture amd64.
SUITES = (("http://deb.debian.org/debian", "bookworm"),
          ("http://deb.debian.org/debian", "bookworm-updates"),
          ("http://security.debian.org/debian-security", "bookworm-security"))
COMPONENT, ARCH = "main", "amd64"


def default_source_dir() -> Path:
    return Path(os.environ.get("HOLOXMC_DATA", "/work/shared/data")) / "Debtags"


def index_paths(lists: Path) -> list[Path]:
    """The ``Packages`` index of every suite in :data:`SUITES` (exits when one is missing)."""
    paths = []
    for mirror, suite in SUITES:
        stem = re.sub(r"^https?://", "", mirror).rstrip("/").replace("/", "_")
        path = lists / f"{stem}_dists_{suite}_{COMPONENT}_binary-{ARCH}_Packages"
        found = [p for p in (path, path.with_name(path.name + ".gz"), path.with_name(path.name + ".lz4")) if p.exists()]
        if not found:
            raise SystemExit(f"no {path.name} in {lists}: run once without --offline")
        paths.append(found[0])
    return paths


@functools.cmp_to_key
def debian_version(a: str, b: str) -> int:
    if a == b:
        return 0
    return 1 if subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0 else -1


def source_packages(paths: list[Path]) -> tuple[dict[str, str], int, int]:
    """Binary package -> source package (highest version's stanza), stanzas read, names whose stanzas disagree."""
    stanzas: dict[str, list[tuple[str, str]]] = {}
    read = 0
    for path in paths:
        for stanza in read_index(path).decode("utf-8", "replace").split("\n\n"):
            fields = dict(re.findall(r"^(Package|Source|Version): (.+)$", stanza, re.M))
            if "Package" not in fields:
                continue
            read += 1
            package = fields["Package"].strip()
            source = re.sub(r"\s*\(.*\)\s*$", "", fields.get("Source", package)).strip()
            stanzas.setdefault(package, []).append((fields.get("Version", "").strip(), source))
    sources, disagreeing = {}, 0
    for package, found in stanzas.items():
        if len({source for _, source in found}) > 1:
            disagreeing += 1
            found = sorted(found, key=lambda vs: debian_version(vs[0]))
        sources[package] = found[-1][1]
    return sources, read, disagreeing


def read_rows(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def published_test(source: str) -> bool:
    """The shared set's split rule (its README): test if int(sha256(source)[:8 bytes]) % 100 < 25."""
    return int.from_bytes(hashlib.sha256(source.encode()).digest()[:8], "big") % 100 < 25


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_ROOT / NAME)
    parser.add_argument("--source-dir", type=Path, default=default_source_dir(),
                        help="folder with the shared train.jsonl.gz / test.jsonl.gz (default $HOLOXMC_DATA/Debtags)")
    parser.add_argument("--offline", action="store_true", help="use the indexes already in OUT/apt/lists")
    args = parser.parse_args(argv)
    out = args.out.expanduser()
    apt = out / "apt"
    if not args.offline:
        apt_update(apt.resolve() if apt.exists() else apt.absolute(),
                   [f"deb [arch={ARCH} signed-by={KEYRING}] {mirror} {suite} {COMPONENT}" for mirror, suite in SUITES],
                   [f'APT::Architecture "{ARCH}";', f'APT::Architectures {{ "{ARCH}"; }};'])
    lists = apt / "lists"
    indexes = index_paths(lists)
    sources, stanzas, disagreeing = source_packages(indexes)
    print(f"read {stanzas} Packages stanzas, {len(sources)} binary packages; "
          f"{disagreeing} names whose stanzas name different sources")

    inputs = [args.source_dir.expanduser() / f"{split}.jsonl.gz" for split in ("train", "test")]
    train, test = (read_rows(path) for path in inputs)
    unmatched = []
    for d in train + test:
        if set(d) != {"id", "text", "labels"}:
            raise SystemExit(f"unexpected fields {sorted(d)} in row {d.get('id')!r}")
        if d["id"] not in sources:
            unmatched.append(d["id"])
        d["group"] = sources.get(d["id"], d["id"])
    train_groups, test_groups = {d["group"] for d in train}, {d["group"] for d in test}
    crossing = sorted(train_groups & test_groups)
    crossing_rows = sum(d["group"] in crossing for d in train + test)
    off_rule = sum(published_test(d["group"]) != (side == "test")
                   for side, rows in (("train", train), ("test", test)) for d in rows)
    print(f"{len(train)} train / {len(test)} test rows; {len(unmatched)} ids in no index (group = the id itself)"
          + (f": {', '.join(unmatched[:20])}" if unmatched else ""))
    print(f"groups on both sides of the published split: {len(crossing)} ({crossing_rows} rows)"
          + (f": {', '.join(crossing[:20])}" if crossing else "") + " (rows not moved)")
    print(f"rows whose side differs from the published rule applied to their group: {off_rule}")
    largest, largest_rows = max(Counter(d["group"] for d in train + test).items(), key=lambda kv: (kv[1], kv[0]))

    release_dates = []
    for _, suite in SUITES:
        release = next(lists.glob(f"*_dists_{suite}_InRelease"), None)
        found = re.search(r"^Date: (.*)$", release.read_text(errors="replace"), re.M) if release else None
        release_dates.append(f"{suite} {found.group(1) if found else '?'}")
    index_rows = "\n".join(f"| `{p.name}` | {p.stat().st_size} | `{sha256(p)}` |" for p in indexes)
    input_rows = "\n".join(f"| `{p.name}` | {p.stat().st_size} | `{sha256(p)}` |" for p in inputs)
    header = f"""# Debtags with source-package groups ({NAME})

- Rows, texts, labels, order and train/test split: the shared Debtags files, unchanged (below);
  each object gains `group`.
- Group = the Debian source package of the binary package (`Source:` of its stanza in the bookworm
  `Packages` indexes, main, amd64, version in parentheses removed; the binary name when there is no
  `Source:`), read from {', '.join(s for _, s in SUITES)}, fetched with `apt-get update` (private
  configuration in `apt/`). InRelease dates: {'; '.join(release_dates)}.
- Built {date.today().isoformat()} by `benchmarks/realdata/build_debtags.py`.
- {stanzas} stanzas read ({len(sources)} binary packages; {disagreeing} names whose stanzas name
  different sources, the highest version's taken); {len(unmatched)} ids found in no index (group = the id){': ' + ', '.join(unmatched) if unmatched else ''}.
- Groups with rows on both sides of the published split: {len(crossing)} ({crossing_rows} rows){': ' + ', '.join(crossing) if crossing else ''}
  (no row moved); rows whose side differs from the published rule (`int(sha256(source)[:8]) % 100 < 25`
  to test) applied to their group: {off_rule}. Largest group: `{largest}` ({largest_rows} rows).

Input files:

| file | bytes | sha256 |
| --- | --- | --- |
{input_rows}

Indexes read:

| index | bytes | sha256 |
| --- | --- | --- |
{index_rows}
"""
    write_outputs(out, NAME, train, test, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

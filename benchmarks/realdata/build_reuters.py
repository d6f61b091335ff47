"""Reuters-21578 as a grouped raw-text multi-label set for holoxmc (issue 49, item 3).

Source: the 22 SGML files ``reut2-000.sgm`` ... ``reut2-021.sgm`` of the Reuters-21578
Distribution 1.0 (David D. Lewis), as committed in a public repository (default: a git snapshot
of ``Arthur-sauvage/Reuter``, commit ``d0a779dd9cc078074c4185f1cac45e5a840a124c``, folder ``data/``;
or ``--source-dir`` with the 22 files). Each file's sha256 is checked against ``SHA256`` below,
and the files are copied to ``OUT/raw/`` (a rerun reads that copy).

Document = one ``<REUTERS>`` story: text = ``TITLE`` + ``BODY`` (an unprocessed story: its whole
``TEXT``), without the dateline (a ``TYPE="BRIEF"`` story: its title; its "Blah blah blah." filler body dropped); SGML character references (``&#N;``) removed, ``&lt;`` ``&gt;``
``&amp;`` decoded, the closing "Reuter" sign-off dropped, whitespace collapsed.
Labels = every category of the five facets, prefixed: ``topic:``, ``place:``, ``people:``,
``org:``, ``exchange:``; labels on fewer than ``--min-docs`` stories (whole set) are dropped,
then stories without a label or with empty text.
Group = the story slug of the wire header (``BC-BAHIA-COCOA-REVIEW``; ``*`` flash marks and a trailing ``-N`` part
number removed), joined (union-find) with every story of identical normalised text (lower case,
digits and punctuation removed; texts of 5 words or more): reruns, corrections and parts of one story stay on one side.
Split: about 20 % of the groups to test, by a seeded shuffle.

    python benchmarks/realdata/build_reuters.py [--out DIR] [--seed 49]
"""

from __future__ import annotations

import argparse
import hashlib
import html
import re
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import DEFAULT_ROOT, UnionFind, grouped_split, keep_frequent_labels, write_outputs  # noqa: E402

NAME = "reuters"
REPO, COMMIT = "Arthur-sauvage/Reuter", "d0a779dd9cc078074c4185f1cac45e5a840a124c"
FILES = [f"reut2-{i:03d}.sgm" for i in range(22)]
SHA256 = dict(zip(FILES, """
1bb4ed87fe2d5f4f8583fae81b06b38ce9efae46b590d4c368d998f739f27dbd 1528e7e82d110d88d0234eb9619eadb7f9fd805711971df05975b92277dfdf4d
99f18068d0518952987dedd78c622e5c2a584e357d264d3754696c815f3e6628 78a3a8d7e04bc9d42c4614d5d5c60a4293dbe3f708df6fb5a71d9ef31f4b3fa3
726342c19a65873330b412378cd6a3f0d512035f5223146ddd60930c62eb6ff0 d09de619b6dd2d047d5124681f6df90550abaf592020d1c1ce338ae9b91522e7
b5535c0d66b01f4976f84621a4a795afbc00d2c4bd0a1b7ae426df6630fb361d aa706007ec84a03537a3921ca976d60e11b3f99e4b9e9b2d5c81dd384d2c2062
a3994583694a00b7c744097c1d7eabfcf90f2e6650cc21663e46828035a336cb 29995f606dd1a9bdf907eacc9d879846c716860d9d9141676979474aaea39c7d
996df6008089bd09fa5b28a4d2eb0ee5f7b9d4601cde566fed3926ac82960fa3 d3a2782015247d9c2bffb8926267827fdd449c70d619435ef01a25a1c56a53ca
da31035d483851f2aebce5b66d779e5e2c0ac9dcfe098596c6d544e81c5604ab 8f7700bc0455fac3fcc12377ced4807b7df8aba1f21ecad059b9cc2b1cf0b8be
ef936bd3e0f36cf722afa9a6957563549775af32e9e28b4f539c8737ceda83ab 6d3bcec73eff871b8a5403588af814c4e50a0de6bc25707480522ab836f74026
be2f03a185fff70131f3b4fdbd6229b7ee2be077eba9691eaa597c8cfbda8812 f370e610b4b1342e41a98e0c426a08541044bd1d7e539674f32372a6060b73b5
a5f971bf25448e915781962309e669359a35fbcaf3017a806eca0590897f209a d3b07097fba2633d130b4914aceba671645985248943ce9e39c289315339dffb
f6ad1b724125c202566c63b35ea0b5ee23881f8b7ed47a32829d5af05d8e860d 9b53472cbdc3a99dc2fc3355a851105ccdb0363c85b12aaa58284dfafeb8e097
""".split()))
FACETS = {"TOPICS": "topic", "PLACES": "place", "PEOPLE": "people", "ORGS": "org", "EXCHANGES": "exchange"}

STORY = re.compile(r"<REUTERS([^>]*)>(.*?)</REUTERS>", re.S)
NEWID = re.compile(r'NEWID="(\d+)"')
SLUG = re.compile(r"\b(BC-[^\s]+)")
CHARREF = re.compile(r"&#\d+;")


def fetch_raw(out: Path, git_dir: Path | None, source_dir: Path | None) -> Path:
    """The 22 files in ``out/raw`` (copied once from the git snapshot or folder), checksums checked."""
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        target = raw / name
        if not target.exists():
            tmp = target.with_suffix(".tmp")
            if source_dir is not None:
                shutil.copyfile(source_dir / name, tmp)
            else:
                blob = subprocess.run(["git", "-C", str(git_dir), "show", f"{COMMIT}:data/{name}"],
                                      check=True, capture_output=True).stdout
                tmp.write_bytes(blob)
            tmp.replace(target)
        digest = hashlib.sha256(target.read_bytes()).hexdigest()
        if digest != SHA256[name]:
            raise SystemExit(f"{target}: sha256 {digest}, expected {SHA256[name]}")
    return raw


def element(body: str, tag: str) -> str | None:
    match = re.search(rf"<{tag}(?:\s[^>]*)?>(.*?)</{tag}>", body, re.S)  # <TEXT TYPE="BRIEF"> too
    return match.group(1) if match else None


def clean(text: str) -> str:
    text = html.unescape(CHARREF.sub(" ", text))
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\s*\bBlah blah blah\.", "", text)  # the filler body of TYPE="BRIEF" stories
    return re.sub(r"\s*\bReuter\s*$", "", text).strip()


def parse(raw: Path) -> list[dict]:
    docs = []
    for name in FILES:
        content = (raw / name).read_bytes().decode("latin-1")
        for attributes, body in STORY.findall(content):
            newid = NEWID.search(attributes).group(1)
            labels = []
            for tag, prefix in FACETS.items():
                labels += [f"{prefix}:{d}" for d in re.findall(r"<D>(.*?)</D>", element(body, tag) or "")]
            text_part = element(body, "TEXT") or ""
            title, story = element(text_part, "TITLE"), element(text_part, "BODY")
            if title is None and story is None:  # TYPE="UNPROC": the whole text
                text = clean(re.sub(r"<[^>]+>", " ", text_part))
            else:
                text = clean(" ".join(part for part in (title, story) if part))
            slug = SLUG.search(element(body, "UNKNOWN") or "")
            docs.append({"id": newid, "text": text, "labels": list(dict.fromkeys(labels)),
                         "slug": re.sub(r"-\d+$", "", slug.group(1).upper().replace("*", "")) if slug else None})
    return docs


def assign_groups(docs: list[dict]) -> None:
    groups = UnionFind()
    for d in docs:
        own = f"slug:{d['slug']}" if d["slug"] else f"story:{d['id']}"
        normalised = re.sub(r"[^a-z]+", " ", d["text"].lower()).strip()
        if len(normalised.split()) >= 5:  # empty and near-empty texts join nothing
            groups.union(own, "text:" + hashlib.sha1(normalised.encode()).hexdigest())
        else:
            groups.find(own)
        d["_key"] = own
    for d in docs:
        d["group"] = groups.find(d.pop("_key"))
        del d["slug"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_ROOT / NAME)
    parser.add_argument("--seed", type=int, default=49)
    parser.add_argument("--min-docs", type=int, default=2, help="keep labels on at least this many stories")
    parser.add_argument("--git-dir", type=Path, default=Path("/work/.mirror/Arthur-sauvage+Reuter/repo"),
                        help=f"git directory of a snapshot of {REPO} holding commit {COMMIT}")
    parser.add_argument("--source-dir", type=Path, help="a folder with the 22 reut2-*.sgm files instead")
    args = parser.parse_args(argv)
    out = args.out.expanduser()
    raw = fetch_raw(out, args.git_dir, args.source_dir)
    stories = parse(raw)
    print(f"parsed {len(stories)} stories from {len(FILES)} files")
    assign_groups(stories)
    docs = keep_frequent_labels([d for d in stories if d["text"]], args.min_docs)
    train, test = grouped_split(docs, args.seed)
    header = f"""# Reuters-21578, grouped by story ({NAME})

- Source: Reuters-21578 Distribution 1.0 (David D. Lewis), the 22 files `reut2-000.sgm` ...
  `reut2-021.sgm` as committed in the public repository `{REPO}`, commit `{COMMIT}`, folder `data/`
  (sha256 of each file in `build_reuters.py`; copies in `raw/`).
- Built {date.today().isoformat()} by `benchmarks/realdata/build_reuters.py --seed {args.seed} --min-docs {args.min_docs}`.
- {len(stories)} stories parsed; {sum(1 for d in stories if not d['text'])} without text dropped;
  labels on fewer than {args.min_docs} stories dropped, then stories left without a label.
- Text = TITLE + BODY (no dateline); labels = the five category facets, prefixed `topic:`, `place:`,
  `people:`, `org:`, `exchange:`; group = story slug (`BC-...`, trailing `-N` removed) joined with
  identical normalised text (5 words or more); about 20 % of the groups to test by a seeded shuffle (seed {args.seed}).
"""
    write_outputs(out, NAME, train, test, header)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

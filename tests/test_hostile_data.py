"""Hostile and broken data files: each gives one clear error (file, line where known, what is
wrong) of the holoxmc family, the CLI one line and exit code 2; nothing is allocated from a
size a file claims before it is checked, nothing blocks, nothing is silently transposed."""

from __future__ import annotations

import dataclasses
import errno
import gzip
import hashlib
import io
import os
import subprocess
import sys
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

import holoxmc.data.registry as registry
from holoxmc.cli import main
from holoxmc.data import (
    REGISTRY, Dataset, download, fetch, load, make_synthetic, read_jsonl, read_mat, read_split_indices, read_svmlight,
    read_xml_repo, save_npz,
)
from holoxmc.data.readers import MAX_GZIP_RATIO, read_bytes
from holoxmc.data.text import read_label_vocabulary
from holoxmc.errors import DataFormatError, InputError
from holoxmc.limits import MAX_SIZE

SRC = Path(__file__).resolve().parents[1] / "src"


def write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return path


def one_error_line(capsys, data: Path | str) -> str:
    """Run ``holoxmc data info DATA``; check exit code 2 and a single error line; return it."""
    assert main(["data", "info", str(data)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("holoxmc: error: ") and "Traceback" not in err
    return err.strip()


# 1. sizes a file claims
@pytest.mark.parametrize("content, message", [
    (b"3 99999999999999999999 4\n0 0:1\n0 0:1\n0 0:1\n", ":1: header num_features 99999999999999999999 is larger"),
    (b"1 4 1000000000000\n0 0:1\n", ":1: header num_labels 1000000000000 is larger"),
    (b"99999999999 4 3\n0 0:1\n", ":1: header num_points 99999999999 is larger"),
    (b"1 0 3\n0 \n", ":1: header num_features must be at least 1"),
])
def test_header_sizes_are_bounded_before_use(tmp_path, capsys, content, message):
    path = write(tmp_path, "big.txt", content)
    with pytest.raises(DataFormatError, match=message):
        read_xml_repo(path)
    assert message in one_error_line(capsys, path)


@pytest.mark.parametrize("content, message", [
    (b"1000000000000 0:1\n", ":1: label index 1000000000000 is larger than holoxmc accepts"),
    (b"0 0:1\n1 1000000000000:1\n", ":2: feature index 1000000000000 is larger than holoxmc accepts"),
    (f"0 {MAX_SIZE}:1\n".encode(), f":1: feature index {MAX_SIZE} is larger than holoxmc accepts"),
])
def test_headerless_ids_are_bounded_and_located(tmp_path, capsys, content, message):
    path = write(tmp_path, "ids.txt", content)
    with pytest.raises(DataFormatError, match=message):
        read_svmlight(path)
    assert message in one_error_line(capsys, path)


# 2. synthetic sizes
@pytest.mark.parametrize("arguments, message", [
    (dict(n_features=10**15), "n_features 1000000000000000 is larger than holoxmc accepts"),
    (dict(n_points=10, n_labels=10**12), "n_labels 1000000000000 is larger than holoxmc accepts"),
    (dict(n_features=1e15), "n_features must be an integer"),
    (dict(n_points=10.0), "n_points must be an integer"),
    (dict(n_test=-1), "n_test must be at least 0"),
    (dict(seed=2**40), r"seed must lie in \[0, 2\*\*32\)"),
    (dict(n_points=MAX_SIZE, signature_size=MAX_SIZE), "make_synthetic would need"),
])
def test_absurd_synthetic_sizes_are_one_input_error(arguments, message):
    with pytest.raises(InputError, match=message):
        make_synthetic(**arguments)


def test_absurd_synthetic_size_through_the_cli(capsys):
    assert main(["data", "info", "synthetic", "--data-option", "n_features=1000000000000000"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


# 3. gzip bombs and endless devices
def _gzip_of_newlines(n_bytes: int) -> bytes:
    """A gzip stream of ``n_bytes`` newlines, built in chunks (compresses about 1000x)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\n" * 2**20
    parts = [compressor.compress(chunk) for _ in range(n_bytes // 2**20)]
    return b"".join(parts) + compressor.flush()


def test_gzip_bomb_is_refused_while_streaming(tmp_path, capsys):
    bomb = write(tmp_path, "bomb_train.txt.gz", _gzip_of_newlines(256 * 2**20))
    tracemalloc.start()
    try:
        with pytest.raises(DataFormatError, match=f"gzip data expands beyond .* \\({MAX_GZIP_RATIO}x its"):
            read_bytes(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20  # stopped at the bound, far below the 256 MiB it would expand to
    assert "gzip data expands beyond" in one_error_line(capsys, bomb)


def test_ordinary_gzip_text_is_within_the_ratio(tmp_path):
    content = b"2 3 2\n" + b"0,1 0:1 2:0.5\n 1:2\n"
    path = write(tmp_path, "ok.txt.gz", gzip.compress(content))
    assert read_xml_repo(path)[0].shape == (2, 3)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_is_not_read(capsys):
    with pytest.raises(DataFormatError, match="/dev/zero: not a regular file \\(a character device\\)"):
        load("/dev/zero")
    assert "not a regular file" in one_error_line(capsys, "/dev/zero")


# 4. FIFO
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
@pytest.mark.parametrize("as_folder", [False, True])
def test_fifo_is_refused_instead_of_blocking(tmp_path, as_folder):
    folder = tmp_path / "pipes"
    folder.mkdir()
    os.mkfifo(folder / "x_train.txt")
    data = folder if as_folder else folder / "x_train.txt"
    child = subprocess.run([sys.executable, "-m", "holoxmc", "data", "info", str(data)], capture_output=True,
                           text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert child.returncode == 2
    assert child.stderr == f"holoxmc: error: {folder / 'x_train.txt'}: not a regular file (a FIFO (named pipe))\n"


def test_folder_given_where_a_file_is_read(tmp_path):
    with pytest.raises(DataFormatError, match="not a regular file \\(a folder\\)"):
        read_svmlight(tmp_path)


# 5. empty files
@pytest.mark.parametrize("name, content", [("e.txt", b""), ("e.txt.gz", gzip.compress(b"", mtime=0)),
                                           ("bom_only.txt", b"\xef\xbb\xbf")])
def test_empty_file_says_so(tmp_path, capsys, name, content):
    path = write(tmp_path, name, content)
    for reader in (read_xml_repo, read_svmlight, lambda p: read_split_indices(p, 3), read_jsonl,
                   read_label_vocabulary):
        with pytest.raises(DataFormatError, match=f"{name}: empty file$"):
            reader(path)
    assert one_error_line(capsys, path) == f"holoxmc: error: {path}: empty file"


# 6. byte-order mark
BOM = b"\xef\xbb\xbf"


def test_utf8_bom_is_accepted_by_every_text_reader(tmp_path):
    xml = b"2 3 2\n0,1 0:1 2:0.5\n1 1:2\n"
    svm = b"0,1 0:1 2:0.5\n1 1:2\n"
    for name, content, reader in (
        ("x.txt", xml, read_xml_repo), ("s.txt", svm, read_svmlight),
        ("xz.txt.gz", xml, read_xml_repo), ("load.txt", svm, lambda p: (load(p).X, load(p).Y)),
    ):
        plain = write(tmp_path, "plain_" + name, gzip.compress(content) if name.endswith(".gz") else content)
        marked = write(tmp_path, "bom_" + name, gzip.compress(BOM + content) if name.endswith(".gz") else BOM + content)
        for expected, got in zip(reader(plain), reader(marked)):
            assert (expected != got).nnz == 0 and expected.shape == got.shape
    jsonl = b'{"text": "red apple", "labels": ["fruit"]}\n'
    assert read_jsonl(write(tmp_path, "b.jsonl", BOM + jsonl)).labels == [["fruit"]]
    assert read_label_vocabulary(write(tmp_path, "labels.txt", BOM + b"fruit\ncar\n")) == ["fruit", "car"]
    assert read_split_indices(write(tmp_path, "s_trSplit.txt", BOM + b"2\n1\n"), 2).tolist() == [[1], [0]]


# 7. no "declared" sizes where nothing declared them
def test_headerless_width_messages_do_not_claim_a_declaration(tmp_path):
    path = write(tmp_path, "plain.txt", b"0 0:1\n7 5:1\n")
    with pytest.raises(DataFormatError) as caught:
        read_svmlight(path, n_features=3)
    assert str(caught.value) == f"{path}:2: feature index 5 >= D=3, the width this file is read at"
    with pytest.raises(DataFormatError) as caught:
        read_svmlight(path, n_labels=4)
    assert str(caught.value) == f"{path}:2: label index 7 >= L=4, the width this file is read at"
    with_header = write(tmp_path, "header.txt", b"2 3 9\n0 0:1\n7 5:1\n")
    with pytest.raises(DataFormatError, match=r"header.txt:3: feature index 5 >= declared D=3$"):
        read_xml_repo(with_header)


# 8. permission denied is not "no such file"
def _deny(monkeypatch, function_name: str, denied: Path) -> None:
    """Make ``os.<function_name>`` fail with EACCES for ``denied`` (the tests run as root too)."""
    original = getattr(os, function_name)

    def refusing(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(denied):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(os, function_name, refusing)


@pytest.mark.parametrize("name", ["locked.txt", "locked.mat", "locked.npz"])
def test_unreadable_file_is_permission_denied(tmp_path, monkeypatch, name):
    path = write(tmp_path, name, b"1 2 3\n0 0:1\n")
    _deny(monkeypatch, "open", path)
    with pytest.raises(DataFormatError, match=f"{name}: cannot read file: permission denied$"):
        load(path)


def test_unsearchable_path_is_permission_denied(tmp_path, monkeypatch, capsys):
    path = tmp_path / "hidden" / "x_train.txt"
    _deny(monkeypatch, "stat", path)
    with pytest.raises(DataFormatError, match="x_train.txt: cannot read file: permission denied$"):
        load(path)
    assert one_error_line(capsys, path).endswith("permission denied")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_really_denied(tmp_path):
    path = write(tmp_path, "locked.txt", b"1 2 3\n0 0:1\n")
    path.chmod(0)
    with pytest.raises(DataFormatError, match="permission denied"):
        load(path)


# 9. train/test pairing by file name only
def test_pairing_uses_the_file_name_words_only(tmp_path, capsys):
    folder = tmp_path / "mytests" / "latest_data"
    write(folder, "latest_train.txt", b"1 2 3\n0 0:1\n")
    write(folder, "latest_test.txt", b"2 2 3\n1 1:1\n2 0:1\n")
    write(folder, "contest_notes.txt", b"not data\n")
    assert len(load(folder, "train")) == 1 and len(load(folder, "test")) == 2
    assert main(["data", "info", str(folder)]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["data", "info", "--help"])
    assert "paired by file name only" in " ".join(capsys.readouterr().out.split())
    assert registry.name_words("Bibtex_train.txt.gz") == ["bibtex", "train", "txt", "gz"]


# 10. NaN / inf in a cache
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_npz_with_non_finite_features_is_refused(tmp_path, capsys, bad):
    path = tmp_path / "cache.npz"
    save_npz(Dataset(sp.csr_matrix(np.array([[0, 1], [bad, 0]], dtype=np.float32)), sp.csr_matrix([[1], [0]]), "x"),
             path)
    with pytest.raises(DataFormatError, match="cache.npz: .*X holds 1 non-finite value\\(s\\), e.g. .* at row 1, "
                                              "feature 0"):
        load(path)
    assert "non-finite" in one_error_line(capsys, path)


# 11. .mat label orientation
def _mat(tmp_path: Path, Y: np.ndarray, Ytest: np.ndarray) -> Path:
    path = tmp_path / "toy.mat"
    scipy.io.savemat(path, {"X": sp.csr_matrix(np.ones((4, 3))), "Y": sp.csr_matrix(Y),
                            "Xtest": sp.csr_matrix(np.ones((2, 3))), "Ytest": sp.csr_matrix(Ytest)})
    return path


def test_mat_labels_transposed_only_when_the_shape_says_so(tmp_path):
    label_major = _mat(tmp_path, np.eye(5, 4), np.eye(5, 2))  # (L, n) in both splits, as Bibtex.mat
    assert read_mat(label_major)[1].shape == (4, 5) and read_mat(label_major, "test")[1].shape == (2, 5)
    assert read_mat(label_major)[1].toarray().tolist() == np.eye(5, 4).T.tolist()
    mixed = _mat(tmp_path, np.eye(5, 4), np.eye(2, 5))  # Y has 5 rows for 4 points; Ytest is (n, L)
    with pytest.raises(DataFormatError, match=r"toy.mat: the train labels read as label-major \(L, n\) but Ytest "
                                              r"\(2, 5\) for Xtest \(2, 3\) is stored the other way"):
        read_mat(mixed)
    neither = _mat(tmp_path, np.eye(5, 3), np.eye(2, 5))
    with pytest.raises(DataFormatError, match=r"Y has shape \(5, 3\), neither \(4, L\) nor \(L, 4\)"):
        read_mat(neither)


# 12. the downloader on pooch, without the network
def _zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("Eurlex/eurlex_train.txt", "2 3 2\n0 0:1\n1 2:1\n")
        archive.writestr("Eurlex/eurlex_test.txt", "1 3 2\n0,1 1:1\n")
    return buffer.getvalue()


@pytest.fixture
def fake_pooch(monkeypatch):
    """``pooch.retrieve`` replaced by one that writes a zip and checks ``known_hash`` as pooch
    does; records its calls."""
    calls: list[dict] = []
    content = _zip_bytes()

    def retrieve(url, known_hash, fname, path, progressbar):
        calls.append(dict(url=url, known_hash=known_hash, fname=fname))
        if known_hash is not None and known_hash != "sha256:" + hashlib.sha256(content).hexdigest():
            raise ValueError(f"SHA256 hash of downloaded file does not match the known hash: expected {known_hash}")
        target = Path(path) / fname
        target.write_bytes(content)
        return str(target)

    monkeypatch.setattr("pooch.retrieve", retrieve)  # registry imports pooch where it downloads
    return calls, hashlib.sha256(content).hexdigest()


def test_fetch_passes_the_registry_checksum_to_pooch(tmp_path, monkeypatch, fake_pooch):
    calls, digest = fake_pooch
    info = REGISTRY["eurlex-4k"]
    monkeypatch.setitem(REGISTRY, "eurlex-4k", dataclasses.replace(info, sha256=digest))
    folder = fetch("eurlex-4k", tmp_path / "home", progress=False)
    assert calls == [dict(url=info.url, known_hash=f"sha256:{digest}", fname="eurlex-4k.download")]
    assert load(folder, "test").Y.toarray().tolist() == [[1, 1]]
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["eurlex-4k"]


def test_download_without_a_published_checksum_reports_it(tmp_path, fake_pooch):
    calls, digest = fake_pooch
    with pytest.warns(UserWarning, match=f"sha256 of the download is {digest}"):
        download("https://example.invalid/x.zip", tmp_path / "x.zip", progress=False)
    assert calls[-1]["known_hash"] is None and (tmp_path / "x.zip").read_bytes() == _zip_bytes()
    with pytest.raises(DataFormatError, match="sha256 mismatch"):
        download("https://example.invalid/x.zip", tmp_path / "bad" / "x.zip", sha256="0" * 64, progress=False)
    assert list((tmp_path / "bad").iterdir()) == []

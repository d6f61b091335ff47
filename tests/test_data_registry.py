"""Registry: real data loads to the documented statistics, name resolution, statistics
warnings, and the download path against a loopback HTTP server."""

from __future__ import annotations

import functools
import hashlib
import http.server
import io
import os
import threading
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from holoxmc.data import REGISTRY, StatisticsWarning, download, fetch, load, read_mat
from holoxmc.data.registry import find_dataset_dir
from holoxmc.data.text import fit_tfidf
from holoxmc.errors import DataFormatError, InputError

SHARED = Path(os.environ.get("HOLOXMC_DATA") or Path(__file__).resolve().parents[1].parent / "shared" / "data")
needs_shared = pytest.mark.skipif(
    not (SHARED / "Bibtex").is_dir(), reason=f"real datasets not present at {SHARED} (set HOLOXMC_DATA)"
)

# (train points, test points, D, L, train labels/point) measured in shared/data/SOURCES.md
REAL = {
    "bibtex": (4880, 2515, 1836, 159, 2.394),
    "delicious": (12920, 3185, 500, 983, 19.047),
}


@needs_shared
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_xml_repo_sets_match_published_statistics(name):
    n_train, n_test, D, L, lpp = REAL[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatisticsWarning)
        train, test = load(name, "train"), load(name.upper(), "test")
    assert (len(train), len(test)) == (n_train, n_test)
    assert train.n_features == test.n_features == D and train.n_labels == test.n_labels == L
    assert train.stats().labels_per_point == pytest.approx(lpp, abs=1e-3)
    info = REGISTRY[name]
    assert (train.Y.nnz + test.Y.nnz) / L == pytest.approx(info.points_per_label, abs=0.01)
    assert train.Y.has_sorted_indices and set(np.unique(train.Y.data)) == {1.0}


@needs_shared
@pytest.mark.parametrize("name, mat", [("bibtex", "Bibtex/Bibtex.mat"), ("delicious", "Delicious/delicious.mat")])
def test_text_files_equal_mat_files(name, mat):
    for split in ("train", "test"):
        text = load(name, split)
        X, Y = read_mat(SHARED / mat, split)
        assert (text.X != X).nnz == 0 and (text.Y != Y).nnz == 0


@needs_shared
def test_debtags_text_tfidf_fitted_on_train_and_tokens():
    train = load("debtags", "train")
    test = load("debtags", "test", features="tokens", max_length=64)
    assert (len(train), len(test), train.n_labels) == (15668, 5034, 443)
    assert train.label_names[0] == "devel::library" and test.label_names == train.label_names
    assert train.stats().labels_per_point == pytest.approx(3.074, abs=1e-3)
    expected = fit_tfidf(train.texts).transform(test.texts)
    assert test.n_features == train.n_features and abs(test.X - expected).max() < 1e-6
    assert test.tokens.shape == (5034, 64) and test.tokens.dtype == np.int32
    assert test.inputs is test.tokens and test.tokens.min() == 0
    with pytest.raises(InputError, match="needs raw text"):
        load("bibtex", features="tokens")


@needs_shared
def test_debtags_token_ids_cover_the_tokenizer_vocabulary():
    """Regression: the vocabulary was counted over whole texts, so the largest training id
    (what a model infers its embedding size from) was below the tokenizer's id count."""
    train = load("debtags", "train", features="tokens", check_statistics=False)
    assert train.tokens.max() + 1 == train.encoder.tokenizer.n_tokens


def test_synthetic_default_and_presets():
    train, test = load("synthetic"), load("Synthetic", "test")
    assert (len(train), len(test), train.n_labels, train.n_features) == (10_000, 2_000, 1_500, 5_000)
    small = load("synthetic", "test", n_points=100, n_test=10, n_labels=7, n_features=9, seed=4)
    assert (len(small), small.n_labels, small.n_features) == (10, 7, 9)


def _toy_folder(folder: Path, prefix: str = "toy") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{prefix}_train.txt").write_bytes(b"2 3 2\n0 0:1\n1 2:1\n")
    (folder / f"{prefix}_test.txt").write_bytes(b"1 3 2\n0,1 1:1\n")
    return folder


def _split_folder(folder: Path, data: bytes, train_split: bytes, test_split: bytes) -> Path:
    """A ``Toy_data.txt`` + ``toy_trSplit.txt`` / ``toy_tstSplit.txt`` folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Toy_data.txt").write_bytes(data)
    (folder / "toy_trSplit.txt").write_bytes(train_split)
    (folder / "toy_tstSplit.txt").write_bytes(test_split)
    return folder


def test_holoxmc_data_env_resolution_and_statistics_warning(tmp_path, monkeypatch):
    _toy_folder(tmp_path / "eurlex-4k", prefix="eurlex")
    monkeypatch.setenv("HOLOXMC_DATA", str(tmp_path))
    assert find_dataset_dir("EURLex-4K") == tmp_path / "eurlex-4k"
    with pytest.warns(StatisticsWarning, match="eurlex-4k train: 2 points, published 15539; 3 features, published 5000"):
        train = load("eurlex-4k")
    assert train.X.shape == (2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatisticsWarning)
        assert len(load("eurlex-4k", "test", check_statistics=False)) == 1


def test_folder_and_split_file_variant(tmp_path):
    folder = _split_folder(tmp_path / "Toy", b"3 2 2\n0 0:1\n1 1:1\n0,1 0:1 1:1\n", b"1 3\n2 2\n", b"3 1\n")
    assert load(folder, "train").Y.toarray().tolist() == [[1, 0], [0, 1]]
    assert load(folder, "test", split_column=1).Y.toarray().tolist() == [[1, 0]]


def test_several_candidate_files_are_an_error_not_a_silent_choice(tmp_path):
    folder = _toy_folder(tmp_path / "Two")
    (folder / "other_train.txt.gz").write_bytes(b"")
    with pytest.raises(InputError, match=r"2 candidate train data files \(other_train.txt.gz, toy_train.txt\)"):
        load(folder, "train")
    assert len(load(folder, "test")) == 1
    split = _split_folder(tmp_path / "Split", b"2 2 2\n0 0:1\n1 1:1\n", b"1\n", b"2\n")
    (split / "toy_trSplit_old.txt").write_bytes(b"2\n")
    with pytest.raises(InputError, match=r"2 candidate trSplit files \(toy_trSplit.txt, toy_trSplit_old.txt\)"):
        load(split, "train")
    (split / "Other_data.txt").write_bytes(b"1 2 2\n0 0:1\n")
    with pytest.raises(InputError, match=r"2 candidate \*_data.txt files \(Other_data.txt, Toy_data.txt\)"):
        load(split, "test")
    mats = tmp_path / "Mats"
    mats.mkdir()
    for name in ("a.mat", "b.mat"):
        (mats / name).write_bytes(b"")
    with pytest.raises(InputError, match=r"2 candidate .mat files \(a.mat, b.mat\)"):
        load(mats, "train")


def test_split_column_option_is_validated(tmp_path):
    """Regression: ``--data-option split_column=x`` raised TypeError, ``=0.0`` IndexError."""
    folder = _split_folder(tmp_path / "Toy", b"2 2 2\n0 0:1\n1 1:1\n", b"1 2\n", b"2 1\n")
    for value in ("x", 0.0):
        with pytest.raises(InputError, match=f"split column must be an integer, got {value!r}"):
            load(folder, "train", split_column=value)
    with pytest.raises(InputError, match="split column 2 not in 0..1"):
        load(folder, "train", split_column=2)
    assert load(folder, "train", split_column=1).Y.toarray().tolist() == [[0, 1]]


def test_cache_file_names_change_with_the_cache_format(tmp_path, monkeypatch):
    """A cache written in another format (or by another tokenizer) is rebuilt, not read."""
    from holoxmc.data import registry

    folder = _toy_folder(tmp_path / "Toy")
    load(folder, "train", cache_dir=tmp_path / "cache")
    monkeypatch.setattr(registry, "FORMAT_VERSION", registry.FORMAT_VERSION + 1)
    load(folder, "train", cache_dir=tmp_path / "cache")
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_splits_are_read_at_the_widths_asked_for(tmp_path):
    """A headerless test file need not contain the largest feature or label id of train:
    read at the train split's widths it keeps them; an id beyond them names its line; a
    source that declares its widths must match them."""
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "plain_train.txt").write_bytes(b"0,4 0:1 9:2\n1 3:1\n")
    (folder / "plain_test.txt").write_bytes(b"1 2:1\n0 0:1\n")
    assert (load(folder, "test").n_features, load(folder, "test").n_labels) == (3, 2)  # from the file alone
    test = load(folder, "test", widths=(10, 5))
    assert test.X.shape == (2, 10) and test.Y.shape == (2, 5)
    assert test.X.toarray()[:, :3].tolist() == [[0, 0, 1], [1, 0, 0]] and test.Y.toarray()[:, :2].tolist() == [[0, 1], [1, 0]]
    with pytest.raises(DataFormatError, match=r"plain_train.txt:1: feature index 9 >= D=5, the width this file is read at"):
        load(folder, "train", widths=(5, None))
    with pytest.raises(DataFormatError, match=r"plain_train.txt:1: label index 4 >= L=3, the width this file is read at"):
        load(folder, "train", widths=(None, 3))
    with_header = tmp_path / "toy_test.txt"
    with_header.write_bytes(b"1 3 2\n0 2:1\n")
    assert load(with_header, "test", widths=(3, 2)).X.shape == (1, 3)
    with pytest.raises(InputError, match="toy_test.txt: its test split has 3 features, expected 10"):
        load(with_header, "test", widths=(10, None))
    with pytest.raises(InputError, match="widths must be"):
        load(folder, "test", widths=(10, 0))
    for n_features in (10, 10, 12):  # a split prepared at other widths is not reused
        cached = load(folder, "test", widths=(n_features, 5), cache_dir=tmp_path / "cache")
        assert cached.X.shape == (2, n_features)
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_options_a_source_does_not_take_are_errors_not_ignored(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "plain_train.txt").write_bytes(b"0 0:1\n")
    (folder / "plain_test.txt").write_bytes(b"0 0:1\n")
    with pytest.raises(InputError, match=r"options \['max_length'\] do not apply to .*plain_test.txt \(feature vectors\)"):
        load(folder, "test", max_length=8)
    with pytest.raises(InputError, match=r"options \['split_column'\] do not apply"):
        load(folder / "plain_test.txt", split_column=1)
    with pytest.raises(InputError, match=r"options \['colour'\] do not apply to synthetic data"):
        load("synthetic", colour="red")
    texts = tmp_path / "texts"
    texts.mkdir()
    for split in ("train", "test"):
        (texts / f"{split}.jsonl").write_text('{"text": "alpha beta gamma", "labels": ["x"]}\n{"text": "beta gamma delta", "labels": ["y"]}\n')
    assert load(texts, "test", features="tokens", max_length=2, min_df=1).tokens.shape == (2, 2)
    with pytest.raises(InputError, match=r"options \['split_column'\] do not apply to .*train.jsonl \(raw texts\)"):
        load(texts, "test", split_column=1)


def test_unknown_name_and_missing_dataset(tmp_path, monkeypatch):
    monkeypatch.setenv("HOLOXMC_DATA", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="neither an existing path nor a known dataset"):
        load("no-such-set")
    with pytest.raises(InputError, match="split must be"):
        load("synthetic", "valid")
    if find_dataset_dir("amazon-670k") is None:
        with pytest.raises(InputError, match="not found"):
            load("amazon-670k")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def loopback_server(tmp_path):
    """An HTTP server on 127.0.0.1 serving ``tmp_path / 'www'``; yields its base URL."""
    root = tmp_path / "www"
    root.mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_downloads_verifies_and_unpacks(tmp_path, loopback_server):
    root, base = loopback_server
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("Eurlex/eurlex_train.txt", "2 3 2\n0 0:1\n1 2:1\n")
        archive.writestr("Eurlex/eurlex_test.txt", "1 3 2\n0,1 1:1\n")
    (root / "eurlex.zip").write_bytes(buffer.getvalue())
    digest = hashlib.sha256(buffer.getvalue()).hexdigest()
    home = tmp_path / "home"
    folder = fetch("eurlex-4k", home, url=f"{base}/eurlex.zip", sha256=digest, progress=False)
    assert folder == home / "eurlex-4k"
    assert sorted(p.name for p in folder.iterdir()) == ["eurlex_test.txt", "eurlex_train.txt"]
    assert load(folder, "test").Y.toarray().tolist() == [[1, 1]]
    assert sorted(p.name for p in home.iterdir()) == ["eurlex-4k"]  # no archive, no temp files

    with pytest.raises(DataFormatError, match="sha256 mismatch"):
        download(f"{base}/eurlex.zip", tmp_path / "bad" / "x.zip", sha256="0" * 64, progress=False)
    assert list((tmp_path / "bad").iterdir()) == []  # atomic: nothing left behind

    (root / "page.html").write_text("<html>confirm</html>")
    with pytest.raises(DataFormatError, match="HTML page"):
        download(f"{base}/page.html", tmp_path / "html" / "x.zip", progress=False)
    with pytest.warns(UserWarning, match=f"sha256 of the download is {digest}"):
        download(f"{base}/eurlex.zip", tmp_path / "nosum" / "x.zip", progress=False)
    with pytest.raises(InputError, match="cannot download"):
        download(f"{base}/missing.zip", tmp_path / "missing" / "x.zip", progress=False)


def test_cache_dir_reuses_prepared_split_until_source_changes(tmp_path):
    folder = _toy_folder(tmp_path / "Toy")
    cache = tmp_path / "cache"
    first = load(folder, "train", cache_dir=cache)
    files = list(cache.iterdir())
    assert len(files) == 1 and files[0].suffix == ".npz"
    again = load(folder, "train", cache_dir=cache)
    assert (again.X != first.X).nnz == 0 and list(cache.iterdir()) == files
    (folder / "toy_train.txt").write_bytes(b"3 3 2\n0 0:1\n1 2:1\n1 1:1\n")  # source changed
    assert len(load(folder, "train", cache_dir=cache)) == 3
    assert len(list(cache.iterdir())) == 2
    synthetic = load("synthetic", cache_dir=cache, n_points=50, n_labels=5, n_features=8)
    assert (load("synthetic", cache_dir=cache, n_points=50, n_labels=5, n_features=8).Y != synthetic.Y).nnz == 0
    with pytest.raises(InputError, match="unknown synthetic preset"):
        load("synthetic", preset="huge")

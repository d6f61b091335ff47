"""Readers: every format in, validated; every malformed input named by file, line and fault."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from holoxmc.data import (
    Dataset,
    load,
    load_npz,
    read_jsonl,
    read_mat,
    read_split_indices,
    read_svmlight,
    read_xml_repo,
    read_xml_repo_split,
    save_npz,
)
from holoxmc.errors import DataFormatError, InputError

VALID = b"3 4 3\n0,2 0:1 3:0.5\n 1:2\n1 2:1\n"


def write(tmp_path: Path, name: str, content: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content)
    return path


def test_xml_repo_plain_and_gzip(tmp_path):
    for name, content in (("a.txt", VALID), ("a.txt.gz", gzip.compress(VALID))):
        X, Y = read_xml_repo(write(tmp_path, name, content))
        assert X.dtype == np.float32 and Y.dtype == np.float32
        np.testing.assert_array_equal(X.toarray(), [[1, 0, 0, 0.5], [0, 2, 0, 0], [0, 0, 1, 0]])
        np.testing.assert_array_equal(Y.toarray(), [[1, 0, 1], [0, 0, 0], [0, 1, 0]])
        assert Y.has_sorted_indices


def test_declared_sizes_kept_even_if_unused(tmp_path):
    X, Y = read_xml_repo(write(tmp_path, "a.txt", b"1 100 50\n0 0:1\n"))
    assert X.shape == (1, 100) and Y.shape == (1, 50)


def test_blank_line_is_an_empty_point_when_header_counts_it(tmp_path):
    X, Y = read_xml_repo(write(tmp_path, "a.txt", b"3 2 2\n0 0:1\n \n1 1:1\n"))
    assert X.shape == (3, 2)
    np.testing.assert_array_equal(Y.toarray(), [[1, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(X.toarray(), [[1, 0], [0, 0], [0, 1]])


@pytest.mark.parametrize(
    "content, line, fault",
    [
        (b"3 4\n0 0:1\n", 1, "bad header"),
        (b"3 4 3\n0 0:1\n1 1:1\n", 1, "header declares 3 points, file has 2"),
        (b"2 4 3\n0 0:1\n1 4:1\n", 3, "feature index 4 >= declared D=4"),
        (b"2 4 3\n0 0:1\n3 1:1\n", 3, "label index 3 >= declared L=3"),
        (b"2 4 3\n0 -1:1\n1 1:1\n", 2, "negative feature index -1"),
        (b"2 4 3\n-1 0:1\n1 1:1\n", 2, "negative label index -1"),
        (b"2 4 3\n0 0:1\n1 1:nan\n", 3, "non-finite feature value 'nan'"),
        (b"2 4 3\n0 0:inf\n1 1:1\n", 2, "non-finite feature value 'inf'"),
        (b"2 4 3\n0 0:1\n1 1:1 1:2\n", 3, "duplicate feature index 1"),
        (b"2 4 3\n0 2:1 1:1\n1 1:1\n", 2, "not ascending"),
        (b"2 4 3\n0 0:1\n1,1 1:1\n", 3, "duplicate label 1"),
        (b"2 4 3\n0 x:1\n1 1:1\n", 2, "bad feature index 'x'"),
        (b"2 4 3\n0 0:1\na 1:1\n", 3, "bad label token 'a'"),
        (b"2 4 3\n0 0:1\n1.5 1:1\n", 3, "label '1.5' is not an integer"),
        (b"2 4 3\n0 0:1\n1 1:1 # note\n", 3, "'#' is not allowed"),
        (b"2 4 3\n0 0:1\n1 1\n", 3, "bad feature token '1'"),
        (b"2 4 3\n0 0:1\n1 99999999999999999999999:1\n", 3, "feature index 99999999999999999999999 >= declared D=4"),
        # scikit-learn's parser drops a first feature token starting with "qid"
        (b"2 4 3\n0 qid:7 1:1\n1 1:1\n", 2, "query id token 'qid:7' is not allowed"),
        (b"2 4 3\n0 0:1\nqidx:5 1:1\n", 3, "query id token 'qidx:5' is not allowed"),
        (b"2 4 3\n0 0:1\n1 1:1e39\n", 3, "feature value '1e39' at index 1 overflows float32"),
        (b"2 4 3\n0 0:1e-50\n1 1:1\n", 2, "feature value '1e-50' at index 0 underflows float32 to 0"),
        # a blank line is a point, counted against the header like any other line
        (b"2 4 3\n0 0:1\n\n1 1:1\n", 1, "header declares 2 points, file has 3 data lines (line 3 is blank"),
        (b"2 4 3\n0 0:1\n1 1:1\n\n", 1, "header declares 2 points, file has 3 data lines (line 4 is blank"),
    ],
)
def test_malformed_xml_repo_names_file_line_fault(tmp_path, content, line, fault):
    path = write(tmp_path, "bad.txt", content)
    with pytest.raises(DataFormatError) as info:
        read_xml_repo(path)
    assert info.value.line == line
    assert fault in info.value.message
    assert str(info.value).startswith(f"{path}:{line}: ")


def test_svmlight_blank_line_is_a_point_comment_line_is_not(tmp_path):
    """Regression: scikit-learn's parser skips whitespace-only lines, which
    ``dump_svmlight_file`` writes for a point without labels and features."""
    X, Y = read_svmlight(write(tmp_path, "a.svm", b"0 0:1\n\n# a comment\n \n1 1:1 # qid:3 in a comment\n"))
    np.testing.assert_array_equal(X.toarray(), [[1, 0], [0, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(Y.toarray(), [[1, 0], [0, 0], [0, 0], [0, 1]])


def test_svmlight_qid_and_float32_range_name_the_line(tmp_path):
    for content, fault in ((b"0 0:1\n0 qid:7 1:1\n", ":2: query id token 'qid:7'"),
                           (b"0 0:1\n1 1:-1e39\n", ":2: feature value '-1e39' at index 1 overflows float32"),
                           (b"0 0:1\n1 1:1e-50\n", ":2: feature value '1e-50' at index 1 underflows float32 to 0")):
        with pytest.raises(DataFormatError, match=fault):
            read_svmlight(write(tmp_path, "bad.svm", content))
    X, _ = read_svmlight(write(tmp_path, "zero.svm", b"0 0:0 1:1e-40\n"))  # a written 0 and a float32 subnormal stay
    assert X.nnz == 2 and X.data[0] == 0 and X.data[1] > 0


def test_unreadable_gzip(tmp_path):
    truncated = gzip.compress(VALID * 50)[:40]
    for content in (b"\x1f\x8b garbage", truncated):
        with pytest.raises(DataFormatError, match="unreadable gzip"):
            read_xml_repo(write(tmp_path, "bad.txt.gz", content))


def test_svmlight_headerless_with_declared_sizes(tmp_path):
    path = write(tmp_path, "a.svm", b"0,2 0:1 3:0.5\n 1:2\n1 2:1 # comments are svmlight\n")
    X, Y = read_svmlight(path, n_features=10, n_labels=5)
    assert X.shape == (3, 10) and Y.shape == (3, 5)
    X, Y = read_svmlight(path)
    assert X.shape == (3, 4) and Y.shape == (3, 3)
    with pytest.raises(DataFormatError, match=r"a.svm:1: feature index 3 >= D=3, the width this file is read at"):
        read_svmlight(path, n_features=3)


def test_split_file_variant(tmp_path):
    data = write(tmp_path, "Toy_data.txt", b"4 2 2\n0 0:1\n1 1:1\n0,1 0:1 1:1\n 0:2\n")
    splits = write(tmp_path, "toy_trSplit.txt", b"1 4\n3 2\n")
    X, Y = read_xml_repo_split(data, splits, column=0)
    np.testing.assert_array_equal(Y.toarray(), [[1, 0], [1, 1]])
    X, Y = read_xml_repo_split(data, splits, column=1)
    np.testing.assert_array_equal(X.toarray(), [[2, 0], [0, 1]])
    with pytest.raises(InputError, match="split column 2"):
        read_xml_repo_split(data, splits, column=2)
    with pytest.raises(DataFormatError, match=r":2: split index 5 outside 1..4"):
        read_split_indices(write(tmp_path, "bad_trSplit.txt", b"1 2\n5 3\n"), 4)
    with pytest.raises(DataFormatError, match=r":2: 1 columns, previous lines have 2"):
        read_split_indices(write(tmp_path, "bad2_trSplit.txt", b"1 2\n3\n"), 4)


def test_split_file_rejects_repeated_rows_and_bad_columns(tmp_path):
    data = write(tmp_path, "Toy_data.txt", b"4 2 2\n0 0:1\n1 1:1\n0,1 0:1 1:1\n 0:2\n")
    assert read_split_indices(write(tmp_path, "ok_trSplit.txt", b"1 1\n2 3\n"), 4).tolist() == [[0, 0], [1, 2]]
    with pytest.raises(DataFormatError, match=r"dup_trSplit.txt:3: row 1 repeated in column 1 \(first on line 1\)"):
        read_split_indices(write(tmp_path, "dup_trSplit.txt", b"2 1\n3 4\n4 1\n"), 4)
    splits = write(tmp_path, "toy_trSplit.txt", b"1 4\n3 2\n")
    for column in ("x", 0.0, True, None):
        with pytest.raises(InputError, match=f"split column must be an integer, got {column!r}"):
            read_xml_repo_split(data, splits, column=column)
    with pytest.raises(InputError, match=r"split column -1 not in 0..1"):
        read_xml_repo_split(data, splits, column=-1)
    assert read_xml_repo_split(data, splits, column=np.int64(1))[0].shape == (2, 2)


def test_mat_label_major_sparse_and_dense(tmp_path):
    X = sp.random(6, 5, density=0.4, random_state=0, format="csc")
    Y = (sp.random(3, 6, density=0.5, random_state=1, format="csc") > 0).astype(np.float64)
    path = tmp_path / "toy.mat"
    scipy.io.savemat(path, {"X": X, "Y": Y, "Xtest": X[:2], "Ytest": Y[:, :2]})
    Xr, Yr = read_mat(path, "train")
    np.testing.assert_allclose(Xr.toarray(), X.toarray(), rtol=1e-6)
    np.testing.assert_array_equal(Yr.toarray(), Y.T.toarray())
    assert read_mat(path, "test")[1].shape == (2, 3)
    dense = tmp_path / "dense.mat"
    scipy.io.savemat(dense, {"train_data": np.eye(4, 3, dtype=np.uint8), "train_target": np.eye(2, 4, dtype=np.uint8),
                             "test_data": np.eye(1, 3, dtype=np.uint8), "test_target": np.eye(2, 1, dtype=np.uint8)})
    Xd, Yd = read_mat(dense, "train")
    assert Xd.shape == (4, 3) and Yd.shape == (4, 2) and Yd.dtype == np.float32
    signed = tmp_path / "signed.mat"
    scipy.io.savemat(signed, {"X": np.eye(3, 2), "Y": -np.ones((4, 3))})
    with pytest.raises(DataFormatError, match="values other than 0/1"):
        read_mat(signed)
    square = tmp_path / "square.mat"
    scipy.io.savemat(square, {"X": np.eye(3, 2), "Y": np.eye(3)})
    with pytest.raises(DataFormatError, match="square"):
        read_mat(square)
    assert read_mat(square, label_major=False)[1].shape == (3, 3)


def test_jsonl_reader_and_errors(tmp_path):
    good = b'{"id": "a", "text": "x y", "labels": ["p"]}\n\n{"text": "z", "labels": []}\n'
    records = read_jsonl(write(tmp_path, "t.jsonl", good))
    assert records.texts == ["x y", "z"] and records.labels == [["p"], []] and records.lines == [1, 3]
    for content, fault in (
        (b'{"text": "x", "labels": ["p"]}\n{"text": 1, "labels": []}\n', ":2: 'text' must be a string"),
        (b'{"text": "x", "labels": ["p", "p"]}\n', ":1: duplicate label"),
        (b'{"text": "x", "labels": "p"}\n', ":1: 'labels' must be a list of strings"),
        (b"[1]\n", ":1: a line must be a JSON object"),
        (b'{"text": \n', ":1: invalid JSON"),
    ):
        with pytest.raises(DataFormatError, match=fault):
            read_jsonl(write(tmp_path, "bad.jsonl", content))


def test_npz_round_trip_and_corruption(tmp_path):
    dataset = Dataset(
        sp.random(4, 6, density=0.5, random_state=0, format="csr"),
        sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 1], [0, 0]])),
        "toy",
        texts=["a", "b b", "ç", ""],
        label_names=["x", "y"],
        tokens=np.arange(12, dtype=np.int32).reshape(4, 3),
    )
    path = tmp_path / "toy.npz"
    save_npz(dataset, path)
    back = load_npz(path)
    assert back.name == "toy" and back.texts == dataset.texts and back.label_names == ["x", "y"]
    assert (back.X != dataset.X).nnz == 0 and (back.Y != dataset.Y).nnz == 0
    np.testing.assert_array_equal(back.tokens, dataset.tokens)
    assert load(path).n_labels == 2  # also through the registry
    with pytest.raises(DataFormatError, match="not a holoxmc dataset cache"):
        load_npz(write(tmp_path, "junk.npz", b"PK\x03\x04 junk"))


def test_npz_stores_texts_as_utf8_bytes_and_round_trips_them_exactly(tmp_path):
    """Regression: texts were a fixed-width string array (every row as wide as the longest
    text: Debtags would take about 5 GB) that also lost trailing NUL characters."""
    texts = ["x" * 20_000, "tail\x00", "\x00", "", "ünï ☃", "lone \ud800 surrogate"] + ["short"] * 500
    dataset = Dataset(sp.csr_matrix((len(texts), 2)), sp.csr_matrix((len(texts), 2)), "t",
                      texts=texts, label_names=["a\x00", "b"])
    path = tmp_path / "t.npz"
    save_npz(dataset, path)
    back = load_npz(path)
    assert back.texts == texts and back.label_names == ["a\x00", "b"]
    with np.load(path) as npz:
        assert all(npz[key].dtype.kind != "U" or npz[key].ndim == 0 for key in npz.files)
        assert npz["texts_utf8"].nbytes == sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
        arrays = {key: npz[key] for key in npz.files}
    arrays["texts_offsets"] = arrays["texts_offsets"][::-1].copy()
    np.savez(tmp_path / "corrupt.npz", **arrays)
    with pytest.raises(DataFormatError, match="inconsistent cache|not a holoxmc dataset cache"):
        load_npz(tmp_path / "corrupt.npz")
    arrays["format_version"] = np.array(1)
    np.savez(tmp_path / "old.npz", **arrays)
    with pytest.raises(DataFormatError, match="unsupported cache format 1"):
        load_npz(tmp_path / "old.npz")


def test_dataset_validates_and_normalises():
    labels = sp.csr_matrix((np.array([0.0, 1.0, 1.0]), np.array([0, 1, 0]), np.array([0, 1, 3])), shape=(2, 2))
    d = Dataset(sp.csr_matrix(np.ones((2, 2))), labels, "d")
    assert d.X.dtype == np.float32 and d.Y.dtype == np.float32 and d.Y.nnz == 2  # a stored 0 is not a label
    assert d.Y.toarray().tolist() == [[0, 0], [1, 1]] and d.Y.has_canonical_format
    assert labels.nnz == 3 and labels.indices.tolist() == [0, 1, 0]  # the caller's matrix is left alone
    assert d.stats().labels_per_point == 1.0 and d.inputs is d.X
    with pytest.raises(InputError, match="rows"):
        Dataset(sp.csr_matrix((2, 2)), sp.csr_matrix((3, 2)), "d")
    with pytest.raises(InputError, match="label names"):
        Dataset(sp.csr_matrix((2, 2)), sp.csr_matrix((2, 2)), "d", label_names=["a"])


@pytest.mark.parametrize("value", [-1.0, 0.5, 2.0, np.nan])
def test_dataset_rejects_non_binary_label_values(value):
    """Regression: such values used to become 1 silently."""
    labels = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, value]]))
    with pytest.raises(InputError, match=f"Y must hold 0/1 label values, found {value:g} at row 1, label 1"):
        Dataset(sp.csr_matrix((2, 2)), labels, "d")


def test_dataset_rejects_a_label_stored_twice():
    twice = sp.csr_matrix((np.ones(2), np.array([1, 1]), np.array([0, 0, 2])), shape=(2, 2))
    with pytest.raises(InputError, match="Y stores row 1, label 1 twice"):
        Dataset(sp.csr_matrix((2, 2)), twice, "d")


def test_json_labels_keep_unicode(tmp_path):
    line = json.dumps({"text": "ünïcode", "labels": ["ä::b"]}).encode() + b"\n"
    assert read_jsonl(write(tmp_path, "u.jsonl.gz", gzip.compress(line))).labels == [["ä::b"]]


def test_write_xml_repo_round_trip(tmp_path):
    from holoxmc.data.readers import write_xml_repo

    X = sp.random(20, 7, density=0.3, random_state=3, format="csr", dtype=np.float32)
    Y = sp.random(20, 5, density=0.3, random_state=4, format="csr", dtype=np.float32)
    Y.data[:] = 1
    Y = Y.tolil()
    Y[0, :] = 0  # a point without labels: its line starts with a space
    Y = Y.tocsr()
    for name in ("out.txt", "out.txt.gz"):
        write_xml_repo(tmp_path / name, X, Y)
        X_back, Y_back = read_xml_repo(tmp_path / name)
        assert (X_back != X).nnz == 0 and (Y_back != Y).nnz == 0
    assert (tmp_path / "out.txt").read_bytes().split(b"\n")[1].startswith(b" ")


def test_corrupt_sparse_mat_variable_is_an_error_not_a_crash():
    """Regression (found by the fuzzer): out-of-range indices in a .mat sparse matrix used to
    reach scipy's CSC -> CSR conversion and crash the interpreter."""
    from holoxmc.data.readers import _as_matrix

    broken = sp.csc_matrix(np.eye(3))
    broken.indices[0] = 1_000_000
    with pytest.raises(DataFormatError, match="corrupt sparse matrix"):
        _as_matrix("x.mat", "X", broken)

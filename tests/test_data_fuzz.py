"""Fuzzing every reader: random bytes and mutated valid files either parse or raise
holoxmc's own error; no other exception type may escape."""

from __future__ import annotations

import gzip
import io
import tempfile
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.io
import scipy.sparse as sp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holoxmc.data import Dataset, load_npz, read_jsonl, read_mat, read_split_indices, read_svmlight, read_xml_repo, save_npz
from holoxmc.data.text import read_label_vocabulary
from holoxmc.errors import DataFormatError, HoloxmcError

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

XML_VALID = b"4 6 3\n0,2 0:1 3:0.5 5:2\n 1:2\n1 2:1 4:1e-3\n2 0:0.25\n"
JSONL_VALID = b'{"id": "a", "text": "red car", "labels": ["x", "y"]}\n{"id": "b", "text": "tea", "labels": []}\n'


def _mat_bytes() -> bytes:
    buffer = io.BytesIO()
    scipy.io.savemat(buffer, {"X": sp.csc_matrix(np.eye(3, 4)), "Y": sp.csc_matrix(np.eye(2, 3)),
                              "Xtest": np.eye(1, 4), "Ytest": np.eye(2, 1)})
    return buffer.getvalue()


def _npz_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "d.npz"
        save_npz(Dataset(sp.csr_matrix(np.eye(3, 4)), sp.csr_matrix(np.eye(3, 2)), "d", texts=["a", "b", "c"]), path)
        return path.read_bytes()


READERS: dict[str, tuple[Callable[[Path], object], bytes]] = {
    "xml": (read_xml_repo, XML_VALID),
    "xml.gz": (read_xml_repo, gzip.compress(XML_VALID, mtime=0)),
    "svmlight": (lambda p: read_svmlight(p, n_features=6, n_labels=3), XML_VALID.split(b"\n", 1)[1]),
    "mat": (lambda p: read_mat(p, "train"), _mat_bytes()),
    "jsonl": (read_jsonl, JSONL_VALID),
    "npz": (load_npz, _npz_bytes()),
    "split": (lambda p: read_split_indices(p, 4), b"1 2\n3 4\n"),
    "labels": (read_label_vocabulary, b"a::b\nc\n"),
}


def _only_holoxmc_errors(reader: Callable[[Path], object], content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "input"
        path.write_bytes(content)
        try:
            reader(path)
        except HoloxmcError:
            pass


@st.composite
def mutated(draw, valid: bytes) -> bytes:
    data = bytearray(valid)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["replace", "insert", "delete", "truncate"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "replace" and data:
            data[position] = draw(st.sampled_from(b"0123456789:, -.\n#nainfe\x00\xff"))
        elif kind == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=4))
        elif kind == "delete" and data:
            del data[position]
        else:
            del data[position:]
    return bytes(data)


def _fuzz(name: str, max_examples: int = 60):
    reader, valid = READERS[name]

    @settings(FUZZ, max_examples=max_examples)
    @given(content=st.one_of(st.binary(max_size=300), mutated(valid)))
    def run(content: bytes) -> None:
        _only_holoxmc_errors(reader, content)

    return run


test_fuzz_xml_repo = _fuzz("xml")
test_fuzz_xml_repo_gzip = _fuzz("xml.gz")
test_fuzz_svmlight = _fuzz("svmlight")
test_fuzz_mat = _fuzz("mat", max_examples=20)  # each read starts a child interpreter
test_fuzz_jsonl = _fuzz("jsonl")
test_fuzz_npz = _fuzz("npz")
test_fuzz_split_indices = _fuzz("split")
test_fuzz_label_vocabulary = _fuzz("labels")


def test_valid_fixtures_parse():
    """The seeds of the mutation fuzzing are themselves valid inputs."""
    for name, (reader, valid) in READERS.items():
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "input"
            path.write_bytes(valid)
            assert reader(path) is not None, name


def test_mat_that_crashes_scipy_is_a_data_format_error():
    """Regression (found by this fuzzer): 4 bytes inserted into the last variable make
    ``scipy.io.loadmat`` segfault; the reader runs it in a child and reports the file."""
    valid = READERS["mat"][1]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "crash.mat"
        path.write_bytes(valid[:520] + b".\xa2\xb9\x81" + valid[520:])
        with pytest.raises(DataFormatError, match="not a readable MATLAB file"):
            read_mat(path)


@pytest.mark.parametrize("offset, value", [(10, 99), (8, 0x20)], ids=["compression method", "patched-data flag"])
def test_npz_with_an_unsupported_zip_feature_is_a_data_format_error(tmp_path, offset, value):
    """zipfile raises NotImplementedError for these (found by the fuzzer); the reader must
    turn it into one clear DataFormatError like any other corruption."""
    content = bytearray(_npz_bytes())
    entry = content.index(b"PK\x01\x02")  # the first central-directory entry
    content[entry + offset] = value
    path = tmp_path / "cache.npz"
    path.write_bytes(bytes(content))
    with pytest.raises(DataFormatError, match="not a holoxmc dataset cache"):
        load_npz(path)

"""Shard stores (:mod:`holoxmc.data.shards`) and training / scoring from them
(:mod:`holoxmc.train.streaming`): round trips, one error per bad file, and the same model
and scores as in memory."""

from __future__ import annotations

import hashlib
import json
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import holoxmc.train.trainer as trainer_module
from holoxmc.backbones import build_network
from holoxmc.cli import main
from holoxmc.data import Dataset, ShardStore, open_shards, write_shards
from holoxmc.data.shards import MANIFEST
from holoxmc.errors import DataFormatError, InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.train import TrainConfig, Trainer
from holoxmc.train.streaming import epoch_order


def _dataset(n: int = 103, n_features: int = 40, n_labels: int = 12, seed: int = 0) -> Dataset:
    X = sp.random(n, n_features, density=0.15, format="csr", random_state=seed, dtype=np.float32)
    Y = sp.random(n, n_labels, density=0.2, format="csr", random_state=seed + 1)
    Y.data[:] = 1
    return Dataset(X, Y, "toy")


@pytest.fixture
def data() -> Dataset:
    return _dataset()


@pytest.fixture
def store(data: Dataset, tmp_path) -> ShardStore:
    return open_shards(write_shards(data, tmp_path / "store", rows_per_shard=10))


def _equal(a: sp.spmatrix, b: sp.spmatrix) -> bool:
    return a.shape == b.shape and (sp.csr_matrix(a) != sp.csr_matrix(b)).nnz == 0


def _manifest(folder) -> dict:
    return json.loads((folder / MANIFEST).read_text())


# ---------------------------------------------------------------------------- the store
def test_round_trip_gives_back_every_row(data, store):
    assert (store.n_rows, store.n_features, store.n_labels, store.n_shards) == (103, 40, 12, 11)
    loaded = store.load()
    assert _equal(loaded.X, data.X) and _equal(loaded.Y, data.Y)
    blocks = list(store.chunks())
    assert [X.shape[0] for X, _ in blocks] == [10] * 10 + [3]
    assert _equal(sp.vstack([X for X, _ in blocks]), data.X) and _equal(sp.vstack([Y for _, Y in blocks]), data.Y)
    rows = np.random.default_rng(0).permutation(103)[:37]  # any order, across shards
    assert _equal(store.X[rows], data.X[rows]) and _equal(store.Y[rows], data.Y[rows])
    view = store.X.subset(np.array([99, 5, 50]))
    assert view.shape == (3, 40) and _equal(view[np.array([1, 0])], data.X[[5, 99]])
    assert np.array_equal(store.label_counts(), np.bincount(data.Y.indices, minlength=12))


def test_shards_are_memory_mapped_not_copied(store):
    X, Y = store.shard(0)
    for array in (X.data, X.indices, X.indptr, Y.indices):
        assert not array.flags.owndata and not array.flags.writeable  # views of the mapped files


def test_a_generator_of_blocks_writes_the_same_shards_as_the_dataset(data, store, tmp_path):
    cuts = [0, 7, 7, 30, 31, 90, 103]  # uneven blocks, one empty
    blocks = ((data.X[a:b], data.Y[a:b]) for a, b in zip(cuts[:-1], cuts[1:]))
    folder = write_shards(blocks, tmp_path / "from-blocks", rows_per_shard=10, name="toy")
    assert _manifest(folder) == _manifest(store.folder)
    with pytest.raises(InputError, match="a block of 41 features and 12 labels after blocks of 40 and 12"):
        write_shards(iter([(data.X, data.Y), (sp.csr_matrix((2, 41)), sp.csr_matrix((2, 12)))]), tmp_path / "bad")
    with pytest.raises(InputError, match="0/1 label values"):
        write_shards(iter([(data.X[:2], 2 * data.Y[:2])]), tmp_path / "bad")
    with pytest.raises(InputError, match="no block"):
        write_shards(iter([]), folder)
    assert open_shards(folder).n_rows == 103  # the refused write left the store as it was


def test_a_split_of_no_rows_is_a_store_of_no_shards(tmp_path):
    empty = open_shards(write_shards(Dataset(sp.csr_matrix((0, 5)), sp.csr_matrix((0, 3)), "e"), tmp_path / "empty"))
    assert (empty.n_rows, empty.n_features, empty.n_labels, empty.n_shards) == (0, 5, 3, 0)
    assert empty.load().X.shape == (0, 5)


def test_rewriting_a_store_drops_surplus_shards_and_refuses_other_folders(data, tmp_path):
    folder = write_shards(data, tmp_path / "store", rows_per_shard=10)
    write_shards(data, folder, rows_per_shard=50)
    assert len(list(folder.glob("shard-*.npy"))) == 3 * 5 and open_shards(folder).n_shards == 3
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not a shard store"):
        write_shards(data, other, rows_per_shard=10)
    with pytest.raises(InputError, match="rows_per_shard"):
        write_shards(data, tmp_path / "zero", rows_per_shard=0)


def test_a_corrupted_shard_is_one_error_naming_its_file(store):
    path = store.folder / "shard-00004-X_data.npy"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF  # same size, another value
    path.write_bytes(bytes(raw))
    reopened = open_shards(store.folder)  # sizes and headers still agree
    with pytest.raises(DataFormatError, match=r"shard-00004-X_data\.npy: its SHA-256 differs"):
        list(reopened.chunks())


def test_a_truncated_or_missing_shard_is_refused_when_opened(store):
    path = store.folder / "shard-00002-Y_indices.npy"
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(DataFormatError, match=r"shard-00002-Y_indices\.npy: .*truncated"):
        open_shards(store.folder)
    path.unlink()
    with pytest.raises(DataFormatError, match=r"shard-00002-Y_indices\.npy: missing"):
        open_shards(store.folder)


def test_a_manifest_lying_about_sizes_is_refused_without_allocating(store):
    manifest = _manifest(store.folder)
    manifest["shards"][0]["rows"] = 10**9  # the files hold 10 rows
    manifest["n_rows"] += 10**9 - 10
    (store.folder / MANIFEST).write_text(json.dumps(manifest))
    tracemalloc.start()
    try:
        with pytest.raises(DataFormatError, match=r"shard-00000-X_indptr\.npy: holds a int32 array of shape \(11,\)"):
            open_shards(store.folder)
        assert tracemalloc.get_traced_memory()[1] < 2**20  # nothing of the claimed 10**9 rows
    finally:
        tracemalloc.stop()
    manifest["n_rows"] = 2**40
    (store.folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataFormatError, match="n_rows 1099511627776 is larger than holoxmc accepts"):
        open_shards(store.folder)


def test_a_forged_header_and_manifest_must_still_match_the_file_size(store):
    """Files whose headers and manifest all claim 10**9 entries are refused by their size."""
    for name, dtype in (("X_indices", np.int32), ("X_data", np.float32)):
        header = np.lib.format.header_data_from_array_1_0(np.zeros(3, dtype=dtype)) | {"shape": (10**9,)}
        with open(store.folder / f"shard-00000-{name}.npy", "wb") as f:
            np.lib.format.write_array_header_1_0(f, header)
            f.write(b"\0" * 64)
    manifest = _manifest(store.folder)
    manifest["shards"][0]["X_nnz"] = 10**9
    (store.folder / MANIFEST).write_text(json.dumps(manifest))
    tracemalloc.start()
    try:
        with pytest.raises(DataFormatError, match=r"shard-00000-X_indices\.npy: 192 bytes; its header implies 4000000128"):
            open_shards(store.folder)
        assert tracemalloc.get_traced_memory()[1] < 2**20
    finally:
        tracemalloc.stop()


def test_a_manifest_naming_a_file_outside_the_store_is_refused(store):
    manifest = _manifest(store.folder)
    manifest["shards"][1]["files"]["X_data"]["file"] = "../../etc/passwd"
    (store.folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(DataFormatError, match="needs a shard file name"):
        open_shards(store.folder)


def _rewrite(store: ShardStore, shard: int, name: str, change) -> str:
    """Change one array of a shard and put its new checksum in the manifest; its file name."""
    file = f"shard-{shard:05d}-{name}.npy"
    array = np.load(store.folder / file)
    change(array)
    np.save(store.folder / file, array)
    manifest = _manifest(store.folder)
    manifest["shards"][shard]["files"][name]["sha256"] = hashlib.sha256((store.folder / file).read_bytes()).hexdigest()
    (store.folder / MANIFEST).write_text(json.dumps(manifest))
    return file


def _swap_first_labels(store: ShardStore, shard: int):
    Y = store.shard(shard)[1]
    row = int(np.flatnonzero(np.diff(Y.indptr) >= 2)[0])
    start = int(Y.indptr[row])

    def swap(indices):
        indices[start], indices[start + 1] = indices[start + 1], indices[start]
    return swap


@pytest.mark.parametrize("name, fault", [
    ("X_indices", r"holds column ids outside \[0, 40\)"),
    ("X_data", "holds a NaN or infinite feature value"),
    ("X_indptr", "must rise from 0 to nnz"),
    ("Y_indices", "a row's labels must be sorted and distinct"),
])
def test_a_shard_with_a_valid_checksum_but_bad_structure_names_the_array(store, name, fault):
    """Faults in the arrays are caught even when the manifest's checksum was updated."""
    changes = {"X_indices": lambda a: a.__setitem__(0, 40), "X_data": lambda a: a.__setitem__(1, np.nan),
               "X_indptr": lambda a: a.__setitem__(2, a[1] - 1), "Y_indices": _swap_first_labels(store, 3)}
    file = _rewrite(store, 3, name, changes[name])
    with pytest.raises(DataFormatError, match=rf"{file}: {fault}"):
        list(open_shards(store.folder).chunks())


def test_no_manifest_or_a_foreign_one_is_one_error(tmp_path):
    with pytest.raises(DataFormatError, match="no shard manifest here"):
        open_shards(tmp_path)
    (tmp_path / MANIFEST).write_text('{"format": "other"}')
    with pytest.raises(DataFormatError, match="not a shard manifest"):
        open_shards(tmp_path)


# ---------------------------------------------------------------------------- training
def test_the_epoch_order_reads_each_shard_once(store):
    train_rows = np.setdiff1d(np.arange(103), [3, 40, 41, 77])
    order = epoch_order(store.X, train_rows, seed=5, epoch=2)
    assert np.array_equal(np.sort(order), train_rows)
    shard_of = store.X.row_blocks[order]
    assert np.count_nonzero(np.diff(shard_of)) == store.n_shards - 1  # one run per shard
    assert np.array_equal(order, epoch_order(store.X, train_rows, seed=5, epoch=2))
    assert not np.array_equal(order, epoch_order(store.X, train_rows, seed=5, epoch=3))


@pytest.mark.parametrize("val_fraction", [0.0, 0.2])
def test_training_from_shards_gives_the_weights_of_training_in_memory(data, store, monkeypatch, val_fraction):
    """Same seed, same (shard-blocked) row order: the same weights, bit for bit."""
    config = TrainConfig(epochs=2, batch_size=16, seed=3, val_fraction=val_fraction, progress=False)

    def train(X, Y):
        network = build_network("fc", "hrr", n_features=40, n_labels=12, hidden=[8], dim=16, seed=0)
        return network, Trainer(config).fit(network, X, Y)

    from_shards, history = train(store.X, store.Y)
    monkeypatch.setattr(trainer_module, "epoch_order",
                        lambda X, rows, seed, epoch: epoch_order(store.X, rows, seed, epoch))
    in_memory, memory_history = train(data.X, data.Y)
    for name, tensor in in_memory.state_dict().items():
        assert torch.equal(tensor, from_shards.state_dict()[name]), name
    assert history.history == [dict(h, seconds=s["seconds"]) for h, s in zip(memory_history.history, history.history)]


def test_a_checkpointed_run_resumes_on_its_store(store, tmp_path):
    clf = XMCClassifier(head="dense", hidden=(8,), epochs=2, progress=False)
    first = clf.fit(store.X, store.Y, run_dir=tmp_path / "run").predict_topk(store.X, k=3)
    again = XMCClassifier(head="dense", hidden=(8,), epochs=2, progress=False)
    resumed = again.fit(store.X, store.Y, run_dir=tmp_path / "run", resume=True).predict_topk(store.X, k=3)
    assert np.array_equal(first[0], resumed[0])
    other = open_shards(write_shards(_dataset(seed=7), tmp_path / "other", rows_per_shard=10))
    with pytest.raises(InputError, match="another configuration or data"):
        XMCClassifier(head="dense", hidden=(8,), epochs=2, progress=False).fit(
            other.X, other.Y, run_dir=tmp_path / "run", resume=True)


def test_refit_on_a_store_holds_out_its_own_rows_and_refuses_a_second_store(data, store, tmp_path):
    clf = XMCClassifier(head="dense", hidden=(8,), epochs=2, refit=True, progress=False).fit(store.X, store.Y)
    assert clf.fit_result_.refit is not None and clf.fit_result_.refit.best_epoch >= 1
    val = open_shards(write_shards(_dataset(n=20, seed=4), tmp_path / "val", rows_per_shard=10))
    with pytest.raises(InputError, match="would join two shard stores"):
        clf.fit(store.X, store.Y, val.X, val.Y)


# ---------------------------------------------------------------------------- scoring
def test_scoring_a_store_equals_scoring_in_memory(data, store, tmp_path):
    clf = XMCClassifier(head="hrr", dim=16, hidden=(8,), epochs=2, progress=False).fit(data.X, data.Y)
    indices, scores = clf.predict_topk(data.X, k=5, batch_size=16)
    streamed = clf.predict_topk(store.X, k=5, batch_size=16)
    assert np.array_equal(indices, streamed[0]) and np.array_equal(scores, streamed[1])
    assert clf.evaluate(store.X, store.Y) == clf.evaluate(data.X, data.Y)
    test = open_shards(write_shards(_dataset(n=31, seed=9), tmp_path / "test", rows_per_shard=7))
    assert clf.evaluate(test.X, test.Y, ks=(1, 3)) == clf.evaluate(test.load().X, test.load().Y, ks=(1, 3))
    streamed = clf.evaluate(test.X, test.Y, recall_ks=(7,))  # a cut-off past the top-5, read from one top-7
    assert "Recall@7" in streamed and streamed == clf.evaluate(test.load().X, test.load().Y, recall_ks=(7,))


def test_a_model_fitted_on_shards_scores_like_one_fitted_in_memory(data, store):
    """One shard holding every row: the shuffled order is the in-memory one."""
    whole = open_shards(write_shards(data, store.folder.parent / "whole", rows_per_shard=200))
    settings = dict(head="hrr", dim=16, hidden=(8,), epochs=2, progress=False)
    in_memory = XMCClassifier(**settings).fit(data.X, data.Y)
    streamed = XMCClassifier(**settings).fit(whole.X, whole.Y)
    assert np.array_equal(in_memory.inv_prop_, streamed.inv_prop_)
    assert np.array_equal(in_memory.predict_topk(data.X)[1], streamed.predict_topk(whole.X)[1])


@pytest.mark.parametrize("head", ["linear", "solar", "auto"])
def test_heads_that_need_every_row_refuse_a_store(store, head):
    with pytest.raises(InputError, match=r"streams to the network heads \['hrr', 'dense'\].*open_shards\(\.\.\.\)\.load"):
        XMCClassifier(head=head, progress=False).fit(store.X, store.Y)


def test_a_store_is_not_mixed_with_matrices_or_other_rows(data, store):
    clf = XMCClassifier(head="dense", hidden=(8,), epochs=1, progress=False)
    with pytest.raises(InputError, match="from shards or none"):
        clf.fit(store.X, data.Y)
    with pytest.raises(InputError, match="store.X as the features"):
        clf.fit(store.Y, store.X)
    with pytest.raises(InputError, match="not the store itself"):
        clf.fit(store, store.Y)
    clf.fit(store.X, store.Y)
    with pytest.raises(InputError, match="with its own labels"):
        clf.evaluate(store.X, data.Y)
    linear = XMCClassifier(head="linear", progress=False).fit(data.X, data.Y)
    with pytest.raises(InputError, match="streams to the network heads"):
        linear.predict(store.X)


def test_cli_writes_each_split_as_a_store(tmp_path, capsys):
    folder = tmp_path / "Toy"
    folder.mkdir()
    (folder / "toy_train.txt").write_bytes(b"3 3 2\n0 0:1\n0,1 2:1\n1 1:0.5\n")
    (folder / "toy_test.txt").write_bytes(b"1 3 2\n1 1:1\n")
    assert main(["data", "shard", str(folder), "--out", str(tmp_path / "out"), "--rows-per-shard", "2"]) == 0
    train = open_shards(tmp_path / "out" / "train")
    assert (train.n_rows, train.n_shards, open_shards(tmp_path / "out" / "test").n_rows) == (3, 2, 1)
    assert train.load().Y.toarray().tolist() == [[1, 0], [1, 1], [0, 1]]
    (tmp_path / "file").write_text("x")
    assert main(["data", "shard", str(folder), "--out", str(tmp_path / "file")]) == 2
    assert "cannot make the shard folder" in capsys.readouterr().err


def test_a_dense_head_starting_from_label_priors_reads_a_store(data, store):
    settings = dict(head="dense", hidden=(8,), epochs=1, progress=False, head_options={"prior_bias": True})
    clf = XMCClassifier(**settings).fit(store.X, store.Y)
    assert clf.predict_topk(store.X)[0].shape[0] == data.X.shape[0]


def test_bad_settings_with_a_store_are_one_error(store):
    with pytest.raises(InputError):
        XMCClassifier(head="dense", n_models="2", progress=False).fit(store.X, store.Y)


def test_a_boolean_mask_is_not_taken_for_row_ids(store):
    with pytest.raises(IndexError, match="not a mask"):
        store.X[np.ones(store.n_rows, dtype=bool)]


def test_a_write_that_stopped_part_way_can_be_written_over(data, tmp_path):
    def blocks():
        yield data.X[:60], data.Y[:60]
        yield data.X[60:], data.Y[60:, :3]  # a block of other label width: refused part-way

    folder = tmp_path / "store"
    with pytest.raises(InputError):
        write_shards(blocks(), folder, rows_per_shard=50)
    assert not (folder / "manifest.json").exists()
    store = open_shards(write_shards(data, folder, rows_per_shard=50))
    assert store.n_rows == data.X.shape[0]

"""The PIFA retriever's pruned postings and its sparse shortlist: each feature keeps its largest
label weights only; past DENSE_UP_TO labels the shortlist comes from the sparse product's
stored entries and agrees with the dense path (same scores, labels up to ties), and the
shortlist-restricted scores still equal full scoring."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc.data import make_realistic
from holoxmc.errors import InputError
from holoxmc.models.rerank import model as rerank_model
from holoxmc.models.rerank import kernels
from holoxmc.models.rerank.kernels import dense_product, label_margins, product_top
from holoxmc.models.rerank.model import RerankModel
from holoxmc.sparse import in_threads, l2_rows, sparse_row_top, top_columns
from holoxmc.models.rerank import fit as rerank_fit
from holoxmc.models.rerank.fit import RerankConfig, fit_rerank, pifa_centroids, pifa_index


@pytest.fixture(scope="module")
def data():
    return make_realistic(500, 60, 200, n_test=120, seed=5)


def sparse_copy(model: RerankModel, monkeypatch, block: int | None = None) -> RerankModel:
    """The same model, built as past DENSE_UP_TO labels (sparse retrieval, weight rows only),
    its index in column blocks of ``block`` labels (``None``: the default)."""
    monkeypatch.setattr(rerank_model, "DENSE_UP_TO", 0)
    if block is not None:
        monkeypatch.setattr(rerank_model, "INDEX_BLOCK_LABELS", block)
    copy = RerankModel(sp.csr_matrix(model.centroids_t.T), model.weights, model.bias, model.shortlist, model.alpha,
                       always=model.always)
    assert copy._sparse_retrieval and copy._weights is None
    assert len(copy._index) == (1 if block is None else -(-model.n_labels // block))
    return copy


def test_the_pifa_index_keeps_each_features_largest_weights(data):
    train, _ = data
    X, Y = l2_rows(train.X), sp.csr_matrix(train.Y)
    full = sp.csr_matrix(pifa_centroids(X, Y).T)  # (D, L): a row per feature
    np.testing.assert_allclose(pifa_index(X, Y).toarray(), full.toarray(), rtol=1e-5, atol=1e-7)
    pruned = pifa_index(X, Y, postings=5)
    lengths = np.diff(pruned.indptr)
    assert lengths.max() == 5 and np.diff(full.indptr).max() > 5
    for feature in range(full.shape[0]):
        weights = full.data[full.indptr[feature]:full.indptr[feature + 1]]
        kept = pruned.data[pruned.indptr[feature]:pruned.indptr[feature + 1]]
        assert len(kept) == min(5, len(weights))
        np.testing.assert_allclose(np.sort(kept), np.sort(weights)[len(weights) - len(kept):], rtol=1e-5)
    assert (pifa_index(X, Y, postings=10**6) != pifa_index(X, Y)).nnz == 0


@pytest.mark.parametrize("postings", [0, 5])
def test_the_pifa_index_built_in_blocks_equals_one_product_exactly(data, postings):
    train, _ = data
    X, Y = l2_rows(train.X), sp.csr_matrix(train.Y)
    product = sp.csr_matrix(sp.csr_matrix(X.T) @ sp.csr_matrix(Y, dtype=np.float32), dtype=np.float32)
    squares = np.bincount(product.indices, weights=np.square(product.data, dtype=np.float64), minlength=Y.shape[1])
    product.data *= (1.0 / np.sqrt(np.where(squares > 0, squares, 1.0))).astype(np.float32)[product.indices]
    rerank_fit._keep_largest(product, postings)  # the reference: one product, normalised, pruned
    product.sort_indices()
    for block_entries in (1, 500, 1 << 24):  # a block per label and feature; a few; one
        index = pifa_index(X, Y, postings, block_entries=block_entries)
        assert index.shape == product.shape
        np.testing.assert_array_equal(index.indptr, product.indptr)
        np.testing.assert_array_equal(index.indices, product.indices)
        np.testing.assert_array_equal(index.data, product.data)  # bit for bit


def test_tied_weights_keep_the_lower_labels_whatever_the_blocks():
    """Labels whose only positive is the same row have equal centroids: a feature keeps the
    lowest of them, in one block or many."""
    X = sp.csr_matrix(np.array([[1, 2, 0], [0, 1, 1]], np.float32))
    Y = sp.csr_matrix(np.array([[0, 1, 1, 1, 1, 0], [1, 0, 0, 0, 0, 1]], np.float32))
    for block_entries in (1, 2, 10**6):
        index = pifa_index(X, Y, postings=2, block_entries=block_entries)
        assert sorted(index[0].indices.tolist()) == [1, 2]  # labels 1-4 tie on feature 0
        assert sorted(index[2].indices.tolist()) == [0, 5]


def test_a_fit_prunes_the_pifa_postings_only(data):
    train, _ = data
    model = fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=8, alpha=0.5, postings=4))
    assert np.diff(model.centroids_t.indptr).max() == 4
    clustered = fit_rerank(train.X, train.Y, RerankConfig(shortlist=8, alpha=0.5, postings=4, retriever="clusters",
                                                          clusters=6, beam=3))
    assert np.diff(clustered.centroids_t.indptr).max() > 4


def test_sparse_row_top_equals_the_dense_top():
    rng = np.random.default_rng(0)
    dense = rng.random((30, 50)).astype(np.float32) * (rng.random((30, 50)) < 0.15)
    dense[3] = 0.0  # a row with nothing stored: filled with the lowest columns
    dense[4] = 0.0
    dense[4, 2:4] = 0.5  # fewer stored entries than k
    cols, vals = sparse_row_top(sp.csr_matrix(dense), 6)
    best = top_columns(dense, 6)
    np.testing.assert_allclose(vals, np.take_along_axis(dense, best, axis=1))
    np.testing.assert_allclose(vals, np.take_along_axis(dense, cols, axis=1))
    assert cols[3].tolist() == [0, 1, 2, 3, 4, 5] and cols[4].tolist() == [2, 3, 0, 1, 4, 5]
    assert all(len(set(row)) == 6 for row in cols.tolist())


def test_sparse_row_top_keeps_the_lowest_tied_columns_whatever_their_order():
    columns = np.array([9, 2, 7, 4, 0, 5, 8])
    values = np.array([5, 3, 3, 3, 3, 1, 3], np.float32)  # five entries tie at 3 across the 3rd place
    rng = np.random.default_rng(0)
    for _ in range(20):
        order = rng.permutation(len(columns))
        row = sp.csr_matrix((values[order], columns[order], [0, len(columns)]), shape=(1, 10))
        cols, vals = sparse_row_top(row, 3)
        assert cols.tolist() == [[9, 0, 2]] and vals.tolist() == [[5.0, 3.0, 3.0]]


def test_sparse_shortlists_do_not_depend_on_the_index_blocks(monkeypatch):
    rng = np.random.default_rng(0)
    half = sp.random(30, 40, density=0.3, random_state=1, dtype=np.float32)
    centroids = sp.vstack([half, half], format="csr")  # labels 30-59 copy labels 0-29: every score tied in pairs
    X = l2_rows(sp.csr_matrix(rng.random((50, 40), dtype=np.float32) * (rng.random((50, 40)) < 0.3)))
    model = RerankModel(centroids, sp.csr_matrix((40, 60), dtype=np.float32), np.zeros(60, np.float32), 11, 0.0)
    runs = [sparse_copy(model, monkeypatch, block).shortlists(X) for block in (None, 7, 16)]
    for labels, scores in runs[1:]:
        np.testing.assert_array_equal(labels, runs[0][0])
        np.testing.assert_array_equal(scores, runs[0][1])
    split_pairs = sum((row[-1] + 30) % 60 not in row for row in runs[0][0].tolist())
    assert split_pairs > 10  # rows whose last label's tied twin is left off: the tie-break decided


@pytest.mark.parametrize("entries, block", [(1 << 24, None), (40, None), (1 << 24, 7), (40, 16)])
def test_sparse_shortlists_agree_with_the_dense_path(data, monkeypatch, entries, block):
    train, test = data
    model = fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=12, alpha=0.5, postings=20))
    X = l2_rows(test.X)
    dense_labels, dense_scores = model.shortlists(X)
    sparse = sparse_copy(model, monkeypatch, block)  # block: the index in column blocks of that many labels
    assert (sparse.centroids_t != model.centroids_t).nnz == 0
    monkeypatch.setattr(rerank_model, "SPARSE_CHUNK_ENTRIES", entries)  # many small chunks
    labels, scores = sparse.shortlists(X)
    np.testing.assert_allclose(scores, dense_scores, rtol=1e-6, atol=1e-7)
    retriever = np.asarray((X @ model.centroids_t).toarray())
    np.testing.assert_allclose(np.take_along_axis(retriever, labels, axis=1), scores, rtol=1e-6, atol=1e-7)
    assert np.mean(labels == dense_labels) > 0.95  # only tied labels may differ
    # shortlist-restricted scores equal full scoring on the shortlisted labels
    shortlisted, mixed = sparse.shortlist_scores(test.X)
    np.testing.assert_allclose(mixed, np.take_along_axis(sparse.full_scores(test.X), shortlisted, axis=1),
                               rtol=1e-5, atol=1e-6)
    same = np.all(labels == dense_labels, axis=1)  # rows without ties at the shortlist's end
    assert same.mean() > 0.8
    np.testing.assert_allclose(sparse.predict_topk(test.X, 5)[1][same], model.predict_topk(test.X, 5)[1][same],
                               rtol=1e-5, atol=1e-6)


def test_product_top_is_the_top_of_scipys_product_in_any_blocks():
    """The compiled product-and-select equals scipy's product then :func:`sparse_row_top`
    (the scores summed in scipy's order), ties (half-integer values) the lower column first, rows with fewer
    scores than k filled with their lowest unscored columns, for any column blocks."""
    rng = np.random.default_rng(0)
    for trial in range(60):
        n, D, L = int(rng.integers(1, 30)), int(rng.integers(1, 40)), int(rng.integers(1, 200))
        X = sp.random(n, D, density=rng.uniform(0.01, 0.5), format="csr", dtype=np.float32, random_state=rng)
        C = sp.random(D, L, density=rng.uniform(0.01, 0.5), format="csr", dtype=np.float32, random_state=rng)
        if trial % 2:
            X.data, C.data = np.round(X.data * 2) / 2 + 0.5, np.round(C.data * 2) / 2 + 0.5
        k, width = int(rng.integers(1, L + 1)), int(rng.integers(1, L + 1))
        blocks = [sp.csr_matrix(C[:, start:start + width]) for start in range(0, L, width)]
        labels, scores = product_top(X, blocks, range(0, L, width), k)
        expected = sparse_row_top(sp.csr_matrix(X @ C), k)
        np.testing.assert_array_equal(labels, expected[0])
        np.testing.assert_allclose(scores, expected[1], rtol=1e-6, atol=0)  # equal where scipy sums without FMA


def test_dense_product_is_scipys_product_in_any_blocks():
    """The compiled dense product equals scipy's ``(X @ M).toarray()`` (its sums, in its order),
    for any column blocks, with empty rows and a row's repeated column added up."""
    rng = np.random.default_rng(1)
    for _ in range(40):
        n, D, L = int(rng.integers(1, 30)), int(rng.integers(1, 40)), int(rng.integers(1, 200))
        X = sp.random(n, D, density=rng.uniform(0.0, 0.5), format="csr", dtype=np.float32, random_state=rng)
        M = sp.random(D, L, density=rng.uniform(0.01, 0.5), format="csr", dtype=np.float32, random_state=rng)
        width = int(rng.integers(1, L + 1))
        blocks = [sp.csr_matrix(M[:, start:start + width]) for start in range(0, L, width)]
        np.testing.assert_allclose(dense_product(X, blocks, range(0, L, width), L), (X @ M).toarray(),
                                   rtol=1e-6, atol=0)  # equal where scipy sums without FMA
    X = sp.csr_matrix((np.array([1.0, 2.0], np.float32), np.array([1, 1]), np.array([0, 2])), shape=(1, 3))
    M = sp.csr_matrix(np.array([[0, 1], [1, 0], [0, 0]], np.float32))
    assert dense_product(X, [M], [0], 2).tolist() == [[3.0, 0.0]]  # 1 + 2 in column 1
    with pytest.raises(InputError, match="features"):
        dense_product(X, [sp.csr_matrix(M.T)], [0], 3)
    with pytest.raises(InputError, match="do not fit"):
        dense_product(X, [M], [1], 2)
    assert dense_product(X[:0], [M], [0], 2).shape == (0, 2)


def test_the_models_dense_scores_are_the_same_compiled_or_by_scipy(data, monkeypatch):
    """Every label's retriever scores, margins and mixed scores (the rule's and
    ``decision_function``'s input), and the shortlists, do not depend on which of the two
    computes the dense products (COMPILED_PRODUCT), for float32 or float64 rows."""
    train, test = data
    model = fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=12))
    X = l2_rows(sp.csr_matrix(test.X))
    outputs = []
    for entries, rows in itertools.product((0, 1 << 40), (X, sp.csr_matrix(X, dtype=np.float64))):
        monkeypatch.setattr(rerank_model, "COMPILED_PRODUCT", {"entries": entries, "labels": entries})
        outputs.append((model.full_scores(rows), model.retriever_scores(rows), *model.shortlists(rows)))
    for values in zip(*outputs):
        for other in values[1:]:
            np.testing.assert_allclose(other, values[0], rtol=1e-6, atol=0)


@pytest.mark.parametrize("threads", [1, 3])
def test_sparse_margins_are_the_dense_margins_at_any_thread_count(data, monkeypatch, threads):
    """Past DENSE_UP_TO labels the margins are the compiled per-row dot products: the dense
    path's values, and bit for bit the same on one thread and on several."""
    train, test = data
    model = fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=12, alpha=0.5))
    X = l2_rows(sp.vstack([test.X] * 3, format="csr"))
    labels = model.shortlists(X)[0]
    dense = model.margins(X, labels)
    sparse = sparse_copy(model, monkeypatch)
    alone = sparse.margins(X, labels, threads=1)
    np.testing.assert_allclose(alone, dense, rtol=1e-5, atol=1e-6)
    chunks = []
    monkeypatch.setattr(kernels, "label_margins", lambda R, *rest: chunks.append(R.shape[0]) or label_margins(R, *rest))
    np.testing.assert_array_equal(sparse.margins(X, labels, threads=threads), alone)
    assert len(chunks) > 1 and sum(chunks) == X.shape[0]  # the rows spread over several chunks


def test_kernels_refuse_disagreeing_shapes_and_add_repeated_columns():
    X = sp.csr_matrix((np.array([1.0, 2.0], np.float32), np.array([1, 1]), np.array([0, 2])), shape=(1, 3))
    W = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 1]], np.float32))
    assert label_margins(X, W, np.array([[0, 1]])).tolist() == [[3.0, 0.0]]  # 1 + 2 in column 1
    labels, scores = product_top(X, [sp.csr_matrix(W.T)], [0], 2)
    assert labels.tolist() == [[0, 1]] and scores.tolist() == [[3.0, 0.0]]
    assert product_top(X, [sp.csr_matrix(W.T)], [0], 0)[0].shape == (1, 0)
    with pytest.raises(InputError, match="features"):
        product_top(X, [sp.csr_matrix(W)], [0], 2)
    with pytest.raises(InputError, match="labels must lie"):
        label_margins(X, W, np.array([[2, 0]]))


@pytest.mark.parametrize("threads", [1, 3])
def test_sparse_shortlists_on_threads_equal_one_thread(data, monkeypatch, threads):
    train, test = data
    sparse = sparse_copy(fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=12, alpha=0.5, postings=20)), monkeypatch, 16)
    X = l2_rows(sp.vstack([test.X] * 3, format="csr"))
    alone = sparse.shortlists(X, threads=1)
    monkeypatch.setattr(rerank_model, "SPARSE_CHUNK_ENTRIES", 40)  # many chunks
    chunks = []
    monkeypatch.setattr(kernels, "product_top", lambda R, *rest: chunks.append(R.shape[0]) or product_top(R, *rest))
    torch.set_num_threads(threads)  # conftest's autouse fixture restores it
    labels, scores = sparse.shortlists(X)  # threads=None: torch's
    assert len(chunks) > 10 and sum(chunks) == X.shape[0]
    np.testing.assert_array_equal(labels, alone[0])
    np.testing.assert_array_equal(scores, alone[1])


def test_in_threads_runs_every_item_and_raises_the_first_error():
    seen: list[int] = []
    in_threads(seen.append, list(range(50)), threads=4)
    assert sorted(seen) == list(range(50))
    meet = threading.Barrier(2, timeout=10)  # broken (an error) unless two items run at once
    idents: set[int] = set()

    def together(item: int) -> None:
        idents.add(threading.get_ident())
        if item < 2:
            meet.wait()
    in_threads(together, list(range(6)), threads=2)
    assert len(idents) == 2

    def fail(item: int) -> None:
        if item == 7:
            raise InputError("item 7")
    with pytest.raises(InputError, match="item 7"):
        in_threads(fail, list(range(20)), threads=3)


def test_negative_values_take_the_dense_path(monkeypatch):
    """A row with a negative feature: an unstored label (score 0) outranks a stored negative one."""
    monkeypatch.setattr(rerank_model, "DENSE_UP_TO", 0)
    centroids = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], np.float32))
    model = RerankModel(centroids, sp.csr_matrix((2, 3), dtype=np.float32), np.zeros(3, np.float32), 1, 0.0)
    assert model._sparse_retrieval
    labels, scores = model.shortlists(sp.csr_matrix(np.array([[-1.0, 0.0], [1.0, 0.0]], np.float32)))
    assert scores.ravel().tolist() == [0.0, 1.0] and labels[0, 0] in (1, 2) and labels[1, 0] == 0
    negative = RerankModel(-centroids, sp.csr_matrix((2, 3), dtype=np.float32), np.zeros(3, np.float32), 1, 0.0)
    assert not negative._sparse_retrieval


def test_negative_postings_are_refused():
    with pytest.raises(InputError, match="postings"):
        RerankConfig(postings=-1)


def test_alpha_is_chosen_on_at_most_alpha_rows_validation_rows(data, monkeypatch):
    train, test = data
    scored: list[int] = []
    shortlists = RerankModel.shortlists
    monkeypatch.setattr(RerankModel, "shortlists",
                        lambda self, X, *a, **k: scored.append(X.shape[0]) or shortlists(self, X, *a, **k))
    monkeypatch.setattr(rerank_fit, "ALPHA_ROWS", 50)
    monkeypatch.setattr(rerank_model, "BLOCK_ENTRIES", 60 * 30)  # batches of 30 rows: the cap cuts one
    model = fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=12), test.X, test.Y)
    assert model.alpha in rerank_fit.ALPHAS
    assert scored[-2:] == [30, 20]  # the validation rows scored: 50 of the 120


def test_a_negative_value_sends_a_large_batch_to_dense_blocks_of_bounded_size(data, monkeypatch):
    train, test = data
    model = fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=12, alpha=0.5))
    sparse = sparse_copy(model, monkeypatch)
    monkeypatch.setattr(rerank_model, "BLOCK_ENTRIES", 60 * 16)  # dense blocks of 16 rows x 60 labels
    widths: list[int] = []
    scores = RerankModel.retriever_scores
    monkeypatch.setattr(RerankModel, "retriever_scores", lambda self, X, *a: widths.append(X.shape[0]) or scores(self, X, *a))
    X = l2_rows(test.X)
    X.data[0] = -X.data[0]
    labels, got = sparse.shortlists(X)  # 120 rows in one call, as a sparse batch of 1024 would come
    assert widths == [16]  # the 16 rows holding the negative value: dense; the other sub-batches: sparse
    retriever = np.asarray((X @ model.centroids_t).toarray())
    np.testing.assert_allclose(got, np.take_along_axis(retriever, top_columns(retriever, 12), axis=1), rtol=1e-6,
                               atol=1e-7)


def test_a_prior_set_after_construction_is_not_ignored(data, monkeypatch):
    train, test = data
    sparse = sparse_copy(fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=5, alpha=0.5)), monkeypatch)
    sparse.prior = np.zeros(sparse.n_labels, np.float32)
    sparse.prior[7] = 100.0  # outranks every PIFA score
    labels, _ = sparse.shortlists(l2_rows(test.X))
    assert np.all(labels[:, 0] == 7)


def test_empty_rows_and_batches_on_the_sparse_path(data, monkeypatch):
    train, _ = data
    sparse = sparse_copy(fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=6, alpha=0.5)), monkeypatch)
    X = sp.csr_matrix((3, sparse.n_features), dtype=np.float32)
    labels, scores = sparse.shortlists(X)
    assert labels.tolist() == [[0, 1, 2, 3, 4, 5]] * 3 and not scores.any()
    labels, scores = sparse.shortlists(X[:0])
    assert labels.shape == (0, 6) and scores.shape == (0, 6)
    assert sparse.predict_topk(X[:0], 3)[0].shape == (0, 3)


@pytest.mark.parametrize("block", [None, 8])
def test_a_model_past_dense_up_to_saves_and_loads(data, monkeypatch, block):
    train, test = data
    model = fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=10, alpha=0.5))
    sparse = sparse_copy(model, monkeypatch, block)
    tensors = sparse.tensors()
    for name, tensor in model.tensors().items():  # the blocks are stored as one (L, D) matrix
        assert tensors[name].equal(tensor), name
    assert sparse.parameter_counts() == model.parameter_counts()
    loaded = RerankModel.from_tensors(tensors, sparse.n_features, sparse.n_labels)
    assert loaded._sparse_retrieval and loaded._weights is None
    assert len(loaded._index) == len(sparse._index)
    assert (loaded.weights != model.weights).nnz == 0
    for a, b in zip(loaded.predict_topk(test.X, 5), sparse.predict_topk(test.X, 5)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(loaded.full_scores(test.X), model.full_scores(test.X), rtol=1e-5, atol=1e-6)


def test_l2_rows_decides_row_by_row_and_copies_nothing_for_unit_rows():
    rng = np.random.default_rng(3)
    unit = l2_rows(sp.random(4, 30, density=0.4, format="csr", random_state=3, dtype=np.float64))  # float64-normalised
    assert np.shares_memory(l2_rows(unit).data, unit.data)  # every row of unit length: no copy
    other = sp.csr_matrix(rng.random((2, 30)).astype(np.float32) * 3)
    mixed = l2_rows(sp.vstack([unit, other], format="csr"))
    np.testing.assert_array_equal(mixed[:4].toarray(), unit.toarray())  # a row's values do not depend on its batch
    np.testing.assert_allclose(np.linalg.norm(mixed.toarray(), axis=1), 1.0, rtol=1e-6)


def test_with_scorers_shares_the_retriever_and_checks_the_sizes(data, monkeypatch):
    train, test = data
    model = fit_rerank(train.X, train.Y, RerankConfig(frequent_labels=0, shortlist=10, alpha=0.5))
    sparse = sparse_copy(model, monkeypatch, 16)
    other = sparse.with_scorers(2 * model.weights, 2 * model.bias, 0.75)
    assert all(a is b for a, b in zip(other._index, sparse._index)) and other.alpha == 0.75
    assert sparse.alpha == 0.5 and (sparse.weights != model.weights).nnz == 0  # the original is unchanged
    X, labels = l2_rows(test.X), np.tile(np.arange(4), (test.X.shape[0], 1))
    np.testing.assert_allclose(other.margins(X, labels), 2 * sparse.margins(X, labels), rtol=1e-5, atol=1e-6)
    with pytest.raises(InputError, match="sizes"):
        sparse.with_scorers(model.weights[:, :5], model.bias[:5], 0.5)
    with pytest.raises(InputError, match="alpha"):
        sparse.with_scorers(model.weights, model.bias, 1.5)


@pytest.mark.parametrize("kind", ["dense", "knn", "sparse"])
def test_training_shortlists_on_threads_equal_one_thread_and_the_ray_task(data, monkeypatch, kind):
    """Several batches on three threads (a kNN row never its own neighbour, whichever batch
    holds it) give the shortlists of one thread and of the Ray path's row-block task."""
    from holoxmc.models.rerank import fit as rerank_fit

    train, _ = data
    X, Y = l2_rows(sp.vstack([train.X] * 3, format="csr")), sp.csr_matrix(sp.vstack([train.Y] * 3), dtype=np.float32)
    centroids = pifa_centroids(X, Y)
    empty = sp.csc_matrix((X.shape[1], Y.shape[1]), dtype=np.float32)
    knn = {"neighbours": X, "neighbour_labels": Y, "knn": 5} if kind == "knn" else {}
    if kind == "sparse":
        monkeypatch.setattr(rerank_model, "DENSE_UP_TO", 0)
        monkeypatch.setattr(rerank_model, "INDEX_BLOCK_LABELS", 16)
    else:
        monkeypatch.setattr(rerank_model, "BLOCK_ENTRIES", 3 * 60 * 100)  # dense batches of 100 rows
    retriever = RerankModel(centroids, empty, np.zeros(Y.shape[1], np.float32), 8, 0.0, **knn)
    assert X.shape[0] > retriever.batch_rows()  # several batches
    one = rerank_fit.training_shortlists(retriever, X, threads=1)
    three = rerank_fit.training_shortlists(retriever, X, threads=3)
    np.testing.assert_array_equal(rerank_fit.training_shortlists(retriever, X), one)  # every core by default
    task = rerank_fit._shortlist_block(rerank_fit._Block(0, X.shape[0]), (retriever, X, retriever.shortlist))
    assert one.dtype == three.dtype == task.dtype == np.int32 and one.shape == (X.shape[0], 8)
    np.testing.assert_array_equal(three, one)
    np.testing.assert_array_equal(task, one)
    for row in (0, 99, 100, 250, X.shape[0] - 1):  # each row alone, excluding itself: batch offsets are right
        alone = retriever.shortlists(X[row:row + 1], np.array([row]) if kind == "knn" else None, threads=1)[0]
        np.testing.assert_array_equal(one[row], alone[0])
    with pytest.raises(InputError, match="workers"):
        rerank_fit.training_shortlists(retriever, X, workers=0)

"""The re-rank model's shortlist rule: its value for given label counts, an explicit
``shortlist`` wins over it, the fitted and saved model holds the resolved number, resumed
blocks are fingerprinted by it, and bad values are refused as one InputError; the training
shortlists are the shortlists' best labels, cut past the entry budget."""

from __future__ import annotations

import math

import numpy as np
import pytest

from holoxmc import presets
from holoxmc.data import make_realistic
from holoxmc.errors import InputError
from holoxmc.train.checkpoint import load_state_dict_file
from holoxmc.sparse import l2_rows
from holoxmc.models.rerank import fit as rerank_fit
from holoxmc.models.rerank.fit import BLOCK_FILE, RerankConfig, fit_rerank, shortlist_rule, train_shortlist_rule, \
    training_shortlists

#: Small constants, so that a tiny set lands between the floor and the cap.
SMALL_RULE = {"per_row": 3, "floor": 4, "cap": 12}


@pytest.fixture(scope="module")
def data():
    return make_realistic(300, 40, 200, n_test=60, seed=5, labels_per_point=3)


@pytest.fixture
def small_rule(monkeypatch):
    for key, value in SMALL_RULE.items():
        monkeypatch.setitem(presets.RERANK_SHORTLIST, key, value)


def mean_labels(Y) -> float:
    return Y.nnz / Y.shape[0]


def test_rule_values_for_given_label_counts():
    # the documented constants: 16 labels a row, floor 50, cap 500
    assert presets.RERANK_SHORTLIST == {"per_row": 16, "floor": 50, "cap": 500}
    assert presets.RERANK_BUDGETS == {"train_entries": 100_000_000, "weight_entries": 500_000_000}
    assert shortlist_rule(983, 19.05) == 305  # Delicious's training rows
    assert shortlist_rule(1000, 11.56) == 185  # ceil(16 x 11.56)
    assert shortlist_rule(159, 2.39) == 50  # Bibtex: the floor
    assert shortlist_rule(10_000, 3.42) == 55
    assert shortlist_rule(100_000, 80.0) == 500  # the cap
    assert shortlist_rule(30, 19.0) == 30  # never more than L
    assert shortlist_rule(5, 0.0) == 5


def test_rule_grows_with_labels_per_row_and_stays_in_bounds():
    sizes = [shortlist_rule(2_000, m) for m in np.linspace(0, 60, 121)]
    assert sizes == sorted(sizes)
    assert min(sizes) == presets.RERANK_SHORTLIST["floor"] and max(sizes) == presets.RERANK_SHORTLIST["cap"]


def test_fit_resolves_the_rule_from_the_training_labels(data, small_rule):
    train, _ = data
    wanted = math.ceil(SMALL_RULE["per_row"] * mean_labels(train.Y))
    assert SMALL_RULE["floor"] < wanted <= SMALL_RULE["cap"]  # neither bound decides here
    assert RerankConfig().shortlist is None
    assert fit_rerank(train.X, train.Y, RerankConfig(alpha=0.5)).shortlist == wanted
    few = fit_rerank(train.X[:40], train.Y[:40], RerankConfig(alpha=0.5))  # other rows, its own mean
    assert few.shortlist == min(SMALL_RULE["cap"], max(SMALL_RULE["floor"],
                                                       math.ceil(SMALL_RULE["per_row"] * mean_labels(train.Y[:40]))))


def test_an_explicit_shortlist_wins_over_the_rule(data, small_rule):
    train, _ = data
    for explicit in (2, 25):  # below the floor, above the cap
        assert fit_rerank(train.X, train.Y, RerankConfig(shortlist=explicit, alpha=0.5)).shortlist == explicit


def test_the_saved_model_records_the_resolved_shortlist(data, small_rule, tmp_path):
    from holoxmc.estimator import XMCClassifier

    train, test = data
    clf = XMCClassifier(head="rerank", progress=False).fit(train.X, train.Y)
    resolved = clf.rerank_.shortlist
    assert resolved == math.ceil(SMALL_RULE["per_row"] * mean_labels(train.Y))
    clf.save(tmp_path / "m")
    with pytest.MonkeyPatch.context() as later:  # the rule changes after the save: the model keeps its number
        later.setitem(presets.RERANK_SHORTLIST, "per_row", 1)
        loaded = XMCClassifier.load(tmp_path / "m")
        assert loaded.rerank_.shortlist == resolved
        np.testing.assert_array_equal(clf.predict_topk(test.X, 5)[0], loaded.predict_topk(test.X, 5)[0])
    explicit = XMCClassifier(head="rerank", head_options={"shortlist": 3}, progress=False).fit(train.X, train.Y)
    explicit.save(tmp_path / "e")
    assert XMCClassifier.load(tmp_path / "e").rerank_.shortlist == 3


def test_resumed_blocks_are_fingerprinted_by_the_resolved_shortlist(data, small_rule, tmp_path):
    train, _ = data
    model = fit_rerank(train.X, train.Y, RerankConfig(alpha=0.5, label_block=64), run_dir=tmp_path)
    block = tmp_path / BLOCK_FILE.format(start=0, stop=train.Y.shape[1])
    _, metadata = load_state_dict_file(block)
    assert f'"shortlist": {model.shortlist}' in metadata["fingerprint"]


@pytest.mark.parametrize("bad", [0, -5, 2.5, "50", True, float("nan")])
def test_bad_shortlists_are_one_input_error(bad, data):
    from holoxmc.estimator import XMCClassifier

    train, _ = data
    with pytest.raises(InputError, match="shortlist"):
        RerankConfig(shortlist=bad)
    with pytest.raises(InputError, match="shortlist"):
        XMCClassifier(head="rerank", head_options={"shortlist": bad}, progress=False).fit(train.X, train.Y)


@pytest.mark.parametrize("path", ["dense", "sparse", "clusters"])
def test_training_shortlists_are_the_best_labels_of_the_shortlists(data, monkeypatch, path):
    from holoxmc.models.rerank import model as rerank_model

    train, _ = data
    if path == "sparse":
        monkeypatch.setattr(rerank_model, "DENSE_UP_TO", 0)
    config = RerankConfig(shortlist=12, alpha=0.5, frequent_labels=0, **({"retriever": "clusters", "clusters": 5, "beam": 2}
                                                     if path == "clusters" else {}))
    model = fit_rerank(train.X, train.Y, config)
    assert model._sparse_retrieval == (path == "sparse") and (model.matcher is not None) == (path == "clusters")
    X = l2_rows(train.X)
    whole = training_shortlists(model, X)
    assert whole.shape == (X.shape[0], 12)
    np.testing.assert_array_equal(training_shortlists(model, X, size=3), whole[:, :3])
    np.testing.assert_array_equal(training_shortlists(model, X, size=50), whole)  # never more than the shortlist
    for bad in (0, -2, 2.5):
        with pytest.raises(InputError, match="training shortlist size"):
            training_shortlists(model, X, size=bad)


def test_the_training_shortlist_is_cut_past_the_entry_budget(data, monkeypatch, tmp_path, shortlist_widths):
    train, _ = data
    n = train.X.shape[0]
    assert train_shortlist_rule(12, n) == 12  # far under the budget: the whole shortlist
    monkeypatch.setitem(presets.RERANK_BUDGETS, "train_entries", n * 5 + 7)
    assert train_shortlist_rule(12, n) == 5 and train_shortlist_rule(3, n) == 3
    assert train_shortlist_rule(12, 10 * presets.RERANK_BUDGETS["train_entries"]) == 1
    widths = shortlist_widths
    model = fit_rerank(train.X, train.Y, RerankConfig(shortlist=12, alpha=0.5, label_block=64, frequent_labels=0),
                       run_dir=tmp_path)
    assert widths == [5] and model.shortlist == 12  # scoring keeps the whole shortlist
    _, metadata = load_state_dict_file(tmp_path / BLOCK_FILE.format(start=0, stop=train.Y.shape[1]))
    assert '"train_shortlist": 5' in metadata["fingerprint"]
    fit_rerank(train.X, train.Y, RerankConfig(shortlist=12, train_shortlist=40, alpha=0.5, frequent_labels=0))  # explicit,
    assert widths[-1] == 12  # at most the shortlist


@pytest.mark.parametrize("bad", [0, -1, 2.5, "5"])
def test_bad_training_shortlists_are_one_input_error(bad):
    with pytest.raises(InputError, match="train_shortlist"):
        RerankConfig(train_shortlist=bad)


def test_each_label_keeps_at_most_its_largest_weights(data, monkeypatch):
    train, _ = data
    free = fit_rerank(train.X, train.Y, RerankConfig(shortlist=12, alpha=0.5, label_weights=10**9))
    counts = np.diff(free.weight_rows.indptr)
    assert counts.max() > 6  # the cap below binds
    capped = fit_rerank(train.X, train.Y, RerankConfig(shortlist=12, alpha=0.5, label_weights=6))
    assert np.diff(capped.weight_rows.indptr).max() <= 6
    for label in np.flatnonzero(counts > 6)[:20]:  # the same SVM, its 6 largest weights kept
        full = free.weight_rows[label].toarray().ravel()
        kept = capped.weight_rows[label]
        assert set(kept.indices) <= set(np.flatnonzero(full))
        np.testing.assert_array_equal(np.sort(np.abs(kept.data)), np.sort(np.abs(full))[-6:])
    assert rerank_fit.label_weights_rule(train.Y.shape[1]) > counts.max()  # the default cap does not bind here
    monkeypatch.setitem(presets.RERANK_BUDGETS, "weight_entries", 6 * train.Y.shape[1])
    np.testing.assert_array_equal(fit_rerank(train.X, train.Y, RerankConfig(shortlist=12, alpha=0.5)).weight_rows.data,
                                  capped.weight_rows.data)  # the rule: weight_entries / L
    with pytest.raises(InputError, match="label_weights"):
        RerankConfig(label_weights=0)

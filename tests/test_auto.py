"""``head="auto"`` / ``--model auto``: the model chosen on a validation split, within a budget."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

from holoxmc.cli import main
from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.auto import CANDIDATES

# small networks would need settings of their own; auto trains each candidate at its defaults,
# so the data is kept small instead
DATA = make_synthetic(300, 10, 40, n_test=80, seed=5)


@pytest.fixture(autouse=True)
def fc_on_any_rows(monkeypatch):
    """DATA's rows carry few labels, where the FC candidate does not train
    (``holoxmc.auto.skipped_by_rule``); these tests run the selection with both candidates."""
    from holoxmc.presets import FC_CANDIDATE

    monkeypatch.setitem(FC_CANDIDATE, "min_labels_per_row", 0.0)


@pytest.fixture(scope="module")
def chosen() -> XMCClassifier:
    """A selection in which every candidate trains (the FC candidate's labels-a-row rule off)."""
    from holoxmc.presets import FC_CANDIDATE

    train = DATA[0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(FC_CANDIDATE, "min_labels_per_row", 0.0)
        return XMCClassifier(head="auto", time_budget=1e6, progress=False).fit(train.X, train.Y)


def test_at_the_shipped_rule_fc_trains_where_rows_carry_many_labels(monkeypatch):
    """Without the fixture's override: rows of about 12 labels each are above FC_CANDIDATE's
    cut, so the FC candidate trains and is scored."""
    from holoxmc.presets import FC_CANDIDATE, fc_candidate_runs

    monkeypatch.undo()  # the shipped rule
    train, _ = make_synthetic(200, 40, 40, n_test=10, labels_per_point=12.0, seed=2)
    assert fc_candidate_runs(train.Y.nnz, train.Y.shape[0]) and FC_CANDIDATE["min_labels_per_row"] == 8.6
    clf = XMCClassifier(head="auto", time_budget=1e6, progress=False).fit(train.X, train.Y)
    assert next(trial for trial in clf.selection_ if trial.model == "fc").val_p1 is not None


def test_the_rule_reads_the_rows_fc_would_fit_on_not_the_validation_rows(monkeypatch):
    """With X_val given, the labels a row are the training rows' (those FC would fit on): a
    validation set of many labels a row does not make FC train on a training set of few."""
    from holoxmc.presets import FC_CANDIDATE

    train = DATA[0]
    X_fit, Y_fit = train.X[:240], sp.csr_matrix(train.Y[:240])
    Y_val = sp.csr_matrix(np.ones((60, train.Y.shape[1]), np.float32))  # every label on every row
    monkeypatch.setitem(FC_CANDIDATE, "min_labels_per_row", Y_fit.nnz / 240 + 1.0)
    clf = XMCClassifier(head="auto", time_budget=1e6, progress=False).fit(X_fit, Y_fit, train.X[240:], Y_val)
    assert next(trial for trial in clf.selection_ if trial.model == "fc").note.startswith("skipped (")


def test_the_fc_candidate_trains_only_where_rows_carry_many_labels(monkeypatch):
    """Below FC_CANDIDATE's labels a row the FC network is skipped with the rule in its note
    (whatever the budget), and the re-rank model is kept; at or above it, FC trains."""
    from holoxmc.presets import FC_CANDIDATE

    train = DATA[0]
    per_row = train.Y.nnz / train.Y.shape[0]
    monkeypatch.setitem(FC_CANDIDATE, "min_labels_per_row", per_row + 1.0)
    few = XMCClassifier(head="auto", time_budget=1e6, progress=False).fit(train.X, train.Y)
    fc = next(trial for trial in few.selection_ if trial.model == "fc")
    assert fc.val_p1 is None and fc.note.startswith("skipped (") and "labels a row" in fc.note
    assert few.head_ == "rerank"
    monkeypatch.setitem(FC_CANDIDATE, "min_labels_per_row", per_row / 2)
    many = XMCClassifier(head="auto", time_budget=1e6, progress=False).fit(train.X, train.Y)
    assert next(trial for trial in many.selection_ if trial.model == "fc").val_p1 is not None


def test_every_candidate_is_tried_and_the_best_on_validation_is_kept(chosen):
    trials = chosen.selection_
    assert [trial.model for trial in trials] == [name for name, _ in CANDIDATES]
    best = max(trials, key=lambda trial: trial.val_p1)
    assert best.note.startswith("chosen") and sum(trial.note.startswith("chosen") for trial in trials) == 1
    assert chosen.head_ == dict(CANDIDATES)[best.model]["head"]
    assert chosen.head == "auto" and chosen.fit_results_  # the parameters stay as given


def test_the_winner_is_made_a_model_of_every_row(chosen):
    from holoxmc.metrics import inverse_propensity

    train = DATA[0]
    assert chosen.n_labels_ == 10 and "on every row" in next(t for t in chosen.selection_ if "chosen" in t.note).note
    np.testing.assert_allclose(chosen.inv_prop_, inverse_propensity(train.Y, *chosen.propensity))


def test_a_network_winner_is_finished_with_one_epoch_on_every_row_not_trained_again(monkeypatch):
    """A network winner continues its selection run: one epoch from its best epoch's weights,
    on the training and held-out rows together, at the learning rate its schedule had at that
    epoch (annealed to zero over the epoch), with nothing held out; it is not trained from
    scratch a second time, and its scores change (it learnt the held-out rows)."""
    from dataclasses import replace

    from holoxmc import auto
    from holoxmc.models import registry
    dense = registry.family("dense")
    calls = []

    def spy(settings, plan, data):
        calls.append((settings, data, None if data.warm is None else data.warm.predict_topk(DATA[1].X, 5)[1]))
        return dense.fit(settings, plan, data)

    monkeypatch.setitem(registry.FAMILIES._built, "dense", replace(dense, fit=spy))
    monkeypatch.setattr(auto, "CANDIDATES", (("fc", {"head": "dense"}),))
    train = DATA[0]
    clf = XMCClassifier(head="auto", progress=False).fit(train.X, train.Y)
    assert clf.head_ == "dense" and clf.selection_[0].note.endswith("chosen, finished on every row (no second fit)")
    assert len(calls) == 2  # the selection run, then one finishing epoch
    (chosen, selected, _), (finishing, data, before) = calls
    assert selected.X_val is not None and data.X_val is None and data.X.shape[0] == train.X.shape[0]
    best, epochs = clf.fit_results_[0].best_epoch, chosen.train.epochs
    assert finishing.train.epochs == 1 and finishing.train.val_fraction == 0.0
    steps = -(-selected.X.shape[0] // chosen.train.batch_size)  # the selection run's steps per epoch
    assert chosen.train.schedule == "cosine" and best < epochs
    at_best = 0.5 * (1 + math.cos(math.pi * (steps * best - 1) / (steps * epochs)))  # its last step's rate
    assert finishing.train.lr == pytest.approx(chosen.train.lr * at_best)
    assert not np.allclose(clf.model_.predict_topk(DATA[1].X, 5)[1], before)


def test_a_network_whose_best_epoch_ended_its_schedule_is_kept_as_it_is():
    """A best epoch that was the schedule's last (its learning rate annealed to zero there)
    leaves nothing to finish: the selection run's network is kept, not trained at rate zero."""
    from holoxmc.models.registry import _finish_network

    train = DATA[0]
    clf = XMCClassifier(head="dense", hidden=(16,), epochs=2, progress=False).fit(train.X, train.Y)
    clf.fit_results_[0].best_epoch = 2
    held = np.zeros(train.X.shape[0], bool)
    held[-30:] = True
    assert _finish_network(clf, train.X, train.Y, held) is clf.model_


def test_the_rerank_winner_keeps_its_selection_scorers_and_the_alpha_it_chose():
    """The re-rank winner is not trained again: a label without a positive among the
    validation rows keeps the selection run's scorer weight for weight (a re-rank fit of the
    training rows with the mix weight chosen), a label with one trains again, and the index
    is every row's."""
    from holoxmc.models.rerank.fit import RerankConfig, pifa_index
    from holoxmc.sparse import l2_rows

    train = DATA[0]
    X, Y = sp.csr_matrix(train.X), sp.csr_matrix(train.Y)
    n = X.shape[0] - 4
    auto = XMCClassifier(head="auto", time_budget=0.0, progress=False).fit(X[:n], Y[:n], X[n:], Y[n:])
    assert auto.head_ == "rerank" and "finished on every row" in auto.selection_[0].note
    direct = XMCClassifier(head="rerank", head_options={"alpha": auto.model_.alpha,
                                                        "shortlist": auto.model_.shortlist}, progress=False)
    direct.fit(X[:n], Y[:n])
    kept = np.asarray(Y[n:].getnnz(axis=0)) == 0
    assert kept.any() and not kept.all()
    mine, theirs = auto.model_.weights.tocsc(), direct.model_.weights.tocsc()
    assert (mine[:, kept] != theirs[:, kept]).nnz == 0
    np.testing.assert_array_equal(auto.model_.bias[kept], direct.model_.bias[kept])
    assert (mine[:, ~kept] != theirs[:, ~kept]).nnz > 0  # trained again with the held rows
    index = pifa_index(l2_rows(sp.csr_matrix(X, dtype=np.float32)), Y, RerankConfig().postings)
    assert abs(auto.model_.centroids_t - index).max() < 1e-6


def test_a_rerank_winner_is_refit_with_the_alpha_it_chose():
    from types import SimpleNamespace

    from holoxmc.auto import refit_settings

    chosen = SimpleNamespace(head="rerank", model_=SimpleNamespace(alpha=0.75, shortlist=61))
    assert refit_settings(chosen) == {"head_options": {"alpha": 0.75, "shortlist": 61}}


def test_the_linear_refit_reuses_the_chosen_C():
    """A linear model chosen on validation retrains with the C its validation run chose."""
    from holoxmc.auto import refit_settings

    train = DATA[0]
    X_fit, Y_fit, X_val, Y_val = train.X[:240], train.Y[:240], train.X[240:], train.Y[240:]
    linear = XMCClassifier(head="linear", progress=False).fit(X_fit, Y_fit, X_val, Y_val)
    tried = [fit for fit in linear.fit_results_[0].history if "val" in fit]
    best = max(tried, key=lambda fit: fit["val"]["P@1"])
    assert refit_settings(linear) == {"head_options": {"C": float(best["C"])}}


def test_a_network_winner_trains_its_best_epoch_count_on_every_row():
    from types import SimpleNamespace

    from holoxmc.auto import refit_settings

    network = SimpleNamespace(head="dense", fit_results_=[SimpleNamespace(best_epoch=0)])
    assert refit_settings(network) == {"epochs": 1, "val_fraction": 0.0}


def test_a_zero_budget_trains_only_the_first_candidate():
    train = DATA[0]
    clf = XMCClassifier(head="auto", time_budget=0.0, progress=False).fit(train.X, train.Y)
    assert [trial.val_p1 is None for trial in clf.selection_] == [False, True]
    assert all("skipped (budget" in trial.note for trial in clf.selection_[1:])
    assert clf.head_ == "rerank"


def test_a_chosen_model_saves_as_the_winner_and_loads_identically(chosen, tmp_path):
    test = DATA[1]
    chosen.save(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["params"]["head"] == chosen.head_ and len(config["selection"]) == len(CANDIDATES)
    loaded = XMCClassifier.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.predict_topk(test.X)[0], chosen.predict_topk(test.X)[0])
    assert [t.model for t in loaded.selection_] == [t.model for t in chosen.selection_]


def test_a_tampered_selection_is_one_error(chosen, tmp_path):
    chosen.save(tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    config = json.loads(path.read_text())
    config["selection"] = [{"model": "linear"}]
    path.write_text(json.dumps(config))
    with pytest.raises(InputError, match="'selection' must be a list"):
        XMCClassifier.load(tmp_path / "m")


@pytest.mark.parametrize("params, message", [
    ({"hidden": (8,)}, "would be ignored"),
    ({"backbone": "cnn"}, "backbone 'fc'"),
    ({"time_budget": -1.0}, "time_budget"),
])
def test_settings_auto_would_not_use_are_refused(params, message):
    train = DATA[0]
    with pytest.raises(InputError, match=message):
        XMCClassifier(head="auto", progress=False, **params).fit(train.X, train.Y)


def test_the_cli_prints_what_it_tried(tmp_path, capsys, toy):
    run_dir = tmp_path / "auto"
    assert main(["train", str(toy), "--model", "auto", "--time-budget", "0", "--out", str(run_dir), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "val P@1" in out and "chosen, finished on every row" in out and "skipped (budget" in out
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert [trial["model"] for trial in metrics["selection"]] == [name for name, _ in CANDIDATES]
    assert main(["train", str(toy), "--model", "fc", "--time-budget", "3", "--out", str(tmp_path / "x")]) == 2
    assert "--time-budget applies to --model auto only" in capsys.readouterr().err


def test_a_network_candidate_trains_within_what_is_left_of_the_budget(monkeypatch):
    """The FC candidate gets the budget's remainder as its time limit (here none left: it
    stops after its first epoch, and the trial says so)."""
    from holoxmc import auto

    given: list[dict] = []

    def no_time_left(keywords, remaining, leader):
        given.append({"head": keywords["head"], "remaining": remaining})
        return {"time_limit": 0.0} if keywords["head"] == "dense" else {}

    monkeypatch.setattr(auto, "_limits", no_time_left)
    train = DATA[0]
    clf = XMCClassifier(head="auto", time_budget=1e6, progress=False).fit(train.X, train.Y)
    assert [entry["head"] for entry in given] == ["rerank", "dense"]
    assert 0 < given[1]["remaining"] < 1e6  # the budget less what the re-rank model took
    fc = clf.selection_[1]
    assert fc.val_p1 is not None and "stopped by the budget after epoch 1 of" in fc.note


def test_only_network_candidates_get_a_time_limit_and_the_leaders_score():
    from holoxmc.auto import Trial, _limits

    leader = Trial("rerank", 61.5, 1.0)
    assert _limits({"head": "dense"}, 12.0, leader) == {"time_limit": 12.0, "abandon_below": 61.5}
    assert _limits({"head": "dense"}, -3.0, None) == {"time_limit": 0.0}
    assert _limits({"head": "rerank"}, 12.0, leader) == {}


def test_a_network_candidate_that_cannot_catch_the_leader_is_abandoned(monkeypatch):
    """The FC candidate told to reach a score no network reaches stops after its third
    epoch (the first with two gains to extrapolate) and the trial says why."""
    from holoxmc import auto

    monkeypatch.setattr(auto, "_limits", lambda keywords, remaining, leader:
                        {"abandon_below": 100.0} if keywords["head"] == "dense" else {})
    train = DATA[0]
    clf = XMCClassifier(head="auto", time_budget=1e6, progress=False).fit(train.X, train.Y)
    fc = clf.selection_[1]
    assert fc.val_p1 is not None and "abandoned after epoch 3 of" in fc.note, fc.note


def test_the_rerank_winner_is_finished_on_every_row_not_fitted_twice(monkeypatch):
    """A re-rank winner is its selection run's model finished on the held-out rows: its
    scorers are the selection run's (one fit, not two), its index every row's, and a label
    whose only positives were held out gets a scorer (it is predicted for its own rows)."""
    from holoxmc.models.rerank import fit as rerank_fit

    calls = []
    original = rerank_fit.fit_rerank
    monkeypatch.setattr(rerank_fit, "fit_rerank", lambda *a, **k: calls.append(1) or original(*a, **k))
    train = DATA[0]
    X, Y = sp.csr_matrix(train.X), sp.lil_matrix(train.Y)
    n, last = X.shape[0] - 20, Y.shape[1] - 1
    Y[:, last] = 0
    Y[n:n + 3, last] = 1  # the last label: positives among the validation rows only
    Y = sp.csr_matrix(Y)
    clf = XMCClassifier(head="auto", time_budget=1e-9, progress=False)
    clf.fit(X[:n], Y[:n], X[n:], Y[n:])
    assert len(calls) == 1 and "finished on every row" in clf.selection_[0].note
    assert clf.model_.weight_rows[last].nnz > 0  # it got a scorer
    assert clf.model_.centroids_t[:, last].nnz > 0  # and is in the index


@pytest.mark.parametrize("head", ["rerank", "linear"])
def test_a_time_limit_is_refused_where_no_network_trains(head):
    train = DATA[0]
    with pytest.raises(InputError, match="time_limit"):
        XMCClassifier(head=head, time_limit=5.0).fit(train.X, train.Y)


def test_a_candidate_expected_to_overrun_the_budget_is_skipped_before_it_starts(monkeypatch):
    """The first candidate always runs; the next, whose expected seconds (the real estimate
    from the first's, scaled up so that it lies past the budget whatever this machine's load:
    a budget taken from a timed probe failed when two test processes shared the cores) would
    end past the budget, is skipped rather than started."""
    import holoxmc.auto as auto

    train, _ = make_synthetic(300, 12, 60, n_test=10, seed=1)
    real, estimates = auto.expected_seconds, []

    def far_past(seconds: list[float]) -> float:
        estimates.append(real(seconds))
        return 1e6 * max(estimates[-1], 1e-3)

    monkeypatch.setattr(auto, "expected_seconds", far_past)
    clf = XMCClassifier(head="auto", time_budget=600.0, progress=False).fit(train.X, train.Y)
    assert estimates and estimates[-1] > 0  # the real estimate was made from the first candidate's seconds
    assert clf.selection_[0].model == "rerank" and clf.selection_[0].val_p1 is not None
    assert all(trial.val_p1 is None and "more expected" in trial.note for trial in clf.selection_[1:])

"""Hostile inputs at the estimator's boundary (issue 35): each one is a single InputError
(CLI: one ``holoxmc: error:`` line, exit 2) before any training or allocation."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import scipy.sparse as sp

from holoxmc.cli import main
from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.settings import for_head
from holoxmc.train import Trainer

TINY = dict(hidden=(8,), dim=16, epochs=1, batch_size=16, lr=1e-2, dropout=0.0, seed=0, progress=False)


@pytest.fixture(scope="module")
def tiny():
    train, _ = make_synthetic(60, 10, 30, n_test=10, labels_per_point=1.5, seed=3)
    return train


@pytest.fixture(scope="module")
def fitted(tiny):
    return XMCClassifier(head="dense", **for_head("dense", TINY)).fit(tiny.X, tiny.Y)


@pytest.fixture
def no_training(monkeypatch):
    """Any training step is a test failure: the refusal must come before the work."""
    def refuse(*args, **kwargs):
        raise AssertionError("training started")
    monkeypatch.setattr(Trainer, "fit", refuse)


@pytest.mark.parametrize(
    "params, name",
    [
        ({"lr": math.inf}, "lr"),
        ({"lr": math.nan}, "lr"),
        ({"weight_decay": math.nan}, "weight_decay"),
        ({"weight_decay": math.inf}, "weight_decay"),
        ({"dropout": math.nan}, "dropout"),
        ({"warmup_epochs": math.inf}, "warmup_epochs"),
        ({"grad_clip": math.nan}, "grad_clip"),
        ({"val_fraction": math.nan}, "val_fraction"),
        ({"propensity": (math.nan, 1.5)}, "propensity"),
        ({"head": "hrr", "head_options": {"ranking": math.nan}}, "ranking"),
        ({"head": "hrr", "head_options": {"ranking": math.inf}}, "ranking"),
        ({"head": "linear", "hidden": None, "dim": 400, "epochs": None, "batch_size": None, "lr": None,
          "dropout": None, "head_options": {"C": math.inf}}, "C"),
    ],
)
def test_non_finite_settings_are_refused_naming_them(tiny, no_training, params, name):
    with pytest.raises(InputError, match=name):
        XMCClassifier(**{"head": "hrr"} | TINY | params).fit(tiny.X, tiny.Y)


@pytest.mark.parametrize("option, value", [("--lr", "inf"), ("--lr", "nan"), ("--dropout", "nan"),
                                           ("--ranking", "nan")])
def test_cli_non_finite_setting_is_one_error_line_and_exit_2(toy, tmp_path, capsys, option, value):
    argv = ["train", str(toy), "--model", "hrr-fc", "--hidden", "8", "--epochs", "1", "--quiet",
            "--out", str(tmp_path / "run"), option, value]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("holoxmc: error: ") and option.lstrip("-") in err[0]
    assert not (tmp_path / "run" / "model.safetensors").exists()


@pytest.mark.parametrize("batch_size", [-1, 0, 2.5, True, "8"])
@pytest.mark.parametrize("method", ["predict", "predict_topk", "predict_proba", "predict_above", "decision_function"])
def test_inference_batch_size_must_be_a_positive_integer(tiny, fitted, method, batch_size):
    """``predict(X, batch_size=-1)`` returned all -1 labels silently, ``0`` a raw ValueError."""
    with pytest.raises(InputError, match="batch_size must be a positive integer"):
        getattr(fitted, method)(tiny.X, batch_size=batch_size)


def test_label_id_lists_claiming_a_huge_label_count_are_refused_at_once(tiny, no_training):
    """``[[10**12], ...]`` claimed 10**12 labels: the old code tried to allocate them."""
    Y = [[10**12]] + [[0]] * (tiny.X.shape[0] - 1)
    started = time.perf_counter()
    with pytest.raises(InputError, match="larger than holoxmc accepts"):
        XMCClassifier(head="dense", **for_head("dense", TINY)).fit(tiny.X, Y)
    assert time.perf_counter() - started < 5


@pytest.mark.parametrize("head", ["dense", "hrr"])
def test_a_label_count_whose_network_cannot_fit_is_refused_before_it_is_built(tiny, no_training, head):
    """10**8 labels pass the size bound, but the output layer would need hundreds of GiB."""
    Y = [[10**8 - 1]] + [[0]] * (tiny.X.shape[0] - 1)
    with pytest.raises(InputError, match="would need .* GiB"):
        XMCClassifier(head=head, **TINY | {"hidden": (512,), "dim": 400}).fit(tiny.X, Y)


@pytest.mark.parametrize("params", [{"hidden": (2**30,)}, {"head": "hrr", "dim": 2**30},
                                    {"head": "hrr", "hidden": (2**26,), "n_models": 64}])
def test_claimed_widths_that_cannot_fit_are_refused_before_building(tiny, no_training, params):
    with pytest.raises(InputError, match="would need .* GiB"):
        head = params.get("head", "dense")
        XMCClassifier(**for_head(head, TINY) | {"head": head} | params).fit(tiny.X, tiny.Y)


@pytest.mark.parametrize("backbone", ["cnn", "lstm"])
@pytest.mark.parametrize("huge", [10**12, 2**40])
def test_a_huge_token_id_is_refused_not_allocated(tiny, no_training, backbone, huge):
    """The largest token id sets the vocabulary size: 10**12 asked for a TB embedding table."""
    tokens = np.arange(1, 1 + tiny.X.shape[0] * 4, dtype=np.int64).reshape(-1, 4) % 50 + 1
    tokens[3, 2] = huge
    with pytest.raises(InputError, match="vocabulary size"):
        XMCClassifier(head="hrr", backbone=backbone, **TINY | {"hidden": None}).fit(tokens, tiny.Y)


def test_a_vocabulary_that_cannot_fit_is_refused_by_its_bytes(tiny, no_training):
    """Within the size bound but beyond memory: 2**31 - 2 ids x 300-wide embeddings."""
    tokens = np.ones((tiny.X.shape[0], 3), dtype=np.int64)
    tokens[0, 0] = 2**31 - 2
    with pytest.raises(InputError, match="would need .* GiB"):
        XMCClassifier(head="hrr", backbone="cnn", **TINY | {"hidden": None}).fit(tokens, tiny.Y)


SOLAR = dict(hidden=(8,), epochs=1, batch_size=16, lr=1e-2, seed=0, progress=False)


def test_solar_refuses_more_buckets_than_labels(tiny, no_training):
    """``--buckets 100000`` with L = 10 trained 100,000 mostly empty buckets per chunk for P@1 0."""
    n_labels = tiny.Y.shape[1]
    with pytest.raises(InputError, match=rf"n_buckets .*100000.* {n_labels} labels"):
        XMCClassifier(head="solar", **SOLAR, head_options={"n_chunks": 2, "n_buckets": 100_000}).fit(tiny.X, tiny.Y)


def test_solar_accepts_as_many_buckets_as_labels(tiny):
    n_labels = tiny.Y.shape[1]
    clf = XMCClassifier(head="solar", **SOLAR, head_options={"n_chunks": 1, "n_buckets": n_labels})
    clf.fit(tiny.X, tiny.Y)
    assert clf.solar_.config.n_buckets == n_labels


def test_cli_solar_too_many_buckets_is_exit_2(toy, tmp_path, capsys):
    started = time.perf_counter()
    argv = ["train", str(toy), "--model", "solar", "--chunks", "2", "--buckets", "100000", "--epochs", "1",
            "--hidden", "8", "--quiet", "--out", str(tmp_path / "run")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("holoxmc: error: ") and "n_buckets" in err[0]
    assert time.perf_counter() - started < 20


def test_hostile_y_gets_the_same_rules_at_every_entry_point(tiny, fitted):
    """``score``, ``evaluate`` and ``fit`` all refuse a label id beyond the model's L the same way."""
    Y = [[0]] * (tiny.X.shape[0] - 1) + [[10**12]]
    for call in (lambda: fitted.evaluate(tiny.X, Y), lambda: fitted.score(tiny.X, Y)):
        with pytest.raises(InputError, match=r"label id 1000000000000 out of range \[0, 10\)"):
            call()
    with pytest.raises(InputError, match="Y must be binary"):
        fitted.score(tiny.X, sp.csr_matrix(np.full((tiny.X.shape[0], 10), 2.0)))

"""Recall at a cut-off past the top-5 (SOLAR's Recall@100): ``XMCClassifier.evaluate(...,
recall_ks=)`` and ``holoxmc evaluate``, which reports it as ``train`` does; on the way (the
CLI test's set has labels no training row has), a linear model with such labels saves and
loads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from holoxmc.cli import main
from holoxmc.data import make_synthetic
from holoxmc.data.readers import write_xml_repo
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.metrics import evaluate, pad_predictions


@pytest.fixture(scope="module")
def sets():
    return make_synthetic(400, 120, 60, n_test=100, labels_per_point=3.0, seed=5)


@pytest.fixture(scope="module")
def linear(sets):
    train, _ = sets
    return XMCClassifier(head="linear", progress=False).fit(train.X, train.Y)


def test_recall_at_100_is_read_from_the_top_100(linear, sets):
    _, test = sets
    got = linear.evaluate(test.X, test.Y, recall_ks=(100,))
    top = linear.predict_topk(test.X, k=100)[0]
    assert got == evaluate(pad_predictions(top, 100), test.Y, inv_prop=linear.inv_prop_, ks=(1, 2, 3, 4, 5),
                           recall_ks=(100,))
    assert got["Recall@5"] < got["Recall@100"] <= 100.0
    assert "Recall@100" not in linear.evaluate(test.X, test.Y)  # only when asked for
    assert linear.evaluate(test.X, test.Y, recall_ks=[]) == linear.evaluate(test.X, test.Y)


@pytest.mark.parametrize("bad", [100, [0], ["100"], "100", np.array(100), {100}])
def test_bad_recall_cutoffs_are_one_error(linear, sets, bad):
    _, test = sets
    with pytest.raises(InputError, match="recall_ks must be a list of positive integers"):
        linear.evaluate(test.X, test.Y, recall_ks=bad)
    assert linear.evaluate(test.X, test.Y, recall_ks=np.array([], dtype=int)) == linear.evaluate(test.X, test.Y)


def test_check_finite_lets_infinities_through_only_where_allowed():
    import torch

    from holoxmc.trust import check_finite

    biases = torch.tensor([float("-inf"), 0.5, float("inf")])
    check_finite([("linear.bias", biases)], "m", infinite_ok={"linear.bias"})  # ±inf allowed there
    with pytest.raises(InputError, match="'other' holds NaN or infinite values"):
        check_finite([("other", biases)], "m", infinite_ok={"linear.bias"})
    with pytest.raises(InputError, match="'linear.bias' holds NaN values"):
        check_finite([("linear.bias", torch.tensor([float("nan")]))], "m", infinite_ok={"linear.bias"})


def test_the_cli_evaluate_reports_recall_at_100_as_train_does(sets, tmp_path, capsys):
    train, test = sets
    data = tmp_path / "wide"
    write_xml_repo(data / "wide_train.txt", train.X, train.Y)
    write_xml_repo(data / "wide_test.txt", test.X, test.Y)
    run = tmp_path / "run"
    assert main(["train", str(data), "--model", "linear", "--out", str(run), "--quiet"]) == 0
    trained = json.loads((run / "metrics.json").read_text())["test"]
    capsys.readouterr()
    assert main(["evaluate", str(run), str(data), "--output", str(tmp_path / "eval.json")]) == 0
    assert "Recall@100:" in capsys.readouterr().out
    evaluated = json.loads((tmp_path / "eval.json").read_text())["metrics"]
    assert "Recall@100" in trained and evaluated["Recall@100"] == trained["Recall@100"]
    assert np.isclose(evaluated["P@1"], trained["P@1"])


def test_a_linear_model_with_labels_absent_from_training_saves_and_loads(linear, sets, tmp_path):
    """Labels no training row has score -inf (their bias): the saved model loads and predicts
    the same (it was refused as holding infinite values), and a NaN bias is still refused."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    train, test = sets
    absent = np.flatnonzero(np.asarray(train.Y.sum(axis=0)).ravel() == 0)
    assert len(absent) and np.all(linear.model_.bias[absent] == -np.inf)
    folder = linear.save(tmp_path / "linear")
    loaded = XMCClassifier.load(folder)
    for got, want in zip(loaded.predict_topk(test.X, k=5), linear.predict_topk(test.X, k=5)):
        assert np.array_equal(got, want)
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        metadata = f.metadata()
    tensors = load_file(folder / "model.safetensors")
    tensors["linear.bias"][int(absent[0])] = float("nan")
    save_file(tensors, folder / "model.safetensors", metadata=metadata)
    with pytest.raises(InputError, match="'linear.bias' holds NaN values"):
        XMCClassifier.load(folder)

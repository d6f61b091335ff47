"""The re-rank model's sizes on the command line: ``train --model rerank`` sets the shortlist,
the training shortlist, the per-label weight budget and the labels on every shortlist (recorded in the saved model's
config and used by the fit); other models refuse them with one error and exit code 2."""

from __future__ import annotations

import numpy as np
import pytest

from holoxmc.cli import main
from holoxmc.estimator import XMCClassifier


def test_train_sets_the_rerank_sizes(toy, tmp_path, shortlist_widths):
    widths = shortlist_widths
    run = tmp_path / "run"
    assert main(["train", str(toy), "--model", "rerank", "--out", str(run), "--shortlist", "7",
                 "--train-shortlist", "3", "--label-weights", "4", "--frequent-labels", "2", "--quiet"]) == 0
    model = XMCClassifier.load(run).rerank_
    assert model.shortlist == 7 and widths and set(widths) == {3 + 2}  # the two frequent labels on every list
    assert model.always.size == 2
    assert np.diff(model.weight_rows.indptr).max() <= 4


@pytest.mark.parametrize("flag", ["--shortlist", "--train-shortlist", "--label-weights", "--frequent-labels"])
@pytest.mark.parametrize("model", ["linear", "solar"])
def test_other_models_refuse_the_rerank_sizes(toy, tmp_path, capsys, flag, model):
    assert main(["train", str(toy), "--model", model, "--out", str(tmp_path / "run"), flag, "5", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag} applies to --model rerank only" in err[0], err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ["0", "-3", "2.5", "many"])
def test_bad_rerank_sizes_exit_2(toy, tmp_path, capsys, value):
    assert main(["train", str(toy), "--model", "rerank", "--out", str(tmp_path / "run"), "--label-weights", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "argument --label-weights" in err[0], err
    assert not (tmp_path / "run").exists()

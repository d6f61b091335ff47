"""Groups (issue 49): ``fit(..., groups=)``, the JSON-lines ``group`` field, near-duplicate
groups when none are given, and every carved validation split keeping groups apart."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import scipy.sparse as sp

from holoxmc.cli import main
from holoxmc.data.groups import check_groups, near_duplicate_groups
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.train import split_validation


def _grouped_texts(folder, field="group", groups=300, copies=4):
    """Groups of near-identical texts (12 words, one word changed a copy) whose two labels are
    the group's own draw: nothing carries from one group to another, so only a split that
    puts a group's copies on both sides can score well."""
    rng = random.Random(0)
    words = [f"w{i}" for i in range(300)]
    labels = [f"L{i}" for i in range(20)]
    folder.mkdir()
    with open(folder / "train.jsonl", "w") as train, open(folder / "test.jsonl", "w") as test:
        for g in range(groups):
            own = random.Random(g)
            base, tags = own.sample(words, 12), own.sample(labels, 2)
            for _ in range(copies):
                record = {"text": " ".join(base + [rng.choice(words)]), "labels": tags, field: f"g{g}"}
                (test if g >= 0.8 * groups else train).write(json.dumps(record) + "\n")
    return folder


def test_a_grouped_split_keeps_every_group_on_one_side():
    groups = np.repeat(np.arange(50), np.arange(1, 51))  # sizes 1 .. 50
    train, val = split_validation(len(groups), 0.2, 3, groups)
    assert set(groups[train]).isdisjoint(groups[val])
    assert abs(len(val) / len(groups) - 0.2) < 0.05
    again = split_validation(len(groups), 0.2, 3, groups)
    assert np.array_equal(again[1], val)
    single = split_validation(10, 0.2, 0, np.zeros(10, np.int64))  # one group: a row split
    assert len(single[1]) == 2


def test_near_duplicates_are_grouped_and_other_rows_are_not():
    rng = np.random.default_rng(0)
    X = sp.random(300, 2000, density=0.01, format="csr", random_state=1, dtype=np.float32)
    X.data[:] = rng.random(X.nnz).astype(np.float32) + 0.5
    near = X[:50].copy()
    near.data *= 1 + 0.01 * rng.standard_normal(near.nnz).astype(np.float32)  # the same rows, reweighted a little
    codes = near_duplicate_groups(sp.vstack([X, near, X[:10]], format="csr"), 0.9)
    assert all(codes[300 + i] == codes[i] for i in range(50))
    assert all(codes[350 + i] == codes[i] for i in range(10))
    assert len(np.unique(codes[:300])) == 300  # random rows are no near-duplicates


def test_groups_are_one_value_per_row():
    assert check_groups(np.array(["a", "b", "a"]), 3).tolist() == [0, 1, 0]
    with pytest.raises(InputError, match="one value per row of X \\(3\\), got 2"):
        check_groups(["a", "b"], 3)
    with pytest.raises(InputError, match="groups row 1"):
        check_groups(["a", ["b"], "c"], 3)


def test_fit_with_groups_validates_on_unseen_groups(tmp_path):
    from holoxmc.data import load

    train = load(_grouped_texts(tmp_path / "set"), "train")
    assert train.groups is not None and len(set(train.groups)) == 240
    grouped = XMCClassifier(head="linear", progress=False).fit(train.X, train.Y, groups=train.groups)
    assert grouped.groups_.source == "groups" and grouped.groups_.groups == 240
    found = XMCClassifier(head="linear", progress=False).fit(train.X, train.Y)
    assert found.groups_.source == "near-duplicates" and 240 <= found.groups_.groups <= 250  # a few copies missed
    random_split = XMCClassifier(head="linear", progress=False, duplicate_cosine=None).fit(train.X, train.Y)
    assert random_split.groups_.source == "none"
    # held-out groups are unlearnable here; held-out copies of training rows are not
    assert grouped.validation_["P@1"] < 40 and random_split.validation_["P@1"] > 80


def test_the_cli_reads_groups_and_reports_the_validation_gap(tmp_path, capsys):
    data = _grouped_texts(tmp_path / "set", field="origin")
    assert main(["train", str(data), "--model", "linear", "--group-field", "origin", "--out", str(tmp_path / "R"),
                 "--quiet"]) == 0
    metrics = json.loads((tmp_path / "R" / "metrics.json").read_text())
    assert metrics["groups"] == {"source": "groups", "groups": 240, "grouped_rows": 960}
    validation = metrics["validation"]
    assert validation["source"] == "val_fraction" and validation["gap_to_test_P@1"] == pytest.approx(
        validation["P@1"] - metrics["test"]["P@1"], abs=1e-3)
    assert abs(validation["gap_to_test_P@1"]) < 15


def test_a_group_of_another_type_is_one_line_with_its_place(tmp_path, capsys):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "train.jsonl").write_text('{"text": "a b", "labels": ["x"], "group": "g"}\n'
                                        '{"text": "a c", "labels": ["y"], "group": [1]}\n')
    (folder / "test.jsonl").write_text('{"text": "a b", "labels": ["x"]}\n')
    assert main(["train", str(folder), "--model", "linear", "--out", str(tmp_path / "R")]) == 2
    err = capsys.readouterr().err.strip()
    assert "train.jsonl:2: 'group' must be a string or an integer" in err
    assert len(err.splitlines()) == 1


def test_a_separate_test_file_of_texts_is_read_with_the_training_encoder(tmp_path):
    """``holoxmc train TRAIN.jsonl --test TEST.jsonl`` (it failed: the test texts were encoded
    on their own, "its test split has 11574 features, expected 22932") scores as the folder does."""
    data = _grouped_texts(tmp_path / "set", groups=60)
    assert main(["train", str(data / "train.jsonl"), "--test", str(data / "test.jsonl"), "--model", "linear",
                 "--out", str(tmp_path / "A"), "--quiet"]) == 0
    assert main(["train", str(data), "--model", "linear", "--out", str(tmp_path / "B"), "--quiet"]) == 0
    a, b = (json.loads((tmp_path / run / "metrics.json").read_text()) for run in ("A", "B"))
    assert a["test"] == b["test"] and a["evaluation"]["split"] == "test file"

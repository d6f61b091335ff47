"""Label names end to end: fit on label-name lists or on a MultiLabelBinarizer output with
its classes, ``classes_`` holds the names, predict / predict_topk / predict_labels give
them back, save/load keeps them (config.json), and the CLI's --label-names writes them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.preprocessing import MultiLabelBinarizer

from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.labels import encode_names, holds_names

LINEAR = dict(head="linear", progress=False)
WORDS = ["sports", "news", "tech", "art", "music", "travel", "food", "science", "health", "games",
         "film", "books", "cars", "pets", "garden", "money", "jobs", "law", "space", "weather"]


@pytest.fixture(scope="module")
def data():
    train, test = make_synthetic(240, 20, 60, n_test=60, labels_per_point=2.0, seed=5)
    def names(Y):
        return [[WORDS[j] for j in Y[i].indices] for i in range(Y.shape[0])]
    return train, test, names(train.Y), names(test.Y)


@pytest.fixture(scope="module")
def by_name(data):
    train, _, names, _ = data
    return XMCClassifier(**LINEAR).fit(train.X, names)


def test_fit_on_name_lists_learns_the_same_model_as_on_ids(data, by_name):
    train, test, _, _ = data
    assert by_name.classes_.tolist() == sorted(WORDS)
    by_id = XMCClassifier(**LINEAR).fit(train.X, train.Y)
    # the columns are the sorted names: map them to ids and the rankings agree
    order = np.array([WORDS.index(name) for name in by_name.classes_])
    name_top = order[by_name.predict_topk(test.X, 3)[0]]
    np.testing.assert_array_equal(name_top, by_id.predict_topk(test.X, 3)[0])


def test_predict_columns_and_predict_labels_are_names(data, by_name):
    _, test, _, _ = data
    indicator = by_name.predict(test.X)
    labels = by_name.predict_labels(test.X)
    assert labels == [by_name.classes_[indicator[i].indices].tolist() for i in range(indicator.shape[0])]
    assert all(isinstance(name, str) for row in labels for name in row)
    names, scores = by_name.predict_topk(test.X, 2, names=True)
    assert names.dtype == object and names.shape == scores.shape == (test.X.shape[0], 2)
    assert set(names.ravel()) <= set(WORDS)


def test_score_and_validation_take_names(data, by_name):
    train, test, names, test_names = data
    assert by_name.score(test.X, test_names) == by_name.score(test.X, encode_names(test_names, by_name.classes_)[0])
    clf = XMCClassifier(**LINEAR).fit(train.X[40:], names[40:], train.X[:40], names[:40])
    assert clf.label_rule_.source == "X_val"


def test_a_multilabel_binarizer_output_with_its_classes(data):
    train, test, names, _ = data
    binarizer = MultiLabelBinarizer(sparse_output=True)
    Y = binarizer.fit_transform(names)
    clf = XMCClassifier(**LINEAR).fit(train.X, Y, classes=binarizer.classes_)
    assert clf.classes_.tolist() == binarizer.classes_.tolist()
    # what predict gives back, the binarizer reads back into names
    assert [sorted(row) for row in binarizer.inverse_transform(clf.predict(test.X))] == \
        [sorted(row) for row in clf.predict_labels(test.X)]
    with pytest.raises(InputError, match="classes has 3 names for 20 label columns"):
        XMCClassifier(**LINEAR).fit(train.X, Y, classes=["a", "b", "c"])


def test_unknown_and_malformed_names_are_one_clear_error(data, by_name):
    _, test, _, test_names = data
    bad = [list(row) for row in test_names]
    bad[4] = ["sports", "nonsense"]
    with pytest.raises(InputError, match="Y row 4: label 'nonsense' is not one of the model's 20 labels"):
        by_name.score(test.X, bad)
    with pytest.raises(InputError, match="Y row 1: label names must be strings"):
        encode_names([["a"], ["b", 3]])
    with pytest.raises(InputError, match="Y row 0: a label name is given twice"):
        encode_names([["a", "a"]])
    with pytest.raises(InputError, match="expected a list of label names"):
        encode_names([["a"], "b"])
    assert holds_names([[], ["x"]]) and not holds_names([[1], [2]])


def test_save_and_load_keep_the_names_without_pickle(tmp_path, data, by_name):
    _, test, _, _ = data
    by_name.save(tmp_path / "model")
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["classes"] == by_name.classes_.tolist()
    loaded = XMCClassifier.load(tmp_path / "model")
    assert loaded.classes_.tolist() == by_name.classes_.tolist()
    assert loaded.predict_labels(test.X) == by_name.predict_labels(test.X)
    assert (loaded.predict(test.X) != by_name.predict(test.X)).nnz == 0
    np.testing.assert_array_equal(loaded.predict_proba(test.X), by_name.predict_proba(test.X))
    assert loaded.label_rule_ == by_name.label_rule_


def test_a_saved_model_with_a_bad_classes_entry_is_refused(tmp_path, by_name):
    by_name.save(tmp_path / "model")
    path = tmp_path / "model" / "config.json"
    config = json.loads(path.read_text())
    config["classes"] = config["classes"][:-1]
    path.write_text(json.dumps(config))
    with pytest.raises(InputError, match="config.json: 'classes' holds 19 names for 20 labels"):
        XMCClassifier.load(tmp_path / "model")


def test_ids_keep_integer_classes(data):
    train, _, _, _ = data
    clf = XMCClassifier(**LINEAR).fit(train.X, train.Y)
    assert clf.classes_.dtype.kind == "i" and clf.classes_.tolist() == list(range(20))
    assert clf.predict_labels(train.X[:2]) == [clf.predict(train.X[:2])[i].indices.tolist() for i in range(2)]


def test_cli_label_names_of_a_model_fitted_on_names(tmp_path, data, by_name, capsys):
    """``holoxmc predict --label-names`` writes the saved names of a model fitted on them."""
    from holoxmc.cli import main
    from holoxmc.data.readers import write_xml_repo

    _, test, _, _ = data
    by_name.save(tmp_path / "run")
    write_xml_repo(tmp_path / "test.txt", test.X, test.Y)
    code = main(["predict", str(tmp_path / "run"), str(tmp_path / "test.txt"), "--label-names", "--top-k", "2"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and len(lines) == test.X.shape[0]
    expected, _ = by_name.predict_topk(test.X, 2, names=True)
    assert [[pair.rsplit(":", 1)[0] for pair in line.split()] for line in lines] == expected.tolist()
    assert sp.issparse(by_name.predict(test.X))

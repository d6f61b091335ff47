"""Saved models written by the code before the estimator refactor load and predict exactly
as they did (fixtures: ``tests/fixtures/make_saved_models.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from holoxmc.estimator import XMCClassifier
from holoxmc.train.checkpoint import load_state_dict_file

ROOT = Path(__file__).parent / "fixtures" / "saved-before-refactor"
NAMES = ["hrr-fc", "fc", "hrr-fc-ensemble", "solar", "linear", "hrr-cnn"]


@pytest.fixture(scope="module")
def inputs() -> dict[str, object]:
    tensors, _ = load_state_dict_file(ROOT / "input.safetensors")
    shape = tuple(int(n) for n in tensors["X.shape"].tolist())
    X = sp.csr_matrix((tensors["X.data"].numpy(), tensors["X.indices"].numpy(), tensors["X.indptr"].numpy()),
                      shape=shape)
    return {"X": X, "tokens": tensors["tokens"].numpy()}


def test_every_fixture_is_there():
    assert sorted(p.name for p in ROOT.iterdir() if p.is_dir()) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_a_model_saved_before_the_refactor_predicts_as_it_did(inputs, name):
    expected = json.loads((ROOT / name / "expected.json").read_text())
    clf = XMCClassifier.load(ROOT / name)
    indices, scores = clf.predict_topk(inputs[expected["input"]], k=5)
    np.testing.assert_array_equal(indices, np.asarray(expected["indices"]))
    np.testing.assert_allclose(scores, np.asarray(expected["scores"], dtype=np.float32), rtol=0, atol=1e-6)


def test_a_pre_change_config_with_both_copies_of_dim_loads_with_that_dim():
    config = json.loads((ROOT / "hrr-fc" / "config.json").read_text())
    assert config["params"]["dim"] == config["network"]["dim"] == 16  # the fixture holds both copies
    clf = XMCClassifier.load(ROOT / "hrr-fc")
    assert clf.dim == 16 and clf.get_params()["dim"] == 16


@pytest.mark.parametrize("n_models", [1, 2])
def test_a_network_saves_dim_once_and_loads_it_back(tmp_path, n_models):
    rng = np.random.default_rng(0)
    X = sp.random(60, 20, density=0.3, format="csr", dtype=np.float32, random_state=1)
    Y = sp.csr_matrix((rng.random((60, 8)) < 0.3).astype(np.float32))
    clf = XMCClassifier(head="hrr", dim=12, hidden=(8,), epochs=1, n_models=n_models, progress=False).fit(X, Y)
    config = json.loads((clf.save(tmp_path / "m") / "config.json").read_text())
    network = config["network"]["members"][0] if n_models > 1 else config["network"]
    assert "dim" not in config["params"] and network["dim"] == 12
    loaded = XMCClassifier.load(tmp_path / "m")
    assert loaded.get_params() == clf.get_params()
    np.testing.assert_array_equal(loaded.predict_topk(X, k=3)[0], clf.predict_topk(X, k=3)[0])

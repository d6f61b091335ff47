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
    indices, scores = clf.predict(inputs[expected["input"]], k=5)
    np.testing.assert_array_equal(indices, np.asarray(expected["indices"]))
    np.testing.assert_allclose(scores, np.asarray(expected["scores"], dtype=np.float32), rtol=0, atol=1e-6)

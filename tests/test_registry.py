"""One registry of head kinds, one home for presets, one protocol for served models."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp

import holoxmc
from holoxmc import estimator, metrics, presets
from holoxmc.cli import report
from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.auto import SELECTORS, refit_settings
from holoxmc.models.base import FittedModel
from holoxmc.models.registry import FAMILIES, family


def test_every_head_of_the_presets_and_models_has_one_family():
    heads = {head for head, _ in presets.MODELS.values()}
    assert set(FAMILIES) == set(presets.HEAD_DEFAULTS) == heads - set(SELECTORS) and set(SELECTORS) == {"auto"}
    assert all(FAMILIES[head].defaults is presets.HEAD_DEFAULTS[head] for head in FAMILIES)
    with pytest.raises(InputError, match="unknown head 'nope'"):
        family("nope")


def test_the_estimator_does_not_branch_on_the_head_name():
    for module in (estimator, report):
        assert "head ==" not in inspect.getsource(module) and 'head in ("' not in inspect.getsource(module)


def test_no_head_branch_remains_outside_the_registry():
    branch = re.compile(r'head_? ==|head_? !=|"head"\] ==|"head"\] !=|head_? in \(')
    root = Path(holoxmc.__file__).parent
    found = [f"{path.relative_to(root)}:{number}" for path in sorted(root.rglob("*.py")) if path.name != "registry.py"
             for number, line in enumerate(path.read_text().splitlines(), 1) if branch.search(line)]
    assert found == []


def test_what_the_cli_and_the_selection_read_of_a_family():
    assert [head for head, kind in FAMILIES.items() if kind.code_dim] == ["hrr", "xr"]
    assert [head for head, kind in FAMILIES.items() if kind.jobs_apart] == ["solar", "linear", "rerank"]
    assert SELECTORS["auto"].settings == {"time_budget"} and SELECTORS["auto"].jobs_apart
    assert FAMILIES["linear"].kept_from_selection == ("calibration",)
    fits = [{"C": 0.5, "val": {"P@1": 40.0}}, {"C": 2.0, "val": {"P@1": 45.0}}, {"C": 2.0}]
    assert refit_settings(SimpleNamespace(head="linear", fit_results_=[SimpleNamespace(history=fits)])) == \
        {"head_options": {"C": 2.0}}
    with pytest.raises(InputError, match="head 'solar' cannot be refit"):
        refit_settings(SimpleNamespace(head="solar", fit_results_=[]))


def test_presets_and_propensities_have_one_home():
    assert estimator.DATASET_PRESETS is presets.DATASET_PRESETS and estimator.MODELS is presets.MODELS
    assert metrics.propensity_preset is presets.propensity_preset
    assert XMCClassifier().propensity == presets.DEFAULT_PROPENSITY
    source = inspect.getsource(presets)
    assert "docs/tuning.md" in source and "P@1" not in source  # the evidence lives in the tuning log


@pytest.mark.parametrize("head, options", [("hrr", {"dim": 16}), ("dense", {}), ("hrr", {"n_models": 2, "dim": 16}),
                                           ("solar", {"head_options": {"n_chunks": 2, "n_buckets": 4}}),
                                           ("linear", {"head_options": {"C": 1.0}})])
def test_every_served_model_is_a_fitted_model(tmp_path, head, options):
    train, test = make_synthetic(120, 8, 30, n_test=20, labels_per_point=1.5, seed=1)
    network = {} if head == "linear" else {"hidden": (8,), "epochs": 1}
    clf = XMCClassifier(head=head, progress=False, **network, **options).fit(train.X, train.Y)
    assert isinstance(clf.model_, FittedModel)
    assert getattr(clf, FAMILIES[head].attribute) is FAMILIES[head].public(clf.model_)
    others = {f.attribute for f in FAMILIES.values()} - {FAMILIES[head].attribute}
    assert not any(hasattr(clf, name) for name in others)
    full = clf.decision_function(test.X)
    indices, scores = clf.predict_topk(test.X, k=3)
    np.testing.assert_allclose(np.take_along_axis(full, indices, 1)[indices >= 0], scores[indices >= 0], rtol=1e-5,
                               atol=1e-6)
    assert sp.issparse(clf.predict_above(test.X, 0.5))
    loaded = XMCClassifier.load(clf.save(tmp_path / head))
    np.testing.assert_array_equal(loaded.predict_topk(test.X, k=3)[0], indices)
    assert loaded.n_parameters() == clf.n_parameters()

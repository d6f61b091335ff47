"""The Examples in the docstrings of the data layer, metrics, device checks, the heads'
decoding, the networks, the estimator and the trainer's optimiser choice run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "holoxmc.errors",
    "holoxmc.io",
    "holoxmc.devices",
    "holoxmc.metrics",
    "holoxmc.data.dataset",
    "holoxmc.data.readers",
    "holoxmc.data.synthetic",
    "holoxmc.data.text",
    "holoxmc.data.cache",
    "holoxmc.data.registry",
    "holoxmc.train.optim",
    "holoxmc.heads.decoding",
    "holoxmc.heads.dense",
    "holoxmc.backbones.network",
    "holoxmc.estimator",
    "holoxmc.distributed.jobs",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

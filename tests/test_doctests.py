"""The Examples in the docstrings of every holoxmc module run and hold.

Every module found by :func:`pkgutil.walk_packages` is imported and checked with
:func:`doctest.testmod`; a module whose import needs an optional extra that is not
installed (e.g. ``ray``, or ``matplotlib`` from ``holoxmc[plot]``) is skipped with the reason.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import holoxmc

#: Run as a program only: importing it would start the CLI.
NOT_IMPORTABLE = {"holoxmc.__main__"}
#: Modules whose examples need an optional extra at run time (not at import).
EXAMPLES_NEED = {"holoxmc.plotting": "matplotlib"}
#: Modules known to carry examples: a walk that finds none in them has lost them.
WITH_EXAMPLES = {
    "holoxmc.errors", "holoxmc.io", "holoxmc.devices", "holoxmc.metrics", "holoxmc.data.dataset",
    "holoxmc.data.readers", "holoxmc.data.synthetic", "holoxmc.data.text", "holoxmc.data.cache",
    "holoxmc.data.registry", "holoxmc.train.optim", "holoxmc.train.heap", "holoxmc.heads.decoding",
    "holoxmc.heads.dense", "holoxmc.backbones.network", "holoxmc.estimator", "holoxmc.distributed.jobs",
    "holoxmc.plotting",
}
MODULES = sorted(
    module.name for module in pkgutil.walk_packages(holoxmc.__path__, "holoxmc.") if module.name not in NOT_IMPORTABLE
)


def test_the_walk_finds_the_subpackages_modules() -> None:
    assert WITH_EXAMPLES | {"holoxmc.heads.hrr", "holoxmc.cli.train"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] == "holoxmc":
            raise
        pytest.skip(f"{name} needs {exc.name}, an optional extra that is not installed")
    if name in EXAMPLES_NEED:
        pytest.importorskip(EXAMPLES_NEED[name], reason=f"{name}'s examples need {EXAMPLES_NEED[name]}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
    assert result.attempted > 0 or name not in WITH_EXAMPLES, f"{name} lost its examples"

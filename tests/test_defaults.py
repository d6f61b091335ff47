"""The library defaults: chosen leave-one-set-out by ``benchmarks/tuning/defaults_loo.py`` on
its recorded fits, and the process settings that keep a default fit fast."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from holoxmc.presets import HEAD_DEFAULTS
from holoxmc.models.linear.fit import LinearConfig

ROOT = Path(__file__).resolve().parents[1]
RECORDS = [ROOT / "benchmarks" / "results" / f"defaults_loo_{part}.jsonl" for part in ("linear", "network")]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("defaults_loo", ROOT / "benchmarks" / "tuning" / "defaults_loo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def loo() -> ModuleType:
    return _script()


@pytest.fixture(scope="module")
def shipped(loo: ModuleType) -> dict:
    rows = [json.loads(line) for path in RECORDS for line in path.read_text().splitlines() if line.strip()]
    return loo.shipped(rows)


def test_the_linear_defaults_are_the_choice_on_the_whole_panel(shipped):
    chosen, config = shipped["linear"], LinearConfig()
    assert (config.C, config.C_grid, config.prune) == (None, tuple(chosen["C_grid"]), chosen["prune"])


@pytest.mark.parametrize("head", ["hrr", "dense"])
def test_the_network_defaults_are_the_choice_on_the_whole_panel(shipped, head):
    assert {key: HEAD_DEFAULTS[head][key] for key in shipped[head]} == shipped[head]


def test_the_choice_is_the_best_mean_unless_a_cheaper_candidate_is_within_the_tolerance(loo):
    table = {"old": {"a": (50.0, 10.0), "b": (20.0, 4.0)},
             "cheap": {"a": (49.9, 2.0), "b": (20.0, 1.0)},
             "worse": {"a": (40.0, 1.0), "b": (10.0, 0.5)}}
    assert loo.choose(table, ["a", "b"], tolerance=0.25) == "cheap"
    assert loo.choose(table, ["a", "b"], tolerance=0.0) == "old"
    assert loo.choose(table, ["b"], tolerance=0.0) == "cheap"  # tied on b: the cheaper


def test_a_candidate_is_assembled_from_the_fits_as_fit_linear_runs_it(loo):
    """The grid's best C by validation P@1 (first in grid order on a tie); its carved or refit model."""
    rows = []
    for C in sorted({C for grid in loo.LINEAR_GRIDS for C in grid}):
        for phase in ("carved", "refit"):
            row = {"part": "linear", "set": "bibtex", "C": C, "phase": phase, "seconds": C}
            for prune in loo.LINEAR_PRUNE:
                row[f"test@{prune}"] = 100 * C + (1 if phase == "refit" else 0)
                if phase == "carved":
                    row[f"val@{prune}"] = 1.0 if C in (0.3, 1.0) else 0.0
            rows.append(row)
    table = loo.linear_candidates(rows)
    prune = loo.LINEAR_PRUNE[0]
    assert table[f"C_grid=[0.1, 0.3, 1.0, 3.0] refit=False prune={prune}"]["bibtex"] == pytest.approx((30.0, 4.4))
    assert table[f"C_grid=[0.3, 1.0] refit=True prune={prune}"]["bibtex"] == pytest.approx((31.0, 1.6))


@pytest.mark.parametrize("preset, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_importing_holoxmc_lets_idle_openmp_threads_sleep_unless_the_user_chose(preset, expected):
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    env |= {"PYTHONPATH": str(ROOT / "src")} | ({} if preset is None else {"OMP_WAIT_POLICY": preset})
    done = subprocess.run([sys.executable, "-c", "import holoxmc, os; print(os.environ['OMP_WAIT_POLICY'])"],
                          env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected

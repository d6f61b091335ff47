"""Set-up paths (Makefile) and the declared dependencies (pyproject.toml).

The Makefile is read with ``make -n`` (print the commands, run none) against a venv path in
a temporary folder, so nothing is installed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
needs_make = pytest.mark.skipif(
    shutil.which("make") is None or not (ROOT / "Makefile").exists(), reason="make or the Makefile is absent"
)


def dry_run(target: str, venv: Path) -> list[str]:
    """The commands ``make target`` would run with the venv at ``venv``."""
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"], capture_output=True, text=True, check=True
    )
    return [line for line in done.stdout.splitlines() if not line.startswith("make")]


def index(commands: list[str], text: str) -> int:
    """Position of the first command containing ``text``; -1 when none does."""
    return next((i for i, command in enumerate(commands) if text in command), -1)


def fake_venv(tmp_path: Path, *stamps: str) -> Path:
    """A venv folder with a python in it and the given stamps, newer than pyproject.toml."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    for stamp in stamps:
        (venv / stamp).touch()
    return venv


@needs_make
def test_demo_installs_the_pinned_torch_first_then_only_the_runtime(tmp_path):
    commands = dry_run("demo", tmp_path / "venv")
    torch, runtime = index(commands, "torch==2.13.0"), index(commands, "pip install -q -e .")
    assert 0 <= torch < runtime
    assert index(commands, "[test]") == -1
    assert index(commands, "holoxmc demo") > runtime


@needs_make
def test_test_installs_the_pinned_torch_first_then_the_test_extra_then_lints_and_tests(tmp_path):
    commands = dry_run("test", tmp_path / "venv")
    torch, extra = index(commands, "torch==2.13.0"), index(commands, '".[test,docs]"')
    assert 0 <= torch < extra < index(commands, "ruff check src tests benchmarks") < index(commands, "-m pytest")


@needs_make
def test_demo_then_test_installs_only_the_test_extra(tmp_path):
    commands = dry_run("test", fake_venv(tmp_path, ".installed-runtime"))
    assert index(commands, "torch==2.13.0") == -1 and index(commands, "pip install -q -e . ") == -1
    assert index(commands, '".[test,docs]"') >= 0


@needs_make
@pytest.mark.parametrize("target", ["demo", "test"])
def test_a_second_set_up_installs_nothing(tmp_path, target):
    commands = dry_run(target, fake_venv(tmp_path, ".installed-runtime", ".installed-test"))
    assert commands and index(commands, "pip install") == -1 and index(commands, "-m venv") == -1


def test_torch_requirement_stays_loose():
    torch = [d for d in PYPROJECT["project"]["dependencies"] if d.startswith("torch")]
    assert torch == ["torch>=2.2"]


def test_matplotlib_is_an_optional_plot_extra_included_in_test():
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert not any(d.startswith("matplotlib") for d in PYPROJECT["project"]["dependencies"])
    assert any(d.startswith("matplotlib") for d in extras["plot"])
    assert any(d.startswith("matplotlib") for d in extras["test"])
    assert any(d.startswith("ruff") for d in extras["test"])


def test_ruff_check_passes():
    ruff = pytest.importorskip("ruff")
    binary = Path(ruff.find_ruff_bin())
    done = subprocess.run([str(binary), "check", "src", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr

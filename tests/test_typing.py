"""The package ships a ``py.typed`` marker, so its annotations must hold: mypy over
``src/holoxmc`` (settings in ``pyproject.toml``) reports nothing."""

import subprocess
import sys
from pathlib import Path

import pytest

import holoxmc

ROOT = Path(__file__).resolve().parents[1]


def test_the_package_is_marked_typed() -> None:
    assert (Path(holoxmc.__file__).parent / "py.typed").is_file()


def test_mypy_finds_no_errors_in_the_package() -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found")

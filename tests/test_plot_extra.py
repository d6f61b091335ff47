"""matplotlib is an optional extra (``holoxmc[plot]``): imported only to draw figures, and
its absence is one clear InputError before any work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import holoxmc.experiments.capacity as capacity_module
from holoxmc.cli import main
from holoxmc.errors import InputError
from holoxmc.experiments.capacity import output_folder
from holoxmc.plotting import PLOT_EXTRA, figure_class

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def no_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import matplotlib`` (and its submodules) fail as when it is not installed."""
    for name in [name for name in sys.modules if name == "matplotlib" or name.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    for name in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, name, None)  # type: ignore[arg-type]


def test_no_module_imports_matplotlib_at_import_time() -> None:
    script = (
        "import pkgutil, importlib, sys, holoxmc\n"
        "for module in pkgutil.walk_packages(holoxmc.__path__, 'holoxmc.'):\n"
        "    if module.name != 'holoxmc.__main__':\n"
        "        importlib.import_module(module.name)\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'matplotlib'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                          env={"PYTHONPATH": str(SRC), "PATH": ""})
    assert done.stdout.strip() == "[]"


def test_missing_matplotlib_is_one_input_error_naming_the_extra(no_matplotlib: None) -> None:
    with pytest.raises(InputError, match=r"pip install holoxmc\[plot\]"):
        figure_class()


def test_output_folder_refuses_before_creating_anything(no_matplotlib: None, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"holoxmc\[plot\]"):
        with output_folder(tmp_path / "out"):
            raise AssertionError("the block ran without matplotlib")
    assert list(tmp_path.iterdir()) == []


def test_cli_without_matplotlib_fails_before_the_run_with_one_line(
    no_matplotlib: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("the experiment ran without matplotlib")

    monkeypatch.setattr(capacity_module, "run_capacity", never)
    assert main(["experiment", "capacity", "--quick", "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("holoxmc: error: ") and "\n" not in error and PLOT_EXTRA in error
    assert list(tmp_path.iterdir()) == []


def test_figures_draw_with_matplotlib_present() -> None:
    pytest.importorskip("matplotlib")
    figure = figure_class()(figsize=(2, 2))
    figure.subplots().plot([0, 1], [1, 0])
    assert len(figure.axes[0].lines) == 1

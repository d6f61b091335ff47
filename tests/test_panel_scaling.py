"""benchmarks/scaling.py at a tiny L: the JSON, table and plot; a cell past its memory limit
records why and the stage where it stopped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(out: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "benchmarks/scaling.py", "--labels", "300", "--threads", "1",
                           "--out", str(out), *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def test_tiny_scaling_run_writes_json_table_and_plot(tmp_path):
    pytest.importorskip("napkinxc")
    pytest.importorskip("matplotlib")
    out = tmp_path / "scaling.json"
    done = _run(out, "--models", "napkinxc-plt")
    assert done.returncode == 0, done.stderr
    cell = json.loads(out.read_text())["cells"]["300"]["napkinxc-plt"]
    assert cell["shape"] == {"n_train": 219, "n_test": 69, "n_features": 180}
    row = cell["row"]
    assert 0 < row["P@1"] <= 100 and row["fit_seconds"] > 0 and row["peak_rss_mb"] > 0
    assert row["generate_seconds"] > 0 and row["predict_ms_per_point"] > 0
    table = out.with_suffix(".md").read_text().splitlines()
    assert table[0].startswith("| L | N train / test | model | fit s |")
    assert table[2].startswith("| 300 | 219 / 69 | napkinxc-plt | ")
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_cell_past_its_memory_limit_records_why_and_where(tmp_path):
    out = tmp_path / "scaling.json"
    done = _run(out, "--models", "holoxmc-linear", "--memory-gb", "0.001")
    assert done.returncode == 0, done.stderr
    cell = json.loads(out.read_text())["cells"]["300"]["holoxmc-linear"]
    assert cell["error"].startswith("memory limit:") and cell["stage"] in ("start", "generate", "fit")
    assert "memory limit" in out.with_suffix(".md").read_text()

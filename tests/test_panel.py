"""benchmarks/panel.py --quick: tiny sets, the table's columns and the merged results file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


def test_quick_panel_table_and_results(tmp_path):
    """--quick: tiny sets, napkinXC and the linear model; the table's columns and the results file."""
    pytest.importorskip("napkinxc")
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "panel.json"
    env = dict(os.environ, PYTHONPATH=str(root / "src"))
    done = subprocess.run([sys.executable, "benchmarks/panel.py", "--quick", "--threads", "1", "--out", str(out)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| set |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns == ["set", "N train / test", "L", "model", "P@1", "P@5", "PSP@5", "fit s", "top-5 ms/pt",
                       "peak MB"]
    rows = [line for line in lines if line.startswith("| mlc-tiny") or line.startswith("| realistic-tiny")]
    assert len(rows) == 4
    assert all(len(row.strip("|").split("|")) == len(columns) for row in rows)
    results = json.loads(out.read_text())
    for name in ("mlc-tiny", "realistic-tiny"):
        models = results["sets"][name]["models"]
        assert set(models) == {"napkinxc-plt", "holoxmc-linear"}
        for row in models.values():
            assert 0 < row["P@1"] <= 100 and 0 < row["P@5"] <= 100 and row["PSP@5"] > 0
            assert row["fit_seconds"] > 0 and row["predict_ms_per_point"] > 0 and row["peak_rss_mb"] > 0


def test_rerank_row_is_skipped_with_its_reason_while_the_head_is_missing(tmp_path):
    """The holoxmc-rerank row runs only where holoxmc has that head; else the row says why."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import panel

    from holoxmc.models.registry import HEADS

    assert panel.missing_head("holoxmc-default") is None and panel.missing_head("omikuji") is None
    reason = panel.missing_head("holoxmc-rerank")
    assert (reason is None) == ("rerank" in HEADS)
    if reason is not None:
        assert "rerank" in reason
        row = panel.run_isolated("mlc-tiny", "holoxmc-rerank", 1, tmp_path / "none", 10)
        assert row == {"error": reason}

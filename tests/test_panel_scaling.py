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
    assert 0 < row["peak_tree_mb"] <= row["peak_tree_rss_mb"]  # the tree's polled PSS and resident peaks
    assert len(row["predict_ms_repeats"]) == 3  # top-5 timed three times by default, the median reported
    assert row["predict_ms_per_point"] == sorted(row["predict_ms_repeats"])[1]
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
    if cell["stage"] != "start":
        assert 0 <= cell["stage_seconds"] < 600  # how long it had been in that stage when stopped
    assert "memory limit" in out.with_suffix(".md").read_text()


def test_last_stage_reads_the_stage_and_the_seconds_spent_in_it():
    scaling = _scaling_module()
    lines = ["stage: generate 100.0", "a library's own output", "stage: fit 160.5", "more output"]
    assert scaling.last_stage(lines, now=200.0) == {"stage": "fit", "stage_seconds": 39.5}
    assert scaling.last_stage(["stage: fit"], now=200.0) == {"stage": "fit"}  # a line without a time
    assert scaling.last_stage(["no stage yet"], now=1.0) == {"stage": "start"}


def _scaling_module():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import scaling
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return scaling


def _fake_row(p1: float, fit: float) -> dict:
    return {"fit_seconds": fit, "peak_rss_mb": 512.0, "predict_ms_per_point": 0.25, "P@1": p1, "P@5": p1 / 3,
            "generate_seconds": 1.0}


def test_table_and_plot_of_a_fake_result_file(tmp_path):
    """Finished and stopped cells side by side: one row each, as many cells as the header, the
    stopped cell says why and where (with the planned split sizes), the plot is a PNG."""
    pytest.importorskip("matplotlib")
    scaling = _scaling_module()
    results = {"cells": {
        "100000": {"napkinxc-plt": {"row": _fake_row(45.5, 300.0), "shape": {"n_train": 73000, "n_test": 23000,
                                                                               "n_features": 60000},
                                    "load": [2.0, 3.5]},
                   "holoxmc-solar": {"error": "time limit: not finished within 600 s", "stage": "fit",
                                     "load": [2.5, 4.0]},
                   "omikuji": {"error": "memory limit: 9 MB resident > 8 MB", "stage": "fit",
                               "stage_seconds": 1234.4}},
        "10000": {"napkinxc-plt": {"row": _fake_row(55.25, 10.0), "shape": {"n_train": 7300, "n_test": 2300,
                                                                             "n_features": 20000}}}}}
    lines = scaling.table(results).splitlines()
    header_cells = lines[0].count("|")
    assert all(line.count("|") == header_cells for line in lines)
    assert lines[2] == "| 10,000 | 7300 / 2300 | napkinxc-plt | 10.0 | 512 | 0.250 | 55.25 | 18.42 | ? |"
    assert lines[3].startswith("| 100,000 | 73000 / 23000 | napkinxc-plt | 300.0 |") and lines[3].endswith(
        "| 2.0-3.5 |")
    assert lines[4].startswith("| 100,000 | 73000 / 23000 | holoxmc-solar | time limit: not finished within 600 s "
                               "(stopped at: fit) |")
    assert lines[5].startswith("| 100,000 | 73000 / 23000 | omikuji | memory limit: 9 MB resident > 8 MB "
                               "(stopped at: fit, 1,234 s in) |")
    assert scaling.peak_mb({**_fake_row(50.0, 1.0), "peak_tree_mb": 700.0}) == 700.0  # workers counted
    assert scaling.peak_mb({**_fake_row(50.0, 1.0), "peak_tree_mb": 300.0}) == 512.0
    path = tmp_path / "fake.png"
    scaling.plot(results, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_merge_joins_runs_into_one_result_file(tmp_path):
    """``--merge`` writes the joined cells (JSON), the table and the plot, running no cell."""
    pytest.importorskip("matplotlib")
    scaling = _scaling_module()
    parts = []
    for n, (key, model) in enumerate((("10000", "omikuji"), ("100000", "holoxmc-hrr"))):
        part = tmp_path / f"part{n}.json"
        part.write_text(json.dumps({"cells": {key: {model: {"row": _fake_row(50.0 + n, 1.0), "load": [1.0, 1.0]}}},
                                    "runs": [{"command": f"run {n}"}]}))
        parts.append(str(part))
    out = tmp_path / "scaling.json"
    scaling.main(["--merge", *parts, "--out", str(out)])
    joined = json.loads(out.read_text())
    assert joined["cells"]["10000"]["omikuji"]["row"]["P@1"] == 50.0
    assert joined["cells"]["100000"]["holoxmc-hrr"]["row"]["P@1"] == 51.0
    assert joined["runs"] == [{"command": "run 0"}, {"command": "run 1"}]
    assert "| 100,000 | 73000 / 23000 | holoxmc-hrr | 1.0 |" in out.with_suffix(".md").read_text()
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_weight_facts_count_the_labels_at_the_default_cap():
    """At L = 670,091 the default cap is 746 weights a label: two labels at it, one below."""
    import numpy as np
    import scipy.sparse as sp

    scaling = _scaling_module()
    n_labels = 670_091
    labels = np.repeat([0, 5, 9], [746, 746, 3])
    features = np.concatenate([np.arange(746), np.arange(746), np.arange(3)])
    weight_rows = sp.csr_matrix((np.ones(len(labels)), (labels, features)), shape=(n_labels, 1000))
    assert scaling.weight_facts(weight_rows) == {"weights_per_label_max": 746, "labels_at_weight_cap": 2,
                                             "weight_cap": 746}


def test_model_options_reach_the_holoxmc_model_and_are_recorded(tmp_path):
    out = tmp_path / "scaling.json"
    done = _run(out, "--models", "holoxmc-solar", "--model-options", '{"head_options": {"chunks": 4}}')
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())
    cell = results["cells"]["300"]["holoxmc-solar"]
    # the estimator refused the option by name: it was passed to XMCClassifier as given
    assert "options ['chunks'] are not accepted by head 'solar'" in cell["error"] and cell["stage"] == "fit"
    assert results["runs"][-1]["limits"]["model_options"] == {"head_options": {"chunks": 4}}

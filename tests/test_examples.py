"""Every script in examples/ runs to the end on its tiny data, within a time limit.

The scripts run in this process (``runpy``), so torch is imported once for all of them;
each prints what it shows and asserts what it claims (a learnt model, a saved model that
scores as the fitted one, a served answer equal to the local one).
"""

from __future__ import annotations

import runpy
import signal
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
#: Seconds each script may take here (each took under 25 s on a loaded 2-core CPU).
LIMIT = 120
#: What each script prints once it has done its work.
EXPECTED = {
    "own_data.py": "first line of top3.txt:",
    "labels_and_thresholds.py": "holoxmc predict --threshold 0.5:",
    "solar_at_scale.py": "top-5 label ids of two rows:",
    "save_load_serve.py": "POST /predict ->",
    "ray_distributed.py": "Ray cluster:",
}


def test_every_example_is_listed() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(EXPECTED)


class _TimedOut(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _TimedOut(f"over {LIMIT} s")


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.xdist_group("ray")) if "ray" in name else name
                                  for name in sorted(EXPECTED)])
def test_example_runs(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    if name == "ray_distributed.py":
        pytest.importorskip("ray", reason="ray is not installed (pip install 'holoxmc[ray]')")
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(LIMIT)
    try:
        runpy.run_path(str(EXAMPLES / name), run_name="__main__")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert EXPECTED[name] in capsys.readouterr().out

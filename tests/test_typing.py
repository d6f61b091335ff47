"""The package ships a ``py.typed`` marker, so its annotations must hold: mypy over
``src/holoxmc`` (settings in ``pyproject.toml``) reports nothing."""

import subprocess
import sys
from pathlib import Path

import pytest

import holoxmc

ROOT = Path(__file__).resolve().parents[1]
#: Both mypy runs write the package's cache (.mypy_cache): one test process runs them, in turn.
pytestmark = pytest.mark.xdist_group("mypy-cache")


def test_the_package_is_marked_typed() -> None:
    assert (Path(holoxmc.__file__).parent / "py.typed").is_file()


def test_mypy_finds_no_errors_in_the_package() -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found")


def test_a_users_type_checker_sees_the_estimators_signatures(tmp_path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the test extra: pip install -e '.[test]'")
    user = tmp_path / "user.py"
    user.write_text(
        "import numpy as np\n"
        "from holoxmc import XMCClassifier\n"
        "clf = XMCClassifier(head='hrr')\n"
        "indices, scores = clf.predict_topk(np.zeros((2, 3)), k='5')\n"
    )
    # the package's settings and cache (written by the test above, or by this run): only user.py is new
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(ROOT / ".mypy_cache"), str(user)], cwd=tmp_path,
                          capture_output=True, text=True)
    assert 'Argument "k" to "predict_topk" of "XMCClassifier" has incompatible type "str"; expected "int"' in done.stdout, \
        done.stdout + done.stderr

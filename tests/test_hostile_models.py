"""Model folders and checkpoints that were edited, corrupted or written by someone else:
every outcome is one InputError or a working model, never another exception and never an
allocation sized by a number the folder claims."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from holoxmc.data import make_synthetic
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.io import atomic_write_json
from holoxmc.settings import for_head

TINY = dict(hidden=(16,), dim=32, epochs=1, batch_size=64, lr=1e-2, dropout=0.0, seed=1, progress=False)
#: Address-space cap of the subprocesses that load hostile folders (torch itself maps ~1 GB).
MEMORY_CAP = 3 * 2**30


@pytest.fixture(scope="module")
def data():
    return make_synthetic(200, 20, 50, n_test=20, labels_per_point=2.0, seed=2)


@pytest.fixture(scope="module")
def saved(data, tmp_path_factory):
    """One saved folder per head kind."""
    train, _ = data
    root = tmp_path_factory.mktemp("models")
    folders = {}
    for head in ("hrr", "dense"):
        folders[head] = XMCClassifier(head=head, **for_head(head, TINY)).fit(train.X, train.Y).save(root / head)
    ensemble = XMCClassifier(head="hrr", **TINY | {"n_models": 2}).fit(train.X, train.Y)
    folders["ensemble"] = ensemble.save(root / "ensemble")
    return folders


def edited(folder: Path, tmp_path: Path, edit) -> Path:
    """A copy of ``folder`` whose config.json went through ``edit(config)``."""
    copy = tmp_path / f"edited-{folder.name}"
    copy.mkdir()
    (copy / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes())
    config = json.loads((folder / "config.json").read_text())
    edit(config)
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def capped_load(folders: list[Path]) -> list[str]:
    """Load (and predict with) each of ``folders`` in one subprocess under
    :data:`MEMORY_CAP`: per folder ``ok``, ``InputError: ...`` or the other exception."""
    code = textwrap.dedent(f"""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))
        import numpy as np, scipy.sparse as sp
        from holoxmc.errors import InputError
        from holoxmc.estimator import XMCClassifier
        for folder in sys.argv[1:]:
            try:
                clf = XMCClassifier.load(folder)
                X = sp.random(3, clf.n_features_, density=0.3, format="csr", dtype=np.float32, random_state=0)
                clf.predict(X)
                print("ok")
            except InputError as exc:
                print("InputError:", str(exc).replace("\\n", " "))
            except BaseException as exc:
                print("OTHER:", type(exc).__name__, str(exc).replace("\\n", " ")[:300])
    """)
    env = {"PYTHONPATH": str(Path(__file__).parents[1] / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code, *map(str, folders)], capture_output=True, text=True,
                          timeout=300, env=env)
    lines = done.stdout.strip().splitlines()
    assert len(lines) == len(folders), f"exit {done.returncode}: {done.stderr[-500:]}"
    return lines


def _set(path: tuple, value):
    def edit(config):
        target = config
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


# ---------------------------------------------------------------------------- sizes (defect 1)
HUGE = [
    ("hrr", ("n_labels",), 10**10),
    ("hrr", ("network", "n_labels"), 10**10),
    ("dense", ("network", "n_labels"), 10**9),
    ("hrr", ("network", "dim"), 10**9),
    ("hrr", ("network", "hidden"), [10**6]),
    ("dense", ("network", "hidden"), [16, 10**7]),
    ("hrr", ("n_features",), 10**9),
    ("hrr", ("network", "n_features"), 10**9),
    ("ensemble", ("network", "members", 1, "dim"), 10**8),
]


def test_claimed_sizes_are_checked_against_the_stored_tensors_under_a_memory_cap(saved, tmp_path):
    folders = []
    for i, (head, path, value) in enumerate(HUGE):
        (tmp_path / str(i)).mkdir()
        folders.append(edited(saved[head], tmp_path / str(i), _set(path, value)))
    *outcomes, untouched = capped_load([*folders, saved["hrr"]])
    for (head, path, value), outcome in zip(HUGE, outcomes):
        assert outcome.startswith("InputError:"), (head, path, value, outcome)
    assert untouched == "ok"


@pytest.mark.parametrize("value", [float("nan"), None, "40", True, 0, -3, 2.0])
def test_a_bad_label_count_is_one_input_error(saved, tmp_path, value):
    folder = edited(saved["hrr"], tmp_path, _set(("n_labels",), value))
    with pytest.raises(InputError, match="n_labels"):
        XMCClassifier.load(folder)


@pytest.mark.parametrize("edit", [
    _set(("network",), None), _set(("network",), []), _set(("network",), {"members": 3}),
    _set(("network", "hidden"), "16"), _set(("network", "hidden"), [[16]]), _set(("network", "dim"), 31),
    _set(("network", "dropout"), {"p": 0}), _set(("network", "backbone"), "rnn"), _set(("network", "seed"), -1),
    _set(("network", "n_features"), 19), _set(("params",), []), _set(("params", "lr"), float("inf")),
], ids=lambda edit, n=itertools.count(): f"edit{next(n)}")
def test_wrong_types_in_config_json_are_one_input_error(saved, tmp_path, edit):
    with pytest.raises(InputError):
        XMCClassifier.load(edited(saved["hrr"], tmp_path, edit))


# ---------------------------------------------------------------------------- weights (defect 2)
@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_naming_the_tensor(saved, tmp_path, bad):
    folder = edited(saved["dense"], tmp_path, lambda config: None)
    tensors = load_file(folder / "model.safetensors")
    tensors["network.head.linear.bias"][3] = bad
    save_file(tensors, folder / "model.safetensors", metadata={"format": "holoxmc-xmc-classifier/1"})
    with pytest.raises(InputError, match="'network.head.linear.bias' holds NaN or infinite"):
        XMCClassifier.load(folder)


# ---------------------------------------------------------------------------- JSON (defect 3)
def test_non_finite_numbers_are_written_as_null(tmp_path):
    atomic_write_json(tmp_path / "m.json", {"loss": float("nan"), "best": [-math.inf, 1.5]})
    text = (tmp_path / "m.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text) == {"loss": None, "best": [None, 1.5]}


def test_a_diverged_history_saves_as_strict_json(saved, tmp_path, data):
    clf = XMCClassifier.load(saved["dense"])
    clf.fit_result_.history[0]["loss"] = float("nan")
    clf.save(tmp_path / "model")
    config = json.loads((tmp_path / "model" / "config.json").read_text(),
                        parse_constant=lambda name: pytest.fail(f"{name} written into config.json"))
    assert config["history"][0]["loss"] is None
    XMCClassifier.load(tmp_path / "model").predict(data[1].X)


# ---------------------------------------------------------------------------- codes (defect 5)
@pytest.mark.parametrize("key, value", [("seed", 2), ("label_chunk", 7), ("code", "circulant")])
def test_an_edited_code_parameter_is_refused(saved, tmp_path, key, value):
    folder = edited(saved["hrr"], tmp_path, _set(("network", key), value))
    with pytest.raises(InputError, match="edited after the model was saved"):
        XMCClassifier.load(folder)


def test_a_folder_saved_before_the_digest_still_loads(saved, tmp_path, data):
    """holoxmc 0.1.0 wrote folders without the digest (0.2.0 on, its absence is an edit)."""
    folder = edited(saved["hrr"], tmp_path, lambda config: config["written_by"].update(holoxmc="0.1.0"))
    tensors = load_file(folder / "model.safetensors")
    save_file(tensors, folder / "model.safetensors", metadata={"format": "holoxmc-xmc-classifier/1"})
    original = XMCClassifier.load(saved["hrr"]).predict_topk(data[1].X)
    again = XMCClassifier.load(folder).predict_topk(data[1].X)
    assert np.array_equal(original[0], again[0])


# ---------------------------------------------------------------------------- checkpoints (defect 4)
def _checkpoint_run(data, run_dir: Path):
    """A tiny two-epoch trainer run that leaves its checkpoint in ``run_dir``."""
    from holoxmc.backbones.network import build_network
    from holoxmc.train import TrainConfig, Trainer

    train, _ = data

    def fit(resume: bool):
        network = build_network("fc", "hrr", n_features=train.X.shape[1], n_labels=train.Y.shape[1],
                                hidden=[16], dim=32, seed=0)
        config = TrainConfig(epochs=2, batch_size=64, lr=1e-2, seed=0, progress=False)
        return Trainer(config).fit(network, train.X, train.Y, run_dir=run_dir, resume=resume)
    return fit


def _rewrite_state(run_dir: Path, edit) -> None:
    """Apply ``edit(state)`` to the trainer state stored in the checkpoint's metadata."""
    from safetensors import safe_open

    path = run_dir / "checkpoint.safetensors"
    with safe_open(str(path), framework="pt") as f:
        metadata = dict(f.metadata())
    tensors = load_file(path)
    state = json.loads(metadata["trainer_state"])
    edit(state)
    metadata["trainer_state"] = json.dumps(state)
    save_file(tensors, path, metadata=metadata)


@pytest.fixture(scope="module")
def checkpoint(data, tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("run")
    fit = _checkpoint_run(data, run_dir)
    fit(False)
    return run_dir, (run_dir / "checkpoint.safetensors").read_bytes(), fit


@pytest.mark.parametrize("edit", [
    _set(("epoch",), -1), _set(("epoch",), "1"), _set(("epoch",), float("nan")), _set(("since_best",), None),
    _set(("history",), {}), _set(("best_score",), float("nan")), _set(("stopped_early",), 0),
    lambda state: state.pop("best_epoch"), lambda state: state.pop("optimizers"), _set(("optimizers",), [1]),
    _set(("epoch",), 10**12),
], ids=lambda edit, n=itertools.count(): f"edit{next(n)}")
def test_a_tampered_checkpoint_state_is_one_input_error(checkpoint, edit):
    run_dir, original, fit = checkpoint
    (run_dir / "checkpoint.safetensors").write_bytes(original)
    _rewrite_state(run_dir, edit)
    with pytest.raises(InputError):
        fit(True)


# ---------------------------------------------------------------------------- fuzzing (defect 7)
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ = settings(max_examples=2, deadline=None, derandomize=True, database=None)
HOSTILE = st.one_of(
    st.sampled_from([0, -1, 1, 2**31, 10**12, 2**63, float("nan"), float("inf"), -float("inf"), 0.5, True, None,
                     "", "x", [], {}, [10**9], {"members": []}]),
    st.integers(), st.floats(), st.text(max_size=3), st.lists(st.integers(-5, 10**10), max_size=3),
)


def _paths(value, prefix=()):
    """Every key path inside a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield prefix + (key,)
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield prefix + (i,)
            yield from _paths(item, prefix + (i,))


def _mutate(config, draw):
    """Replace, delete, insert or nest at one drawn path of ``config`` (in place)."""
    path = draw(st.sampled_from(sorted(_paths(config), key=repr)))
    parent = config
    for key in path[:-1]:
        parent = parent[key]
    action = draw(st.sampled_from(["replace", "delete", "insert", "nest"]))
    if action == "delete":
        del parent[path[-1]]
    elif action == "insert" and isinstance(parent, dict):
        parent[draw(st.sampled_from(["extra", "members", "dim", "hidden", "n_labels"]))] = draw(HOSTILE)
    elif action == "nest":
        parent[path[-1]] = [parent[path[-1]]]
    else:
        parent[path[-1]] = draw(HOSTILE)



@FUZZ
@given(st.data())
def test_fuzzed_config_json_loads_or_is_one_input_error_under_a_memory_cap(saved, tmp_path_factory, data):
    root = tmp_path_factory.mktemp("fuzz")
    folders = []
    for i in range(24):
        head = data.draw(st.sampled_from(["hrr", "dense", "ensemble"]))
        config = json.loads((saved[head] / "config.json").read_text())
        for _ in range(data.draw(st.integers(1, 3))):
            _mutate(config, data.draw)
        (root / str(i)).mkdir()
        folders.append(edited(saved[head], root / str(i), lambda c, new=config: (c.clear(), c.update(new))))
    outcomes = capped_load(folders)
    bad = [(json.loads((folder / "config.json").read_text(), parse_constant=str), outcome)
           for folder, outcome in zip(folders, outcomes) if not outcome.startswith(("ok", "InputError:"))]
    assert not bad, bad[0]


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(st.data())
def test_fuzzed_checkpoint_state_resumes_or_is_one_input_error(checkpoint, data):
    run_dir, original, fit = checkpoint
    (run_dir / "checkpoint.safetensors").write_bytes(original)
    _rewrite_state(run_dir, lambda state: [_mutate(state, data.draw) for _ in range(data.draw(st.integers(1, 3)))])
    try:
        result = fit(True)
    except InputError:
        return
    assert len(result.history) == 2


# ---------------------------------------------------------------------------- final save (defect 6)
def test_a_save_cut_short_leaves_the_old_folder_and_no_temporary_file(saved, tmp_path, data, monkeypatch):
    import os

    folder = edited(saved["hrr"], tmp_path, lambda config: None)
    (folder / ".config.json.stale.tmp").write_text("{")  # left by an earlier killed save
    before = {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")}
    clf = XMCClassifier.load(saved["dense"])
    real_fsync, calls = os.fsync, []

    def failing_fsync(fd):
        calls.append(fd)
        if len(calls) == 2:  # the second file (config.json) fails after the weights were written
            raise OSError(28, "No space left on device")
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(InputError, match="No space left"):
        clf.save(folder)
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    XMCClassifier.load(folder).predict(data[1].X)

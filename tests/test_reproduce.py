"""``holoxmc reproduce`` and the ``"paper"`` preset: every experiment runs end to end on tiny
synthetic data, bad arguments are one-line errors, the papers' numbers are transcribed from
the papers' texts, and the paper preset is each paper's configuration."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from holoxmc.cli import main
from holoxmc.cli.reproduce import EXPERIMENT_NAMES
from holoxmc.errors import InputError
from holoxmc.experiments import reproduce
from holoxmc.experiments.reproduce import EXPERIMENTS, PAPER, run_experiments
from holoxmc.presets import DATASET_PRESETS, paper_params

SRC = str(Path(__file__).resolve().parents[1] / "src")
PAPERS = Path(__file__).resolve().parents[2] / "shared" / "papers"


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One tiny run of every experiment through the CLI: (exit code, output folder)."""
    out = tmp_path_factory.mktemp("repro") / "out"
    code = main(["reproduce", "--tiny", "--quiet", "--out", str(out)])
    return code, out


def test_every_experiment_writes_its_table_and_figure(tiny_run):
    code, out = tiny_run
    assert code == 0
    index = (out / "README.md").read_text()
    for name in EXPERIMENTS:
        assert f"| {name} | {EXPERIMENTS[name].paper} | ran |" in index
        markdown = (out / f"{name}.md").read_text()
        with open(out / f"{name}.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows, name
        header = markdown.split("\n")[4]
        assert header == "| " + " | ".join(rows[0]) + " |"
    for figure in ("hrr_fig2", "hrr_fig8"):
        assert (out / f"{figure}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "hrr_capacity" / "fig5_capacity.png").exists()
    assert "machine:" in index and "mode: tiny" in index


def test_tables_set_paper_numbers_beside_ours(tiny_run):
    _, out = tiny_run
    with open(out / "hrr_table1.csv", newline="") as handle:
        rows = {(r["dataset"], r["model"], r["preset"]): r for r in csv.DictReader(handle)}
    assert rows[("bibtex", "hrr-fc", "paper")]["paper P@1"] == "60.3"
    assert rows[("bibtex", "hrr-fc", "tuned")]["paper P@1"] == "not reported"
    assert float(rows[("bibtex", "hrr-fc", "paper")]["P@1"]) >= 0
    # no raw text for Bibtex: the text models are not run, and say why, with no number
    cnn = rows[("bibtex", "cnn", "paper")]
    assert cnn["status"].startswith("not run: bibtex has no raw text") and cnn["P@1"] == ""
    assert rows[("debtags", "hrr-lstm", "paper")]["status"] == "ran"
    assert rows[("debtags", "hrr-lstm", "paper")]["epochs"] == "1" and rows[("bibtex", "cnn", "paper")]["epochs"] == ""
    with open(out / "solar_table2.csv", newline="") as handle:
        solar = list(csv.DictReader(handle))
    assert {r["scoring"] for r in solar} == {"prob", "logprob", "logit"}
    assert {r["preset"] for r in solar} == {"paper", "tuned"}
    assert all(0 <= float(r["Rec@100"]) <= 100 for r in solar)


def test_unknown_only_name_is_one_error_listing_the_names(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["reproduce", "--tiny", "--only", "hrr_table1", "table9", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown experiment 'table9'" in err[0] and "solar_table6" in err[0]
    assert not out.exists()


def test_only_runs_the_named_experiments(tmp_path):
    assert main(["reproduce", "--tiny", "--quiet", "--only", "hrr_table2", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "hrr_table2.csv", "hrr_table2.md"]


def test_a_failing_experiment_is_reported_and_the_others_still_run(tmp_path, monkeypatch):
    def broken(ctx):
        raise RuntimeError("boom")

    monkeypatch.setitem(EXPERIMENTS, "hrr_table3",
                        reproduce.Experiment("hrr_table3", "HRR Table 3", broken))
    summary = run_experiments(tmp_path, ["hrr_table2", "hrr_table3"], tiny=True)
    assert summary["hrr_table3"]["status"] == "failed: RuntimeError: boom"
    assert summary["hrr_table2"]["status"] == "ran"
    assert not (tmp_path / "hrr_table3.md").exists()
    assert "failed: RuntimeError: boom" in (tmp_path / "README.md").read_text()


def test_cli_names_are_the_registry():
    assert EXPERIMENT_NAMES == tuple(EXPERIMENTS)


def test_reproduce_help_does_not_import_torch():
    code = ("import sys\nfrom holoxmc.cli import main\ntry:\n    main(['reproduce', '--help'])\n"
            "except SystemExit:\n    pass\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=SRC), capture_output=True,
                         text=True, check=True).stdout
    assert "--only NAME" in out and out.strip().splitlines()[-1] == "False"


def test_the_solar_tables_take_recall_from_holoxmc_metrics():
    class Fixed:  # a "model" whose decoding is given
        def predict(self, X, k, **options):
            return np.array([[1, 3, 0], [-1, -1, -1], [0, 1, 2]]), None, np.array([3.0, 0.0, 3.0])

    Y = sp.csr_matrix(np.array([[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0]], dtype=np.float32))
    scores = reproduce._solar_scores(Fixed(), np.zeros((3, 2)), Y, np.ones(4))
    assert scores["Rec@100"] == pytest.approx(100 * (1.0 + 0) / 2)  # the row without labels is left out
    assert not hasattr(reproduce, "recall_at_k")  # one home: holoxmc.metrics


def _numbers(value):
    if isinstance(value, tuple):
        for item in value:
            yield from _numbers(item)
    elif isinstance(value, float):
        yield value


@pytest.mark.skipif(not PAPERS.is_dir(), reason="needs ../shared/papers")
@pytest.mark.parametrize("table", sorted(PAPER))
def test_paper_numbers_are_in_the_papers_texts(table):
    paper = "solar.txt" if table.startswith("solar") else ""
    text = (PAPERS / paper).read_text() if paper else "".join(
        (PAPERS / name).read_text() for name in ("learning-with-hrr.md", "learning-with-hrr-appendix.md"))
    printed = set(re.findall(r"\d+\.\d+", text))
    for value in _numbers(tuple(PAPER[table].values())):
        assert any(p == repr(value) or p.rstrip("0") == repr(value) for p in printed), (table, value)


def test_paper_preset_is_the_papers_configuration():
    hrr = paper_params("delicious", "hrr-fc")
    assert hrr["hidden"] == (512, 512) and hrr["dim"] == 400 and not hrr["refit"]
    assert hrr["head_options"]["ranking"] == 0.0 and hrr["head_options"]["code"] == "random"
    assert not hrr["head_options"]["label_bias"] and not hrr["head_options"]["learn_pm"]
    assert DATASET_PRESETS["delicious"]["hrr"]["head_options"]["ranking"] == 1.0  # the tuned preset differs
    assert paper_params("delicious", "fc")["hidden"] == (512, 512)
    assert paper_params("wiki10-31k", "hrr-fc")["dim"] == 3000
    assert "hidden" not in paper_params("debtags", "hrr-cnn")
    solar = paper_params("amazon-670k", "solar")
    assert solar["head_options"]["n_chunks"] == 32 and solar["head_options"]["n_buckets"] == 20_000
    assert solar["head_options"]["top_buckets"] == 100 and solar["batch_size"] == 1000
    assert solar["head_options"]["loss"] == "full"  # the paper's BCE, not the library's softmax at large B


def test_paper_preset_trains():
    from holoxmc.estimator import XMCClassifier

    X = sp.random(60, 30, density=0.2, format="csr", random_state=0, dtype=np.float32)
    Y = sp.csr_matrix((np.random.default_rng(0).random((60, 12)) < 0.2).astype(np.float32))
    params = paper_params("delicious", "hrr-fc") | {"epochs": 1, "dim": 16, "hidden": (8,), "progress": False}
    assert XMCClassifier(**params).fit(X, Y).predict_topk(X[:2], k=3)[0].shape == (2, 3)


def test_learn_labels_flag_reaches_the_head(tmp_path):
    from holoxmc.cli.train import train_params

    assert train_params("bibtex", "hrr-fc", {"learn_labels": True})["head_options"]["learn_labels"] is True
    with pytest.raises(InputError, match="--learn-labels applies to HRR models only"):
        train_params("bibtex", "fc", {"learn_labels": True})


def test_model_settings_give_the_hrr_dimension_a_preset_leaves_out(tmp_path):
    import inspect

    from holoxmc.estimator import XMCClassifier

    ctx = reproduce.Context(out=tmp_path, quick=True)
    default = inspect.signature(XMCClassifier).parameters["dim"].default
    assert reproduce.model_settings(ctx, "delicious", "hrr-fc", "tuned")["dim"] == default
    assert reproduce.model_settings(ctx, "bibtex", "hrr-fc", "tuned")["dim"] == 800
    assert reproduce.model_settings(ctx, "bibtex", "hrr-fc", "tuned")["n_models"] == 1  # quick: one network


def test_train_preset_paper_is_the_papers_configuration():
    from holoxmc.cli.train import train_params

    params = train_params("delicious", "hrr-fc", {"epochs": 3}, preset="paper")
    assert params["head_options"]["ranking"] == 0.0 and params["hidden"] == (512, 512) and params["epochs"] == 3
    assert train_params("delicious", "hrr-fc", {}, preset="delicious")["head_options"]["ranking"] == 1.0


def test_quick_caps_the_width_of_the_paper_solar_networks(tmp_path):
    quick = reproduce.model_settings(reproduce.Context(out=tmp_path, quick=True), "delicious", "solar", "paper")
    full = reproduce.model_settings(reproduce.Context(out=tmp_path), "delicious", "solar", "paper")
    assert full["hidden"] == (4096,) and quick["hidden"] == (reproduce.QUICK_SOLAR_HIDDEN,)
    assert quick["head_options"]["n_chunks"] == full["head_options"]["n_chunks"] == 16  # K stays the paper's


@pytest.mark.parametrize("machine, processor, expected", [("x86_64", "x86_64", "x86_64, "), ("x86_64", "", "x86_64, "),
                                                        ("x86_64", "AMD EPYC", "x86_64 AMD EPYC, "), ("", "", "CPU, ")])
def test_machine_line_names_the_cpu_once(monkeypatch, machine, processor, expected):
    monkeypatch.setattr(reproduce.platform, "machine", lambda: machine)
    monkeypatch.setattr(reproduce.platform, "processor", lambda: processor)
    line = reproduce.machine()
    assert line.startswith(expected + f"{os.cpu_count()} cores, ")
    assert re.search(r"\(\d+ threads?\)", line)


def test_table7_scores_on_the_network_s_own_device(monkeypatch, tmp_path):
    """Table 7's execution timing puts the fresh network where its batches go (a GPU run
    once failed: the network stayed on the CPU while predict_topk sent the rows to cuda)."""
    import holoxmc.train as train_module

    seen = {}

    def fake_topk(network, X, k=5, *, batch_size=1024, device="cpu"):
        seen["network"] = next(network.parameters()).device.type
        seen["rows"] = str(device)
        return np.zeros((X.shape[0], k), dtype=np.int64), np.zeros((X.shape[0], k), dtype=np.float32)

    monkeypatch.setattr(train_module, "predict_topk", fake_topk)
    ctx = reproduce.Context(out=tmp_path, quick=True, device="meta")
    params = {"head": "hrr", "backbone": "cnn", "dim": 16, "epochs": 1, "progress": False}
    X = np.arange(1, 13, dtype=np.int64).reshape(3, 4)
    reproduce._execution_seconds(ctx, params, X, sp.csr_matrix(np.eye(3, 5, dtype=np.float32)))
    assert seen == {"network": "meta", "rows": "meta"}


@pytest.mark.parametrize("model", ["fc", "hrr-fc", "cnn", "hrr-cnn", "lstm", "hrr-lstm"])
@pytest.mark.parametrize("preset", ["paper", "tuned"])
def test_full_run_epochs_are_the_estimator_s_own_where_a_preset_leaves_them_out(tmp_path, model, preset):
    """A full run trains each network as long as ``XMCClassifier`` would at its defaults (a text
    backbone's 8 or 5 epochs, not the FC head's 20) unless the preset names its epochs."""
    from holoxmc.estimator import XMCClassifier
    from holoxmc.presets import paper_params, preset_params

    params = reproduce.model_settings(reproduce.Context(out=tmp_path), "debtags", model, preset)
    named = (paper_params if preset == "paper" else preset_params)("debtags", model).get("epochs")
    unset = {key: value for key, value in params.items() if key != "epochs"}
    assert params["epochs"] == (named or XMCClassifier(**unset).setting("epochs"))

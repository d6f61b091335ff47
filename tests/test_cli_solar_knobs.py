"""SOLAR's settings on the command line: ``train`` sets them (and records them), ``evaluate``
and ``predict`` override the decoding ones for one call, other models refuse them; and the
paper's strict ``min_freq`` filter beside the relaxed default."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from holoxmc.cli import build_parser, main
from holoxmc.models.solar.codes import SolarLabelCode
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.models.solar.head import solar_decode
from holoxmc.models.solar.fit import SolarConfig

FAST = ["--hidden", "16", "--epochs", "2", "--batch-size", "64", "--lr", "0.01", "--quiet"]
#: Every SOLAR option of ``train``, a value for it, and the SolarConfig field it sets.
KNOBS = [
    ("--chunks", "3", "n_chunks", 3),
    ("--buckets", "8", "n_buckets", 8),
    ("--code-method", "murmur", "code_method", "murmur"),
    ("--feature-dim", "64", "feature_dim", 64),
    ("--top-buckets", "2", "top_buckets", 2),
    ("--min-freq", "3", "min_freq", 3),
    ("--min-freq-mode", "strict", "min_freq_mode", "strict"),
    ("--scoring", "logit", "scoring", "logit"),
]


# ---------------------------------------------------------------------------- strict vs relaxed
def _hand_built() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two chunks, two buckets, four labels. Chunk 0 puts labels {0, 1} in bucket 0 and
    {2, 3} in bucket 1; chunk 1 puts {0, 2} in bucket 0 and {1, 3} in bucket 1. The point
    prefers bucket 0 in both chunks: label 0 is retrieved twice, labels 1 and 2 once."""
    buckets = torch.tensor([[0, 0, 1, 1], [0, 1, 0, 1]])
    table = torch.tensor([[[0, 1], [2, 3]], [[0, 2], [1, 3]]])
    logits = torch.tensor([[[2.0, -2.0], [1.0, -1.0]]])  # (n=1, K=2, B=2)
    return logits, table, buckets


def test_strict_min_freq_keeps_only_labels_enough_chunks_retrieve():
    logits, table, buckets = _hand_built()
    _, labels, kept = solar_decode(logits, table, buckets, 2, top_buckets=1, min_freq=2, min_freq_mode="strict")
    assert labels.tolist() == [[0, -1]] and kept.tolist() == [1]
    # relaxed: fewer than k = 2 labels pass min_freq 2, so the point's threshold drops to the 2nd best hit
    # count (1) and label 1 (sigmoid 2 + sigmoid -1 = 1.15) beats label 2 (sigmoid -2 + sigmoid 1 = 0.85)
    _, labels, kept = solar_decode(logits, table, buckets, 2, top_buckets=1, min_freq=2)
    assert labels.tolist() == [[0, 1]] and kept.tolist() == [3]
    # with k = 1 the relaxed filter has nothing to relax: both modes agree
    strict = solar_decode(logits, table, buckets, 1, top_buckets=1, min_freq=2, min_freq_mode="strict")
    relaxed = solar_decode(logits, table, buckets, 1, top_buckets=1, min_freq=2)
    assert all(torch.equal(a, b) for a, b in zip(strict, relaxed))
    with pytest.raises(InputError, match="min_freq_mode"):
        solar_decode(logits, table, buckets, 2, min_freq_mode="loose")  # type: ignore[arg-type]


def test_strict_decoding_matches_a_per_point_reference():
    """Random logits: strict keeps exactly the labels retrieved by >= min_freq chunks, scored
    as the relaxed decoding scores them; a point with none gets no labels at all."""
    L, K, B, n, k, m, min_freq = 60, 4, 9, 40, 5, 2, 3
    code = SolarLabelCode(L, n_chunks=K, n_buckets=B, seed=1)
    logits = torch.randn(n, K, B, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    scores, labels, kept = solar_decode(logits, code.inverted_index().padded(), torch.from_numpy(code.buckets).long(),
                                        k, top_buckets=m, min_freq=min_freq, min_freq_mode="strict")
    short = 0
    for i in range(n):
        hits = Counter(label for c in range(K) for b in np.argsort(-logits[i, c].numpy())[:m]
                       for label in np.flatnonzero(code.buckets[c] == b).tolist())
        passed = {label: float(torch.sigmoid(logits[i, torch.arange(K), code.buckets[:, label]]).sum())
                  for label, h in hits.items() if h >= min_freq}
        assert int(kept[i]) == len(passed)
        best = sorted(passed, key=passed.__getitem__, reverse=True)[:k]
        assert labels[i, : len(best)].tolist() == best and (labels[i, len(best):] == -1).all()
        np.testing.assert_allclose(scores[i, : len(best)].numpy(), [passed[b] for b in best], rtol=1e-12)
        short += len(best) < k
    assert short > 0  # the case the relaxed filter would have filled


def test_relaxed_decoding_gives_a_point_the_same_first_labels_whatever_k_asks():
    """The relaxed filter lets more candidates in for a larger k; they rank after the labels
    that pass ``min_freq`` (by hit count, then score), so ``k = 20``'s first j labels are ``k = j``'s
    (before, a label one chunk retrieved with a high probability could outrank them, and a
    top-100 list's P@5 at L = 100K fell from 32.1 to 20.5)."""
    L, K, B, n, m, min_freq = 80, 4, 10, 60, 3, 3
    code = SolarLabelCode(L, n_chunks=K, n_buckets=B, seed=2)
    logits = torch.randn(n, K, B, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    table, buckets = code.inverted_index().padded(), torch.from_numpy(code.buckets).long()
    decoded = {k: solar_decode(logits, table, buckets, k, top_buckets=m, min_freq=min_freq) for k in (1, 2, 5, 20)}
    for k in (1, 2, 5):
        assert torch.equal(decoded[20][1][:, :k], decoded[k][1])
        assert torch.equal(decoded[20][0][:, :k], decoded[k][0])
    strict = solar_decode(logits, table, buckets, 20, top_buckets=m, min_freq=min_freq, min_freq_mode="strict")[1]
    passing = (strict >= 0).sum(1)
    assert 0 < int(passing.min()) < 20  # points where the relaxed filter let candidates in
    for i in range(n):  # the labels that pass min_freq come first, in the strict filter's order
        assert decoded[20][1][i, : passing[i]].tolist() == strict[i, : passing[i]].tolist()


def test_solar_config_takes_the_mode_and_refuses_a_strict_filter_no_label_can_pass():
    assert SolarConfig().min_freq_mode == "relaxed"
    assert SolarConfig(n_chunks=4, min_freq=4, min_freq_mode="strict").min_freq == 4
    assert SolarConfig(n_chunks=4, min_freq=9).min_freq == 9  # relaxed: lowered per point anyway
    with pytest.raises(InputError, match=r"min_freq \(5\) exceeds n_chunks \(4\)"):
        SolarConfig(n_chunks=4, min_freq=5, min_freq_mode="strict")
    with pytest.raises(InputError, match="min_freq_mode must be one of"):
        SolarConfig(min_freq_mode="loose")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- train
@pytest.fixture(scope="module")
def solar_run(toy, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "solar"
    argv = ["train", str(toy), "--model", "solar", "--out", str(run_dir), *FAST]
    assert main(argv + [item for flag, value, _, _ in KNOBS for item in (flag, value)]) == 0
    return run_dir


def test_every_solar_flag_reaches_the_saved_config_and_the_settings(solar_run):
    head_options = json.loads((solar_run / "config.json").read_text())["params"]["head_options"]
    saved = json.loads((solar_run / "solar.json").read_text())["config"]
    recorded = json.loads((solar_run / "metrics.json").read_text())["settings"]
    for flag, _, field, value in KNOBS:
        assert head_options[field] == value, flag
        assert saved[field] == value, flag
        assert recorded["solar"][field] == value, flag
        assert recorded["params"]["head_options"][field] == value, flag
    assert getattr(XMCClassifier.load(solar_run).solar_.config, "min_freq_mode") == "strict"


def test_defaults_are_recorded_resolved(toy, tmp_path):
    run_dir = tmp_path / "run"
    assert main(["train", str(toy), "--model", "solar", "--chunks", "4", "--out", str(run_dir), *FAST]) == 0
    recorded = json.loads((run_dir / "metrics.json").read_text())["settings"]["solar"]
    defaults = SolarConfig()
    assert recorded == {"n_chunks": 4, "n_buckets": 15, "code_method": defaults.code_method, "feature_dim": None,
                        "top_buckets": defaults.top_buckets, "min_freq": 2, "min_freq_mode": "relaxed",
                        "scoring": defaults.scoring}


def test_help_states_solar_config_defaults():
    """The help texts name SolarConfig's defaults (the parser imports no torch to read them)."""
    train = next(action for action in build_parser()._actions
                 if isinstance(action, argparse._SubParsersAction)).choices["train"]
    helps = {action.dest: action.help for action in train._actions}
    defaults = SolarConfig()
    assert f"(default: {defaults.top_buckets})" in helps["top_buckets"]
    assert f"(default: {defaults.min_freq_mode})" in helps["min_freq_mode"]
    assert f"(default: {defaults.scoring})" in helps["scoring"]
    assert f"(default: {defaults.code_method})" in helps["code_method"]


# ---------------------------------------------------------------------------- evaluate / predict
def _evaluate(run_dir: Path, toy: Path, output: Path, *options: str) -> dict:
    assert main(["evaluate", str(run_dir), str(toy), "--output", str(output), *options]) == 0
    return json.loads(output.read_text())


def test_evaluate_overrides_the_decoding_for_that_call_only(solar_run, toy, tmp_path, capsys):
    trained = json.loads((solar_run / "metrics.json").read_text())
    saved_before = (solar_run / "solar.json").read_text()
    plain = _evaluate(solar_run, toy, tmp_path / "plain.json")
    assert plain["metrics"]["P@1"] == trained["test"]["P@1"]
    assert plain["settings"] == {"solar": trained["settings"]["solar"], "overridden": []}
    # the saved values given again change nothing
    same = _evaluate(solar_run, toy, tmp_path / "same.json", "--min-freq", "3", "--scoring", "logit")
    assert same["metrics"] == plain["metrics"] and same["settings"]["overridden"] == ["min_freq", "scoring"]
    relaxed = _evaluate(solar_run, toy, tmp_path / "relaxed.json", "--min-freq-mode", "relaxed", "--top-buckets", "4",
                        "--min-freq", "1", "--scoring", "prob")
    assert relaxed["settings"]["solar"] | {"top_buckets": 2, "min_freq": 3, "min_freq_mode": "strict",
                                           "scoring": "logit"} == plain["settings"]["solar"]
    assert relaxed["settings"]["overridden"] == ["min_freq", "min_freq_mode", "scoring", "top_buckets"]
    # strict with all 3 chunks leaves some points short of 5 labels; relaxed fills every rank
    assert relaxed["metrics"]["Recall@5"] > plain["metrics"]["Recall@5"]
    assert ("SOLAR decoding for this call: top_buckets=4, min_freq=1, min_freq_mode=relaxed, scoring=prob"
            in capsys.readouterr().out)
    assert (solar_run / "solar.json").read_text() == saved_before
    assert _evaluate(solar_run, toy, tmp_path / "again.json")["metrics"] == plain["metrics"]


def _predict(run_dir: Path, toy: Path, output: Path, *options: str) -> list[list[str]]:
    assert main(["predict", str(run_dir), str(toy / "toy_test.txt"), "--output", str(output), *options]) == 0
    return [line.split() for line in output.read_text().splitlines()]


def test_predict_overrides_the_decoding(solar_run, toy, tmp_path):
    strict = _predict(solar_run, toy, tmp_path / "strict.txt")
    relaxed = _predict(solar_run, toy, tmp_path / "relaxed.txt", "--min-freq-mode", "relaxed")
    assert len(strict) == len(relaxed) == 200
    assert any(len(row) < 5 for row in strict) and all(len(row) == 5 for row in relaxed)
    logprob = _predict(solar_run, toy, tmp_path / "logprob.txt", "--min-freq-mode", "relaxed", "--scoring", "logprob")
    scores = [float(pair.rsplit(":", 1)[1]) for row in logprob for pair in row]
    assert all(score <= 0 for score in scores)  # sums of log-probabilities
    assert any(float(pair.rsplit(":", 1)[1]) > 0 for row in relaxed for pair in row)  # the saved logit scoring


# ---------------------------------------------------------------------------- refusals
@pytest.fixture(scope="module")
def fc_run(toy, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("runs") / "fc"
    assert main(["train", str(toy), "--model", "fc", "--out", str(run_dir), "--hidden", "8", "--epochs", "1",
                 "--quiet"]) == 0
    return run_dir


def _one_error(capsys: pytest.CaptureFixture[str], message: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("holoxmc: error:") and message in err[0], err


@pytest.mark.parametrize("flag, value", [(flag, value) for flag, value, _, _ in KNOBS])
@pytest.mark.parametrize("model", ["fc", "hrr-fc", "linear"])
def test_train_refuses_solar_flags_for_other_models(toy, tmp_path, capsys, model, flag, value):
    argv = ["train", str(toy), "--model", model, "--out", str(tmp_path / "run"), flag, value, "--quiet"]
    assert main(argv) == 2
    _one_error(capsys, f"{flag} applies to --model solar only")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", ["evaluate", "predict"])
@pytest.mark.parametrize("flag, value", [("--scoring", "logit"), ("--top-buckets", "3"), ("--min-freq", "2"),
                                         ("--min-freq-mode", "strict")])
def test_evaluate_and_predict_refuse_decoding_flags_for_other_runs(fc_run, toy, tmp_path, capsys, command, flag,
                                                                   value):
    output = tmp_path / "out"
    assert main([command, str(fc_run), str(toy), "--output", str(output), flag, value]) == 2
    _one_error(capsys, f"{flag} applies to SOLAR runs only; {fc_run} holds a 'dense' model")
    assert not output.exists()


def test_training_options_are_not_evaluate_options(solar_run, toy, capsys):
    assert main(["evaluate", str(solar_run), str(toy), "--code-method", "murmur"]) == 2
    _one_error(capsys, "unrecognized arguments: --code-method murmur")


def test_a_strict_filter_above_k_is_refused(solar_run, toy, tmp_path, capsys):
    assert main(["train", str(toy), "--model", "solar", "--chunks", "2", "--min-freq", "3", "--min-freq-mode",
                 "strict", "--out", str(tmp_path / "run"), *FAST]) == 2
    _one_error(capsys, "min_freq (3) exceeds n_chunks (2)")
    assert not (tmp_path / "run").exists()
    assert main(["evaluate", str(solar_run), str(toy), "--output", str(tmp_path / "e.json"), "--min-freq", "4"]) == 2
    _one_error(capsys, "min_freq (4) exceeds n_chunks (3)")
    assert not (tmp_path / "e.json").exists()


def test_loss_negatives_and_prior_bias_flags_reach_the_saved_model(toy, tmp_path):
    from holoxmc.models.solar.head import OutputRows

    run_dir = tmp_path / "run"
    argv = ["train", str(toy), "--model", "solar", "--chunks", "2", "--loss", "sampled", "--negatives", "5",
            "--prior-bias", "--out", str(run_dir), *FAST]
    assert main(argv) == 0
    saved = json.loads((run_dir / "solar.json").read_text())["config"]
    assert (saved["loss"], saved["negatives"], saved["prior_bias"]) == ("sampled", 5, True)
    assert isinstance(XMCClassifier.load(run_dir).solar_.networks[0].head.dense.linear, OutputRows)

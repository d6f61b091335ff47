"""Runs trained on raw text: the CLI saves the text encoder fitted on the training texts
and applies it, never one fitted on the texts it is given, to new texts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from holoxmc.cli import main
from holoxmc.cli.train import TEXT_ENCODER_FILE
from holoxmc.data import TextEncoder, load, load_npz, read_jsonl, save_npz
from holoxmc.estimator import XMCClassifier

FAST = ["--hidden", "32", "--dropout", "0", "--epochs", "6", "--batch-size", "32", "--lr", "0.01", "--quiet"]
LABELS = [f"tag{i}" for i in range(6)]


def _records(n: int, seed: int, with_labels: bool = True) -> list[dict]:
    """Texts made of each label's three signature words plus filler words."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        labels = sorted(rng.choice(len(LABELS), size=int(rng.integers(1, 3)), replace=False).tolist())
        words = [f"w{label}x{j}" for label in labels for j in range(3)] + [f"filler{k}" for k in rng.integers(0, 40, 5)]
        rng.shuffle(words)
        row = {"id": str(i), "text": " ".join(words)}
        if with_labels:
            row["labels"] = [LABELS[label] for label in labels]
        rows.append(row)
    return rows


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture(scope="module")
def text_set(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("data") / "Tags"
    _write(folder / "train.jsonl", _records(400, seed=0))
    _write(folder / "test.jsonl", _records(80, seed=1))
    return folder


@pytest.mark.parametrize("model", ["hrr-fc", "hrr-cnn"])
def test_text_run_encodes_new_texts_with_its_training_encoder(text_set, tmp_path, model, capsys):
    run = tmp_path / "run"
    extra = ["--dim", "64"]
    fast = FAST if model == "hrr-fc" else FAST[2:]  # --hidden sizes the FC backbone alone
    assert main(["train", str(text_set), "--model", model, "--out", str(run), *extra, *fast]) == 0
    assert (run / TEXT_ENCODER_FILE).exists()
    metrics = json.loads((run / "metrics.json").read_text())["test"]
    assert metrics["P@1"] > 60  # signature words make the labels learnable

    # evaluate the test split given as a single file: the same metrics as training reported
    assert main(["evaluate", str(run), str(text_set / "test.jsonl"), "--output", str(tmp_path / "e.json")]) == 0
    evaluated = json.loads((tmp_path / "e.json").read_text())["metrics"]
    assert {k: evaluated[k] for k in metrics} == metrics

    # new texts without labels, in a file of their own (a vocabulary fitted on them would differ)
    new = _write(tmp_path / "new.jsonl", _records(25, seed=7, with_labels=False))
    assert main(["predict", str(run), str(new), "--top-k", "3", "--output", str(tmp_path / "p.txt")]) == 0
    predicted = [[int(pair.split(":")[0]) for pair in line.split()] for line in (tmp_path / "p.txt").read_text().splitlines()]
    encoder = TextEncoder.load(run / TEXT_ENCODER_FILE)
    texts = read_jsonl(new, require_labels=False).texts
    inputs = encoder.features(texts) if model == "hrr-fc" else encoder.tokens(texts)
    expected, _ = XMCClassifier.load(run).predict_topk(inputs, k=3)
    assert predicted == expected.tolist()
    assert main(["predict", str(run), str(new), "--top-k", "3", "--label-names", "--output", str(tmp_path / "n.txt")]) == 0
    named = [[pair.rsplit(":", 1)[0] for pair in line.split()] for line in (tmp_path / "n.txt").read_text().splitlines()]
    assert named == [[encoder.labels[label] for label in row] for row in predicted]
    truth = [[encoder.labels.index(label) for label in row["labels"]] for row in _records(25, seed=7)]
    assert np.mean([row[0] in labels for row, labels in zip(predicted, truth)]) > 0.6


def test_a_text_run_trained_with_data_options_evaluates_and_predicts_its_own_set(text_set, tmp_path, capsys):
    """Its encoder fixed min_df when it trained: the options metrics.json records are not
    applied again (where they do not apply), and the metrics are those training reported."""
    run = tmp_path / "run"
    assert main(["train", str(text_set), "--model", "fc", "--out", str(run), "--data-option", "min_df=1", *FAST]) == 0
    assert json.loads((run / "metrics.json").read_text())["data"]["options"] == {"min_df": 1}
    assert main(["evaluate", str(run), str(text_set), "--output", str(tmp_path / "e.json")]) == 0
    expected = json.loads((run / "metrics.json").read_text())["test"]
    assert {k: v for k, v in json.loads((tmp_path / "e.json").read_text())["metrics"].items() if k in expected} == expected
    capsys.readouterr()
    assert main(["predict", str(run), str(text_set), "--top-k", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 80
    assert main(["evaluate", str(run), str(text_set), "--data-option", "min_df=1"]) == 2
    assert "--data-option and --text-features do not apply" in capsys.readouterr().err


def test_a_run_on_word_pairs_encodes_new_texts_with_them(text_set, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", str(text_set), "--model", "linear", "--out", str(run), "--data-option", "ngrams=2", "--quiet"]
    assert main(argv) == 0
    assert json.loads((run / "metrics.json").read_text())["data"]["options"] == {"ngrams": 2}
    encoder = TextEncoder.load(run / TEXT_ENCODER_FILE)
    assert any(" " in term for term in encoder.tfidf.get_feature_names_out())  # word pairs are terms
    assert main(["evaluate", str(run), str(text_set), "--output", str(tmp_path / "e.json")]) == 0
    expected = json.loads((run / "metrics.json").read_text())["test"]
    assert {k: v for k, v in json.loads((tmp_path / "e.json").read_text())["metrics"].items() if k in expected} == expected


def test_text_features_flag_trains_on_character_runs_and_predicts_with_them(text_set, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", str(text_set), "--model", "linear", "--out", str(run), "--text-features", "words+pairs+chars", "--quiet"]
    assert main(argv) == 0
    assert json.loads((run / "metrics.json").read_text())["data"]["options"] == {"text_features": "words+pairs+chars"}
    encoder = TextEncoder.load(run / TEXT_ENCODER_FILE)
    assert encoder.chars is not None and XMCClassifier.load(run).n_features_ == encoder.n_features
    assert main(["evaluate", str(run), str(text_set), "--output", str(tmp_path / "e.json")]) == 0
    expected = json.loads((run / "metrics.json").read_text())["test"]
    assert {k: v for k, v in json.loads((tmp_path / "e.json").read_text())["metrics"].items() if k in expected} == expected
    capsys.readouterr()
    assert main(["predict", str(run), str(text_set / "test.jsonl"), "--top-k", "1"]) == 0
    test = read_jsonl(text_set / "test.jsonl")
    predicted = [int(line.split(":")[0]) for line in capsys.readouterr().out.splitlines()]
    assert predicted == XMCClassifier.load(run).predict_topk(encoder.features(test.texts), k=1)[0][:, 0].tolist()


def test_text_encoder_is_the_one_the_dataset_was_made_with(text_set, tmp_path):
    train, test = load(text_set, "train"), load(text_set, "test", features="tokens")
    encoder = TextEncoder.from_dict(json.loads(json.dumps(test.encoder.to_dict())))
    assert (encoder.features(test.texts) != test.X).nnz == 0
    assert np.array_equal(encoder.tokens(test.texts), test.tokens)
    assert encoder.labels == test.label_names and (train.encoder.features(test.texts) != test.X).nnz == 0
    save_npz(test, tmp_path / "cached.npz")  # the .npz cache keeps the encoder
    cached = load_npz(tmp_path / "cached.npz").encoder
    assert (cached.features(test.texts) != test.X).nnz == 0 and np.array_equal(cached.tokens(test.texts), test.tokens)


@pytest.mark.parametrize("case, message", [
    ("vectors-run-on-texts", "has no text_encoder.json"),
    ("text-run-on-vectors", "was trained on raw text"),
    ("unknown-label", "new.jsonl:1: label 'nope' is not in the label vocabulary"),
    ("broken-encoder", "not a text encoder file"),
    ("names-of-a-vectors-run", "has no label names"),
    ("data-option-for-a-text-run", "encodes raw text with its saved text encoder; --data-option and --text-features "
                                   "do not apply"),
    ("text-features-for-a-text-run", "--data-option and --text-features do not apply"),
    ("unknown-text-features", "text_features must be one of words, words+pairs, words+pairs+chars; got 'trigrams'"),
])
def test_text_mismatches_are_one_error(text_set, toy, tmp_path, capsys, case, message):
    text_run, vector_run = tmp_path / "text", tmp_path / "vectors"
    assert main(["train", str(text_set), "--model", "fc", "--out", str(text_run), *FAST]) == 0
    assert main(["train", str(toy), "--model", "fc", "--out", str(vector_run), *FAST]) == 0
    capsys.readouterr()
    new = _write(tmp_path / "new.jsonl", [{"text": "w1x0 w1x1", "labels": ["nope"]}])
    argv = {
        "vectors-run-on-texts": ["predict", str(vector_run), str(new)],
        "text-run-on-vectors": ["predict", str(text_run), str(toy / "toy_test.txt")],
        "unknown-label": ["evaluate", str(text_run), str(new)],
        "broken-encoder": ["predict", str(text_run), str(new)],
        "names-of-a-vectors-run": ["predict", str(vector_run), str(toy / "toy_test.txt"), "--label-names"],
        "data-option-for-a-text-run": ["predict", str(text_run), str(new), "--data-option", "max_length=8"],
        "text-features-for-a-text-run": ["evaluate", str(text_run), str(new), "--text-features", "words"],
        "unknown-text-features": ["train", str(new), "--text-features", "trigrams", "--out", str(tmp_path / "x")],
    }[case]
    if case == "broken-encoder":
        (text_run / TEXT_ENCODER_FILE).write_text('{"format": "holoxmc-text-encoder/1"}')
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("holoxmc: error:") and message in err[0]

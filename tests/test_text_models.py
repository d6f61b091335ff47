"""The text models (CNN and LSTM backbones, dense or HRR head): their own defaults, the
settings that do not apply to them refused, pre-trained word vectors, and a batch's padding
that changes no row's output."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from holoxmc.backbones import AttentionLSTMBackbone, XMLCNNBackbone
from holoxmc.cli import main
from holoxmc.data.embeddings import read_word_vectors
from holoxmc.data.text import Tokenizer
from holoxmc.errors import DataFormatError, InputError
from holoxmc.settings import for_head
from holoxmc.estimator import XMCClassifier
from holoxmc.presets import BACKBONE_DEFAULTS, BACKBONE_OPTIONS, preset_params

TINY = {"embed_dim": 8, "n_filters": 4, "bottleneck": 16, "max_length": 12}
TINY_LSTM = {"embed_dim": 8, "hidden_size": 6, "fc_size": 16, "max_length": 12}
LABELS = [f"tag{i}" for i in range(4)]


def _tokens(n: int = 60, seed: int = 0) -> tuple[np.ndarray, list[list[int]]]:
    rng = np.random.default_rng(seed)
    X = np.zeros((n, 12), np.int64)
    for row, length in enumerate(rng.integers(1, 12, n)):
        X[row, :length] = rng.integers(2, 40, length)
    return X, [[int(x) % 4] for x in X[:, 0]]


# ---------------------------------------------------------------------------- presets and defaults
@pytest.mark.parametrize("model", ["hrr-cnn", "hrr-lstm", "cnn", "lstm"])
def test_the_debtags_fc_preset_is_not_applied_to_a_text_backbone(model):
    params = preset_params("debtags", model)
    assert "linear_width" not in params and "hidden" not in params
    assert XMCClassifier(**params)._validate_params() is not None
    assert preset_params("debtags", "hrr-fc")["linear_width"] == 400  # the FC model keeps its preset


@pytest.mark.parametrize("backbone", ["cnn", "lstm"])
def test_a_text_backbone_takes_its_own_defaults(backbone):
    clf = XMCClassifier(head="hrr", backbone=backbone)
    for name, value in BACKBONE_DEFAULTS[backbone].items():
        assert clf.setting(name) == value
    assert XMCClassifier(head="hrr", backbone=backbone, lr=0.5).setting("lr") == 0.5
    assert XMCClassifier(head="hrr", backbone="fc").setting("epochs") == 20  # the head's default


def test_the_backbone_options_are_recorded_in_the_network_config():
    X, Y = _tokens()
    clf = XMCClassifier(head="hrr", backbone="lstm", dim=16, epochs=1, progress=False,
                        head_options={"embed_dim": 8, "hidden_size": 6, "fc_size": 16}).fit(X, Y)
    config = clf.network_.config
    assert (config["embed_dim"], config["hidden_size"]) == (8, 6)
    assert config["max_length"] == BACKBONE_OPTIONS["lstm"]["max_length"]


# ---------------------------------------------------------------------------- the dense-head LSTM
def _keyword_texts(n: int, seed: int, n_labels: int = 50) -> tuple[np.ndarray, list[list[int]]]:
    """Texts of 4-11 filler words and one keyword naming the row's label; label 0 is the
    most frequent (about a third of the rows)."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, 12), np.int64)
    Y = []
    for row in range(n):
        length = int(rng.integers(4, 12))
        X[row, :length] = rng.integers(2 + n_labels, 2 + n_labels + 300, length)
        label = int(rng.integers(0, n_labels)) if rng.random() < 0.7 else 0
        X[row, int(rng.integers(0, length))] = 2 + label
        Y.append([label])
    return X, Y


def test_the_dense_lstm_learns_beyond_the_most_frequent_label():
    """At its defaults the dense-head LSTM used to rank the most frequent label first for every
    text (its backbone emitted one constant vector); it starts from the labels' priors now."""
    X, Y = _keyword_texts(2000, seed=0)
    X_test, Y_test = _keyword_texts(400, seed=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small batches: one thread is several times faster on a shared machine
    try:
        clf = XMCClassifier(head="dense", backbone="lstm", epochs=8, batch_size=64, progress=False).fit(X, Y)
    finally:
        torch.set_num_threads(threads)
    assert clf.network_.config["prior_bias"] is True
    top = clf.predict_topk(X_test, k=1)[0][:, 0]
    p_at_1 = np.mean(top == np.array([y[0] for y in Y_test]))
    most_frequent = np.mean([y[0] == 0 for y in Y_test])
    assert p_at_1 > most_frequent + 0.2


def test_the_dense_head_starts_from_the_label_priors_only_when_asked():
    from holoxmc.heads.dense import DenseHead

    Y = sp.csr_matrix(np.array([[1, 0, 0], [1, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=np.float32))
    head = DenseHead(4, 3, prior_bias=True)
    head.start_from_labels(Y)
    share = (np.array([3, 1, 0]) + 0.5) / 5
    np.testing.assert_allclose(head.linear.bias.detach().numpy(), np.log(share / (1 - share)), rtol=1e-6)
    plain = DenseHead(4, 3)
    before = plain.linear.bias.detach().clone()
    plain.start_from_labels(Y)
    assert torch.equal(plain.linear.bias.detach(), before)
    with pytest.raises(InputError, match="columns"):
        head.start_from_labels(sp.csr_matrix((2, 5)))
    assert "prior_bias" not in XMCClassifier(head="hrr", backbone="lstm", dim=16, epochs=1, progress=False,
                                              head_options=TINY_LSTM).fit(*_tokens()).network_.config


# ---------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("backbone", ["cnn", "lstm"])
@pytest.mark.parametrize("setting", [{"hidden": (32,)}, {"linear_width": 10}])
def test_a_setting_of_the_fc_backbone_is_refused_for_a_text_backbone(backbone, setting):
    X, Y = _tokens()
    with pytest.raises(InputError, match=rf"\['{next(iter(setting))}'\] do not apply to backbone '{backbone}'"):
        XMCClassifier(head="hrr", backbone=backbone, **setting).fit(X, Y)


@pytest.mark.parametrize("model", ["hrr-cnn", "lstm"])
def test_the_cli_refuses_hidden_for_a_text_model_with_one_line(text_set, tmp_path, capsys, model):
    assert main(["train", str(text_set), "--model", model, "--out", str(tmp_path / "r"), "--hidden", "32",
                 "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("holoxmc: error: ['hidden'] do not apply to backbone") and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


# ---------------------------------------------------------------------------- padding
def test_the_lstm_output_of_a_row_does_not_depend_on_the_padding_of_its_batch():
    net = AttentionLSTMBackbone(50, embed_dim=8, hidden_size=6, fc_size=5, dropout=0.0).eval()
    short = torch.tensor([[4, 7, 9, 0], [3, 0, 0, 0]])
    padded = torch.nn.functional.pad(short, (0, 60))
    assert torch.allclose(net(short), net(padded), atol=1e-6)
    assert torch.allclose(net(short[1:]), net(short)[1:], atol=1e-6)


def test_the_lstm_reads_at_most_max_length_tokens():
    net = AttentionLSTMBackbone(50, embed_dim=8, hidden_size=6, fc_size=5, dropout=0.0, max_length=3).eval()
    assert torch.allclose(net(torch.tensor([[4, 7, 9, 11, 12]])), net(torch.tensor([[4, 7, 9]])), atol=1e-6)


def test_the_cnn_output_of_a_row_does_not_depend_on_the_width_of_its_batch():
    net = XMLCNNBackbone(50, embed_dim=8, n_filters=4, bottleneck=5, dropout=0.0, max_length=20).eval()
    short = torch.tensor([[4, 7, 9, 0], [3, 0, 0, 0]])
    assert torch.allclose(net(short), net(torch.nn.functional.pad(short, (0, 30))), atol=1e-6)
    with pytest.raises(InputError, match="max_length"):
        XMLCNNBackbone(50, max_length=0)


# ---------------------------------------------------------------------------- word vectors
@pytest.fixture
def tokenizer() -> Tokenizer:
    return Tokenizer(max_vocab=10).fit(["the cat sat", "the dog sat", "a bird"])


def test_read_word_vectors_keeps_the_vocabulary_words_at_their_ids(tokenizer, tmp_path):
    file = tmp_path / "glove.txt"
    file.write_text("cat 1 2 3\nzebra 0 0 0\nthe 4 5 6\n\n")
    found = read_word_vectors(file, tokenizer, 3)
    ids = {tokenizer.vocabulary[i - 2]: v.tolist() for i, v in zip(found.ids, found.vectors)}
    assert ids == {"cat": [1.0, 2.0, 3.0], "the": [4.0, 5.0, 6.0]}
    assert found.coverage == pytest.approx(2 / len(tokenizer.vocabulary))
    gz = tmp_path / "glove.txt.gz"
    gz.write_bytes(gzip.compress(file.read_bytes()))
    assert read_word_vectors(gz, tokenizer, 3).ids.tolist() == found.ids.tolist()


@pytest.mark.parametrize(("text", "line", "message"), [
    ("cat 1 2 3\nthe 1 2\n", 2, "2 numbers after the word; the embedding is 3 wide"),
    ("zebra 1 2 3 4\n", 1, "4 numbers"),  # a ragged row of a word outside the vocabulary too
    ("cat 1 x 3\n", 1, "'x' is not a number"),
    ("cat 1 nan 3\n", 1, "NaN or an infinite number"),
    ("cat 1 1e39 3\n", 1, "NaN or an infinite number"),
    ("cat 1 2 3\ncat 1 2 3\n", 2, "'cat' appears a second time"),
    ("cat\n", 1, "0 numbers"),
])
def test_a_bad_word_vector_file_is_one_error_with_its_line(tokenizer, tmp_path, text, line, message):
    file = tmp_path / "glove.txt"
    file.write_text(text)
    with pytest.raises(DataFormatError, match=rf"^{file}:{line}: .*{message}"):
        read_word_vectors(file, tokenizer, 3)


def test_an_empty_word_vector_file_is_refused(tokenizer, tmp_path):
    (tmp_path / "blank.txt").write_text("\n\n")
    with pytest.raises(DataFormatError, match="no word vectors"):
        read_word_vectors(tmp_path / "blank.txt", tokenizer, 3)


@pytest.mark.parametrize("backbone", ["cnn", "lstm"])
def test_fit_starts_the_embedding_rows_from_the_word_vectors(backbone, tokenizer, tmp_path):
    file = tmp_path / "glove.txt"
    file.write_text("cat " + " ".join(["0.25"] * 8) + "\n")
    found = read_word_vectors(file, tokenizer, 8)
    X, Y = _tokens()
    options = TINY if backbone == "cnn" else TINY_LSTM
    clf = XMCClassifier(head="hrr", backbone=backbone, dim=16, epochs=1, lr=1e-9, progress=False, head_options=options)
    clf.fit(X, Y, word_vectors=found)
    row = clf.network_.backbone.embedding.weight[int(found.ids[0])]
    assert torch.allclose(row, torch.full((8,), 0.25), atol=1e-4)
    with pytest.raises(InputError, match=r"shape \(1, 8\) for 1 ids; the embedding table is 6 wide"):
        XMCClassifier(head="hrr", backbone=backbone, dim=16, epochs=1, head_options=options | {"embed_dim": 6},
                      progress=False).fit(X, Y, word_vectors=found)
    with pytest.raises(InputError, match="text backbone"):
        XMCClassifier(head="hrr", epochs=1).fit(np.eye(4), [[0], [1], [2], [3]], word_vectors=found)


# ---------------------------------------------------------------------------- the CLI
def _write(path: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = int(rng.integers(0, len(LABELS)))
        words = [f"sig{label}", f"mark{label}"] + [f"filler{k}" for k in rng.integers(0, 30, 4)]
        rows.append({"id": str(i), "text": " ".join(words), "labels": [LABELS[label]]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture(scope="module")
def text_set(tmp_path_factory) -> Path:
    """A small raw-text set (in a folder named like the set whose FC preset failed text models)."""
    folder = tmp_path_factory.mktemp("data") / "debtags"
    _write(folder / "train.jsonl", 200, 0)
    _write(folder / "test.jsonl", 40, 1)
    return folder


FAST = ["--epochs", "2", "--batch-size", "32", "--quiet"]


@pytest.mark.parametrize(("model", "preset"), [("hrr-cnn", ["--preset", "debtags"]), ("hrr-lstm", ["--preset", "debtags"]),
                                               ("hrr-lstm", [])])
def test_the_cli_trains_a_text_model_on_a_set_with_an_fc_preset(text_set, tmp_path, model, preset):
    run = tmp_path / "run"
    assert main(["train", str(text_set), "--model", model, "--out", str(run), *preset, *FAST]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["params"]["linear_width"] == 0 and config["network"]["embed_dim"] == 128


def test_the_cli_reads_word_vectors_and_reports_their_coverage(text_set, tmp_path, capsys):
    file = tmp_path / "glove.txt"
    file.write_text("".join(f"sig{i} " + " ".join(["0.1"] * 128) + "\n" for i in range(4)))
    run = tmp_path / "run"
    assert main(["train", str(text_set), "--model", "lstm", "--out", str(run), "--word-vectors", str(file),
                 *FAST]) == 0
    assert f"{file}: vectors for 4 of the" in capsys.readouterr().err


def test_the_cli_refuses_a_bad_word_vector_file_with_its_line(text_set, tmp_path, capsys):
    file = tmp_path / "glove.txt"
    file.write_text("sig0 0.1 0.2\n")
    assert main(["train", str(text_set), "--model", "cnn", "--out", str(tmp_path / "r"), "--word-vectors", str(file),
                 *FAST]) == 2
    assert capsys.readouterr().err == (f"holoxmc: error: {file}:1: 2 numbers after the word; the embedding is "
                                       "128 wide (embed_dim)\n")
    assert main(["train", str(text_set), "--model", "hrr-fc", "--out", str(tmp_path / "r"), "--word-vectors",
                 str(file), *FAST]) == 2
    assert "--word-vectors initialises the word embeddings" in capsys.readouterr().err


def test_the_unpacked_lstm_computes_what_packed_sequences_compute():
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    net = AttentionLSTMBackbone(50, embed_dim=8, hidden_size=6, n_layers=2, fc_size=5, dropout=0.0)
    inputs = torch.randn(3, 7, 8)
    lengths = torch.tensor([7, 2, 4])
    packed = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
    expected, _ = pad_packed_sequence(net.lstm(packed)[0], batch_first=True, total_length=7)
    states = net.bidirectional_states(inputs, lengths)
    mask = (torch.arange(7).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
    assert torch.allclose(states * mask, expected, atol=1e-5)
    states.sum().backward()  # and it trains the nn.LSTM's own weights
    assert net.lstm.weight_hh_l1_reverse.grad is not None


@pytest.mark.parametrize("head", ["hrr", "dense"])
def test_a_saved_lstm_loads_and_scores_as_it_was(tmp_path, head):
    """``max_length`` (96 by default) caps the tokens read; it is no tensor size, and a saved
    LSTM used to be refused at load ("network size 96 matches no stored tensor")."""
    X, Y = _tokens()
    clf = XMCClassifier(**for_head(head, {"head": head, "backbone": "lstm", "dim": 16}), epochs=1, progress=False,
                        head_options={"embed_dim": 8, "hidden_size": 6, "fc_size": 16}).fit(X, Y)
    assert clf.network_.config["max_length"] == BACKBONE_OPTIONS["lstm"]["max_length"]
    loaded = XMCClassifier.load(clf.save(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.predict_topk(X, k=3)[0], clf.predict_topk(X, k=3)[0])


def test_a_saved_text_model_claiming_a_huge_token_cap_is_refused(tmp_path):
    """``max_length`` is no tensor size, but every batch pads to it: an edited config that
    claims 10**9 tokens is one error at load, not a huge allocation at predict."""
    import json

    X, Y = _tokens()
    clf = XMCClassifier(head="hrr", backbone="lstm", dim=16, epochs=1, progress=False,
                        head_options={"embed_dim": 8, "hidden_size": 6, "fc_size": 16}).fit(X, Y)
    folder = clf.save(tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    text = json.dumps(config).replace(f'"max_length": {clf.network_.config["max_length"]}', '"max_length": 1000000000')
    assert text != json.dumps(config)
    (folder / "config.json").write_text(text)
    with pytest.raises(InputError, match="max_length"):
        XMCClassifier.load(folder)

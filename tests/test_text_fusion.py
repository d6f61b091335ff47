"""The ``xr`` head (CLI ``xr-cnn``, ``xr-lstm``): a text network, then a linear model on its
L2-normalised text embedding beside the tokens' TF-IDF (XR-Transformer's recipe)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from safetensors.numpy import load_file, save_file

from holoxmc.cli import main
from holoxmc.data.text import TextEncoder, fit_token_idf, token_tfidf
from holoxmc.errors import InputError
from holoxmc.estimator import XMCClassifier
from holoxmc.models.network.fusion import FusionModel
from holoxmc.presets import model_params

TINY = {"embed_dim": 8, "n_filters": 4, "bottleneck": 16, "max_length": 12, "dim": 16}
TINY_LSTM = {"embed_dim": 8, "hidden_size": 6, "fc_size": 16, "max_length": 12, "dim": 16}


def _keyword_rows(n: int, seed: int, n_labels: int = 10) -> tuple[np.ndarray, list[list[int]]]:
    """Rows of filler token ids and one keyword id naming the row's label."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, 12), np.int64)
    Y = []
    for row in range(n):
        length = int(rng.integers(4, 12))
        X[row, :length] = rng.integers(2 + n_labels, 2 + n_labels + 60, length)
        label = int(rng.integers(0, n_labels))
        X[row, int(rng.integers(0, length))] = 2 + label
        Y.append([label])
    return X, Y


def _fit(backbone: str = "cnn", **options: object) -> tuple[XMCClassifier, np.ndarray, list[list[int]]]:
    X, Y = _keyword_rows(300, 0)
    sizes = TINY if backbone == "cnn" else TINY_LSTM
    clf = XMCClassifier(head="xr", backbone=backbone, epochs=2, progress=False,
                        head_options={**sizes, "min_df": 1, **options}).fit(X, Y)
    return clf, X, Y


# ---------------------------------------------------------------------------- TF-IDF of token ids
def test_the_tfidf_of_token_ids_is_the_text_encoders_tfidf():
    texts = ["the cat sat on the mat", "the dog ate the cat", "a bird sang", "cat cat dog", "a dog sat"]
    encoder = TextEncoder.fit(texts, ["x"], min_df=2, tokens=True, ngrams=1)  # token ids are single words
    ids = encoder.tokens(texts)
    ours = token_tfidf(ids, fit_token_idf(ids, encoder.tokenizer.n_tokens, min_df=2)).toarray()
    columns = [encoder.tokenizer.vocabulary.index(term) + 2 for term in encoder.tfidf.get_feature_names_out()]
    np.testing.assert_allclose(ours[:, columns], encoder.features(texts).toarray(), atol=1e-6)
    others = np.setdiff1d(np.arange(ours.shape[1]), columns)
    assert not ours[:, others].any()  # words in fewer than min_df rows, padding and OOV weigh nothing


def test_a_bad_min_df_is_refused():
    with pytest.raises(InputError, match="min_df"):
        fit_token_idf(np.array([[2, 3]]), 4, min_df=0)
    X, Y = _keyword_rows(40, 0)
    with pytest.raises(InputError, match="min_df"):
        XMCClassifier(head="xr", backbone="cnn", epochs=1, progress=False,
                      head_options={**TINY, "min_df": 1.5}).fit(X, Y)


# ---------------------------------------------------------------------------- the model
@pytest.mark.parametrize("backbone", ["cnn", "lstm"])
def test_the_model_ranks_by_the_linear_margins_on_both_feature_blocks(backbone):
    clf, X, Y = _fit(backbone)
    model = clf.model_
    assert isinstance(model, FusionModel) and clf.network_.config["head"] == "hrr"
    features = model.features(X[:50])
    n_tokens = len(model.idf)
    assert features.shape[1] == n_tokens + clf.network_.backbone.out_features
    assert model.embedding_weight == 0.5  # the default
    np.testing.assert_allclose(sp.linalg.norm(features[:, n_tokens:], axis=1), 0.5, rtol=1e-5)
    expected = np.argsort(-model.linear.margins(features), axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(clf.predict_topk(X[:50], k=3)[0], expected)
    stages = [record for record in clf.fit_result_.history if record.get("stage") == "linear"]
    assert [record.get("refit", False) for record in stages] == [False, True] and "P@1" in stages[0]["val"]


def test_the_keyword_set_is_learnt():
    clf, _, _ = _fit()
    X_new, Y_new = _keyword_rows(200, 1)
    assert clf.score(X_new, Y_new) > 90.0  # a keyword per label: the TF-IDF block alone names it


def test_the_embedding_weight_scales_the_embedding_block():
    clf, X, _ = _fit(embedding_weight=0.25)
    features = clf.model_.features(X[:10])
    np.testing.assert_allclose(sp.linalg.norm(features[:, len(clf.model_.idf):], axis=1), 0.25, rtol=1e-5)


@pytest.mark.parametrize(("options", "message"), [({"embedding_weight": -1.0}, "embedding_weight"),
                                                   ({"C": 0.0}, "C must be"), ({"no_such": 1}, "no_such")])
def test_a_bad_fusion_option_is_one_error_before_training(options, message):
    X, Y = _keyword_rows(40, 0)
    with pytest.raises(InputError, match=message):
        XMCClassifier(head="xr", backbone="cnn", epochs=1, progress=False, head_options={**TINY, **options}).fit(X, Y)


def test_the_xr_head_refuses_the_fc_backbone_and_fc_settings():
    X, Y = _keyword_rows(40, 0)
    with pytest.raises(InputError, match="backbone"):
        XMCClassifier(head="xr", backbone="fc", epochs=1).fit(sp.csr_matrix(np.eye(40, dtype=np.float32)), Y)
    with pytest.raises(InputError, match="hidden"):
        XMCClassifier(head="xr", backbone="cnn", hidden=(8,), epochs=1).fit(X, Y)


def test_a_ray_address_is_refused_not_ignored():
    X, Y = _keyword_rows(40, 0)
    with pytest.raises(InputError, match="ray_address"):
        XMCClassifier(head="xr", backbone="cnn", epochs=1, ray_address="ray://nowhere:1",
                      head_options=TINY).fit(X, Y)


def test_fused_features_too_large_for_memory_are_refused_before_training(monkeypatch):
    import holoxmc.models.network.fusion

    monkeypatch.setattr(holoxmc.models.network.fusion, "FUSED_ENTRY_BYTES", 2**40)  # as if each entry took a TiB
    X, Y = _keyword_rows(40, 0)
    with pytest.raises(InputError, match="fused features"):
        XMCClassifier(head="xr", backbone="cnn", epochs=1, progress=False, head_options=TINY).fit(X, Y)


def test_a_validation_set_of_another_token_width_is_one_error():
    X, Y = _keyword_rows(60, 0)
    with pytest.raises(InputError, match="tokens wide"):
        XMCClassifier(head="xr", backbone="cnn", epochs=1, progress=False,
                      head_options={**TINY, "min_df": 1}).fit(X[:40], Y[:40], X[40:, :8], Y[40:])


def test_too_few_rows_to_hold_any_out_train_on_every_row():
    X, Y = _keyword_rows(3, 0)
    clf = XMCClassifier(head="xr", backbone="cnn", epochs=1, progress=False, val_fraction=0.1,
                        head_options={**TINY, "min_df": 1}).fit(X, Y)
    assert clf.predict_topk(X, k=1)[0].shape == (3, 1)


# ---------------------------------------------------------------------------- save and load
@pytest.mark.parametrize("backbone", ["cnn", "lstm"])
def test_a_saved_model_loads_and_scores_as_it_was(tmp_path, backbone):
    clf, X, Y = _fit(backbone, embedding_weight=0.25)
    loaded = XMCClassifier.load(clf.save(tmp_path / "model"))
    assert isinstance(loaded.model_, FusionModel) and loaded.model_.embedding_weight == 0.25
    np.testing.assert_array_equal(loaded.predict_topk(X, k=3)[0], clf.predict_topk(X, k=3)[0])
    np.testing.assert_allclose(loaded.decision_function(X[:20]), clf.decision_function(X[:20]), rtol=1e-5, atol=1e-5)
    assert loaded.evaluate(X, Y) == clf.evaluate(X, Y)


def test_a_saved_model_with_a_label_no_training_row_has_loads(tmp_path):
    """The fused model's linear part scores such a label with a -inf bias: saved, it loads
    (the tensor ``linear.bias`` may hold ±inf) and scores as it was."""
    X, Y = _keyword_rows(300, 0)
    rows = np.repeat(np.arange(len(Y)), [len(labels) for labels in Y])
    Y_wide = sp.csr_matrix((np.ones(len(rows)), (rows, np.concatenate(Y))), shape=(len(Y), 11))  # label 10: no row
    clf = XMCClassifier(head="xr", backbone="cnn", epochs=2, progress=False,
                        head_options={**TINY, "min_df": 1}).fit(X, Y_wide)
    assert clf.model_.linear.bias[10] == -np.inf
    loaded = XMCClassifier.load(clf.save(tmp_path / "model"))
    np.testing.assert_array_equal(loaded.predict_topk(X, k=3)[0], clf.predict_topk(X, k=3)[0])


def test_a_saved_model_with_a_misshapen_idf_is_refused(tmp_path):
    clf, _, _ = _fit()
    folder = clf.save(tmp_path / "model")
    tensors = load_file(folder / "model.safetensors")
    metadata = _metadata(folder / "model.safetensors")
    tensors["fusion.idf"] = tensors["fusion.idf"][:-1]
    save_file(tensors, folder / "model.safetensors", metadata=metadata)
    with pytest.raises(InputError, match="fusion.idf"):
        XMCClassifier.load(folder)


def _metadata(path: Path) -> dict[str, str]:
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        return dict(handle.metadata() or {})


# ---------------------------------------------------------------------------- the CLI
def _write(path: Path, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = int(rng.integers(0, 4))
        words = [f"sig{label}"] + [f"filler{k}" for k in rng.integers(0, 30, 5)]
        rows.append({"id": str(i), "text": " ".join(words), "labels": [f"tag{label}"]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.mark.parametrize("model", ["xr-cnn", "xr-lstm"])
def test_the_cli_trains_evaluates_and_predicts_a_fused_model(tmp_path, capsys, model):
    data = tmp_path / "set"
    _write(data / "train.jsonl", 200, 0)
    _write(data / "test.jsonl", 40, 1)
    run = tmp_path / "run"
    size = "n_filters" if model == "xr-cnn" else "hidden_size"
    assert model_params(model) == {"head": "xr", "backbone": model.removeprefix("xr-")}
    assert main(["train", str(data), "--model", model, "--out", str(run), "--epochs", "2", "--batch-size", "32",
                 "--quiet"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert json.loads((run / "config.json").read_text())["network"][size] > 0
    assert main(["evaluate", str(run), str(data)]) == 0  # the saved model, loaded, scores as it did
    assert json.loads((run / "eval-set-test.json").read_text())["metrics"]["P@1"] == metrics["test"]["P@1"]
    capsys.readouterr()
    assert main(["predict", str(run), str(data / "test.jsonl"), "--top-k", "2", "--label-names"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 40 and all(line.startswith("tag") for line in lines)
    assert metrics["test"]["P@1"] > 50.0  # one signal word per label

"""Text datasets: label vocabulary, TF-IDF on train only, tokenizer to padded ids."""

from __future__ import annotations

import json

import pytest

from holoxmc.data import Tokenizer, load
from holoxmc.data.text import build_label_vocabulary
from holoxmc.errors import DataFormatError, InputError


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_tokenizer_ids_padding_oov_truncation(tmp_path):
    tokenizer = Tokenizer(max_vocab=4, max_length=4).fit(["b a a", "a c", "b"])
    assert tokenizer.vocabulary == []  # single characters are not tokens (2+ letters)
    tokenizer = Tokenizer(max_vocab=4, max_length=4).fit(["bb aa aa", "aa cc", "bb"])
    assert tokenizer.vocabulary == ["aa", "bb"] and tokenizer.n_tokens == 4
    ids = tokenizer.transform(["AA zz bb", "aa aa aa aa aa aa", ""])
    assert ids.tolist() == [[2, 1, 3, 0], [2, 2, 2, 2], [0, 0, 0, 0]]
    tokenizer.save(tmp_path / "tok.json")
    assert Tokenizer.load(tmp_path / "tok.json").transform(["bb aa"]).tolist() == [[3, 2, 0, 0]]
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(DataFormatError, match="not a tokenizer file"):
        Tokenizer.load(tmp_path / "bad.json")


def test_tokenizer_vocabulary_only_from_tokens_kept_after_truncation(tmp_path):
    """Regression: tokens past ``max_length`` were counted, so the vocabulary held ids that
    no training sequence contains (Debtags: 46,989 ids, training ids only up to 46,985)."""
    texts = ["aa bb cc cc cc", "dd aa", "ee"]
    tokenizer = Tokenizer(max_vocab=10, max_length=2).fit(texts)
    assert tokenizer.vocabulary == ["aa", "bb", "dd", "ee"]  # "cc" only occurs past the cut
    assert tokenizer.transform(texts).max() + 1 == tokenizer.n_tokens
    assert Tokenizer(max_vocab=10, max_length=5).fit(texts).vocabulary[0] == "cc"
    # a tokenizer saved before (vocabulary counted over whole texts) loads and encodes as it did
    old = Tokenizer.from_dict({"max_vocab": 10, "max_length": 2, "vocabulary": ["cc", "aa", "bb", "dd", "ee"]})
    assert old.n_tokens == 7 and old.transform(["cc aa"]).tolist() == [[2, 3]]


def test_text_folder_vocabulary_from_labels_txt_or_data(tmp_path):
    folder = tmp_path / "Toy"
    folder.mkdir()
    _write_jsonl(folder / "train.jsonl", [
        {"id": "1", "text": "red apple fruit", "labels": ["food"]},
        {"id": "2", "text": "green apple", "labels": ["food", "green"]},
        {"id": "3", "text": "red car", "labels": ["car"]},
    ])
    _write_jsonl(folder / "test.jsonl", [{"id": "4", "text": "apple unseenword", "labels": ["car", "rare"]}])
    train = load(folder, "train", min_df=1)
    test = load(folder, "test", min_df=1, features="tokens", max_length=3)
    assert train.label_names == ["car", "food", "green", "rare"] == test.label_names  # train+test counts, ties by name
    assert test.Y.toarray().tolist() == [[1, 0, 0, 1]]
    assert test.n_features == train.n_features == 9  # TF-IDF words and word pairs of train only (5 + 4)
    assert test.tokens.tolist() == [[2, 1, 0]] and test.texts == ["apple unseenword"]
    (folder / "labels.txt").write_text("food\ncar\ngreen\n")
    with pytest.raises(DataFormatError, match=r"test.jsonl:1: label 'rare' is not in the label vocabulary"):
        load(folder, "test", min_df=1)


def test_ngrams_add_word_runs_to_the_tfidf_terms_and_survive_saving(tmp_path):
    from holoxmc.data import TextEncoder

    folder = tmp_path / "Toy"
    folder.mkdir()
    rows = [{"id": "1", "text": "red apple pie", "labels": ["food"]}, {"id": "2", "text": "red apple tree", "labels": ["tree"]}]
    _write_jsonl(folder / "train.jsonl", rows)
    _write_jsonl(folder / "test.jsonl", [{"id": "3", "text": "apple pie red", "labels": ["food"]}])
    words, pairs = load(folder, "train", min_df=1, ngrams=1), load(folder, "train", min_df=1)  # pairs: the default
    assert words.encoder.tfidf.get_feature_names_out().tolist() == ["apple", "pie", "red", "tree"]
    assert pairs.encoder.tfidf.get_feature_names_out().tolist() == [
        "apple", "apple pie", "apple tree", "pie", "red", "red apple", "tree"]
    test = load(folder, "test", min_df=1, ngrams=2)
    terms = pairs.encoder.tfidf.get_feature_names_out()
    assert sorted(terms[test.X.indices].tolist()) == ["apple", "apple pie", "pie", "red"]  # "pie red" unseen
    (tmp_path / "encoder.json").write_text(json.dumps(pairs.encoder.to_dict()))
    restored = TextEncoder.load(tmp_path / "encoder.json")
    assert (restored.features(["apple pie red"]) != test.X).nnz == 0
    # an encoder file written before the option has no ngram_range: words alone, as then
    state = words.encoder.to_dict()
    del state["tfidf"]["ngram_range"]
    (tmp_path / "old.json").write_text(json.dumps(state))
    assert (TextEncoder.load(tmp_path / "old.json").features(["red apple"]) != words.encoder.features(["red apple"])).nnz == 0
    for bad in ([2, 1], [0, 1], [2, 3], [1], [1, 2.5]):
        state["tfidf"]["ngram_range"] = bad
        (tmp_path / "bad.json").write_text(json.dumps(state))
        with pytest.raises(DataFormatError, match="not a text encoder file"):
            TextEncoder.load(tmp_path / "bad.json")
    for bad_ngrams in (0, 1.5, True):
        with pytest.raises(InputError, match="ngrams must be a positive integer"):
            load(folder, "train", min_df=1, ngrams=bad_ngrams)


def test_text_features_names_a_featurisation_that_survives_saving(tmp_path):
    """``text_features`` picks a row of TEXT_FEATURES; character runs are saved with the
    encoder (format 2), so new texts get the training features; options override the row."""
    import numpy as np

    from holoxmc.data import TextEncoder
    from holoxmc.data.text import TEXT_FEATURES

    folder = tmp_path / "Toy"
    folder.mkdir()
    rows = [{"id": "1", "text": "red apple pie", "labels": ["food"]}, {"id": "2", "text": "red apple tree", "labels": ["tree"]}]
    _write_jsonl(folder / "train.jsonl", rows)
    _write_jsonl(folder / "test.jsonl", [{"id": "3", "text": "apple pie red", "labels": ["food"]}])
    words = load(folder, "train", min_df=1, text_features="words")
    assert words.encoder.tfidf.get_feature_names_out().tolist() == ["apple", "pie", "red", "tree"]
    assert words.encoder.chars is None and words.encoder.to_dict()["format"] == "holoxmc-text-encoder/1"
    assert load(folder, "train", min_df=1, text_features="words", ngrams=2).n_features == 7  # ngrams overrides
    chars = load(folder, "test", min_df=1, text_features="words+pairs+chars")
    low, high = TEXT_FEATURES["words+pairs+chars"].chars
    char_terms = chars.encoder.chars.get_feature_names_out().tolist()
    assert {" ap", "pple ", "red "} <= set(char_terms) and all(low <= len(term) <= high for term in char_terms)
    assert chars.n_features == 7 + len(char_terms) == chars.encoder.n_features
    assert np.allclose(np.sqrt(chars.X.power(2).sum(axis=1)), 1.0)  # one L2 norm over both blocks
    state = json.loads(json.dumps(chars.encoder.to_dict()))
    assert state["format"] == "holoxmc-text-encoder/2" and state["chars"]["analyzer"] == "char_wb"
    (tmp_path / "encoder.json").write_text(json.dumps(state))
    restored = TextEncoder.load(tmp_path / "encoder.json")
    assert (restored.features(chars.texts) != chars.X).nnz == 0
    for broken in ({"chars": None}, {"format": "holoxmc-text-encoder/3"}, {"chars": state["chars"] | {"analyzer": "word"}},
                   {"chars": state["chars"] | {"ngram_range": [3, 2]}}):
        (tmp_path / "bad.json").write_text(json.dumps(state | broken))
        with pytest.raises(DataFormatError, match="not a text encoder file"):
            TextEncoder.load(tmp_path / "bad.json")
    for bad in ("bigrams", 2, None):
        with pytest.raises(InputError, match=r"text_features must be one of words, words\+pairs, words\+pairs\+chars"):
            load(folder, "train", min_df=1, text_features=bad)


def test_build_label_vocabulary_orders_by_frequency_then_name():
    assert build_label_vocabulary([["z", "y"], ["y"]], [["a"], ["z"]]) == ["y", "z", "a"]


def test_text_encoder_file_errors_are_one_data_format_error(tmp_path):
    from holoxmc.data import TextEncoder

    state = TextEncoder.fit(["red apple", "green apple"], ["a"], min_df=1, tokens=True).to_dict()
    bad_states = [{**state, "format": "other"}, {**state, "tfidf": {**state["tfidf"], "norm": "l3"}},
                  {**state, "tfidf": {**state["tfidf"], "idf": [1.0]}}, {**state, "tokenizer": {"max_vocab": 2}}, [1, 2]]
    for bad in bad_states:
        (tmp_path / "encoder.json").write_text(json.dumps(bad))
        with pytest.raises(DataFormatError, match="not a text encoder file"):
            TextEncoder.load(tmp_path / "encoder.json")
    (tmp_path / "encoder.json").write_text(json.dumps(state))
    assert TextEncoder.load(tmp_path / "encoder.json").tokens(["green apple pie"]).tolist()[0][:3] == [3, 2, 1]

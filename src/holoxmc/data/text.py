"""Raw-text datasets: label vocabulary, TF-IDF features fitted on train only, and a
tokenizer to padded token-id sequences for text backbones (CNN, LSTM)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer

from holoxmc.data.readers import JsonlRecords, read_bytes
from holoxmc.errors import DataFormatError, InputError
from holoxmc.io import atomic_write_json

__all__ = ["read_label_vocabulary", "build_label_vocabulary", "labels_to_csr", "fit_tfidf", "Tokenizer"]

PAD_ID = 0
OOV_ID = 1


def read_label_vocabulary(path: str | os.PathLike) -> list[str]:
    """One label per non-empty line (e.g. Debtags' ``labels.txt``); duplicates are an error."""
    labels: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(read_bytes(path).decode("utf-8", "replace").split("\n"), start=1):
        label = line.strip()
        if not label:
            continue
        if label in seen:
            raise DataFormatError(path, number, f"duplicate label {label!r}")
        seen.add(label)
        labels.append(label)
    if not labels:
        raise DataFormatError(path, None, "empty label vocabulary")
    return labels


def build_label_vocabulary(*label_lists: list[list[str]]) -> list[str]:
    """Every label of the given lists, most frequent first, ties by name.

    Example:
        >>> build_label_vocabulary([["b", "a"], ["b"]], [["c"]])
        ['b', 'a', 'c']
    """
    counts = Counter(label for lists in label_lists for labels in lists for label in labels)
    return sorted(counts, key=lambda label: (-counts[label], label))


def labels_to_csr(records: JsonlRecords, vocabulary: list[str], path: str | os.PathLike) -> sp.csr_matrix:
    """``(n, len(vocabulary))`` binary CSR of the records' labels; an unknown label is an error."""
    index = {label: i for i, label in enumerate(vocabulary)}
    columns: list[int] = []
    indptr = [0]
    for labels, line in zip(records.labels, records.lines):
        for label in labels:
            column = index.get(label)
            if column is None:
                raise DataFormatError(path, line, f"label {label!r} is not in the label vocabulary")
            columns.append(column)
        indptr.append(len(columns))
    Y = sp.csr_matrix(
        (np.ones(len(columns), np.float32), np.asarray(columns, dtype=np.int64), np.asarray(indptr)),
        shape=(len(records.labels), len(vocabulary)),
    )
    Y.sort_indices()
    return Y


def fit_tfidf(train_texts: list[str], *, min_df: int = 2, max_features: int | None = None) -> TfidfVectorizer:
    """A ``TfidfVectorizer`` (sublinear tf, L2 rows, float32) fitted on the training texts only.

    Example:
        >>> v = fit_tfidf(["red apple", "green apple", "red car"], min_df=1)
        >>> v.transform(["apple car"]).shape
        (1, 4)
    """
    vectorizer = TfidfVectorizer(min_df=min_df, max_features=max_features, sublinear_tf=True, dtype=np.float32)
    try:
        vectorizer.fit(train_texts)
    except ValueError as exc:  # empty vocabulary
        raise InputError(f"cannot fit TF-IDF on the training texts: {exc}") from None
    return vectorizer


class Tokenizer:
    """Texts → padded token-id sequences for text backbones.

    Tokens are those of scikit-learn's default analyzer (lower-case words of 2+ characters).
    Ids: ``0`` padding, ``1`` out-of-vocabulary, ``2..`` the ``max_vocab - 2`` most
    frequent training tokens (ties by token). Sequences are truncated to ``max_length``.

    Example:
        >>> tok = Tokenizer(max_vocab=4, max_length=5).fit(["the cat", "the dog", "the cat"])
        >>> tok.vocabulary
        ['the', 'cat']
        >>> tok.transform(["the cat and the bird"]).tolist()
        [[2, 3, 1, 2, 1]]
    """

    def __init__(self, max_vocab: int = 50_000, max_length: int = 256):
        if max_vocab < 3 or max_length < 1:
            raise InputError("max_vocab must be >= 3 and max_length >= 1")
        self.max_vocab, self.max_length = max_vocab, max_length
        self._analyzer = CountVectorizer().build_analyzer()
        self.vocabulary: list[str] = []
        self._ids: dict[str, int] = {}

    def fit(self, texts: list[str]) -> "Tokenizer":
        counts = Counter(token for text in texts for token in self._analyzer(text))
        ranked = sorted(counts, key=lambda token: (-counts[token], token))
        self._set_vocabulary(ranked[: self.max_vocab - 2])
        return self

    def _set_vocabulary(self, vocabulary: list[str]) -> None:
        self.vocabulary = list(vocabulary)
        self._ids = {token: i + 2 for i, token in enumerate(self.vocabulary)}

    @property
    def n_tokens(self) -> int:
        """Size of the id space including padding and OOV (an embedding table's rows)."""
        return len(self.vocabulary) + 2

    def transform(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), max_length)`` int32 ids, right-padded with ``0``."""
        out = np.zeros((len(texts), self.max_length), dtype=np.int32)
        for row, text in enumerate(texts):
            ids = [self._ids.get(token, OOV_ID) for token in self._analyzer(text)[: self.max_length]]
            out[row, : len(ids)] = ids
        return out

    def save(self, path: str | os.PathLike) -> None:
        """Write the settings and vocabulary as JSON (atomically)."""
        atomic_write_json(path, {"max_vocab": self.max_vocab, "max_length": self.max_length, "vocabulary": self.vocabulary})

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Tokenizer":
        try:
            state = json.loads(Path(path).read_text(encoding="utf-8"))
            tokenizer = cls(int(state["max_vocab"]), int(state["max_length"]))
            vocabulary = [str(token) for token in state["vocabulary"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataFormatError(path, None, f"not a tokenizer file: {exc}") from None
        tokenizer._set_vocabulary(vocabulary)
        return tokenizer

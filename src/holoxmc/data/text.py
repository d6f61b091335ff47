"""Raw-text datasets: label vocabulary, TF-IDF features fitted on train only, and a
tokenizer to padded token-id sequences for text backbones (CNN, LSTM)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import scipy.sparse as sp

from holoxmc.data.readers import JsonlRecords, read_bytes
from holoxmc.errors import DataFormatError, InputError
from holoxmc.io import atomic_write_json, read_json

if TYPE_CHECKING:  # scikit-learn is imported where a TF-IDF or tokenizer is built (not to read a data file)
    from sklearn.feature_extraction.text import TfidfVectorizer

__all__ = [
    "read_label_vocabulary", "build_label_vocabulary", "labels_to_csr", "fit_tfidf", "Tokenizer", "TextEncoder",
    "token_counts", "fit_token_idf", "token_tfidf", "TEXT_DEFAULTS", "TEXT_FEATURES", "TextFeatures",
    "DEFAULT_TEXT_FEATURES", "text_features_row", "fit_char_tfidf",
]

@dataclass(frozen=True)
class TextFeatures:
    """One named way raw texts become TF-IDF features (a row of :data:`TEXT_FEATURES`).

    Args:
        ngrams: TF-IDF over words and runs of up to this many consecutive words (1: words).
        chars: ``(low, high)``: also TF-IDF over character runs of ``low`` to ``high``
            characters inside word boundaries (scikit-learn's ``char_wb``), the two blocks
            side by side and each row L2-normalised as a whole; ``None``: words only.
        min_df: keep terms in at least this many training texts.
        max_features: keep the most frequent terms of each block (``None``: all).
        help: what it is, one phrase.

    Example:
        >>> TEXT_FEATURES["words"].ngrams, TEXT_FEATURES["words+pairs+chars"].chars
        (1, (2, 5))
    """

    ngrams: int
    chars: tuple[int, int] | None = None
    min_df: int = 2
    max_features: int | None = None
    help: str = ""


#: Every featurisation of raw text a user can name (``load(..., text_features=NAME)``,
#: ``holoxmc train --text-features NAME``). Leave-one-set-out on three grouped real text sets
#: (docs/tuning.md "Text features") chose word pairs over words, then character runs on every
#: fold (+0.4 to +1.1 validation P@1) at 7-14x the re-rank fit: the default stays words+pairs
#: until that cost is weighed. ``min_df``, ``ngrams`` and ``max_features`` given as options
#: override the named row's values.
TEXT_FEATURES: dict[str, TextFeatures] = {
    "words": TextFeatures(1, help="words alone"),
    "words+pairs": TextFeatures(2, help="words and word pairs"),
    "words+pairs+chars": TextFeatures(2, chars=(2, 5), help="words, word pairs and runs of 2-5 characters"),
}
DEFAULT_TEXT_FEATURES = "words+pairs"
DEFAULT_NGRAMS = TEXT_FEATURES[DEFAULT_TEXT_FEATURES].ngrams

#: How raw texts become features unless told otherwise (the ``load`` options of raw-text
#: sets): :data:`TEXT_FEATURES` row ``text_features`` (``min_df``, ``ngrams``,
#: ``max_features``: ``None``, that row's), and a tokenizer of ``max_vocab`` words cutting
#: texts at ``max_length`` tokens.
TEXT_DEFAULTS: dict[str, int | str | None] = {"text_features": DEFAULT_TEXT_FEATURES, "min_df": None,
                                              "max_vocab": 50_000, "max_length": 256, "ngrams": None,
                                              "max_features": None}


def text_features_row(name: Any) -> TextFeatures:
    """The :data:`TEXT_FEATURES` row called ``name``.

    Raises:
        InputError: ``name`` is not one, naming those that are.

    Example:
        >>> text_features_row("words").ngrams
        1
        >>> text_features_row("bigrams")
        Traceback (most recent call last):
        holoxmc.errors.InputError: text_features must be one of words, words+pairs, words+pairs+chars; got 'bigrams'
    """
    if not isinstance(name, str) or name not in TEXT_FEATURES:
        raise InputError(f"text_features must be one of {', '.join(TEXT_FEATURES)}; got {name!r}")
    return TEXT_FEATURES[name]


T = TypeVar("T")

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


def fit_tfidf(
    train_texts: list[str], *, min_df: int = 2, max_features: int | None = None, ngrams: int = DEFAULT_NGRAMS
) -> TfidfVectorizer:
    """A ``TfidfVectorizer`` (sublinear tf, L2 rows, float32) fitted on the training texts only,
    over words and runs of up to ``ngrams`` consecutive words (1: words alone).

    Example:
        >>> v = fit_tfidf(["red apple", "green apple", "red car"], min_df=1, ngrams=1)
        >>> v.transform(["apple car"]).shape
        (1, 4)
        >>> fit_tfidf(["red apple", "green apple", "red car"], min_df=1, ngrams=2).get_feature_names_out().tolist()
        ['apple', 'car', 'green', 'green apple', 'red', 'red apple', 'red car']
    """
    if isinstance(ngrams, bool) or not isinstance(ngrams, int) or ngrams < 1:
        raise InputError(f"ngrams must be a positive integer (1: words, 2: words and word pairs, ...), got {ngrams!r}")
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(min_df=min_df, max_features=max_features, sublinear_tf=True, dtype=np.float32,
                                 ngram_range=(1, ngrams))
    try:
        vectorizer.fit(train_texts)
    except ValueError as exc:  # empty vocabulary
        raise InputError(f"cannot fit TF-IDF on the training texts: {exc}") from None
    return vectorizer


def fit_char_tfidf(
    train_texts: list[str], *, chars: tuple[int, int] = (2, 5), min_df: int = 2, max_features: int | None = None
) -> TfidfVectorizer:
    """A ``TfidfVectorizer`` (sublinear tf, L2 rows, float32) over runs of ``chars[0]`` to
    ``chars[1]`` characters inside word boundaries (``char_wb``: each word padded with a
    space), fitted on the training texts only.

    Example:
        >>> fit_char_tfidf(["ab", "ab c"], chars=(2, 2), min_df=2).get_feature_names_out().tolist()
        [' a', 'ab', 'b ']
    """
    low, high = chars
    if not all(type(n) is int for n in (low, high)) or not 1 <= low <= high:
        raise InputError(f"character runs must be (low, high) with 1 <= low <= high, got {chars!r}")
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=(low, high), min_df=min_df,
                                 max_features=max_features, sublinear_tf=True, dtype=np.float32)
    try:
        vectorizer.fit(train_texts)
    except ValueError as exc:  # empty vocabulary
        raise InputError(f"cannot fit character TF-IDF on the training texts: {exc}") from None
    return vectorizer


def token_counts(ids: np.ndarray, n_tokens: int) -> sp.csr_matrix:
    """``(n, n_tokens)`` CSR counts of the token ids of each row; padding and
    out-of-vocabulary ids (0 and 1) count nowhere, as a vectorizer drops unknown words.

    Example:
        >>> token_counts(np.array([[2, 3, 2, 0], [1, 4, 0, 0]]), 5).toarray().tolist()
        [[0.0, 0.0, 2.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]]
    """
    ids = np.asarray(ids)
    n, width = ids.shape
    rows = np.repeat(np.arange(n), width)
    flat = ids.ravel().astype(np.int64)
    keep = flat > OOV_ID
    counts = sp.csr_matrix((np.ones(int(keep.sum()), np.float32), (rows[keep], flat[keep])), shape=(n, n_tokens))
    counts.sum_duplicates()
    return counts


def fit_token_idf(ids: np.ndarray, n_tokens: int, *, min_df: int = 2) -> np.ndarray:
    """``(n_tokens,)`` float32 inverse document frequencies of token ids, fitted on training
    rows: scikit-learn's smoothed idf, ``ln((1 + n) / (1 + df)) + 1``, and 0 for a token in
    fewer than ``min_df`` rows (it then weighs nothing, as ``TfidfVectorizer(min_df=...)``
    leaves it out).

    Example:
        >>> [round(float(w), 3) for w in fit_token_idf(np.array([[2, 3], [2, 0]]), 4, min_df=1)]
        [0.0, 0.0, 1.0, 1.405]
        >>> [round(float(w), 3) for w in fit_token_idf(np.array([[2, 3], [2, 0]]), 4)]
        [0.0, 0.0, 1.0, 0.0]
    """
    if isinstance(min_df, bool) or not isinstance(min_df, int) or min_df < 1:
        raise InputError(f"min_df must be a positive integer, got {min_df!r}")
    counts = token_counts(ids, n_tokens)
    from sklearn.feature_extraction.text import TfidfTransformer

    idf = TfidfTransformer().fit(counts).idf_.astype(np.float32)
    document_frequency = np.bincount(counts.indices, minlength=n_tokens)
    idf[document_frequency < min_df] = 0.0
    idf[: OOV_ID + 1] = 0.0
    return idf


def token_tfidf(ids: np.ndarray, idf: np.ndarray) -> sp.csr_matrix:
    """``(n, len(idf))`` float32 TF-IDF rows of token ids: sublinear tf (``1 + ln tf``) times
    ``idf``, rows L2-normalised (an all-zero row stays zero), as :func:`fit_tfidf`'s vectorizer
    weighs words.

    Example:
        >>> idf = fit_token_idf(np.array([[2, 3], [2, 0]]), 4, min_df=1)
        >>> [round(float(w), 3) for w in token_tfidf(np.array([[2, 3, 3]]), idf).toarray()[0]]
        [0.0, 0.0, 0.387, 0.922]
    """
    counts = token_counts(ids, len(idf))
    counts.data = 1.0 + np.log(counts.data)
    weighted = sp.csr_matrix(counts.multiply(np.asarray(idf, dtype=np.float32)[None, :]), dtype=np.float32)
    weighted.eliminate_zeros()
    from sklearn.preprocessing import normalize

    return sp.csr_matrix(normalize(weighted), dtype=np.float32)


class Tokenizer:
    """Texts → padded token-id sequences for text backbones.

    Tokens are those of scikit-learn's default analyzer (lower-case words of 2+ characters).
    Sequences are truncated to ``max_length``. Ids: ``0`` padding, ``1`` out-of-vocabulary,
    ``2..`` the ``max_vocab - 2`` most frequent tokens of the truncated training sequences
    (ties by token), so every id of the vocabulary occurs in the training ids.

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
        from sklearn.feature_extraction.text import CountVectorizer

        self._analyzer = CountVectorizer().build_analyzer()
        self.vocabulary: list[str] = []
        self._ids: dict[str, int] = {}

    def fit(self, texts: list[str]) -> "Tokenizer":
        """Choose the vocabulary from the tokens :meth:`transform` keeps of ``texts``."""
        counts = Counter(token for text in texts for token in self._tokens(text))
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

    def _tokens(self, text: str) -> list[str]:
        """The first ``max_length`` tokens of ``text``."""
        return self._analyzer(text)[: self.max_length]

    def transform(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), max_length)`` int32 ids, right-padded with ``0``."""
        out = np.zeros((len(texts), self.max_length), dtype=np.int32)
        for row, text in enumerate(texts):
            ids = [self._ids.get(token, OOV_ID) for token in self._tokens(text)]
            out[row, : len(ids)] = ids
        return out

    def to_dict(self) -> dict[str, Any]:
        """The settings and vocabulary, JSON-ready."""
        return {"max_vocab": self.max_vocab, "max_length": self.max_length, "vocabulary": self.vocabulary}

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> "Tokenizer":
        """Inverse of :meth:`to_dict` (raises ``KeyError``/``TypeError``/``ValueError`` on bad state)."""
        tokenizer = cls(int(state["max_vocab"]), int(state["max_length"]))
        tokenizer._set_vocabulary([str(token) for token in state["vocabulary"]])
        return tokenizer

    def save(self, path: str | os.PathLike) -> None:
        """Write the settings and vocabulary as JSON (atomically)."""
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Tokenizer":
        """Read a file written by :meth:`save`; anything else is one :class:`DataFormatError`."""
        return _load_state(path, cls.from_dict, "tokenizer")


class TextEncoder:
    """Raw texts → a model's inputs and labels, fitted on the training texts only: the
    label vocabulary, TF-IDF rows (the FC features) and, when asked, token ids (CNN/LSTM).

    Saved as JSON with a trained run (``holoxmc train`` writes ``text_encoder.json``), so
    that new texts are encoded exactly as the training texts were; it never refits on the
    texts it encodes.

    Args:
        labels: the label vocabulary (column ``j`` of ``Y`` is ``labels[j]``).
        tfidf: a fitted ``TfidfVectorizer`` of words (see :func:`fit_tfidf`).
        tokenizer: a fitted :class:`Tokenizer`, or ``None`` when no tokens are needed.
        chars: a fitted character ``TfidfVectorizer`` (see :func:`fit_char_tfidf`) whose
            columns follow the words' (rows L2-normalised as a whole), or ``None``.

    Example:
        >>> enc = TextEncoder.fit(["red apple", "green apple", "red car"], ["fruit", "car"], min_df=1)
        >>> enc.features(["apple car"]).shape, enc.tokenizer is None
        ((1, 7), True)
        >>> restored = TextEncoder.from_dict(enc.to_dict())
        >>> (restored.features(["apple car"]) != enc.features(["apple car"])).nnz
        0
        >>> chars = TextEncoder.fit(["red apple", "red car"], ["x"], text_features="words+pairs+chars")
        >>> chars.n_features, round(float(chars.features(["red"]).power(2).sum()), 5)
        (11, 1.0)
    """

    FORMAT = "holoxmc-text-encoder/1"
    #: the format of an encoder with character runs (a reader of format 1 refuses it, never drops them)
    FORMAT_CHARS = "holoxmc-text-encoder/2"

    def __init__(self, labels: list[str], tfidf: TfidfVectorizer, tokenizer: Tokenizer | None = None,
                 chars: TfidfVectorizer | None = None):
        self.labels, self.tfidf, self.tokenizer, self.chars = list(labels), tfidf, tokenizer, chars

    @classmethod
    def fit(
        cls, texts: list[str], labels: list[str], *, min_df: int | None = None, tokens: bool = False,
        max_vocab: int = 50_000, max_length: int = 256, ngrams: int | None = None,
        max_features: int | None = None, text_features: str = DEFAULT_TEXT_FEATURES,
    ) -> "TextEncoder":
        """Fit TF-IDF as :data:`TEXT_FEATURES` row ``text_features`` says (``min_df``,
        ``ngrams``, ``max_features`` given: instead of the row's) and, with ``tokens``, a
        :class:`Tokenizer` of single words, on the training ``texts``."""
        row = text_features_row(text_features)
        min_df = row.min_df if min_df is None else min_df
        max_features = row.max_features if max_features is None else max_features
        tfidf = fit_tfidf(texts, min_df=min_df, ngrams=row.ngrams if ngrams is None else ngrams,
                          max_features=max_features)
        chars = None if row.chars is None else fit_char_tfidf(texts, chars=row.chars, min_df=min_df,
                                                              max_features=max_features)
        tokenizer = Tokenizer(max_vocab=max_vocab, max_length=max_length).fit(texts) if tokens else None
        return cls(labels, tfidf, tokenizer, chars)

    @property
    def n_features(self) -> int:
        """Columns of :meth:`features`: the words' terms, then the character runs'."""
        return sum(len(_terms(vectorizer)) for vectorizer in (self.tfidf, self.chars) if vectorizer is not None)

    def features(self, texts: list[str]) -> sp.csr_matrix:
        """``(len(texts), n_features)`` float32 TF-IDF rows."""
        words = self.tfidf.transform(texts).astype(np.float32)
        if self.chars is None:
            return words
        from sklearn.preprocessing import normalize

        both = sp.hstack([words, self.chars.transform(texts).astype(np.float32)], format="csr")
        return sp.csr_matrix(normalize(both), dtype=np.float32)

    def tokens(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), max_length)`` padded token ids; needs a tokenizer."""
        if self.tokenizer is None:
            raise InputError("this text encoder has no tokenizer (it was fitted for TF-IDF features only)")
        return self.tokenizer.transform(texts)

    def to_dict(self) -> dict[str, Any]:
        """Label vocabulary, TF-IDF terms (in column order) and weights of the words (and of
        the character runs, if any), tokenizer: JSON-ready."""
        state = {
            "format": self.FORMAT if self.chars is None else self.FORMAT_CHARS,
            "labels": self.labels,
            "tfidf": _vectorizer_state(self.tfidf),
            "tokenizer": None if self.tokenizer is None else self.tokenizer.to_dict(),
        }
        if self.chars is not None:
            state["chars"] = _vectorizer_state(self.chars)
        return state

    @classmethod
    def from_dict(cls, state: dict[str, Any]) -> "TextEncoder":
        """Inverse of :meth:`to_dict` (raises ``KeyError``/``TypeError``/``ValueError`` on bad state)."""
        formats = (cls.FORMAT, cls.FORMAT_CHARS)
        if not isinstance(state, dict) or state.get("format") not in formats:
            raise ValueError(f"format {state.get('format') if isinstance(state, dict) else state!r}, "
                             f"expected {' or '.join(map(repr, formats))}")
        if not isinstance(state["labels"], list) or not all(isinstance(label, str) for label in state["labels"]):
            raise ValueError("'labels' must be a list of strings")
        tfidf = _vectorizer_from_state(state["tfidf"], "tfidf")
        chars = _vectorizer_from_state(state["chars"], "chars") if state["format"] == cls.FORMAT_CHARS else None
        tokenizer = None if state["tokenizer"] is None else Tokenizer.from_dict(state["tokenizer"])
        return cls([str(label) for label in state["labels"]], tfidf, tokenizer, chars)

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_dict` as JSON (atomically)."""
        atomic_write_json(path, self.to_dict())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "TextEncoder":
        """Read a file written by :meth:`save`; anything else is one :class:`DataFormatError`."""
        return _load_state(path, cls.from_dict, "text encoder")


def _terms(vectorizer: TfidfVectorizer) -> list[str]:
    """A fitted or restored vectorizer's terms in column order."""
    return vectorizer.get_feature_names_out().tolist()


def _vectorizer_state(vectorizer: TfidfVectorizer) -> dict[str, Any]:
    """A TF-IDF vectorizer's terms, idf weights and settings, JSON-ready (character runs:
    ``"analyzer": "char_wb"``; words leave it out, as files written before it did)."""
    state = {"terms": _terms(vectorizer), "idf": vectorizer.idf_.tolist(), "sublinear_tf": vectorizer.sublinear_tf,
             "norm": vectorizer.norm, "ngram_range": list(vectorizer.ngram_range)}
    return state if vectorizer.analyzer == "word" else state | {"analyzer": vectorizer.analyzer}


def _vectorizer_from_state(state: Any, key: str) -> TfidfVectorizer:
    """Inverse of :func:`_vectorizer_state` (``ValueError`` on bad state; ``key`` names it)."""
    if not isinstance(state, dict):
        raise ValueError(f"{key!r} must be a JSON object")
    if not isinstance(state["terms"], list) or not all(isinstance(term, str) for term in state["terms"]):
        raise ValueError(f"'{key}.terms' must be a list of strings")
    if state["norm"] not in ("l1", "l2", None):
        raise ValueError(f"TF-IDF norm {state['norm']!r}, expected 'l1', 'l2' or null")
    analyzer = state.get("analyzer", "word")
    if analyzer not in ("word", "char_wb") or (key == "chars") != (analyzer == "char_wb"):
        raise ValueError(f"'{key}.analyzer' {analyzer!r}, expected {'char_wb' if key == 'chars' else 'word'!r}")
    ngram_range = tuple(state.get("ngram_range", (1, 1)))  # files written before the option: words
    if len(ngram_range) != 2 or not all(type(n) is int for n in ngram_range) \
            or not 1 <= ngram_range[0] <= ngram_range[1] or (analyzer == "word" and ngram_range[0] != 1):
        raise ValueError(f"TF-IDF ngram_range {list(ngram_range)}, expected [{'1' if analyzer == 'word' else 'low'}, "
                         "high] with 1 <= low <= high")
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(vocabulary=[str(term) for term in state["terms"]], dtype=np.float32,
                                 sublinear_tf=bool(state["sublinear_tf"]), norm=state["norm"],
                                 ngram_range=ngram_range, analyzer=analyzer)
    idf = np.asarray(state["idf"], dtype=np.float32)
    if idf.shape != (len(state["terms"]),):
        raise ValueError(f"{idf.shape[0] if idf.ndim else 0} idf weights for {len(state['terms'])} terms")
    vectorizer.idf_ = idf
    return vectorizer


def _load_state(path: str | os.PathLike, from_dict: Callable[[Any], T], kind: str) -> T:
    """``from_dict`` of the JSON in ``path``; any failure is one :class:`DataFormatError`."""
    try:
        state = read_json(path, what=f"{kind} file")  # a regular file, bounded, depth-checked, an object
    except InputError as exc:
        raise DataFormatError(path, None, f"not a {kind} file: {str(exc).removeprefix(f'{path}: ')}") from None
    try:
        return from_dict(state)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DataFormatError(path, None, f"not a {kind} file: {exc}") from None

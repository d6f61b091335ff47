"""Pre-trained word vectors (GloVe's text format) for the text backbones' embedding tables.

A GloVe file holds one word a line, followed by its vector's numbers, separated by spaces
(``the 0.418 0.24968 -0.41242 ...``). :func:`read_word_vectors` keeps the vectors of the
words of a tokenizer's vocabulary, aligned with their token ids, and checks every line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from holoxmc.data.readers import read_bytes
from holoxmc.data.text import Tokenizer
from holoxmc.errors import DataFormatError, InputError
from holoxmc.presets import BACKBONE_OPTIONS

__all__ = ["WordVectors", "read_word_vectors", "backbone_word_vectors"]


@dataclass(frozen=True)
class WordVectors:
    """The pre-trained vectors of the words of a vocabulary that a file holds.

    Attributes:
        ids: ``(n,)`` int64 token ids (of :class:`~holoxmc.data.text.Tokenizer`) of the words found.
        vectors: ``(n, dim)`` float32, row ``i`` the vector of token ``ids[i]``.
        n_vocabulary: the words of the vocabulary (found or not).
        path: the file read.
    """

    ids: np.ndarray
    vectors: np.ndarray
    n_vocabulary: int
    path: str

    @property
    def coverage(self) -> float:
        """The share of the vocabulary's words the file holds a vector for (0 to 1)."""
        return len(self.ids) / max(self.n_vocabulary, 1)

    def summary(self) -> str:
        """One line: the file, the words found and the coverage.

        Example:
            >>> WordVectors(np.zeros(3, np.int64), np.zeros((3, 2), np.float32), 4, "g.txt").summary()
            'g.txt: vectors for 3 of the 4 vocabulary words (75.0%), 2 wide'
        """
        return (f"{self.path}: vectors for {len(self.ids)} of the {self.n_vocabulary} vocabulary words "
                f"({100 * self.coverage:.1f}%), {self.vectors.shape[1]} wide")


def _vector(path: str | os.PathLike, number: int, fields: list[bytes], dim: int) -> np.ndarray:
    """The numbers of one line's ``fields`` (after its word), checked."""
    if len(fields) != dim:
        raise DataFormatError(path, number, f"{len(fields)} numbers after the word; the embedding is {dim} wide "
                                            "(embed_dim)")
    try:
        values = np.array([float(field) for field in fields], dtype=np.float64)
    except ValueError:
        bad = next(field for field in fields if not _is_number(field))
        raise DataFormatError(path, number, f"{bad.decode('utf-8', 'replace')!r} is not a number") from None
    if not np.all(np.isfinite(values)) or np.abs(values).max(initial=0) > np.finfo(np.float32).max:
        raise DataFormatError(path, number, "a vector holds NaN or an infinite number")
    return values.astype(np.float32)


def _is_number(field: bytes) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def read_word_vectors(path: str | os.PathLike, tokenizer: Tokenizer, dim: int) -> WordVectors:
    """The vectors of ``path`` (GloVe text format, plain or gzip) for the words of ``tokenizer``.

    Every line must be a word and exactly ``dim`` numbers; the numbers of the vocabulary's
    words must be finite, and such a word may appear once. Lines of other words are checked
    for their count of fields only (their numbers are never used). Memory: the file (bounded
    by :func:`~holoxmc.data.readers.read_bytes`) and one vector per vocabulary word.

    Args:
        path: the file.
        tokenizer: the fitted tokenizer whose vocabulary's rows are initialised.
        dim: the embedding width (``embed_dim``).

    Returns:
        the :class:`WordVectors` found.

    Raises:
        DataFormatError: ``file:line: what is wrong`` (a ragged or short row, a word without
            numbers, a non-number, NaN or infinity, a vocabulary word twice, no line at all).
        InputError: ``dim`` is not a positive integer.

    Example:
        >>> import tempfile, pathlib
        >>> file = pathlib.Path(tempfile.mkdtemp()) / "glove.txt"
        >>> _ = file.write_text("cat 0.5 1\\nzebra 2 3\\n")
        >>> tok = Tokenizer(max_vocab=4).fit(["the cat", "the dog"])
        >>> found = read_word_vectors(file, tok, 2)
        >>> found.ids.tolist(), found.vectors.tolist(), found.coverage
        ([3], [[0.5, 1.0]], 0.5)
    """
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise InputError(f"the embedding width must be a positive integer, got {dim!r}")
    wanted = {word: i + 2 for i, word in enumerate(tokenizer.vocabulary)}
    found: dict[int, np.ndarray] = {}
    n_lines = 0
    for number, line in enumerate(read_bytes(path).split(b"\n"), start=1):
        fields = line.split()
        if not fields:
            continue
        n_lines += 1
        word = fields[0].decode("utf-8", "replace")
        if len(fields) - 1 != dim or word in wanted:
            token = wanted.get(word)
            vector = _vector(path, number, fields[1:], dim)
            if token in found:
                raise DataFormatError(path, number, f"the word {word!r} appears a second time")
            found[int(token)] = vector  # type: ignore[arg-type]  # a wrong count raised above
    if not n_lines:
        raise DataFormatError(path, None, "no word vectors in the file")
    ids = np.array(sorted(found), dtype=np.int64)
    vectors = np.stack([found[i] for i in ids]) if found else np.zeros((0, dim), np.float32)
    return WordVectors(ids, vectors, len(wanted), os.fspath(path))


def backbone_word_vectors(path: str | os.PathLike, params: dict[str, Any], tokenizer: Tokenizer | None) -> WordVectors:
    """:func:`read_word_vectors` for the text backbone of the ``XMCClassifier`` keywords
    ``params``, at its embedding width (``head_options["embed_dim"]``, else the backbone's
    default in :data:`holoxmc.presets.BACKBONE_OPTIONS`).

    Raises:
        InputError: an FC model (it has no word embeddings) or no tokenizer.
        DataFormatError: a fault of the file (see :func:`read_word_vectors`).
    """
    backbone = params.get("backbone", "fc")
    if backbone not in BACKBONE_OPTIONS or tokenizer is None:
        raise InputError("word vectors initialise the embeddings of a text backbone (cnn, lstm) trained on raw text")
    dim = (params.get("head_options") or {}).get("embed_dim", BACKBONE_OPTIONS[backbone]["embed_dim"])
    return read_word_vectors(path, tokenizer, dim)

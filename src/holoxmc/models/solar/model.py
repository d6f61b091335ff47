"""The served SOLAR model: K chunk networks, the label codes and the inverted index
(trained by :func:`holoxmc.models.solar.fit.fit_solar`, which writes its folder)."""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from holoxmc.backbones.fc import FCBackbone
from holoxmc.backbones.network import Network
from holoxmc.models.solar.codes import FeatureHash, InvertedIndex, SolarLabelCode
from holoxmc.errors import InputError
from holoxmc.models.solar.head import (SCORE_OF_LOGIT, SOFTMAX_LOSSES, MinFreqMode, Scoring, SolarChunkHead,
                                       softmax_as_logits, solar_decode)
from holoxmc.io import atomic_write_json
from holoxmc.metrics import evaluate
from holoxmc.train.checkpoint import load_state_dict_file, save_state_dict
from holoxmc.models.solar.config import (
    CONFIG_FILE, FORMAT, INDEX_FILE, INFERENCE_FIELDS, MODEL_FILE, SolarConfig, checked_model_config, chunk_network,
    chunk_loss, feature_hash, normalized_rows, read_json, resolved_size, chunk_dir,
)
from holoxmc.trust import check_finite

__all__ = ["SolarModel"]


class _StackedChunks:
    """The K chunk networks of a model as batched tensors, for inference in one pass.

    Chunk k's hashed input is ``X @ H_k``; ``X @ [H_0 | ... | H_{K-1}]`` is all of them at
    once, chunk k's columns offset by ``k * F``. One ``embedding_bag`` over the K input
    tables stacked row-wise (one bag per (point, chunk)) computes every input layer; the
    hidden and output layers run as one ``baddbmm`` over the K chunks each. The weights are
    copied once here — rebuild after changing the chunk networks' parameters.

    Shapes:
        ``__call__``: L2-normalised (if configured) ``(n, D)`` CSR → ``(n, K, B)`` logits,
        a transposed view of a contiguous ``(K, n, B)`` tensor (no copy).
    """

    def __init__(self, hashers: list[FeatureHash | None], networks: Sequence[Network], n_features: int) -> None:
        backbones = [cast(FCBackbone, network.backbone) for network in networks]
        hidden = [[cast(nn.Linear, layer) for layer in backbone.layers] for backbone in backbones]
        outputs = [cast(SolarChunkHead, network.head).dense.linear for network in networks]
        self.n_chunks = len(networks)
        self.input_width = backbones[0].n_features  # F: hashed width (or D without hashing)
        blocks = [  # without hashing every chunk sees the raw input: K identity blocks
            sp.identity(n_features, dtype=np.float32, format="csr") if hasher is None else hasher.matrix()
            for hasher in hashers
        ]
        self.hash_matrix = sp.hstack(blocks, format="csr", dtype=np.float32)  # (D, K * F)
        with torch.no_grad():
            self.input_weight = torch.cat([b.input_layer.weight for b in backbones])  # (K * F, h0)
            self.input_bias = torch.stack([b.input_bias for b in backbones]).unsqueeze(1)  # (K, 1, h0)
            self.hidden_layers = [
                (
                    torch.stack([layers[i].weight for layers in hidden]).transpose(1, 2),  # (K, a, b)
                    torch.stack([layers[i].bias for layers in hidden]).unsqueeze(1),  # (K, 1, b)
                )
                for i in range(len(hidden[0]))
            ]
            self.output_weight = torch.stack([linear.weight for linear in outputs]).transpose(1, 2)  # (K, h, B)
            self.output_bias = torch.stack([linear.bias for linear in outputs]).unsqueeze(1)  # (K, 1, B)

    @torch.no_grad()
    def __call__(self, X: sp.csr_matrix) -> Tensor:
        n, n_chunks = X.shape[0], self.n_chunks
        hashed = (X @ self.hash_matrix).tocsr()  # (n, K * F): chunk k in columns [k F, (k+1) F)
        hashed.sort_indices()  # the per-chunk order: every chunk's block sorted, blocks in order
        indices = torch.from_numpy(hashed.indices.astype(np.int64))
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(hashed.indptr))
        bags = torch.from_numpy(rows * n_chunks + hashed.indices // self.input_width)  # point-major
        offsets = torch.zeros(n * n_chunks, dtype=torch.int64)
        offsets[1:] = torch.cumsum(torch.bincount(bags, minlength=n * n_chunks), 0)[:-1]
        values = torch.from_numpy(hashed.data.astype(np.float32, copy=False))
        h = F.embedding_bag(indices, self.input_weight, offsets, mode="sum", per_sample_weights=values)
        h = torch.relu(h.view(n, n_chunks, -1).transpose(0, 1) + self.input_bias)  # (K, n, h0)
        for weight, bias in self.hidden_layers:
            h = torch.relu(torch.baddbmm(bias, h, weight))
        return torch.baddbmm(self.output_bias, h, self.output_weight).transpose(0, 1)


class SolarModel:
    """A trained SOLAR model: K chunk networks, the label codes and the inverted index.

    Args:
        config: a resolved :class:`SolarConfig` (no ``None`` sizes).
        code: the label codes.
        n_features: D of the raw (unhashed) input.
        fingerprint: digest of the training config and data (``None`` if unknown).

    Example:
        >>> model = SolarModel.load("runs/solar")                    # doctest: +SKIP
        >>> labels, scores, candidates = model.predict(X_test, k=5)  # doctest: +SKIP
    """

    def __init__(
        self, config: SolarConfig, code: SolarLabelCode, n_features: int, fingerprint: str | None = None
    ) -> None:
        self.config = config
        self.fingerprint = fingerprint
        self.code = code
        self.n_features = int(n_features)
        self.n_labels = code.n_labels
        self.index: InvertedIndex = code.inverted_index()
        self.hashers = [feature_hash(config, self.n_features, k) for k in range(config.n_chunks)]
        self.networks = [
            chunk_network(config, self.n_features, code.buckets[k], k) for k in range(config.n_chunks)
        ]
        self._table = self.index.padded().to(torch.int32)
        self._buckets = torch.from_numpy(code.buckets.T.copy()).long().T  # (K, L) view of (L, K)
        self._stacked: _StackedChunks | None = None  # built from the networks at first inference

    # ---- persistence -------------------------------------------------------------------
    def _write_metadata(self, directory: Path) -> None:
        save_state_dict(directory / INDEX_FILE, {"buckets": torch.from_numpy(self.code.buckets)} | self.index.tensors())
        atomic_write_json(
            directory / CONFIG_FILE,
            {
                "format": FORMAT,
                "config": self.config.to_dict(),
                "n_features": self.n_features,
                "n_labels": self.n_labels,
                "fingerprint": self.fingerprint,
            },
        )

    def _load_chunks(self, directory: Path) -> None:
        for k, network in enumerate(self.networks):
            path = chunk_dir(directory, k) / MODEL_FILE
            tensors, _ = load_state_dict_file(path)
            check_finite(tensors.items(), str(path))
            try:
                network.load_state_dict(tensors)
            except RuntimeError as exc:
                raise InputError(f"{path}: weights do not match {directory / CONFIG_FILE} "
                                 f"({' '.join(str(exc).split())})") from None
            network.eval()
        self._stacked = None

    def save(self, directory: str | os.PathLike) -> None:
        """Write the model (config JSON, index and every chunk's safetensors) to ``directory``."""
        directory = Path(directory)
        self._write_metadata(directory)
        for k, network in enumerate(self.networks):
            save_state_dict(chunk_dir(directory, k) / MODEL_FILE, network.state_dict())

    @classmethod
    def load(cls, directory: str | os.PathLike) -> "SolarModel":
        """Read a model written by :func:`fit_solar` or :meth:`save` (no pickle involved)."""
        directory = Path(directory)
        meta = read_json(directory / CONFIG_FILE)
        if meta is None or meta.get("format") != FORMAT:
            raise InputError(f"{directory}: not a SOLAR model directory (no {CONFIG_FILE} of format {FORMAT})")
        config = checked_model_config(directory, meta)
        code = config.label_code(meta["n_labels"])
        tensors, _ = load_state_dict_file(directory / INDEX_FILE)
        check_finite(tensors.items(), str(directory / INDEX_FILE))
        if not np.array_equal(tensors["buckets"].numpy(), code.buckets):
            raise InputError(f"{directory}: stored label codes differ from the ones the seed regenerates")
        model = cls(config, code, meta["n_features"], meta.get("fingerprint"))
        model.index = InvertedIndex.from_tensors(tensors)
        model._table = model.index.padded().to(torch.int32)
        model._load_chunks(directory)
        return model

    def first_chunks(self, n_chunks: int) -> "SolarModel":
        """The model made of chunks ``0..n_chunks-1`` only — exactly the model a K = ``n_chunks``
        run with the same seed trains, since chunks are independent (used for K sweeps).
        ``min_freq`` is reset to its default for the smaller K."""
        if not 1 <= n_chunks <= self.config.n_chunks:
            raise InputError(f"n_chunks must lie in [1, {self.config.n_chunks}], got {n_chunks}")
        config = replace(self.config, n_chunks=n_chunks, min_freq=max(1, n_chunks // 2))
        code = config.label_code(self.n_labels)
        model = SolarModel(config, code, self.n_features)
        for mine, theirs in zip(model.networks, self.networks):
            mine.load_state_dict(theirs.state_dict())
            mine.eval()
        model._stacked = None
        return model

    def with_decoding(self, **settings: Any) -> "SolarModel":
        """This model with other decoding settings: a copy sharing the chunk networks, the
        codes and the index (nothing retrains or is copied), with ``top_buckets``,
        ``min_freq``, ``min_freq_mode`` or ``scoring`` replaced where given (``None``: kept).

        Raises:
            InputError: another setting (one that needs retraining), or an invalid value.

        Example:
            >>> strict = model.with_decoding(min_freq=3, min_freq_mode="strict")  # doctest: +SKIP
            >>> strict.config.min_freq, model.config.min_freq_mode                # doctest: +SKIP
            (3, 'relaxed')
        """
        config = self._decoding(**settings)
        self._stacked_chunks()  # built once, shared with the copy
        model = copy.copy(self)
        model.config = config
        return model

    def _decoding(self, **settings: Any) -> SolarConfig:
        """The config with the decoding ``settings`` given (not ``None``) replaced, checked."""
        unknown = sorted(set(settings) - set(INFERENCE_FIELDS))
        if unknown:
            raise InputError(f"{unknown} are no decoding settings (those are {list(INFERENCE_FIELDS)})")
        return replace(self.config, **{key: value for key, value in settings.items() if value is not None})

    # ---- the FittedModel protocol ------------------------------------------------------
    def predict_topk(self, X: sp.csr_matrix, k: int, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`predict` without the candidate counts."""
        indices, scores, _ = self.predict(X, k, batch_size=batch_size)
        return indices, scores

    def score_chunks(self, X: sp.csr_matrix) -> Iterator[tuple[int, Tensor]]:
        """:meth:`label_score_chunks` with the configured scoring."""
        return self.label_score_chunks(X)

    def save_to(self, directory: Path) -> dict[str, Tensor]:
        """:meth:`save` into ``directory``; no tensors for the estimator's file."""
        self.save(directory)
        return {}

    def parameter_counts(self) -> dict[str, int]:
        """All K chunk networks' parameters, and their B-wide output layers'."""
        return {
            "total": sum(p.numel() for network in self.networks for p in network.parameters()),
            "output_layer": sum(p.numel() for network in self.networks for p in cast(nn.Module, network.head).parameters()),
        }

    # ---- inference ---------------------------------------------------------------------
    @torch.no_grad()
    def chunk_logits(self, X: sp.csr_matrix) -> Tensor:
        """Bucket logits of every chunk, ``(n, K, B)`` float32 (a view of a ``(K, n, B)``
        tensor: all chunks run at once, see :class:`_StackedChunks`)."""
        if self.config.normalize_rows:
            X = normalized_rows(X)
        logits = self._stacked_chunks()(sp.csr_matrix(X, dtype=np.float32))
        softmax = chunk_loss(self.config.loss, resolved_size(self.config.n_buckets, "n_buckets")) in SOFTMAX_LOSSES
        return softmax_as_logits(logits, in_place=True) if softmax else logits

    def _stacked_chunks(self) -> _StackedChunks:
        """The chunk networks batched for inference, built at first use."""
        if self._stacked is None:
            self._stacked = _StackedChunks(self.hashers, self.networks, self.n_features)
        return self._stacked

    def label_score_chunks(
        self, X: sp.csr_matrix, scoring: Scoring | None = None, label_chunk: int = 16384
    ) -> Iterator[tuple[int, Tensor]]:
        """``(start, scores)`` label chunks for the rows of ``X``: a label's ``scoring`` (the
        configured one by default) of its bucket's logit, summed over the K chunks; every
        label, not only the inverted index's candidates (``O(K · L)`` per row).

        Shapes:
            X: ``(n, D)`` → chunks ``(n, m)`` covering labels ``[start, start + m)``.
        """
        per_bucket = SCORE_OF_LOGIT[scoring or self.config.scoring](self.chunk_logits(X))  # (n, K, B)
        for start in range(0, self.n_labels, label_chunk):
            buckets = self._buckets[:, start : start + label_chunk]  # (K, m)
            scores = per_bucket[:, 0, buckets[0]]  # a gather: a new tensor, safe to add into
            for k in range(1, self.config.n_chunks):
                scores += per_bucket[:, k, buckets[k]]
            yield start, scores

    def confidence_chunks(self, X: sp.csr_matrix, label_chunk: int = 16384) -> Iterator[tuple[int, Tensor]]:
        """``(start, confidences)`` label chunks: a label's mean over the K chunks of its
        bucket's probability, in ``[0, 1]`` (:meth:`label_score_chunks` with ``"prob"``, / K)."""
        for start, scores in self.label_score_chunks(X, "prob", label_chunk):
            yield start, scores / self.config.n_chunks

    def predict(
        self,
        X: sp.csr_matrix,
        k: int = 5,
        *,
        top_buckets: int | None = None,
        min_freq: int | None = None,
        scoring: Scoring | None = None,
        min_freq_mode: MinFreqMode | None = None,
        batch_size: int = 1024,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top-k labels of every row of ``X`` via the inverted index.

        Args:
            X: ``(n, D)`` sparse features.
            k: labels per point.
            top_buckets, min_freq, scoring, min_freq_mode: override the config's decoding
                settings for this call (checked as :meth:`with_decoding` does).
            batch_size: rows decoded at once.

        Returns:
            ``(indices (n, k) int64, scores (n, k) float32, candidates_per_point (n,) int64)``;
            ``-1`` marks a missing label when fewer than k candidates exist. The labels that
            pass ``min_freq`` come first, by score; with the relaxed filter, the ones it let in
            follow by hit count, then score (so one of them may score above a label before
            it, and a row's first labels are the same for every ``k``, up to exact ties).
        """
        if not sp.issparse(X) or X.shape[1] != self.n_features:
            raise InputError(f"X must be sparse with {self.n_features} columns")
        config = self._decoding(top_buckets=top_buckets, min_freq=min_freq, scoring=scoring,
                                min_freq_mode=min_freq_mode)
        X = sp.csr_matrix(X, dtype=np.float32)
        n = X.shape[0]
        indices = np.full((n, k), -1, dtype=np.int64)
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        candidates = np.zeros(n, dtype=np.int64)
        for start in range(0, n, batch_size):
            rows = slice(start, min(start + batch_size, n))
            top_scores, top_labels, kept = solar_decode(
                self.chunk_logits(X[rows]),
                self._table,
                self._buckets,
                k,
                top_buckets=config.top_buckets,
                min_freq=resolved_size(config.min_freq, "min_freq"),
                scoring=config.scoring,
                min_freq_mode=config.min_freq_mode,
            )
            indices[rows], scores[rows], candidates[rows] = top_labels.numpy(), top_scores.numpy(), kept.numpy()
        return indices, scores, candidates

    def evaluate(
        self, X: sp.csr_matrix, Y: sp.csr_matrix, inv_prop: np.ndarray | None = None, **predict_options: Any
    ) -> dict[str, float]:
        """Metrics (percent) at k = 1..5 plus ``candidates_per_point`` and ``predict_ms_per_point``."""
        start = time.perf_counter()
        indices, _, candidates = self.predict(X, 5, **predict_options)
        elapsed = time.perf_counter() - start
        metrics = evaluate(indices, Y, inv_prop=inv_prop)
        metrics["candidates_per_point"] = float(candidates.mean())
        metrics["predict_ms_per_point"] = 1000.0 * elapsed / max(X.shape[0], 1)
        return metrics


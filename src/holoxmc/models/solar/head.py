"""SOLAR's output side: per-chunk bucket targets and loss, and inverted-index decoding.

A chunk model predicts B bucket logits. Its training target is the OR of the buckets of the
present labels, built per batch from the :class:`LabelBatch` (never an L-wide vector).
Decoding takes every chunk's top-m buckets, collects their labels through the inverted index,
counts in how many chunks each candidate was hit, drops candidates hit fewer than
``min_freq`` times (``"relaxed"``: per point at most down to the k-th best hit count, so
that k candidates remain where k were retrieved; ``"strict"``: the paper's filter as it
stands), scores the rest by summing a per-chunk score of their bucket over all K
chunks and keeps the top k (the candidates that pass ``min_freq`` first, so that a point's
first labels do not depend on k) — batched over points with sort/scatter ops, no Python loop
over candidates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Literal

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from holoxmc.data.batch import LabelBatch
from holoxmc.errors import InputError
from holoxmc.codes.hrr import Stream, local_generator
from holoxmc.heads.dense import DenseHead, reset_linear_

__all__ = ["SolarChunkHead", "OutputRows", "bucket_label_batch", "sampled_columns", "solar_decode", "SCORINGS",
           "SCORE_OF_LOGIT", "MIN_FREQ_MODES", "LOSSES", "SAMPLED_LOSSES", "SOFTMAX_LOSSES", "softmax_as_logits"]

Loss = Literal["full", "sampled", "softmax", "row-softmax"]
#: A chunk's training loss: ``"full"`` is the BCE over all B buckets; ``"sampled"`` scores
#: only the batch's positive buckets and a shared uniform sample of the others, reweighted so
#: that its expectation is the full loss (:meth:`SolarChunkHead.sampled_loss`); ``"softmax"``
#: is the cross-entropy of a softmax over the buckets against each row's positive buckets, its
#: partition sum estimated on the same columns (:meth:`SolarChunkHead.softmax_loss`);
#: ``"row-softmax"`` is that softmax with each row scored against its own positive buckets and
#: the shared drawn ones only (:meth:`SolarChunkHead.row_softmax_loss`: a step's output
#: products no longer grow with the batch's positive buckets).
LOSSES: tuple[str, ...] = ("full", "sampled", "softmax", "row-softmax")
#: The losses that score only some buckets a step (the output layer is then a table of rows).
SAMPLED_LOSSES: tuple[str, ...] = ("sampled", "softmax", "row-softmax")
#: The losses whose chunks decode a softmax's probabilities (:func:`softmax_as_logits`).
SOFTMAX_LOSSES: tuple[str, ...] = ("softmax", "row-softmax")

Scoring = Literal["prob", "logprob", "logit"]
#: A chunk's bucket logit → the score it adds to each of the bucket's labels, per ``Scoring``.
SCORE_OF_LOGIT: dict[str, Callable[[Tensor], Tensor]] = {
    "prob": torch.sigmoid, "logprob": F.logsigmoid, "logit": torch.clone,
}
SCORINGS: tuple[str, ...] = tuple(SCORE_OF_LOGIT)
MinFreqMode = Literal["relaxed", "strict"]
#: How decoding applies ``min_freq``: ``"relaxed"`` lowers it per point to the k-th best hit
#: count when fewer than k candidates would pass; ``"strict"`` never does (SOLAR's paper).
MIN_FREQ_MODES: tuple[str, ...] = ("relaxed", "strict")


def bucket_label_batch(labels: LabelBatch, bucket_of_label: Tensor, n_buckets: int) -> LabelBatch:
    """The OR of each row's label buckets, as a :class:`LabelBatch` over ``n_buckets``.

    Args:
        labels: present labels of a batch (label ids ``< L``).
        bucket_of_label: ``(L,)`` int64 bucket of every label in this chunk.
        n_buckets: B.

    Shapes:
        returns indices ``(n_pos',)`` sorted per row, duplicates removed; indptr ``(n + 1,)``.

    Example:
        >>> y = LabelBatch(torch.tensor([0, 2, 1]), torch.tensor([0, 2, 3]), n_labels=3)
        >>> out = bucket_label_batch(y, torch.tensor([1, 0, 1]), n_buckets=2)
        >>> out.indices.tolist(), out.indptr.tolist()
        ([1, 0], [0, 1, 2])
    """
    rows = labels.row_ids()
    keys = torch.unique(rows * n_buckets + bucket_of_label[labels.indices])  # sorted
    counts = torch.bincount(keys // n_buckets, minlength=len(labels))
    indptr = torch.zeros(len(labels) + 1, dtype=torch.int64, device=keys.device)
    indptr[1:] = torch.cumsum(counts, 0)
    return LabelBatch(keys % n_buckets, indptr, n_buckets)


def sampled_columns(positives: Tensor, n_buckets: int, negatives: int,
                    generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """The buckets a sampled-loss step scores, and the weight of a negative term in each.

    The columns are the batch's positive buckets ``P`` and ``negatives`` buckets drawn
    uniformly without replacement from all ``B`` (a set ``U`` shared by the batch's rows).
    Given the batch, a bucket of ``P`` is always scored (weight 1) and any other bucket is
    scored with probability ``negatives / B`` (weight ``B / negatives``, the inverse of its
    inclusion probability): the weighted sum of the scored negative terms is an unbiased
    (Horvitz-Thompson) estimate of the sum over all the batch's negative buckets, so the
    expected loss and gradient are the full BCE's and the logits estimate the same
    probabilities. With ``negatives >= B`` every bucket is scored with weight 1.

    Args:
        positives: bucket ids present in the batch (any order, repeats allowed).
        n_buckets: B.
        negatives: buckets drawn per batch.
        generator: random source of the draw (default: torch's, which the trainer seeds per epoch).

    Shapes:
        returns columns ``(C,)`` sorted int64 and weights ``(C,)`` float32.

    Example:
        >>> columns, weights = sampled_columns(torch.tensor([3, 1, 3]), 10, 2, torch.Generator().manual_seed(0))
        >>> len(columns) in (3, 4), sorted(set(weights.tolist())) in ([1.0, 5.0], [1.0])
        (True, True)
    """
    device = positives.device
    if negatives >= n_buckets:
        return torch.arange(n_buckets, device=device), torch.ones(n_buckets, device=device)
    drawn = torch.randperm(n_buckets, generator=generator, device=device)[:negatives]
    columns = torch.unique(torch.cat([positives, drawn]))
    weights = torch.full(columns.shape, n_buckets / negatives, device=device)
    weights[torch.isin(columns, positives)] = 1.0
    return columns, weights


class OutputRows(nn.Embedding):
    """A chunk's ``(B, in_features)`` output layer kept as a table of bucket rows with a bias
    per bucket, so that a step that scores only some buckets reads their rows as an
    embedding lookup: with ``sparse=True`` (the trainer's sparse updates) their weights get a
    row-sparse gradient and :class:`~holoxmc.train.optim.CatchUpAdam` computes only on them.

    Its ``weight`` and ``bias`` have the shapes, names and initial values of the
    :class:`~holoxmc.heads.dense.DenseHead` layer of the same seed (a saved chunk loads in
    either).

    Args:
        in_features: width of the backbone output; n_buckets: B.
        generator: initialisation source (``reset_linear_``'s distribution).

    Shapes:
        ``forward(columns (C,))`` → their ``(C, in_features)`` weight rows (read through the
        module call, so that the sparse updates' hook catches them up first).
    """

    def __init__(self, in_features: int, n_buckets: int, generator: torch.Generator) -> None:
        super().__init__(n_buckets, in_features)
        self.bias = nn.Parameter(torch.zeros(n_buckets))
        reset_linear_(self, generator)

    def forward(self, columns: Tensor) -> Tensor:
        # the sparse-update optimiser's pre-forward hook catches up the rows named by the
        # first argument before they are read
        return F.embedding(columns, self.weight, sparse=self.sparse)


class _RowsHead(DenseHead):
    """A :class:`DenseHead` whose layer is an :class:`OutputRows` table (same state-dict keys)."""

    def __init__(self, in_features: int, n_buckets: int, *, seed: int, prior_bias: bool) -> None:
        super().__init__(in_features, n_buckets, seed=seed, prior_bias=prior_bias)
        self.linear = OutputRows(in_features, n_buckets, local_generator(seed, Stream.HEAD_INIT))  # type: ignore[assignment]

    def forward(self, h: Tensor) -> Tensor:
        return F.linear(h, self.linear.weight, self.linear.bias)  # all buckets, without the table's hook


class SolarChunkHead(nn.Module):
    """One SOLAR chunk's output layer: a :class:`DenseHead` over B buckets whose targets are
    the buckets of the present labels.

    ``forward`` gives ``(n, B)`` bucket logits; ``loss`` takes labels in label space (L) and
    maps them to this chunk's buckets per batch; ``topk`` ranks buckets (used for per-chunk
    model selection on bucket-space validation targets).

    With ``loss="sampled"``, ``"softmax"`` or ``"row-softmax"`` a training step scores only
    some buckets (:meth:`training_loss`, which :class:`SolarNetwork` calls from the backbone
    output) and the layer is an :class:`OutputRows` table (a softmax chunk decodes through
    :func:`softmax_as_logits`).

    Args:
        in_features: width of the backbone output.
        bucket_of_label: ``(L,)`` bucket ids of this chunk (a row of ``SolarLabelCode.buckets``).
        n_buckets: B.
        seed: seed of the weight initialisation (local generator).
        loss: ``"full"``, ``"sampled"``, ``"softmax"`` or ``"row-softmax"`` (:data:`LOSSES`).
        negatives: buckets drawn per batch by the sampled losses (:func:`sampled_columns`,
            :meth:`row_softmax_loss`).
        prior_bias: :meth:`start_from_labels` sets every bucket's bias to the log-odds of its
            share of the training rows.

    Example:
        >>> head = SolarChunkHead(8, torch.tensor([0, 1, 1, 2]), n_buckets=3)
        >>> head(torch.zeros(2, 8)).shape
        torch.Size([2, 3])
    """

    bucket_of_label: Tensor  # buffers: declared for type checkers
    bucket_share: Tensor | None

    def __init__(self, in_features: int, bucket_of_label: Tensor, n_buckets: int, *, seed: int = 0,
                 loss: Loss = "full", negatives: int = 1024, prior_bias: bool = False) -> None:
        super().__init__()
        bucket_of_label = torch.as_tensor(bucket_of_label, dtype=torch.int64)
        if bucket_of_label.ndim != 1 or (bucket_of_label.numel() and int(bucket_of_label.max()) >= n_buckets):
            raise InputError("bucket_of_label must be a 1-D array of bucket ids < n_buckets")
        if loss not in LOSSES:
            raise InputError(f"loss must be one of {LOSSES}, got {loss!r}")
        if negatives < 1:
            raise InputError(f"negatives must be >= 1, got {negatives}")
        self.n_buckets = int(n_buckets)
        self.n_labels = int(bucket_of_label.numel())
        self.loss_kind: Loss = loss
        self.negatives = int(negatives)
        layer = _RowsHead if loss in SAMPLED_LOSSES else DenseHead
        self.dense = layer(in_features, self.n_buckets, seed=seed, prior_bias=prior_bias)
        # row-softmax's draw (:meth:`count_buckets`; None: uniform), moved with the network, not saved
        self.register_buffer("bucket_share", None, persistent=False)
        self.register_buffer("bucket_of_label", bucket_of_label, persistent=False)

    def start_from_labels(self, Y: sp.spmatrix) -> None:
        """With ``prior_bias``, set each bucket's bias to the log-odds of the smoothed share of
        the rows of ``Y`` ``(n, L)`` with a label in it, ``(n_b + 0.5) / (n + 1)``
        (:meth:`DenseHead.start_from_labels` on the rows' bucket sets).

        Example:
            >>> head = SolarChunkHead(4, torch.tensor([0, 1, 1]), n_buckets=2, prior_bias=True)
            >>> head.start_from_labels(sp.csr_matrix([[1, 0, 0], [0, 1, 1], [0, 0, 1]]))
            >>> [round(b, 2) for b in head.dense.linear.bias.tolist()]
            [-0.51, 0.51]
        """
        if Y.shape[1] != self.n_labels:
            raise InputError(f"labels have {Y.shape[1]} columns, the chunk code has {self.n_labels}")
        self.dense.start_from_labels(bucket_matrix(Y, self.bucket_of_label.cpu().numpy(), self.n_buckets))

    def training_loss(self, h: Tensor, labels: LabelBatch) -> Tensor:
        """The chunk's training loss (its ``loss``) from the backbone output ``h``: a sampled
        loss without the B-wide output, the full BCE through :meth:`forward`."""
        if self.loss_kind == "sampled":
            return self.sampled_loss(h, labels)
        if self.loss_kind == "softmax":
            return self.softmax_loss(h, labels)
        if self.loss_kind == "row-softmax":
            return self.row_softmax_loss(h, labels)
        return self.loss(self(h), labels)

    def sampled_loss(self, h: Tensor, labels: LabelBatch) -> Tensor:
        """The sampled estimate of :meth:`loss` from the backbone output ``h``: BCE over the
        batch's positive buckets and ``negatives`` shared random buckets
        (:func:`sampled_columns`), the drawn negatives weighted by ``B / negatives``, summed and
        divided by ``n · B`` as the full mean is. Its expectation over the draw is the full
        loss (equal to it when ``negatives >= B``).

        Shapes:
            h ``(n, in_features)`` → a scalar.
        """
        positives, columns, weights, logits, target = self._sampled(h, labels)
        with torch.autocast(logits.device.type, enabled=False):
            total = F.binary_cross_entropy_with_logits(logits.float(), target, weight=weights, reduction="sum")
        return total / (len(labels) * self.n_buckets)

    def softmax_loss(self, h: Tensor, labels: LabelBatch) -> Tensor:
        """Mean over the batch's rows of the cross-entropy between a softmax over the B buckets
        and the row's positive buckets, each of weight ``1 / |P_row|``; rows without a label
        add nothing.

        The partition sum is estimated on the columns of :func:`sampled_columns` (the batch's
        positive buckets, always scored, and ``negatives`` shared uniform draws): a drawn
        bucket's ``exp(logit)`` counts ``B / negatives`` times (its logit raised by
        ``log(B / negatives)``, the sampled softmax's correction for the inclusion
        probability), which estimates the full sum without bias; with ``negatives >= B`` it is
        the full softmax. One softmax concentrates each step on telling a row's buckets from
        the rest, where B sigmoids each move a little; decoding reads the bucket
        probabilities (:func:`softmax_as_logits`).

        Shapes:
            h ``(n, in_features)`` → a scalar.
        """
        _, _, weights, logits, target = self._sampled(h, labels)
        with torch.autocast(logits.device.type, enabled=False):
            log_p = F.log_softmax(logits.float() + torch.log(weights), dim=1)  # log 1 = 0: positives as they are
            total = -(target * log_p).sum(1) / target.sum(1).clamp(min=1.0)
        return total.sum() / max(len(labels), 1)

    def row_softmax_loss(self, h: Tensor, labels: LabelBatch) -> Tensor:
        """:meth:`softmax_loss` with each row's partition sum estimated on its own positive
        buckets and ``negatives`` shared draws only, not on the other rows' positive buckets:
        a step's output products are ``n x negatives`` (plus one dot product per positive)
        instead of ``n x (|P| + negatives)``, where ``|P|``, the batch's positive buckets,
        grows with the batch (about 4,000 of them in 1,024 rows at 670K labels).

        The draws are ``S = negatives`` buckets with replacement from ``q``, the buckets'
        shares of the training rows (:meth:`count_buckets`, which the fit calls; uniform
        without replacement before it): the other rows' positives that :meth:`softmax_loss`
        scores are such draws, and uniform ones alone learned under half as much a step
        (docs/results/solar.md). Row ``r`` with positive buckets ``P_r``: ``Z_r = sum_{b in
        P_r} exp(l_b) + sum_{u drawn, u not in P_r} (c_u / (S q_u)) exp(l_u)`` (``c_u``: times
        drawn), an unbiased estimate of the full partition sum; the loss is ``log Z_r -
        mean_{b in P_r} l_b``, averaged over the rows with a label. With ``negatives >= B``
        it is the full softmax, as :meth:`softmax_loss` then is.

        Shapes:
            h ``(n, in_features)`` → a scalar.

        Example:
            >>> head = SolarChunkHead(4, torch.tensor([0, 1, 2]), n_buckets=3, loss="row-softmax", negatives=3)
            >>> y = LabelBatch(torch.tensor([0, 2, 1]), torch.tensor([0, 2, 3]), 3)
            >>> h = torch.randn(2, 4)
            >>> bool(torch.isclose(head.row_softmax_loss(h, y), head.softmax_loss(h, y)))
            True
        """
        if labels.n_labels != self.n_labels:
            raise InputError(f"labels have {labels.n_labels} classes, the chunk code has {self.n_labels}")
        positives = bucket_label_batch(labels, self.bucket_of_label, self.n_buckets)
        drawn, correction = self._row_draw(h.device)
        columns = torch.unique(torch.cat([positives.indices, drawn]))  # one read of the table (its sparse hook)
        weight, bias = self._bucket_rows(columns)
        at_drawn, at_positive = torch.searchsorted(columns, drawn), torch.searchsorted(columns, positives.indices)
        rows = positives.row_ids()
        with torch.autocast(h.device.type, enabled=False):
            h, weight, bias = h.float(), weight.float(), bias.float()
            negative = torch.addmm(bias[at_drawn] + correction, h, weight[at_drawn].T)  # (n, S)
            where = torch.full((self.n_buckets,), -1, dtype=torch.int64, device=h.device)
            where[drawn] = torch.arange(len(drawn), device=h.device)
            own = where[positives.indices]  # a row's positive bucket that was also drawn counts once, as a positive
            hit = own >= 0
            negative = negative.index_put((rows[hit], own[hit]), torch.tensor(-math.inf, device=h.device))
            positive = (h[rows] * weight[at_positive]).sum(1) + bias[at_positive]  # (n_pos,)
            counts = positives.counts()
            width = int(counts.max()) if len(counts) else 0
            slot = torch.arange(len(rows), device=h.device) - positives.indptr[rows]
            padded = torch.full((len(labels), max(width, 1)), -math.inf, device=h.device)
            padded = padded.index_put((rows, slot), positive)
            log_z = torch.logsumexp(torch.cat([padded, negative], 1), 1)
            own_mean = torch.zeros(len(labels), device=h.device).index_add(0, rows, positive)
            labelled = counts > 0
            total = (log_z - own_mean / counts.clamp(min=1))[labelled].sum()
        return total / max(len(labels), 1)

    def count_buckets(self, Y: sp.spmatrix) -> None:
        """Keep the share of the rows of ``Y`` ``(n, L)`` with a label in each bucket,
        ``(n_b + 0.5)``, normalised: the distribution :meth:`row_softmax_loss` draws its
        negatives from (uniform until this is called)."""
        if Y.shape[1] != self.n_labels:
            raise InputError(f"labels have {Y.shape[1]} columns, the chunk code has {self.n_labels}")
        counts = np.asarray(bucket_matrix(Y, self.bucket_of_label.cpu().numpy(), self.n_buckets).sum(axis=0)).ravel()
        share = torch.as_tensor(counts + 0.5, dtype=torch.float32, device=self.bucket_of_label.device)
        self.bucket_share = share / share.sum()

    def _row_draw(self, device: torch.device) -> tuple[Tensor, Tensor]:
        """The buckets :meth:`row_softmax_loss` draws for a step and each one's logit correction,
        ``log(times drawn / (S q_b))`` (``q``: :meth:`count_buckets`' shares, or uniform without
        replacement, ``log(B / S)``); every bucket, uncorrected, when ``negatives >= B``."""
        if self.negatives >= self.n_buckets:
            return torch.arange(self.n_buckets, device=device), torch.zeros(self.n_buckets, device=device)
        if self.bucket_share is None:
            drawn = torch.randperm(self.n_buckets, device=device)[:self.negatives]
            return drawn, torch.full((len(drawn),), math.log(self.n_buckets / self.negatives), device=device)
        q = self.bucket_share.to(device)
        drawn, times = torch.unique(torch.multinomial(q, self.negatives, replacement=True), return_counts=True)
        return drawn, torch.log(times.float() / (self.negatives * q[drawn]))

    def _bucket_rows(self, columns: Tensor) -> tuple[Tensor, Tensor]:
        """The output layer's weight rows ``(C, in_features)`` and biases ``(C,)`` of the
        buckets ``columns``; an :class:`OutputRows` table's through its call (its sparse
        updates' hook), a full-loss layer's by indexing (the same estimate from its columns)."""
        layer = self.dense.linear
        weight = layer(columns) if isinstance(layer, OutputRows) else layer.weight[columns]
        return weight, layer.bias[columns]

    def _sampled(self, h: Tensor, labels: LabelBatch) -> tuple[LabelBatch, Tensor, Tensor, Tensor, Tensor]:
        """The batch's positive buckets, the scored columns and their weights
        (:func:`sampled_columns`), their logits ``(n, C)`` and the 0/1 targets ``(n, C)``."""
        if labels.n_labels != self.n_labels:
            raise InputError(f"labels have {labels.n_labels} classes, the chunk code has {self.n_labels}")
        positives = bucket_label_batch(labels, self.bucket_of_label, self.n_buckets)
        columns, weights = sampled_columns(positives.indices, self.n_buckets, self.negatives)
        weight, bias = self._bucket_rows(columns)
        logits = torch.addmm(bias.to(h.dtype), h, weight.T.to(h.dtype))
        target = torch.zeros(logits.shape, dtype=torch.float32, device=logits.device)
        slots = torch.searchsorted(columns, positives.indices)
        target.view(-1).index_fill_(0, positives.row_ids() * len(columns) + slots, 1.0)
        return positives, columns, weights, logits, target

    def forward(self, h: Tensor) -> Tensor:
        return self.dense(h)

    def loss(self, out: Tensor, labels: LabelBatch) -> Tensor:
        """Binary cross-entropy over the B buckets against the OR of the label buckets."""
        if labels.n_labels != self.n_labels:
            raise InputError(f"labels have {labels.n_labels} classes, the chunk code has {self.n_labels}")
        return self.dense.loss(out, bucket_label_batch(labels, self.bucket_of_label, self.n_buckets))

    def topk(self, out: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """Top-k buckets ``(scores, bucket ids)``."""
        return self.dense.topk(out, k)

    def scores(self, out: Tensor) -> Tensor:
        """Score of every bucket: the logits, ``(B, n_buckets)``."""
        return self.dense.scores(out)

    def score_chunks(self, h: Tensor) -> Iterator[tuple[int, Tensor]]:
        """The bucket logits of the backbone output ``h`` as one chunk, ``(0, (B, n_buckets))``."""
        return self.dense.score_chunks(h)

    def confidence_chunks(self, h: Tensor) -> Iterator[tuple[int, Tensor]]:
        """The buckets' probabilities for the backbone output ``h`` as one chunk."""
        return self.dense.confidence_chunks(h)


def softmax_as_logits(logits: Tensor, *, in_place: bool = False) -> Tensor:
    """The logits of a softmax's probabilities over the last dimension, ``log p - log(1 - p)``
    with ``p = softmax(logits)``: a softmax-trained chunk then decodes as a sigmoid one does
    (``sigmoid`` of the result is ``p``; the order within a row is unchanged).

    Args:
        logits: any shape; ``in_place``: overwrite ``logits`` (one temporary of its size
            instead of three: at inference the ``(n, K, B)`` logits are the largest tensor).

    Example:
        >>> p = torch.sigmoid(softmax_as_logits(torch.tensor([[0.0, 1.0, 2.0]])))
        >>> [round(v, 4) for v in p[0].tolist()], round(float(p.sum()), 4)
        ([0.09, 0.2447, 0.6652], 1.0)
    """
    log_p = logits if in_place else logits.clone()
    log_p.sub_(torch.logsumexp(log_p, dim=-1, keepdim=True))
    log_not_p = log_p.exp().clamp_(max=1.0 - 1e-7).neg_().log1p_()
    return log_p.sub_(log_not_p)


def bucket_matrix(Y: sp.spmatrix, bucket_of_label: np.ndarray, n_buckets: int) -> sp.csr_matrix:
    """``(n, B)`` binary CSR: the OR of each row's label buckets.

    Example:
        >>> bucket_matrix(sp.csr_matrix([[1, 0, 1], [0, 1, 0]]), np.array([0, 1, 0]), 2).toarray().tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    assign = sp.csr_matrix(
        (np.ones(len(bucket_of_label), np.float32), bucket_of_label, np.arange(len(bucket_of_label) + 1)),
        shape=(len(bucket_of_label), n_buckets),
    )
    out = (sp.csr_matrix(Y, dtype=np.float32) @ assign).tocsr()
    out.data[:] = 1.0
    out.sort_indices()
    return out


def buckets_by_label(buckets: Tensor) -> Tensor:
    """``(L, K)`` contiguous view of the ``(K, L)`` codes: one row gather per label."""
    return buckets.T.contiguous()


def solar_decode(
    logits: Tensor,
    index_table: Tensor,
    buckets: Tensor,
    k: int = 5,
    *,
    top_buckets: int = 50,
    min_freq: int = 1,
    scoring: Scoring = "prob",
    min_freq_mode: MinFreqMode = "relaxed",
) -> tuple[Tensor, Tensor, Tensor]:
    """Top-k labels from K chunks' bucket logits through the inverted index.

    1. per chunk, the ``top_buckets`` (m) best buckets; 2. their labels from ``index_table``;
    3. hit count of every distinct candidate (in how many chunks it was retrieved);
    4. keep candidates with ``>= min_freq`` hits — with ``min_freq_mode="relaxed"`` the
    threshold is lowered per point to the k-th largest hit count when fewer than k would
    remain; ``"strict"`` (the paper's filter) keeps it, so a point may get fewer than k labels; 5. score = sum over all K chunks of
    ``sigmoid`` (``"prob"``), ``logsigmoid`` (``"logprob"``) or the raw logit (``"logit"``) of
    the candidate's bucket; 6. top-k by score — where the relaxed filter let candidates in,
    by hit count capped at ``min_freq`` first, then score, so that the labels that pass
    ``min_freq`` come first and a point's top labels do not depend on ``k``.

    Args:
        logits: bucket logits of all chunks (any strides, e.g. a transposed ``(K, n, B)``).
        index_table: inverted index as a padded table (``InvertedIndex.padded()``), padding = L;
            int32 saves a copy.
        buckets: the label codes (``SolarLabelCode.buckets``) as int64; pass the transpose of a
            contiguous ``(L, K)`` tensor to save a transpose per call.
        k: labels returned per point.
        top_buckets: m, buckets kept per chunk.
        min_freq: least number of chunks that must retrieve a candidate.
        scoring: ``"prob"``, ``"logprob"`` or ``"logit"``.
        min_freq_mode: ``"relaxed"`` or ``"strict"`` (see step 4).

    Shapes:
        logits ``(n, K, B)``; index_table ``(K, B, S)``; buckets ``(K, L)`` →
        scores ``(n, k)``, labels ``(n, k)`` int64 (``-1`` with score ``-inf`` where a point
        has fewer than k candidates left), candidates ``(n,)`` int64 — candidates kept after
        the ``min_freq`` filter.
    """
    n, n_chunks, n_buckets = logits.shape
    n_labels = buckets.shape[1]
    if index_table.shape[:2] != (n_chunks, n_buckets) or buckets.shape[0] != n_chunks:
        raise InputError(
            f"logits {tuple(logits.shape)} do not match index {tuple(index_table.shape)} "
            f"and codes {tuple(buckets.shape)}"
        )
    if k < 1 or top_buckets < 1 or min_freq < 1:
        raise InputError("k, top_buckets and min_freq must be >= 1")
    device = logits.device
    if scoring not in SCORINGS:
        raise InputError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    if min_freq_mode not in MIN_FREQ_MODES:
        raise InputError(f"min_freq_mode must be one of {MIN_FREQ_MODES}, got {min_freq_mode!r}")
    if n == 0:
        empty = torch.empty(0, k, device=device)
        return empty.to(logits.dtype), empty.long(), torch.zeros(0, dtype=torch.int64, device=device)
    m = min(top_buckets, n_buckets)
    top = logits.topk(m, dim=2).indices  # (n, K, m)
    chunk_ids = torch.arange(n_chunks, device=device)
    # every retrieved label of a point, in one row; padding (= L) sorts after real labels
    flat_table = index_table.reshape(n_chunks * n_buckets, -1)
    retrieved = flat_table[(top + (chunk_ids * n_buckets).view(1, -1, 1)).reshape(-1)].reshape(n, -1)
    retrieved = retrieved.to(torch.int32).sort(dim=1).values  # (n, E); no copy for an int32 table

    # distinct (point, label) pairs in one pass over the sorted rows; the run length is the hit count
    pairs, hits = torch.unique_consecutive(
        (torch.arange(n, device=device).unsqueeze(1) * (n_labels + 1) + retrieved).reshape(-1), return_counts=True
    )
    rows = pairs // (n_labels + 1)
    hits = hits.masked_fill(pairs - rows * (n_labels + 1) == n_labels, 0)  # padding is no candidate

    threshold = (_relaxed_threshold(rows, hits, n, n_chunks, min(k, retrieved.shape[1]), min_freq)
                 if min_freq_mode == "relaxed" else torch.full((n,), min_freq, dtype=hits.dtype, device=device))
    kept_at = (hits >= threshold[rows]).nonzero().squeeze(1)
    kept_pairs, kept_hits = pairs[kept_at], hits[kept_at]  # row-major, labels ascending
    rows, labels = kept_pairs // (n_labels + 1), kept_pairs % (n_labels + 1)
    kept = torch.bincount(rows, minlength=n)

    # score kept candidates with their bucket in all K chunks, then top-k per point
    kept_logits = logits[rows.unsqueeze(1), chunk_ids, buckets_by_label(buckets)[labels]]  # any strides
    first = torch.cumsum(kept, 0) - kept
    slots = torch.arange(rows.numel(), device=device) - first[rows]  # position among the point's candidates
    width = int(kept.max())
    scores = torch.full((n, width), -torch.inf, dtype=logits.dtype, device=device)
    scores[rows, slots] = SCORE_OF_LOGIT[scoring](kept_logits).sum(1)
    slot_labels = torch.full((n, width), -1, dtype=torch.int64, device=device)
    slot_labels[rows, slots] = labels
    if min_freq_mode == "relaxed" and bool((threshold < min_freq).any()):
        top_scores, top_slots = _tiered_top(scores, rows, slots, torch.clamp(kept_hits, max=min_freq), min(k, width))
    else:
        top_scores, top_slots = scores.topk(min(k, width), dim=1)
    top_labels = slot_labels.gather(1, top_slots).masked_fill(top_scores == -torch.inf, -1)
    if top_scores.shape[1] < k:
        top_scores = F.pad(top_scores, (0, k - top_scores.shape[1]), value=-torch.inf)
        top_labels = F.pad(top_labels, (0, k - top_labels.shape[1]), value=-1)
    return top_scores, top_labels, kept


def _tiered_top(scores: Tensor, rows: Tensor, slots: Tensor, tiers: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The top ``k`` slots of each point by tier, then score (ties: the lower slot): a
    candidate at least ``min_freq`` chunks retrieve (the highest tier) ranks above one the
    relaxed filter let in, so a point's first labels are the same whatever ``k`` asks.

    Shapes:
        scores ``(n, width)`` (``-inf`` in empty slots); rows, slots, tiers ``(kept,)`` →
        ``(n, k)`` scores and slots.
    """
    tier = torch.zeros(scores.shape, dtype=tiers.dtype, device=scores.device)
    tier[rows, slots] = tiers
    by_score = scores.argsort(dim=1, descending=True, stable=True)
    by_tier = tier.gather(1, by_score).argsort(dim=1, descending=True, stable=True)
    top_slots = by_score.gather(1, by_tier[:, :k])
    return scores.gather(1, top_slots), top_slots


def _relaxed_threshold(rows: Tensor, hits: Tensor, n: int, n_chunks: int, k: int, min_freq: int) -> Tensor:
    """Per point, ``min_freq`` lowered to the k-th largest hit count when fewer than k
    candidates would reach it (at least 1).

    Shapes:
        rows, hits: ``(pairs,)`` point and hit count of every (point, label) pair → ``(n,)``.
    """
    # at_least[i, h - 1] = candidates of point i hit >= h times (1 <= h <= K)
    histogram = torch.bincount(rows * (n_chunks + 1) + hits, minlength=n * (n_chunks + 1)).view(n, -1)
    at_least = histogram[:, 1:].flip(1).cumsum(1).flip(1)
    hit_counts = torch.arange(1, n_chunks + 1, device=hits.device)
    kth_hits = ((at_least >= k) * hit_counts).amax(1)  # 0: fewer than k candidates
    return torch.clamp(torch.clamp(kth_hits, max=min_freq), min=1)

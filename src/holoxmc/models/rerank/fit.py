"""Fit a :class:`~holoxmc.models.rerank.model.RerankModel`: the retriever (PIFA centroids, and the
training rows as kNN neighbours when ``knn > 0``), each training row's shortlist (its own row
left out of its neighbours), then one sparse linear scorer per label trained only on its
positives and the hard negatives its shortlist brings (training rows that shortlist the label
without having it) — so the cost grows with ``N x train_shortlist``, not ``N x L`` as the one-vs-all
linear model's (the recipe of PECOS / SLICE). Each scorer is liblinear's squared-hinge SVM
(the same objective and stopping rule) trained by :mod:`holoxmc.models.linear.dcd`'s compiled
solver, seeded per label, pruned; labels train in blocks, in this process on every core
(threads; the same model at any thread count) or as jobs of
:func:`~holoxmc.distributed.run_jobs` (local workers or Ray). With a
``run_dir``, every finished block is written there (safetensors, fingerprinted by the data
and settings), and a fit with ``resume`` reads those blocks instead of training them again.
The mix weight ``alpha`` is chosen on the validation split when one is given. Without a
``shortlist``, its size is :func:`shortlist_rule` of the training labels; without a
``train_shortlist``, :func:`train_shortlist_rule` of the shortlist and the training rows.

Example:
    >>> from holoxmc.data import make_realistic
    >>> train, _ = make_realistic(300, 20, 200, seed=0)
    >>> fit_rerank(train.X, train.Y, RerankConfig(shortlist=5)).n_labels
    20
"""

from __future__ import annotations

import json
import math
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize

from holoxmc.distributed import run_jobs, scratch_folder
from holoxmc.distributed.jobs import check_workers
from holoxmc.errors import InputError, check_number_types
from holoxmc.models.rerank.matcher import ClusterMatcher
from holoxmc.models.rerank.model import RerankModel
from holoxmc.sparse import cost_chunks, default_threads, in_threads, l2_rows
from holoxmc.settings import option_default
from holoxmc.timing import Stopwatch
from holoxmc.presets import RERANK_BUDGETS, RERANK_SHORTLIST
from holoxmc.train.checkpoint import data_digest, load_state_dict_file, save_state_dict
from holoxmc.models.linear.dcd import fit_labels_dcd, label_seed
from holoxmc.models.linear.fit import training_rows
from holoxmc.models.rerank.clusters import balanced_clusters, default_clusters

__all__ = ["RerankConfig", "fit_rerank", "add_labels", "fit_matcher", "pifa_centroids", "pifa_index", "shortlist_rule",
           "train_shortlist_rule", "label_weights_rule", "training_shortlists",
           "ALPHAS", "ALPHA_ROWS", "BLOCK_FILE", "RETRIEVERS"]

#: Mix weights tried on the validation split when ``alpha`` is ``None``.
ALPHAS = (0.0, 0.25, 0.5, 0.75, 0.9, 1.0)
#: Validation rows that choose ``alpha`` at most (a seeded random share of more): six values'
#: P@1 are told apart on ten thousand rows (a standard error near 0.5 points), and scoring
#: more costs the fit minutes at large L.
ALPHA_ROWS = 10_000
#: Entries of the unpruned product one block of the PIFA index holds at most (about).
_PIECE = 1 << 24
#: Retrievers of :class:`RerankConfig`.
RETRIEVERS = ("pifa", "clusters")
#: Labels of one call of the compiled solver at most (a block's labels are split into chunks
#: for its threads: four per thread, at most this many labels each).
_CHUNK_LABELS = 64
#: File name of a finished label block in ``run_dir`` (first and last label + 1).
BLOCK_FILE = "rerank_block_{start:08d}_{stop:08d}.safetensors"
#: Whether :func:`fit_rerank` leaves the rows each label trained on with the model
#: (``model.fit_rows``, for :func:`absorb_rows`; never saved): ``head="auto"`` sets it around
#: its re-rank candidate, whose fit may then be finished on the held-out rows.
KEEP_FIT_ROWS: ContextVar[bool] = ContextVar("KEEP_FIT_ROWS", default=False)


@dataclass(frozen=True)
class RerankConfig:
    """Settings of the re-rank fit.

    Attributes:
        shortlist: labels the retriever proposes per row at scoring (and at training, up to
            ``train_shortlist``);
            ``None``: :func:`shortlist_rule` of the training labels, resolved by the fit.
        train_shortlist: the best labels of each training row's shortlist that its rows
            train against as hard negatives (at most ``shortlist``); ``None``:
            :func:`train_shortlist_rule`, the whole shortlist unless the training rows would
            then hold more than ``RERANK_BUDGETS["train_entries"]`` entries.
        label_weights: the most weights a label keeps after ``prune`` (its largest in
            magnitude; ties: the lower features; the clustered retriever's cluster scorers
            too); ``None``: :func:`label_weights_rule`.
        C: inverse L2 regularisation of each label's SVM (rows are L2-normalised).
        prune: weights of smaller magnitude are dropped.
        alpha: the mix weight of the re-rank score; ``None`` picks it from :data:`ALPHAS` by
            P@1 on the validation split (:data:`DEFAULT_ALPHA` without one).
        knn: nearest training rows whose labels the retriever adds (``0``: PIFA alone).
        knn_weight: weight of the neighbours' vote in the retriever score.
        negatives: random training rows added to each label's rows (seeded), so that a label
            no other row shortlists still learns against some negatives.
        max_iter, tol: the solver's iteration limit and stopping tolerance per label (liblinear's
            rule: the spread of the dual's projected gradients at most ``tol``).
        label_block: labels per training job.
        seed: each label's coordinate order (seeded with it and the label's index) and the
            clusters' initial centres.
        retriever: ``"pifa"``: every label scored by its PIFA centroid (``N x L`` work);
            ``"clusters"``: the clustered retriever (:mod:`holoxmc.models.rerank.matcher`): labels in
            balanced clusters of their PIFA vectors, a sparse linear scorer per cluster
            (trained as the labels' are, on the cluster's positives, the rows whose
            ``2 x beam`` nearest cluster centroids hold it and ``negatives`` random rows), and
            a row's shortlist taken from the labels of its ``beam`` best clusters.
        clusters: cluster count (``0``: :func:`~holoxmc.models.rerank.clusters.default_clusters`, about
            :data:`~holoxmc.models.rerank.clusters.LABELS_PER_CLUSTER` labels per cluster).
        beam: clusters whose labels a row takes as candidates (raised when their labels
            would number fewer than ``shortlist``).
        cluster_weight: weight of the cluster score in a candidate's retriever score.
        postings: with the PIFA retriever, each feature keeps only the labels of its
            ``postings`` largest centroid weights (``0``: all). Past
            :data:`~holoxmc.models.rerank.model.DENSE_UP_TO` labels (without kNN, prior or negative
            values) a row's retrieval then costs at most ``postings`` labels per feature it
            holds, not ``L`` (:func:`pifa_index`); below it the dense ``rows x L`` block stays.
        frequent_labels: the most frequent training labels on every shortlist, in training
            (so their scorers learn from every row) and prediction (``0``: none; PIFA without
            kNN only; ``None``: :func:`frequent_labels_rule`, the labels more often right than
            an average shortlist entry, none for the clustered retriever or kNN). Measured in
            docs/results/model-gap.md and the tuning log, "The frequent labels on every
            shortlist".
    """

    shortlist: int | None = option_default("rerank", "shortlist")
    train_shortlist: int | None = option_default("rerank", "train_shortlist")
    label_weights: int | None = option_default("rerank", "label_weights")
    C: float = 0.5
    prune: float = 0.05
    alpha: float | None = None
    knn: int = 0
    knn_weight: float = 1.0
    negatives: int = 30
    max_iter: int = 1000
    tol: float = 0.1
    label_block: int = 1024
    seed: int = 0
    retriever: str = "pifa"
    clusters: int = 0
    beam: int = 64
    cluster_weight: float = 0.5
    postings: int = 1000
    frequent_labels: int | None = option_default("rerank", "frequent_labels")

    def __post_init__(self) -> None:
        check_number_types(self)
        checks = {"shortlist": self.shortlist is None or self.shortlist >= 1,
                  "train_shortlist": self.train_shortlist is None or self.train_shortlist >= 1,
                  "label_weights": self.label_weights is None or self.label_weights >= 1, "C": math.isfinite(self.C) and self.C > 0,
                  "prune": math.isfinite(self.prune) and self.prune >= 0,
                  "alpha": self.alpha is None or (math.isfinite(self.alpha) and 0 <= self.alpha <= 1),
                  "knn": self.knn >= 0, "negatives": self.negatives >= 0, "knn_weight": math.isfinite(self.knn_weight) and self.knn_weight >= 0,
                  "max_iter": self.max_iter >= 1, "tol": math.isfinite(self.tol) and self.tol > 0,
                  "label_block": self.label_block >= 1, "clusters": self.clusters >= 0, "beam": self.beam >= 1,
                  "cluster_weight": math.isfinite(self.cluster_weight) and self.cluster_weight >= 0,
                  "postings": self.postings >= 0,
                  "frequent_labels": self.frequent_labels is None or self.frequent_labels >= 0}
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise InputError(f"rerank setting {bad[0]}={getattr(self, bad[0])!r} is out of range (shortlist, train_shortlist, label_weights, knn, "
                             "negatives, max_iter, label_block: positive integers (knn may be 0, either shortlist or label_weights None); "
                             "C, tol: "
                             "positive; prune, knn_weight: >= 0; alpha: in [0, 1] or None; clusters >= 0, beam >= 1, "
                             "cluster_weight >= 0, postings >= 0, frequent_labels >= 0 or None)")
        if self.retriever not in RETRIEVERS:
            raise InputError(f"rerank setting retriever={self.retriever!r} is not one of {list(RETRIEVERS)}")
        if self.retriever == "clusters" and self.knn:
            raise InputError("rerank's clustered retriever has no kNN vote: set knn=0 or retriever='pifa'")
        if self.frequent_labels and (self.retriever != "pifa" or self.knn):
            raise InputError("rerank's frequent_labels needs retriever='pifa' and knn=0")


#: ``alpha`` when it is ``None`` and no validation split is given.
DEFAULT_ALPHA = 0.25


def shortlist_rule(n_labels: int, labels_per_row: float) -> int:
    """The shortlist size of a training set with ``n_labels`` labels and ``labels_per_row``
    mean labels per row: ``min(L, cap, max(floor, ceil(per_row x labels_per_row)))``, the
    constants of :data:`holoxmc.presets.RERANK_SHORTLIST`.

    Args:
        n_labels: ``L``, at least 1.
        labels_per_row: the mean count of labels of a training row, at least 0.

    Returns:
        The number of labels the retriever proposes per row.

    Example:
        >>> shortlist_rule(983, 2.0), shortlist_rule(983, 19.0), shortlist_rule(30, 19.0)
        (50, 304, 30)
    """
    wanted = math.ceil(RERANK_SHORTLIST["per_row"] * labels_per_row)
    return int(min(n_labels, RERANK_SHORTLIST["cap"], max(RERANK_SHORTLIST["floor"], wanted)))


def frequent_labels_rule(counts: np.ndarray, n_rows: int, shortlist: int) -> int:
    """How many of the most frequent labels are on every shortlist when :class:`RerankConfig`
    gives no ``frequent_labels``: those whose share of the training rows is at least the share
    of a shortlist's entries that are right when it holds every label of its row (the mean
    labels per row over ``shortlist``), i.e. labels more often right than an average entry.
    No constant of its own; at most ``shortlist`` labels pass.

    Args:
        counts: ``(L,)`` training rows of each label; n_rows: the training rows.
        shortlist: the shortlist size the fit resolved (:func:`shortlist_rule`).

    Example:
        >>> frequent_labels_rule(np.array([60, 30, 5, 5, 0, 0, 0, 0]), 100, 4)  # 1 a row: shares >= 1/4
        2
        >>> frequent_labels_rule(np.array([60, 30, 5, 5]), 100, 4)  # a shortlist of every label
        0
    """
    rows, counts = max(int(n_rows), 1), np.asarray(counts)
    if shortlist >= len(counts):  # every label is on every list already
        return 0
    share = float(np.sum(counts)) / rows / max(int(shortlist), 1)
    return int(np.count_nonzero(counts / rows >= share)) if share > 0 else 0


def train_shortlist_rule(shortlist: int, n_rows: int) -> int:
    """The labels of each training row's shortlist that train as hard negatives when
    :class:`RerankConfig` gives none: the whole ``shortlist``, cut where ``n_rows x
    shortlist`` would pass ``RERANK_BUDGETS["train_entries"]`` (the training shortlists and
    the label memberships grow with that product, and the label fits' time with it).

    Example:
        >>> train_shortlist_rule(87, 490_449), train_shortlist_rule(500, 1_717_899)
        (87, 58)
    """
    return int(max(1, min(shortlist, RERANK_BUDGETS["train_entries"] // max(1, n_rows))))


def label_weights_rule(n_labels: int) -> int:
    """The most weights a label keeps when :class:`RerankConfig` gives no ``label_weights``:
    ``RERANK_BUDGETS["weight_entries"] / L`` (the model's weights then hold at most that many
    entries in all).

    Example:
        >>> label_weights_rule(670_091), label_weights_rule(3_000_000)
        (746, 166)
    """
    return int(max(1, RERANK_BUDGETS["weight_entries"] // max(1, n_labels)))


def pifa_centroids(X: sp.csr_matrix, Y: sp.csr_matrix) -> sp.csr_matrix:
    """``(L, D)`` L2-normalised mean feature row of each label's positives (unseen labels: zero rows)."""
    return normalize(sp.csr_matrix(Y.T @ X, dtype=np.float32), norm="l2", axis=1, copy=False)


def pifa_index(X: sp.csr_matrix, Y: sp.csr_matrix, postings: int = 0, *, block_entries: int = _PIECE) -> sp.csr_matrix:
    """The PIFA retriever's inverted index: ``(D, L)`` CSR whose column ``l`` is label ``l``'s
    L2-normalised mean feature row (:func:`pifa_centroids`, transposed) and whose row ``f``
    keeps only the ``postings`` largest weights of feature ``f`` (``0``: all; ties: the lower
    labels), columns not renormalised. A frequent feature is in nearly every label's centroid,
    which makes exact retrieval cost ``rows x L``; pruned, a row costs at most ``postings``
    labels per feature it holds, and the labels a feature drops are those it weighs least.

    Two passes over the product ``X.T @ Y``, each in blocks whose products hold at most about
    ``block_entries`` entries: the first, in blocks of labels, keeps only each label's norm;
    the second, in blocks of features, takes whole rows of the product, divides each entry by
    its label's norm, and prunes each row once. Memory holds the pruned index and
    one block (the pruned blocks are copied into the index one by one as it is assembled),
    never the unpruned ``(D, L)`` product, and no row is pruned twice (joining
    label blocks' pruned rows instead re-pruned the growing index hundreds of times at L = 3M).

    Example:
        >>> X = sp.csr_matrix(np.array([[1, 0], [1, 1], [0, 1]], np.float32))
        >>> Y = sp.csr_matrix(np.eye(3, dtype=np.float32))
        >>> (pifa_index(X, Y).toarray() > 0).astype(int).tolist()
        [[1, 1, 0], [0, 1, 1]]
        >>> (pifa_index(X, Y, postings=1, block_entries=1).toarray() > 0).astype(int).tolist()
        [[1, 0, 0], [0, 0, 1]]
    """
    n_labels = Y.shape[1]
    Y = sp.csc_matrix(Y, dtype=np.float32)
    XT = sp.csr_matrix(X.T, dtype=np.float32)
    row_entries = np.diff(sp.csr_matrix(X).indptr).astype(np.float64)
    squares = np.zeros(n_labels, np.float64)
    for lo, hi in cost_chunks(np.asarray(Y.T @ row_entries).ravel(), block_entries):  # cost: entries before merging
        block = sp.csr_matrix(XT @ Y[:, lo:hi], dtype=np.float32)
        squares[lo:hi] = np.bincount(block.indices, weights=np.square(block.data, dtype=np.float64), minlength=hi - lo)
        del block
    scale = (1.0 / np.sqrt(np.where(squares > 0, squares, 1.0))).astype(np.float32)
    Y = sp.csr_matrix(Y)
    labels_per_row = np.diff(Y.indptr).astype(np.float64)
    parts = []
    for lo, hi in cost_chunks(_feature_cost(XT, labels_per_row), block_entries):
        part = sp.csr_matrix(XT[lo:hi] @ Y, dtype=np.float32)
        part.data *= scale[part.indices]  # each label divided by its norm (after the sum, as in the first pass)
        _keep_largest(part, postings)
        part.sort_indices()
        parts.append(part)
    return _stack_rows(parts, (X.shape[1], n_labels))


def _stack_rows(parts: list[sp.csr_matrix], shape: tuple[int, int]) -> sp.csr_matrix:
    """The CSR matrix of ``parts`` stacked row-wise, each part freed once copied (``parts`` is
    emptied): the stacked matrix and one part in memory, not two copies of every part."""
    total = sum(part.nnz for part in parts)
    index_type = np.int32 if max(total, shape[1]) < np.iinfo(np.int32).max else np.int64
    data, indices = np.empty(total, np.float32), np.empty(total, index_type)
    indptr, row, at = np.zeros(shape[0] + 1, np.int64), 0, 0
    parts.reverse()
    while parts:
        part = parts.pop()
        data[at:at + part.nnz], indices[at:at + part.nnz] = part.data, part.indices
        indptr[row + 1:row + part.shape[0] + 1] = part.indptr[1:] + at
        row, at = row + part.shape[0], at + part.nnz
        del part
    return sp.csr_matrix((data, indices, indptr.astype(index_type)), shape=shape)


def _feature_cost(XT: sp.csr_matrix, labels_per_row: np.ndarray) -> np.ndarray:
    """Entries each feature's row of ``X.T @ Y`` sums before merging: its rows' label counts."""
    pattern = sp.csr_matrix((np.ones(XT.nnz, np.float32), XT.indices, XT.indptr), shape=XT.shape)
    return np.asarray(pattern @ labels_per_row, dtype=np.float64).ravel()


def _keep_largest(M: sp.csr_matrix, k: int) -> None:
    """Keep only the ``k`` largest stored values of each row of ``M`` (``0``: all; ties at the
    ``k``-th value: the lower columns), in place; explicit zeros are dropped. The order is a
    total one: which entries are kept does not depend on the order a row stores them in."""
    if k:
        for row in np.flatnonzero(np.diff(M.indptr) > k):
            lo, hi = M.indptr[row], M.indptr[row + 1]
            values, columns = M.data[lo:hi], M.indices[lo:hi]
            kth = -np.partition(-values, k - 1)[k - 1]
            tied = np.flatnonzero(values == kth)
            keep = values > kth
            keep[tied[np.argsort(columns[tied], kind="stable")[:k - int(keep.sum())]]] = True
            values[~keep] = 0.0
    M.eliminate_zeros()


def training_shortlists(retriever: RerankModel, X: sp.csr_matrix, *, size: int | None = None, workers: int = 1,
                        ray_address: str | None = None, threads: int | None = None) -> np.ndarray:
    """``(n, size)`` best labels the retriever proposes for each training row of unit rows
    ``X`` (``size``: at most its shortlist, ``None``: all of it), then the retriever's
    ``always`` labels (``(n, size + f)``); with kNN, a row is not its own neighbour. Locally, batches of rows are scored on ``threads`` threads of this process
    (``None``: every core, :func:`~holoxmc.sparse.default_threads`; :func:`~holoxmc.sparse.in_threads`:
    the products release the GIL, threads hold no copy of the index or the rows, as worker
    processes would, and each batch is scored alone, so the result is the same at any count);
    with Ray, row blocks are tasks of :func:`~holoxmc.distributed.run_jobs` (about four per
    worker).

    Example:
        >>> C = sp.csr_matrix(np.eye(3, dtype=np.float32))
        >>> m = RerankModel(C, sp.csr_matrix((3, 3), dtype=np.float32), np.zeros(3, np.float32), 1, 0.0)
        >>> training_shortlists(m, C).ravel().tolist()
        [0, 1, 2]
    """
    check_workers(workers)
    if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1):
        raise InputError(f"the training shortlist size must be a positive integer, not {size!r}")
    step = retriever.batch_rows()
    size = retriever.shortlist if size is None else min(int(size), retriever.shortlist)
    if ray_address is None:
        out = np.empty((X.shape[0], size), np.int32)

        def batch(start: int) -> None:
            out[start:start + step] = _shortlist_rows(retriever, X, start, min(start + step, X.shape[0]), size)
        in_threads(batch, range(0, X.shape[0], step), default_threads() if threads is None else threads)
    else:
        rows_per_job = step * max(1, -(-X.shape[0] // (step * max(1, workers) * 4)))
        starts = range(0, X.shape[0], rows_per_job)
        blocks = [_Block(start, min(start + rows_per_job, X.shape[0])) for start in starts]
        parts = run_jobs(_shortlist_block, blocks, (retriever, X, size), workers=workers if len(blocks) > 1 else 1,
                         ray_address=ray_address, gpu=False)
        out = np.concatenate(parts) if parts else np.zeros((0, size), np.int32)
    if retriever.always.size:  # on every row's list (a repeat is harmless: memberships read the pattern)
        out = np.hstack([out, np.repeat(retriever.always.astype(np.int32)[None, :], X.shape[0], axis=0)])
    return out


def _shortlist_block(block: "_Block", shared: tuple[RerankModel, sp.csr_matrix, int]) -> np.ndarray:
    """Shortlists of training rows ``[start, stop)`` (a Ray task), in scoring batches."""
    retriever, X, size = shared
    step = retriever.batch_rows()
    return np.concatenate([_shortlist_rows(retriever, X, start, min(start + step, block.stop), size)
                           for start in range(block.start, block.stop, step)])


def _shortlist_rows(retriever: RerankModel, X: sp.csr_matrix, start: int, stop: int, size: int) -> np.ndarray:
    """int32 shortlists (half the int64's memory) of training rows ``[start, stop)``, their
    ``size`` best labels, one batch on one thread; with kNN, a row is not its own neighbour."""
    exclude = np.arange(start, stop) if retriever.knn else None
    return retriever.shortlists(X[start:stop], exclude, threads=1)[0][:, :size].astype(np.int32)


# ---------------------------------------------------------------------------- label blocks
@dataclass(frozen=True)
class _Block:
    """Labels (or training rows) ``[start, stop)``."""

    start: int
    stop: int


@dataclass(frozen=True)
class _Problem:
    """What every block trains from: float32 unit rows with int32 indices,
    per label the rows it learns from (``rows``, CSC) and its positives (``Y``, CSC), the
    settings, the folder finished blocks are written to (``None``: none), whether their
    weights stay there rather than being sent back (``on_disk``: not with Ray, whose workers
    may not share this machine's disks), the threads a block's labels train on, and the
    model's index of the first label of ``Y`` (:func:`add_labels`' new labels come after the
    old ones; each label's seed is of its index in the model)."""

    X: sp.csr_matrix
    rows: sp.csc_matrix
    Y: sp.csc_matrix
    config: RerankConfig
    folder: str | None
    fingerprint: str
    on_disk: bool = False
    threads: int = 1
    first_label: int = 0


#: A block's ``(nonzero weights per label, their feature indices, their values, biases)``;
#: the indices and values are ``None`` when they were left in the block's file.
_Part = tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray]


def _block_path(folder: str | None, block: _Block) -> Path | None:
    return None if folder is None else Path(folder) / BLOCK_FILE.format(start=block.start, stop=block.stop)


def _read_block(path: Path | None, problem: _Problem, block: _Block) -> _Part | None:
    """A finished block's ``(counts, indices, values, biases)`` from ``path``, or ``None`` when
    it is absent, unreadable or from other data or settings."""
    if path is None or not path.is_file():
        return None
    try:
        tensors, metadata = load_state_dict_file(path)
    except InputError:
        return None
    part = tuple(tensors[name].numpy() for name in ("counts", "indices", "values", "bias") if name in tensors)
    if metadata.get("fingerprint") != problem.fingerprint or len(part) != 4:
        return None
    counts, indices, values, bias = part
    m = block.stop - block.start
    if (counts.shape != (m,) or bias.shape != (m,) or counts.sum() != len(indices) or len(indices) != len(values)
            or (counts < 0).any() or not np.isfinite(values).all() or not np.isfinite(bias).all()
            or (len(indices) and (indices.min() < 0 or indices.max() >= problem.X.shape[1]))):
        return None
    return counts, indices, values, bias


def _fit_block(block: _Block, problem: _Problem) -> _Part:
    """One SVM per label of the block on its own rows, read from the folder when already done
    there, written there otherwise. With ``on_disk``, only its counts and biases are sent back
    (the weights stay on disk until :func:`_weights` reads them into the model: no worker's
    results and no list of parts held beside it)."""
    path = _block_path(problem.folder, block)
    part = _read_block(path, problem, block)
    if part is None:
        part = _train_block(block, problem)
        if path is not None:
            save_state_dict(path, {name: torch.from_numpy(np.ascontiguousarray(a))
                                   for name, a in zip(("counts", "indices", "values", "bias"), part)},
                            metadata={"fingerprint": problem.fingerprint})
    return (part[0], None, None, part[3]) if problem.on_disk and path is not None else part


def _train_block(block: _Block, problem: _Problem) -> _Part:
    """The block's labels trained (:func:`~holoxmc.models.linear.dcd.fit_labels_dcd`, each label
    seeded by its index in the model): ``(nonzero weights per label, their feature indices,
    their values, biases)``. Its labels run in chunks on ``problem.threads`` threads; each
    label's weights depend only on its rows and seed, so the block is the same at any count."""
    config, m = problem.config, block.stop - block.start
    X, rows, Y = problem.X, problem.rows, problem.Y
    seeds = np.array([label_seed(config.seed, problem.first_label + label) for label in range(block.start, block.stop)],
                     np.uint64)
    step = max(1, min(_CHUNK_LABELS, -(-m // (4 * problem.threads))))
    chunks: list[Any] = [None] * len(range(0, m, step))

    def chunk(at: int) -> None:
        labels = np.arange(block.start + at, min(block.start + at + step, block.stop), dtype=np.int64)
        chunks[at // step] = fit_labels_dcd(X.data, X.indices, X.indptr, X.shape[1], rows.indptr, rows.indices, Y.indptr, Y.indices,
                                            labels, seeds[at:at + len(labels)], float(config.C), 1.0, float(config.tol),
                                            int(config.max_iter), float(config.prune), int(config.label_weights or 0))
    in_threads(chunk, range(0, m, step), problem.threads)
    classes = np.concatenate([c[0] for c in chunks])
    bias = np.concatenate([c[4] for c in chunks]).astype(np.float32)
    bias[classes != 0] = 4.0 * classes[classes != 0]  # one class: a constant score
    return (np.concatenate([c[1] for c in chunks]), np.concatenate([c[2] for c in chunks]).astype(np.int32),
            np.concatenate([c[3] for c in chunks]).astype(np.float32), bias)


def _run_blocks(blocks: list[_Block], problem: _Problem, workers: int, ray_address: str | None) -> list[_Part]:
    """:func:`_fit_block` of every block: in this process one block after another, each
    block's labels on every core (:func:`~holoxmc.sparse.default_threads`), with ``workers=1``
    and no Ray; else as jobs of :func:`~holoxmc.distributed.run_jobs` (one thread each). The
    model is the same either way."""
    if ray_address is None and workers == 1:
        threaded = replace(problem, threads=default_threads())
        return [_fit_block(block, threaded) for block in blocks]
    return run_jobs(_fit_block, blocks, problem, workers=workers, ray_address=ray_address, gpu=False)


def _weights(parts: list[_Part], blocks: list[_Block], folder: str | None, n_features: int,
             n_labels: int) -> tuple[sp.csc_matrix, np.ndarray]:
    """The ``(D, L)`` CSC weights and ``(L,)`` biases of the blocks' parts, in label order,
    each block's weights taken from its part or, where it left them there, its file: filled
    into the model's arrays one block at a time."""
    counts = np.concatenate([part[0] for part in parts])
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices, values = np.empty(indptr[-1], np.int32), np.empty(indptr[-1], np.float32)
    for block, part in zip(blocks, parts):
        lo, hi = indptr[block.start], indptr[block.stop]
        if part[1] is None or part[2] is None:
            path = _block_path(folder, block)
            assert path is not None
            tensors, _ = load_state_dict_file(path)
            part = (part[0], tensors["indices"].numpy(), tensors["values"].numpy(), part[3])
        indices[lo:hi], values[lo:hi] = part[1], part[2]
    weights = sp.csc_matrix((values, indices, indptr), shape=(n_features, n_labels))
    return weights, np.concatenate([part[3] for part in parts]).astype(np.float32)


def _membership(shortlists: np.ndarray, Y: sp.csr_matrix, negatives: int, seed: int) -> sp.csc_matrix:
    """``(n, L)`` boolean CSC whose column ``l`` holds the rows label ``l`` learns from: its
    positives, the rows that shortlist it and ``negatives`` random rows (only the pattern is
    read: one byte a value)."""
    n, s = shortlists.shape
    n_labels = Y.shape[1]
    S = sp.csr_matrix((np.ones(n * s, bool), shortlists.ravel(), np.arange(0, n * s + 1, s)), shape=Y.shape)
    random_rows = np.random.default_rng(seed).integers(0, n, size=n_labels * negatives).astype(np.int32)
    R = sp.csr_matrix((np.ones(len(random_rows), bool),
                       (random_rows, np.repeat(np.arange(n_labels, dtype=np.int32), negatives))), shape=Y.shape)
    M = sp.csc_matrix(S + sp.csr_matrix(Y, dtype=bool) + R)
    M.sort_indices()
    return M


def _block_folder(run_dir: str | Path | None, ray_address: str | None) -> AbstractContextManager[str | None]:
    """Where finished blocks go: ``run_dir``; else, with local jobs, a scratch folder removed
    afterwards (their weights are read from there); else (Ray) none."""
    if run_dir is not None:
        return nullcontext(str(run_dir))
    return scratch_folder() if ray_address is None else nullcontext(None)


# ---------------------------------------------------------------------------- the clustered retriever
def fit_matcher(X: sp.csr_matrix, Y: sp.csr_matrix, centroids: sp.csr_matrix,
                config: RerankConfig, *, workers: int = 1, ray_address: str | None = None) -> ClusterMatcher:
    """The clustered retriever: balanced clusters of the labels' PIFA vectors, then one sparse
    linear scorer per cluster, trained as the labels' scorers are (a row is positive for a
    cluster holding one of its labels; hard negatives are the rows whose ``2 x beam`` nearest
    cluster centroids hold it; plus ``negatives`` random rows), the clusters in blocks of
    ``label_block`` as jobs of :func:`~holoxmc.distributed.run_jobs`.

    Args:
        X: the ``(n, D)`` unit training rows (float32 CSR with int32 indices).
        Y: their ``(n, L)`` labels; centroids: the ``(L, D)`` PIFA centroids.
        config: ``clusters``, ``beam``, ``cluster_weight`` and the SVM settings.
        workers, ray_address: where the cluster blocks train.

    Returns:
        The :class:`~holoxmc.models.rerank.matcher.ClusterMatcher`.

    Example:
        >>> from holoxmc.data import make_realistic
        >>> from holoxmc.models.rerank.model import l2_rows
        >>> train, _ = make_realistic(300, 40, 200, seed=0)
        >>> X = l2_rows(train.X)
        >>> Y = sp.csr_matrix(train.Y, dtype=np.float32)
        >>> m = fit_matcher(X, Y, pifa_centroids(X, Y), RerankConfig(clusters=4, beam=2))
        >>> m.n_clusters, m.beam
        (4, 2)
    """
    n_labels = Y.shape[1]
    n_clusters = min(config.clusters or default_clusters(n_labels), n_labels)
    assignment = balanced_clusters(centroids, n_clusters, seed=config.seed)
    A = sp.csr_matrix((np.ones(n_labels, np.float32), (np.arange(n_labels), assignment)), shape=(n_labels, n_clusters))
    Yc = sp.csr_matrix(sp.csr_matrix(Y @ A) > 0, dtype=np.float32)
    empty = sp.csc_matrix((X.shape[1], n_clusters), dtype=np.float32)
    cluster_centroids = pifa_centroids(X, Yc)
    probe = RerankModel(cluster_centroids, empty, np.zeros(n_clusters, np.float32),
                        min(n_clusters, 2 * config.beam), 0.0)
    shortlists = training_shortlists(probe, X, workers=workers, ray_address=ray_address)
    blocks = [_Block(start, min(start + config.label_block, n_clusters))
              for start in range(0, n_clusters, config.label_block)]
    with _block_folder(None, ray_address) as folder:
        problem = _Problem(X, _membership(shortlists, Yc, config.negatives, config.seed), sp.csc_matrix(Yc), config,
                           folder, "", on_disk=ray_address is None)
        parts = _run_blocks(blocks, problem, workers, ray_address)
        del problem
        weights, bias = _weights(parts, blocks, folder, X.shape[1], n_clusters)
    return ClusterMatcher(assignment, cluster_centroids, weights, bias, config.beam, config.cluster_weight)


# ---------------------------------------------------------------------------- the fit
def _alpha_rows(X_val: sp.csr_matrix, Y_val: sp.csr_matrix, seed: int) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """At most :data:`ALPHA_ROWS` validation rows, a seeded random share when there are more
    (in their order)."""
    if X_val.shape[0] <= ALPHA_ROWS:
        return X_val, Y_val
    keep = np.sort(np.random.default_rng(seed).choice(X_val.shape[0], ALPHA_ROWS, replace=False))
    return X_val[keep], Y_val[keep]


def _choose_alpha(model: RerankModel, X_val: sp.csr_matrix, Y_val: sp.csr_matrix) -> float:
    """The :data:`ALPHAS` value of best validation P@1 (ties: the first)."""
    hits = np.zeros(len(ALPHAS))
    step = model.batch_rows()
    for start in range(0, X_val.shape[0], step):
        rows = l2_rows(X_val[start:start + step])
        labels, rerank, retriever = model.scored_shortlists(rows)  # the lists predict reads
        truth = Y_val[start:start + rows.shape[0]]
        for a, alpha in enumerate(ALPHAS):
            mixed = alpha * rerank + (1 - alpha) * retriever
            mixed[labels < 0] = -np.inf  # a repeated always-listed label: never the top
            top = labels[np.arange(len(labels)), np.argmax(mixed, axis=1)]
            hits[a] += np.asarray(truth[np.arange(len(top)), top]).ravel().astype(bool).sum()
    return float(ALPHAS[int(np.argmax(hits))])


def fit_rerank(X: Any, Y: Any, config: RerankConfig = RerankConfig(), X_val: Any = None, Y_val: Any = None, *,
               workers: int = 1, ray_address: str | None = None, run_dir: str | Path | None = None,
               resume: bool = False) -> RerankModel:
    """Train the retriever and the per-label scorers.

    Args:
        X, Y: ``(n, D)`` features and ``(n, L)`` labels (nonzero entries present) of the training rows.
        config: see :class:`RerankConfig` (without a ``shortlist``, :func:`shortlist_rule`
            of ``Y`` gives it).
        X_val, Y_val: the validation split that picks ``alpha`` when ``config.alpha`` is ``None``.
        workers, ray_address: where the label blocks train: with ``workers=1`` and no Ray, in
            this process, each block's labels on every core (threads; ``torch.set_num_threads``
            bounds them); else as jobs of :func:`~holoxmc.distributed.run_jobs`. The model is
            the same either way.
        run_dir: a folder for finished label blocks (none kept when ``None``).
        resume: read the blocks a fit on the same data and settings left in ``run_dir``
            instead of training them (without it, they are trained and written again).

    Returns:
        The fitted :class:`RerankModel`.

    Raises:
        InputError: row counts or sizes that disagree, or a bad setting.

    Example:
        >>> from holoxmc.data import make_realistic
        >>> train, _ = make_realistic(300, 20, 200, seed=0)
        >>> fit_rerank(train.X, train.Y, RerankConfig(shortlist=5, alpha=0.5)).alpha
        0.5
    """
    if not isinstance(config, RerankConfig):
        raise InputError(f"config must be a RerankConfig, got {type(config).__name__}")
    watch = Stopwatch("rerank")  # the stages' seconds, as the model's fit_seconds
    X, Y = training_rows(X, Y, dtype=np.float32)  # each label's own rows become float64
    if (X_val is None) != (Y_val is None):
        raise InputError("give both X_val and Y_val, or neither")
    if X_val is not None:
        X_val, Y_val = training_rows(X_val, Y_val, "X_val", "Y_val", np.float32)
        if X_val.shape[1] != X.shape[1] or Y_val.shape[1] != Y.shape[1]:
            raise InputError(f"X_val, Y_val have {X_val.shape[1]} features and {Y_val.shape[1]} labels; "
                             f"X, Y have {X.shape[1]} and {Y.shape[1]}")
        X_val, Y_val = _alpha_rows(X_val, Y_val, config.seed)
    X = l2_rows(X)
    n_labels = Y.shape[1]
    if config.shortlist is None:  # the rule of the labels; the model and the fingerprint get the number
        config = replace(config, shortlist=shortlist_rule(n_labels, Y.nnz / Y.shape[0]))
    shortlist = config.shortlist
    assert shortlist is not None
    train_size = config.train_shortlist or train_shortlist_rule(shortlist, X.shape[0])
    config = replace(config, train_shortlist=min(train_size, shortlist),  # resolved, as the shortlist
                     label_weights=config.label_weights or label_weights_rule(n_labels))
    if config.retriever == "clusters":  # the fingerprint gets the resolved count too
        config = replace(config, clusters=min(config.clusters or default_clusters(n_labels), n_labels))
    watch.lap("prepare")
    # the PIFA retriever's centroids are the (L, D) view of its pruned (D, L) index: one copy
    centroids = pifa_index(X, Y, config.postings).T if config.retriever == "pifa" else pifa_centroids(X, Y)
    watch.lap("pifa_index")
    knn: dict[str, Any] = {"neighbours": X, "neighbour_labels": Y, "knn": min(config.knn, X.shape[0] - 1),
                           "knn_weight": config.knn_weight} if config.knn and X.shape[0] > 1 else {}
    if X.nnz >= np.iinfo(np.int32).max:
        raise InputError(f"the re-rank fit keeps 32-bit row pointers: {X.nnz} nonzeros "
                         "is too many (train on fewer rows)")
    # 32-bit indices (half the memory of int64); the rows stay float32
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32, copy=False), X.indptr.astype(np.int32, copy=False)),
                      shape=X.shape)
    if config.retriever == "clusters":
        knn = {"matcher": fit_matcher(X, Y, centroids, config, workers=workers, ray_address=ray_address)}
    empty = sp.csc_matrix((X.shape[1], n_labels), dtype=np.float32)
    counts = np.asarray(Y.getnnz(axis=0))
    frequent = config.frequent_labels
    if frequent is None:
        frequent = 0 if knn else frequent_labels_rule(counts, X.shape[0], shortlist)
    always = np.argsort(-counts, kind="stable")[:frequent]  # ties: the lower labels
    always = np.sort(always[counts[always] > 0])
    retriever = RerankModel(centroids, empty, np.zeros(n_labels, np.float32), shortlist, 0.0, **knn,
                            always=always)
    del centroids  # the retriever holds the index (in column blocks past INDEX_BLOCK_LABELS labels)
    watch.lap("retriever")
    shortlists = training_shortlists(retriever, X, size=config.train_shortlist, workers=workers,
                                     ray_address=ray_address)
    watch.lap("training_shortlists")
    rows = _membership(shortlists, Y, config.negatives, config.seed)
    del shortlists
    watch.lap("memberships")
    fingerprint = data_digest(X, Y) + json.dumps(asdict(config) | {"alpha": None}, sort_keys=True)
    if run_dir is not None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        if not resume:
            for old in Path(run_dir).glob(BLOCK_FILE.split("{")[0] + "*.safetensors"):
                old.unlink()
    blocks = [_Block(start, min(start + config.label_block, n_labels)) for start in range(0, n_labels, config.label_block)]
    with _block_folder(run_dir, ray_address) as folder:
        problem = _Problem(X, rows, sp.csc_matrix(Y), config, folder, fingerprint, on_disk=ray_address is None)
        parts = _run_blocks(blocks, problem, workers, ray_address)
        kept = rows if KEEP_FIT_ROWS.get() else None
        del problem, rows  # memory for the weights and the choice of alpha
        weights, bias = _weights(parts, blocks, folder, X.shape[1], n_labels)
        del parts
    watch.lap("label_fits")
    model = retriever.with_scorers(weights, bias, DEFAULT_ALPHA if config.alpha is None else config.alpha)
    if kept is not None:
        model.fit_rows = kept
    if config.alpha is None and X_val is not None and Y_val is not None:
        model.alpha = _choose_alpha(model, X_val, Y_val)
    watch.lap("alpha")
    model.fit_seconds = watch.done()
    return model


def add_labels(model: RerankModel, X: Any, Y: Any, config: RerankConfig = RerankConfig(), *, workers: int = 1,
               ray_address: str | None = None) -> RerankModel:
    """``model`` with the columns of ``Y`` appended as new labels: their PIFA centroids join
    the retriever's index, and one scorer per new label trains on its positives, the rows of
    ``X`` that shortlist it (with the grown index) and ``negatives`` random rows, as
    :func:`fit_rerank` trains a label. The existing labels' scorers, the shortlist size and
    the mix weight stay; the index's per-feature pruning (``postings``) runs again over old
    and new labels, which keeps exactly what a fit of every label would keep.

    What differs from a fit of every label at once: the old labels' hard negatives were mined
    with the old index (a new label can now take a shortlist slot they had), so their scorers
    are not those a full fit would train; ``tests/test_incremental.py`` bounds the effect on P@k.

    Args:
        model: a fitted model with the PIFA retriever and no kNN vote (the default).
        X: ``(n, D)`` rows labelled for the new labels (the training rows, or others).
        Y: ``(n, L_new)`` their labels of the new labels.
        config: the scorers' settings (``C``, ``prune``, ``negatives``, ``postings``, ...);
            ``train_shortlist`` and ``label_weights`` resolve as in :func:`fit_rerank`.
        workers, ray_address: where the label blocks train.

    Shapes:
        model ``L`` labels → ``L + L_new``.

    Example:
        >>> from holoxmc.data import make_realistic
        >>> train, _ = make_realistic(300, 20, 200, seed=0)
        >>> Y = sp.csr_matrix(train.Y)
        >>> base = fit_rerank(train.X, Y[:, :15], RerankConfig(shortlist=5, alpha=0.5))
        >>> add_labels(base, train.X, Y[:, 15:], RerankConfig()).n_labels
        20
    """
    if model.matcher is not None or model.knn:
        raise InputError("adding labels works with the PIFA retriever without a kNN vote (the default); "
                         "this model has the clustered retriever or kNN: fit it again with every label")
    X, Y = training_rows(X, Y, dtype=np.float32)
    if X.shape[1] != model.n_features:
        raise InputError(f"X has {X.shape[1]} features, the model expects {model.n_features}")
    if X.nnz >= np.iinfo(np.int32).max:
        raise InputError(f"the re-rank fit keeps 32-bit row pointers: {X.nnz} nonzeros "
                         "is too many (train on fewer rows)")
    X = l2_rows(X)
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32, copy=False), X.indptr.astype(np.int32, copy=False)),
                      shape=X.shape)
    old, new = model.n_labels, Y.shape[1]
    config = replace(config, shortlist=model.shortlist,
                     label_weights=config.label_weights or label_weights_rule(old + new),
                     train_shortlist=min(config.train_shortlist or train_shortlist_rule(model.shortlist, X.shape[0]),
                                         model.shortlist))
    index = sp.csr_matrix(sp.hstack([model.centroids_t, pifa_index(X, Y)], format="csr"), dtype=np.float32)
    _keep_largest(index, config.postings)  # the pruning of a fit of every label (ties: the lower labels)
    index.sort_indices()
    empty = sp.csc_matrix((X.shape[1], old + new), dtype=np.float32)
    retriever = RerankModel(index.T, empty, np.zeros(old + new, np.float32), model.shortlist, 0.0,
                            prior=np.concatenate([model.prior, np.zeros(new, np.float32)]), always=model.always)
    del index
    shortlists = training_shortlists(retriever, X, size=config.train_shortlist, workers=workers,
                                     ray_address=ray_address)
    grown = sp.hstack([sp.csr_matrix((X.shape[0], old), dtype=np.float32), Y], format="csr")
    rows = sp.csc_matrix(_membership(shortlists, grown, config.negatives, config.seed)[:, old:])
    del shortlists, grown
    weights, bias = _train_labels(X, rows, sp.csc_matrix(Y), config, workers, ray_address, first_label=old)
    return retriever.with_scorers(sp.hstack([model.weights, weights], format="csc"),
                                  np.concatenate([model.bias, bias]), model.alpha)


def absorb_rows(model: RerankModel, X: Any, Y: Any, held: np.ndarray, config: RerankConfig = RerankConfig(), *,
                fit_rows: sp.csc_matrix | None = None, workers: int = 1,
                ray_address: str | None = None) -> RerankModel:
    """``model``, fitted on the rows of ``X, Y`` outside ``held``, finished on every row
    without a second fit (what ``head="auto"`` keeps instead of training its winner again):
    the PIFA index is built from every row, and each label with a positive among the held
    rows (only those learn something new) trains again on the rows it trained on
    (``fit_rows``), the held rows that shortlist it with the new index and its held
    positives. The other labels' scorers, the shortlist and the mix weight stay: what differs
    from a fit on every row is that the held rows are no negatives of labels they do not
    shortlist, and the old rows' hard negatives were mined with the old index.

    Args:
        model: fitted with the PIFA retriever and no kNN vote (the default) on ``X[~held]``.
        X, Y: ``(n, D)`` and ``(n, L)``: every row.
        held: ``(n,)`` booleans: the rows the fit held out.
        config: the scorers' settings, as for :func:`add_labels`.
        fit_rows: ``(n - held.sum(), L)`` the rows each label trained on (``model.fit_rows``
            of a fit under :data:`KEEP_FIT_ROWS`); ``None``: its positives alone (and the
            held rows), as a label that a fit never trained.
        workers, ray_address: where the scorers train.

    Returns:
        A new model; ``model`` is unchanged.

    Example:
        >>> from holoxmc.data import make_realistic
        >>> train, _ = make_realistic(300, 20, 200, seed=0)
        >>> held = np.arange(300) >= 250
        >>> part = fit_rerank(train.X[~held], train.Y[~held], RerankConfig(shortlist=5, alpha=0.5))
        >>> absorb_rows(part, train.X, train.Y, held).n_labels
        20
    """
    if model.matcher is not None or model.knn:
        raise InputError("finishing on every row works with the PIFA retriever without a kNN vote (the default)")
    X, Y = training_rows(X, Y, dtype=np.float32)
    held = np.asarray(held, bool)
    if X.shape[1] != model.n_features or Y.shape[1] != model.n_labels or held.shape != (X.shape[0],):
        raise InputError(f"X, Y and held must describe {model.n_features} features and {model.n_labels} labels "
                         "of the same rows")
    if fit_rows is not None and fit_rows.shape != (int((~held).sum()), model.n_labels):
        raise InputError("fit_rows must have a row per row outside held and a column per label")
    X = l2_rows(X)
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32, copy=False), X.indptr.astype(np.int32, copy=False)),
                      shape=X.shape)
    config = replace(config, shortlist=model.shortlist,
                     label_weights=config.label_weights or label_weights_rule(model.n_labels),
                     train_shortlist=min(config.train_shortlist or train_shortlist_rule(model.shortlist, X.shape[0]),
                                         model.shortlist))
    retriever = RerankModel(pifa_index(X, Y, config.postings).T, sp.csc_matrix((X.shape[1], model.n_labels),
                            dtype=np.float32), np.zeros(model.n_labels, np.float32), model.shortlist, 0.0,
                            prior=model.prior, always=model.always)
    labels = np.flatnonzero(np.asarray(Y[held].getnnz(axis=0)) > 0)
    weights, bias = sp.csc_matrix(model.weights), model.bias
    if len(labels):
        rows = _every_row(retriever, X, Y, held, fit_rows, config, workers, ray_address)[:, labels]
        new_weights, new_bias = _train_labels(X, sp.csc_matrix(rows), sp.csc_matrix(Y[:, labels]), config,
                                              workers, ray_address)
        order = np.arange(model.n_labels)
        order[labels] = model.n_labels + np.arange(len(labels))
        weights = sp.csc_matrix(sp.hstack([weights, new_weights], format="csc")[:, order])
        bias = np.concatenate([bias, new_bias])[order]
    return retriever.with_scorers(weights, bias, model.alpha)


def _every_row(retriever: RerankModel, X: sp.csr_matrix, Y: sp.csr_matrix, held: np.ndarray,
               fit_rows: sp.csc_matrix | None, config: RerankConfig, workers: int,
               ray_address: str | None) -> sp.csr_matrix:
    """``(n, L)`` CSR: the rows each label learns from, among every row: ``fit_rows`` (or the
    positives) on the fitted rows, and on the held rows those that shortlist it (with
    ``retriever``) and its positives."""
    shortlists = training_shortlists(retriever, X[held], size=config.train_shortlist, workers=workers,
                                     ray_address=ray_address)
    on_held = sp.csr_matrix(_membership(shortlists, Y[held], 0, config.seed))
    on_fit = sp.csr_matrix(Y[~held], dtype=bool) if fit_rows is None else sp.csr_matrix(fit_rows)
    order = np.concatenate([np.flatnonzero(~held), np.flatnonzero(held)])
    return sp.csr_matrix(sp.vstack([on_fit, on_held], format="csr")[np.argsort(order)])


def _train_labels(X: sp.csr_matrix, rows: sp.csc_matrix, Y: sp.csc_matrix, config: RerankConfig, workers: int,
                  ray_address: str | None, first_label: int = 0) -> tuple[sp.csc_matrix, np.ndarray]:
    """``(D, L')`` weights and ``(L',)`` biases of the labels that are the columns of ``rows``
    (the rows each trains on) and ``Y`` (its positives); ``first_label``: the model's number
    of the first of them (it seeds their solver)."""
    n_labels = Y.shape[1]
    blocks = [_Block(start, min(start + config.label_block, n_labels)) for start in range(0, n_labels, config.label_block)]
    with _block_folder(None, ray_address) as folder:
        problem = _Problem(X, rows, Y, config, folder, "", on_disk=ray_address is None, first_label=first_label)
        parts = _run_blocks(blocks, problem, workers, ray_address)  # seeded by their order here
        return _weights(parts, blocks, folder, X.shape[1], n_labels)

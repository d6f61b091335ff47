"""Training and scoring straight from a shard store (:mod:`holoxmc.data.shards`): the
trainer draws its batches from the shards, shuffled by shard then by row within a shard,
and scoring runs shard by shard, so memory holds the model and a few shards of rows.

The network heads (``hrr``, ``dense``) on the FC backbone stream: each step reads only its
batch's rows. The linear, SOLAR and re-rank models read every row of a label (a column
view of ``Y``) or build indexes over all rows at once; they refuse a shard store with
:func:`check_streams` instead of loading it whole behind the caller's back.

Example:
    >>> from holoxmc.data import open_shards                        # doctest: +SKIP
    >>> train = open_shards("shards/train")                        # doctest: +SKIP
    >>> clf = XMCClassifier(head="hrr").fit(train.X, train.Y)      # doctest: +SKIP
    >>> clf.evaluate(test.X, test.Y)["P@1"]                        # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.data.shards import ShardedRows, ShardStore, is_sharded
from holoxmc.errors import InputError
from holoxmc.metrics import MetricAccumulator, pad_predictions

__all__ = ["epoch_order", "take_rows", "as_labels", "check_streams", "streamed_fit_data", "streamed_input",
           "evaluate_streamed", "is_sharded"]


def epoch_order(X: Any, rows: np.ndarray, seed: int, epoch: int) -> np.ndarray:
    """The order epoch ``epoch`` visits the training ``rows`` in, from ``(seed, epoch)`` only.

    In memory, a permutation of ``rows``. From shards (``X`` has ``row_blocks``), the shards
    in a random order and the rows of each shard permuted, so that an epoch reads each
    shard once, and a batch at most two neighbouring ones.

    Example:
        >>> order = epoch_order(np.zeros((6, 1)), np.arange(6), seed=0, epoch=0)
        >>> sorted(order.tolist()), bool(np.array_equal(order, epoch_order(np.zeros((6, 1)), np.arange(6), 0, 0)))
        ([0, 1, 2, 3, 4, 5], True)
    """
    rng = np.random.default_rng([seed, epoch])
    blocks = getattr(X, "row_blocks", None)
    if blocks is None:
        return rng.permutation(rows)
    block_of = blocks[rows]
    by_block = np.argsort(block_of, kind="stable")
    ids, starts = np.unique(block_of[by_block], return_index=True)
    groups = np.split(rows[by_block], starts[1:])
    return np.concatenate([rng.permutation(groups[i]) for i in rng.permutation(len(ids))]) if groups else rows[:0]


def take_rows(M: Any, rows: np.ndarray) -> Any:
    """Rows ``rows`` of ``M``: a view (nothing read) of sharded rows, else ``M[rows]``."""
    return M.subset(rows) if isinstance(M, ShardedRows) else M[rows]


def as_labels(Y: Any) -> Any:
    """``Y`` as the trainer reads labels: sharded rows as they are, else CSR."""
    return Y if isinstance(Y, ShardedRows) else sp.csr_matrix(Y)


def check_streams(head: str, backbone: str, streaming: Sequence[str]) -> None:
    """Refuse a shard store for a head that cannot read it batch by batch.

    Args:
        head, backbone: the model's.
        streaming: the heads that read a store batch by batch (the model registry's
            :func:`~holoxmc.models.registry.streaming_heads`).

    Raises:
        InputError: naming the heads that stream.
    """
    if head not in streaming or backbone != "fc":
        raise InputError(f"a shard store streams to the network heads {list(streaming)} on the fc backbone, "
                         f"which read a batch of rows at a time; head {head!r} with backbone {backbone!r} reads "
                         "every row at once: load the split in memory instead (open_shards(...).load())")


def _rows_of(value: Any, name: str) -> ShardedRows | None:
    if isinstance(value, ShardStore):
        raise InputError(f"pass a shard store's rows as {name} (store.X for features, store.Y for labels), "
                         "not the store itself")
    return value if isinstance(value, ShardedRows) else None


def streamed_fit_data(clf: Any, X: Any, Y: Any, X_val: Any = None, Y_val: Any = None, *,
                      streaming: Sequence[str]) -> tuple[Any, ...] | None:
    """The training data checked when it comes from shard stores, or ``None`` when every
    part is in memory (the estimator then checks it as usual).

    Args:
        clf: the :class:`~holoxmc.estimator.XMCClassifier` that fits (its head, backbone,
            and whether an ensemble would train in other processes).
        X, Y, X_val, Y_val: as given to ``fit``; from shards, ``store.X`` and ``store.Y``.
        streaming: the heads that stream (:func:`check_streams`).

    Raises:
        InputError: shards mixed with in-memory matrices, features and labels of different
            stores or rows, validation features of another width, a head that does not
            stream, or networks trained apart.
    """
    parts = {"X": X, "Y": Y, "X_val": X_val, "Y_val": Y_val}
    sharded = {name: _rows_of(value, name) for name, value in parts.items() if value is not None}
    if not any(value is not None for value in sharded.values()):
        return None
    check_streams(clf.head, clf.backbone, streaming)
    if clf.n_models > 1 and (clf.n_workers > 1 or clf.ray_address is not None):
        raise InputError("a shard store trains its networks in this process: leave workers and ray_address unset")
    if any(value is None for value in sharded.values()):
        raise InputError(f"give every part of the data from shards or none: {sorted(n for n, v in sharded.items() if v is None)} "
                         "are in memory")
    if (X_val is None) != (Y_val is None):
        raise InputError("give both X_val and Y_val, or neither")
    for features, labels in ((X, Y), (X_val, Y_val)):
        if features is None:
            continue
        if features.matrix != "X" or labels.matrix != "Y":
            raise InputError("pass store.X as the features and store.Y as the labels")
        if features.store is not labels.store or not _same_selection(features.selection, labels.selection):
            raise InputError("the features and labels must be the same rows of one shard store")
    if X_val is not None and (X_val.shape[1] != X.shape[1] or Y_val.shape[1] != Y.shape[1]):
        raise InputError(f"the validation store has {X_val.shape[1]} features and {Y_val.shape[1]} labels, "
                         f"the training store {X.shape[1]} and {Y.shape[1]}")
    if X.shape[0] < 1:
        raise InputError("the training store holds no rows")
    return X, Y, X_val, Y_val


def _same_selection(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))


def streamed_input(X: ShardedRows, head: str, backbone: str, n_features: int, streaming: Sequence[str]) -> ShardedRows:
    """Sharded features checked for scoring by a model of ``head`` fitted on ``n_features``.

    Raises:
        InputError: the head does not stream, labels given as features, or another width.
    """
    X = _rows_of(X, "X") or X
    check_streams(head, backbone, streaming)
    if X.matrix != "X":
        raise InputError("pass store.X, the features, to score a shard store")
    if X.shape[1] != n_features:
        raise InputError(f"X has {X.shape[1]} features, but the model was fitted with {n_features}")
    return X


def evaluate_streamed(model: Any, X: ShardedRows, Y: ShardedRows, *, inv_prop: np.ndarray | None,
                      ks: Sequence[int], n_labels: int, batch_size: int = 1024,
                      recall_ks: Sequence[int] = ()) -> dict[str, float]:
    """:func:`holoxmc.metrics.evaluate` of ``model``'s top-k over sharded rows, a batch of
    ``batch_size`` rows at a time (the batches in-memory scoring uses, so the result is the
    same): the metrics are accumulated, never a matrix of every row's predictions.

    Raises:
        InputError: ``Y`` is not the labels of ``X``'s rows, or has another label count.
    """
    if not is_sharded(Y) or not isinstance(Y, ShardedRows) or Y.matrix != "Y" or Y.store is not X.store \
            or not _same_selection(X.selection, Y.selection):
        raise InputError("evaluate a shard store with its own labels: clf.evaluate(store.X, store.Y)")
    if Y.shape[1] != n_labels:
        raise InputError(f"Y has {Y.shape[1]} labels, but the model was fitted with {n_labels}")
    accumulator = MetricAccumulator(ks=ks, inv_prop=inv_prop, recall_ks=recall_ks)
    k = accumulator.k_needed
    for start in range(0, X.shape[0], batch_size):  # the batches predict scores in memory
        rows = np.arange(start, min(start + batch_size, X.shape[0]))
        indices, _ = model.predict_topk(X[rows], min(k, n_labels), batch_size=batch_size)
        accumulator.update(pad_predictions(indices, k), Y[rows])
    return accumulator.result()

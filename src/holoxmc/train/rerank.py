"""Fit a :class:`~holoxmc.models.rerank.RerankModel`: PIFA centroids, training shortlists,
then one sparse logistic scorer per label on its positives and the hard negatives its
shortlist brings (rows that shortlist the label without having it), pruned; the mix weight
is chosen on the validation split when one is given.

Example:
    >>> from holoxmc.data import make_realistic
    >>> train, _ = make_realistic(300, 20, 200, seed=0)
    >>> fit_rerank(train.X, train.Y, RerankConfig(shortlist=5)).n_labels
    20
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import normalize

from holoxmc.errors import InputError
from holoxmc.models.rerank import RerankModel

__all__ = ["RerankConfig", "fit_rerank", "pifa_centroids"]

ALPHAS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class RerankConfig:
    """Settings of the re-rank fit.

    Attributes:
        shortlist: labels the retriever proposes per row.
        C: inverse L2 regularisation of each label's logistic scorer.
        prune: weights of smaller magnitude are dropped.
        alpha: the mix weight; ``None`` picks it from :data:`ALPHAS` by P@1 on the validation split
            (0.5 without one).
        seed: the scorers' random state.
    """

    shortlist: int = 100
    C: float = 4.0
    prune: float = 0.01
    alpha: float | None = None
    seed: int = 0


def pifa_centroids(X: sp.csr_matrix, Y: sp.csr_matrix) -> sp.csr_matrix:
    """``(L, D)`` L2-normalised mean feature row of each label's positives (unseen labels: zero rows)."""
    return normalize(sp.csr_matrix(Y.T @ X, dtype=np.float32), norm="l2", axis=1, copy=False)


def _label_rows(Y: sp.csc_matrix, shortlists: np.ndarray, n_labels: int) -> list[np.ndarray]:
    """Per label, the training rows it learns from: positives and rows that shortlist it."""
    rows = np.repeat(np.arange(shortlists.shape[0]), shortlists.shape[1])
    S = sp.csc_matrix((np.ones(rows.size, dtype=np.int8), (rows, shortlists.ravel())),
                      shape=(shortlists.shape[0], n_labels))
    return [np.union1d(Y.indices[Y.indptr[j]:Y.indptr[j + 1]], S.indices[S.indptr[j]:S.indptr[j + 1]])
            for j in range(n_labels)]


def _fit_label(X: sp.csr_matrix, rows: np.ndarray, positive: np.ndarray, config: RerankConfig
               ) -> tuple[np.ndarray, float]:
    """Dense ``(D,)`` weights and bias of one label's scorer (constant when one class only)."""
    target = np.isin(rows, positive)
    if target.all() or not target.any():
        return np.zeros(X.shape[1], dtype=np.float32), 4.0 if target.any() else -4.0
    model = LogisticRegression(C=config.C, solver="liblinear", random_state=config.seed).fit(X[rows], target)
    return model.coef_.ravel().astype(np.float32), float(model.intercept_[0])


def _precision_at_1(model: RerankModel, X: sp.csr_matrix, Y: sp.csr_matrix) -> float:
    top, _ = model.predict_topk(X, 1)
    return float(np.mean([Y[i, t] > 0 for i, t in enumerate(top[:, 0]) if t >= 0] or [0.0]))


def fit_rerank(X: sp.csr_matrix, Y: sp.csr_matrix, config: RerankConfig = RerankConfig(),
               X_val: sp.csr_matrix | None = None, Y_val: sp.csr_matrix | None = None) -> RerankModel:
    """Train the retriever and the per-label scorers.

    Args:
        X, Y: ``(n, D)`` features and ``(n, L)`` labels of the training rows.
        config: see :class:`RerankConfig`.
        X_val, Y_val: the validation split that picks ``alpha`` when ``config.alpha`` is ``None``.

    Returns:
        The fitted :class:`RerankModel`.

    Raises:
        InputError: row counts that disagree, or a shortlist below 1.
    """
    X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y, dtype=np.float32)
    if X.shape[0] != Y.shape[0] or config.shortlist < 1:
        raise InputError(f"rerank needs as many label rows as feature rows and shortlist >= 1 "
                         f"({X.shape[0]} vs {Y.shape[0]}, shortlist {config.shortlist})")
    n_labels = Y.shape[1]
    centroids = pifa_centroids(X, Y)
    retriever = RerankModel(centroids, sp.csr_matrix((X.shape[1], n_labels), dtype=np.float32),
                            np.zeros(n_labels, np.float32), config.shortlist, 0.0)
    shortlists, _ = retriever.shortlists(X)
    Yc = Y.tocsc()
    columns, biases = [], np.zeros(n_labels, dtype=np.float32)
    for label, rows in enumerate(_label_rows(Yc, shortlists, n_labels)):
        w, biases[label] = _fit_label(X, rows, Yc.indices[Yc.indptr[label]:Yc.indptr[label + 1]], config)
        w[np.abs(w) < config.prune] = 0.0
        columns.append(sp.csc_matrix(w[:, None]))
    weights = sp.csr_matrix(sp.hstack(columns, format="csc"), dtype=np.float32)
    weights.eliminate_zeros()
    alphas = [config.alpha] if config.alpha is not None else list(ALPHAS) if X_val is not None else [0.5]
    best = max(alphas, key=lambda a: _precision_at_1(
        RerankModel(centroids, weights, biases, config.shortlist, a), X_val, Y_val)
        if X_val is not None and Y_val is not None and len(alphas) > 1 else 0.0)
    return RerankModel(centroids, weights, biases, config.shortlist, best)

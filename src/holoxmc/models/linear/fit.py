"""Linear one-vs-rest: one L2-regularised linear SVM per label, trained by liblinear.

Every label ``j`` gets a weight vector ``w_j`` and a bias ``b_j`` minimising the squared hinge
loss of ``x · w_j + b_j`` against ``±1`` plus ``‖w_j‖² / (2C)`` (scikit-learn's
:class:`~sklearn.svm.LinearSVC`, liblinear's dual coordinate descent). The labels are
independent problems, so blocks of labels train as separate jobs with no communication, in
this process, in local worker processes or as Ray tasks, and each block's weights below
``prune`` in magnitude are dropped, leaving a sparse ``(D, L)`` weight matrix (the design of
DiSMEC: Babbar & Schölkopf, WSDM 2017). Rows are L2-normalised first by default, which puts
the best ``C`` of Bibtex (binary words), Delicious (counts) and Debtags (TF-IDF) in the same
range; ``C=None`` chooses it from a grid on a validation split carved from train (by
default a grid of one value, which that split then only calibrates).

Memory and time grow with ``L`` times the cost of one liblinear fit over all rows, so the
model suits label sets up to tens of thousands on one machine; millions of labels are the
HRR and SOLAR heads' case.

Example:
    >>> import scipy.sparse as sp, numpy as np
    >>> X = sp.random(300, 40, density=0.2, format="csr", random_state=0, dtype=np.float32)
    >>> Y = sp.csr_matrix((X[:, :6].toarray() > 0).astype(np.float32))
    >>> model, history = fit_linear(X, Y, LinearConfig(C=1.0))
    >>> model.predict(X[:2], k=3)[0].shape
    (2, 3)
"""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import normalize
from sklearn.svm import LinearSVC

try:  # scikit-learn's liblinear binding (private; checked against LinearSVC before use)
    from sklearn.svm import _liblinear
except ImportError:  # pragma: no cover
    _liblinear = None

from holoxmc.calibration import platt_scaling
from holoxmc.distributed import run_jobs
from holoxmc.errors import InputError
from holoxmc.metrics import evaluate, pad_predictions
from holoxmc.models.linear.config import DEFAULT_C_GRID, DEFAULT_PRUNE, LinearConfig, finite_number  # noqa: F401
from holoxmc.models.linear.model import DENSE_SCORING_ENTRIES, LinearModel  # noqa: F401  (the served model's home)
from holoxmc.train.trainer import split_validation

__all__ = ["LinearConfig", "LinearModel", "fit_linear", "add_labels", "DEFAULT_C_GRID", "DEFAULT_PRUNE"]

#: Metric that chooses C on the validation split.
SELECT_METRIC = "P@1"


# ---------------------------------------------------------------------------- training
@dataclass(frozen=True)
class _Block:
    """Labels ``[start, stop)`` trained with ``C``."""

    start: int
    stop: int
    C: float


@dataclass(frozen=True)
class _Problem:
    """What every block trains from: float64 rows (liblinear's type, converted once), the
    labels by column, and the solver settings."""

    X: sp.csr_matrix
    Y: sp.csc_matrix
    config: LinearConfig


def _fit_block(block: _Block, problem: _Problem) -> tuple[sp.csc_matrix, np.ndarray, int, float]:
    """One SVM per label of the block: ``(pruned (D, m) CSC weights, (m,) biases, labels
    that reached max_iter, seconds)``."""
    started = time.perf_counter()
    config, n = problem.config, problem.X.shape[0]
    fit = fit_label if direct_liblinear_works() else fit_label_sklearn
    columns, biases, unconverged = [], [], 0
    for label in range(block.start, block.stop):
        positives = problem.Y.indices[problem.Y.indptr[label] : problem.Y.indptr[label + 1]]
        if len(positives) in (0, n):  # one class: no SVM, a constant score
            columns.append(sp.csc_matrix((problem.X.shape[1], 1), dtype=np.float32))
            biases.append(np.inf if len(positives) else -np.inf)
            continue
        y = np.zeros(n, dtype=np.float64)
        y[positives] = 1.0
        w, bias, converged = fit(problem.X, y, block.C, config)
        unconverged += not converged
        keep = np.flatnonzero(np.abs(w) >= config.prune) if config.prune else np.flatnonzero(w)
        columns.append(sp.csc_matrix((w[keep].astype(np.float32), keep, [0, len(keep)]), shape=(len(w), 1)))
        biases.append(bias)
    weights = sp.hstack(columns, format="csc")
    return weights, np.asarray(biases, dtype=np.float32), unconverged, time.perf_counter() - started


def fit_label(X: sp.csr_matrix, y: np.ndarray, C: float, config: LinearConfig) -> tuple[np.ndarray, float, bool]:
    """One label's SVM through scikit-learn's liblinear binding, as :class:`~sklearn.svm.LinearSVC`
    calls it (``_fit_liblinear``: solver 1, bias feature 1 as ``intercept_scaling=1``, unit
    class and sample weights, ``y`` as its label encoder codes 0/1, the seed drawn from
    ``RandomState(seed)``) without its per-call input checks: ``(w, b, converged)``.

    Args:
        X: ``(n, D)`` float64 CSR with int32 indices; y: ``(n,)`` float64 0/1 (1 = present).
        C: the label's C; config: tol, max_iter and seed.

    Returns:
        The ``(D,)`` float64 weights, the bias and whether liblinear stopped before max_iter.

    Example:
        >>> X = sp.csr_matrix(np.eye(4))
        >>> w, b, ok = fit_label(X, np.array([1.0, 0, 0, 0]), 1.0, LinearConfig(C=1.0))
        >>> bool(w[0] > 0), ok
        (True, True)
    """
    raw, n_iter = _liblinear.train_wrap(
        X, y, True, _SOLVER_L2R_L2LOSS_SVC_DUAL, config.tol, _BIAS, C, _CLASS_WEIGHT, config.max_iter,
        _liblinear_seed(config.seed), 0.1, np.ones(X.shape[0], dtype=np.float64))
    return raw[0, :-1], float(_BIAS * raw[0, -1]), int(np.max(n_iter)) < config.max_iter


def fit_label_sklearn(X: sp.csr_matrix, y: np.ndarray, C: float,
                       config: LinearConfig) -> tuple[np.ndarray, float, bool]:
    """:func:`fit_label` through :class:`~sklearn.svm.LinearSVC` itself (the fallback when the
    direct binding is missing or differs from it)."""
    svm = LinearSVC(C=C, loss="squared_hinge", dual=True, tol=config.tol, max_iter=config.max_iter,
                    random_state=config.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        svm.fit(X, np.where(y > 0, 1, -1).astype(np.int8))
    converged = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
    return svm.coef_.ravel(), float(svm.intercept_[0]), converged


#: liblinear's L2R_L2LOSS_SVC_DUAL (``LinearSVC(loss="squared_hinge", dual=True)``).
_SOLVER_L2R_L2LOSS_SVC_DUAL = 1
#: The bias feature's value (``LinearSVC``'s default ``intercept_scaling``).
_BIAS = 1.0
_CLASS_WEIGHT = np.ones(2, dtype=np.float64)


@functools.lru_cache(maxsize=None)
def _liblinear_seed(seed: int) -> int:
    """The seed :class:`~sklearn.svm.LinearSVC` hands liblinear for ``random_state=seed``."""
    return int(np.random.RandomState(seed).randint(np.iinfo("i").max))


@functools.lru_cache(maxsize=1)
def direct_liblinear_works() -> bool:
    """Whether :func:`fit_label` trains exactly what ``LinearSVC`` trains, checked once per
    process on a small problem (the binding is private to scikit-learn, so a release that
    changes it falls back to ``LinearSVC`` instead of training something else)."""
    if _liblinear is None:
        return False
    rng = np.random.default_rng(0)
    X = sp.random(40, 8, density=0.5, format="csr", random_state=0, dtype=np.float64)
    X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    y = (rng.random(40) < 0.4).astype(np.float64)
    config = LinearConfig(C=1.0)
    try:
        _liblinear.set_verbosity_wrap(0)
        direct = fit_label(X, y, 1.0, config)
    except Exception:  # any change of the private binding: use the public estimator
        return False
    reference = fit_label_sklearn(X, y, 1.0, config)
    return bool(np.array_equal(direct[0], reference[0]) and direct[1:] == reference[1:])


def _train(X: sp.csr_matrix, Y: sp.csr_matrix, Cs: Sequence[float], config: LinearConfig, workers: int,
           ray_address: str | None) -> list[tuple[LinearModel, int, float]]:
    """One model over all labels of ``Y`` per value of ``Cs``, every (C, label block) pair a
    job of one :func:`~holoxmc.distributed.run_jobs` call (one worker pool for a whole grid):
    ``(model, labels that reached max_iter, seconds its blocks took, summed)`` per C."""
    L = Y.shape[1]
    starts = range(0, L, config.label_block)
    blocks = [_Block(start, min(start + config.label_block, L), float(C)) for C in Cs for start in starts]
    if X.nnz < np.iinfo(np.int32).max:  # liblinear's index type
        X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)
    parts = run_jobs(_fit_block, blocks, _Problem(X, sp.csc_matrix(Y), config), workers=workers,
                     ray_address=ray_address, gpu=False)
    models = []
    for first in range(0, len(parts), len(starts)):
        mine = parts[first : first + len(starts)]
        weights = sp.hstack([part[0] for part in mine], format="csr")
        model = LinearModel(weights, np.concatenate([part[1] for part in mine]), normalize_rows=False)
        models.append((model, sum(part[2] for part in mine), sum(part[3] for part in mine)))
    return models


def fit_linear(
    X: sp.spmatrix,
    Y: sp.spmatrix,
    config: LinearConfig,
    X_val: sp.spmatrix | None = None,
    Y_val: sp.spmatrix | None = None,
    *,
    val_fraction: float = 0.1,
    refit: bool = True,
    workers: int = 1,
    ray_address: str | None = None,
    groups: np.ndarray | None = None,
) -> tuple[LinearModel, list[dict[str, Any]]]:
    """Train a linear one-vs-rest model; choose ``C`` on a validation split when it is ``None``.

    With ``config.C=None``, one model per ``C_grid`` value trains on the training rows less a
    carved validation share (``val_fraction``, drawn with ``config.seed``), or on all of them
    when ``(X_val, Y_val)`` is given; the best by validation P@1 is kept and, with ``refit``,
    trained again on every training row (and the given validation rows, as the Trainer's
    refit does). The grid's models train as one set of jobs (one worker pool) and are held
    together until validation has picked one. The chosen model's validation margins also fit
    its ``calibration`` (Platt scaling, :meth:`LinearModel.confidence_chunks`); a fixed ``C``
    without a validation set leaves the plain ``sigmoid(margin)``.

    Args:
        X: ``(n, D)`` sparse features; Y: ``(n, L)`` labels, its nonzero entries the present
            ones (stored zeros are not labels).
        config: the model; X_val, Y_val: an optional validation set (never the test set).
        val_fraction, refit: the carved split and whether to retrain on all rows after it.
        workers, ray_address: where the label blocks train (see :func:`holoxmc.distributed.run_jobs`).
        groups: ``(n,)`` group codes: the carved validation share takes whole groups.

    Returns:
        ``(model, history)``: one entry per model trained, ``{"C", "seconds" (its label
        blocks' seconds, summed over workers), "unconverged_labels"}`` plus ``"val"`` (P@1, P@3, P@5) for the grid's models and
        ``"refit": True`` for the last one after a refit.
    """
    X, Y = training_rows(X, Y)
    if (X_val is None) != (Y_val is None):
        raise InputError("give both X_val and Y_val, or neither")
    history: list[dict[str, Any]] = []

    def train(X_fit: sp.csr_matrix, Y_fit: sp.csr_matrix, Cs: Sequence[float], **entry: Any) -> list[LinearModel]:
        models = []
        for C, (model, unconverged, seconds) in zip(Cs, _train(X_fit, Y_fit, Cs, config, workers, ray_address)):
            if unconverged:
                warnings.warn(f"liblinear reached max_iter={config.max_iter} on {unconverged} of {Y.shape[1]} "
                              f"labels (C={C}); raise max_iter or lower C", ConvergenceWarning, stacklevel=3)
            history.append({"C": C, "seconds": seconds, "unconverged_labels": unconverged} | entry)
            models.append(model)
        return models

    if config.normalize_rows:
        X = normalize(X)
    if config.C is not None and X_val is None:
        model = train(X, Y, [config.C])[0]
    else:
        if X_val is None:
            if not (finite_number(val_fraction) and 0.0 < val_fraction < 1.0):
                raise InputError(f"choosing C needs a validation share in (0, 1), got val_fraction={val_fraction!r}; "
                                 "or give X_val, Y_val, or a fixed C")
            inner, held = split_validation(X.shape[0], val_fraction, int(config.seed), groups)
            X_fit, Y_fit, X_sel, Y_sel = X[inner], Y[inner], X[held], Y[held]
        else:
            X_sel, Y_sel = training_rows(X_val, Y_val, "X_val", "Y_val")
            if X_sel.shape[1] != X.shape[1] or Y_sel.shape[1] != Y.shape[1]:
                raise InputError(f"X_val, Y_val have {X_sel.shape[1]} features and {Y_sel.shape[1]} labels; "
                                 f"X, Y have {X.shape[1]} and {Y.shape[1]}")
            X_sel = normalize(X_sel) if config.normalize_rows else X_sel
            X_fit, Y_fit = X, Y
        grid = [config.C] if config.C is not None else list(config.C_grid)
        best: tuple[float, float, LinearModel] | None = None
        models = train(X_fit, Y_fit, grid)
        for C, entry in zip(grid, history[-len(grid):]):
            model = models.pop(0)  # a model that loses is released here, with its scoring table
            indices, _ = model.predict(X_sel, k=min(5, model.n_labels))
            metrics = evaluate(pad_predictions(indices, 5), Y_sel, ks=(1, 3, 5))
            entry["val"] = {name: metrics[name] for name in ("P@1", "P@3", "P@5")}
            if best is None or metrics[SELECT_METRIC] > best[0]:
                best = (metrics[SELECT_METRIC], C, model)
        assert best is not None
        calibration = _platt(best[2], X_sel, Y_sel)
        if refit:  # every training row, and a given validation set's rows too (as the Trainer's refit)
            X_all = X if X_val is None else sp.vstack([X, X_sel], format="csr")
            Y_all = Y if X_val is None else sp.vstack([Y, Y_sel], format="csr")
            model = train(X_all, Y_all, [best[1]], refit=True)[0]
        else:
            model = best[2]
        model.calibration = calibration
    model.normalize_rows = config.normalize_rows
    return model, history


def add_labels(model: LinearModel, X: Any, Y: Any, C: float, config: LinearConfig, *, workers: int = 1,
               ray_address: str | None = None) -> LinearModel:
    """``model`` with one SVM per column of ``Y`` appended as new labels, the existing labels'
    weights, biases and the calibration untouched.

    Each new label trains exactly as :func:`fit_linear` trains a label with a fixed ``C``
    (the labels are independent problems, each seeded with ``config.seed``), so on the rows
    the model was fitted on the result equals a fit of every label at once with that ``C``.

    Args:
        model: the fitted model; X: ``(n, D)`` rows, each labelled for the new labels (the
            training rows, or any others); Y: ``(n, L_new)`` labels of the new labels.
        C: the fitted model's ``C``; config: the solver settings (``tol``, ``max_iter``,
            ``prune``, ``label_block``, ``seed``).
        workers, ray_address: where the label blocks train.

    Shapes:
        model ``(D, L)`` → ``(D, L + L_new)``.

    Example:
        >>> X = sp.random(300, 40, density=0.2, format="csr", random_state=0, dtype=np.float32)
        >>> Y = sp.csr_matrix((X[:, :6].toarray() > 0).astype(np.float32))
        >>> base, _ = fit_linear(X, Y[:, :4], LinearConfig(C=1.0))
        >>> grown = add_labels(base, X, Y[:, 4:], 1.0, LinearConfig(C=1.0))
        >>> full, _ = fit_linear(X, Y, LinearConfig(C=1.0))
        >>> grown.n_labels, bool((grown.weights != full.weights).nnz == 0)
        (6, True)
    """
    X, Y = training_rows(X, Y)
    if X.shape[1] != model.n_features:
        raise InputError(f"X has {X.shape[1]} features, the model expects {model.n_features}")
    if model.normalize_rows:
        X = normalize(X)
    new, unconverged, _ = _train(X, Y, [C], config, workers, ray_address)[0]
    if unconverged:
        warnings.warn(f"liblinear reached max_iter={config.max_iter} on {unconverged} of {Y.shape[1]} new labels "
                      f"(C={C}); raise max_iter or lower C", ConvergenceWarning, stacklevel=2)
    weights = sp.hstack([model.weights, new.weights], format="csr")
    return LinearModel(weights, np.concatenate([model.bias, new.bias]), model.normalize_rows, model.calibration)


#: Validation (margin, label) pairs that Platt scaling fits on, at most (rows are taken in order).
CALIBRATION_PAIRS = 2_000_000


def _platt(model: LinearModel, X: sp.csr_matrix, Y: sp.csr_matrix) -> tuple[float, float]:
    """``(a, b)`` maximising the likelihood of ``sigmoid(a · margin + b)`` for "label present"
    over the validation rows' (margin, label) pairs (Platt, 1999;
    :func:`holoxmc.calibration.platt_scaling`: never falling); ``(1, 0)`` when those pairs
    hold only one class. Labels with a constant score (``±inf`` margins) are left out."""
    rows = max(1, CALIBRATION_PAIRS // model.n_labels)
    margins, present = model.margins(X[:rows]), Y[:rows].toarray() > 0
    finite = np.isfinite(margins)
    x, y = margins[finite].astype(np.float64), present[finite]
    return platt_scaling(x, y.astype(np.int64), np.ones_like(x)) or (1.0, 0.0)


def training_rows(X: Any, Y: Any, x_name: str = "X", y_name: str = "Y",
                   dtype: type = np.float64) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """``X`` as CSR of ``dtype`` (float64: liblinear's type) and ``Y``'s nonzeros as a 0/1 CSR, same rows."""
    try:
        X, Y = sp.csr_matrix(X, dtype=dtype), sp.csr_matrix(sp.csr_matrix(Y) != 0, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{x_name}, {y_name} must be 2-D numeric matrices: {exc}") from None
    if X.shape[0] != Y.shape[0]:
        raise InputError(f"{x_name} has {X.shape[0]} rows but {y_name} has {Y.shape[0]}")
    if 0 in Y.shape:
        raise InputError(f"{y_name} has shape {Y.shape}: no rows or no labels")
    return X, Y

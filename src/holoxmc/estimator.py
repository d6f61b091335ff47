"""``XMCClassifier``: fit, predict, evaluate, save and load an extreme multi-label model in a
few lines, with an HRR (``d'``-wide), a dense (``L``-wide) or a SOLAR (K × B sparse code)
output layer, or as a linear one-vs-rest model (one SVM per label, no hidden layer).

The estimator holds settings and checks them (:mod:`holoxmc.validation`); each head kind's
fitting, loading and defaults are its family in :mod:`holoxmc.models.registry`, and the
fitted model is a :class:`~holoxmc.models.base.FittedModel` (:mod:`holoxmc.models`).

Example:
    >>> from holoxmc.data import load
    >>> from holoxmc.estimator import XMCClassifier
    >>> train, test = load("synthetic", "train"), load("synthetic", "test")  # doctest: +SKIP
    >>> clf = XMCClassifier(head="hrr", dim=400, epochs=5).fit(train.X, train.Y)  # doctest: +SKIP
    >>> indices, scores = clf.predict(test.X, k=5)  # doctest: +SKIP
    >>> clf.score(test.X, test.Y)  # P@1, one float, as scikit-learn expects  # doctest: +SKIP
    >>> clf.evaluate(test.X, test.Y)["nDCG@5"]  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import numbers
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import BaseEstimator
from safetensors.torch import save as safetensors_bytes

from holoxmc import __version__
from holoxmc.devices import check_device
from holoxmc.errors import InputError
from holoxmc.io import atomic_write_files, finite_or_null, json_text, to_json
from holoxmc.limits import check_size
from holoxmc.metrics import evaluate, inverse_propensity, label_set_f1, pad_predictions
from holoxmc.models.base import FittedModel
from holoxmc.models.network import MEMBER_DIR, NetworkModel, NetworkPlan
from holoxmc.models.registry import FAMILIES, HEAD_SPECIFIC, NETWORK_SETTINGS, FitData, family
from holoxmc.presets import DATASET_PRESETS, DEFAULT_PROPENSITY, HEAD_DEFAULTS, MODELS, model_params, preset_params
from holoxmc.seeding import member_seeds
from holoxmc.train import FitResult, TrainConfig, labels_above
from holoxmc.train.checkpoint import load_state_dict_file
from holoxmc.train.trainer import Precision, Schedule
from holoxmc.trust import check_finite, check_network_config, tensor_shapes
from holoxmc.validation import (
    ESTIMATOR_CONSTRAINTS, SETTING_NAMES, NotFittedError, check_batch_size, check_finite_options, check_fitted,
    check_label_statistics, check_params, check_X, check_Y,
)

__all__ = ["XMCClassifier", "NotFittedError", "MODELS", "DATASET_PRESETS", "HEAD_DEFAULTS", "NETWORK_SETTINGS",
           "MEMBER_DIR", "model_params", "preset_params"]

FORMAT = "holoxmc-xmc-classifier/1"
CONFIG_FILE = "config.json"
MODEL_FILE = "model.safetensors"
#: Keys of config.json that loading reads, besides ``format`` (``network`` is ``null`` but for networks).
CONFIG_KEYS = ("params", "network", "n_features", "n_labels")
#: decision_function refuses to build a score matrix larger than this many entries.
MAX_DENSE_SCORES = 50_000_000
#: Metric families :meth:`XMCClassifier.score` can return (``metric="<family>@<k>"``).
SCORE_FAMILIES = ("P", "nDCG", "PSP", "PSnDCG")


class XMCClassifier(BaseEstimator):
    """Extreme multi-label classifier: a backbone plus an HRR, dense or SOLAR output layer,
    or a linear one-vs-rest model.

    Args:
        head: ``"hrr"`` (``dim``-wide output, HRR loss), ``"dense"`` (``L`` logits, BCE),
            ``"solar"`` (K independent chunk networks over B buckets each, trained with zero
            communication, decoded through an inverted index; ``backbone="fc"`` only) or
            ``"linear"`` (one L2-regularised linear SVM per label on the L2-normalised input,
            trained by liblinear, :mod:`holoxmc.train.linear`; ``backbone="fc"``, on the CPU,
            for label sets up to tens of thousands; the network settings do not apply, and
            its ``C`` is chosen on the validation split unless ``head_options`` fixes it).
        backbone: ``"fc"`` (sparse features X) or ``"cnn"``/``"lstm"`` (token-id matrices).
        dim: HRR dimension d' (``head="hrr"`` only).
        hidden: widths of the FC backbone's hidden layers (``None``: the head's default).
        dropout: dropout after every hidden activation (``None``: the head's default).
        linear_width: ``backbone="fc"``, heads ``"hrr"``/``"dense"``: width of a linear path
            of the input concatenated to the last hidden layer (wide and deep; 0: none), see
            :class:`~holoxmc.backbones.FCBackbone`.
        head_options: extra head keywords (``{"learn_pm": True}``,
            ``{"ranking": 1.0, "label_bias": True}``, ``{"code": "circulant", "cache_codes": False}``
            for millions of labels, ...); for
            ``head="solar"``, :class:`holoxmc.train.solar.SolarConfig` fields such as
            ``{"n_chunks": 8, "n_buckets": 500, "top_buckets": 10, "min_freq": 4, "scoring": "prob"}``;
            for ``head="linear"``, :class:`holoxmc.train.linear.LinearConfig` fields such as
            ``{"C": 0.5}`` or ``{"C_grid": [0.3, 1.0], "prune": 0.0}``.
        epochs, batch_size, lr, weight_decay, sparse_updates, schedule, warmup_epochs, grad_clip,
        val_fraction, patience, refit: training settings, see :class:`holoxmc.train.TrainConfig`
            (``refit=True``: after choosing the epoch on the validation split, retrain on all
            rows with the same schedule and stop at that epoch; ``sparse_updates=True``: Adam's
            steps computed only on the input-layer rows a batch reads, many times faster
            for large D, see :mod:`holoxmc.train.optim`; the default ``"auto"`` turns them
            on where they were measured faster: on a CPU, in one process, without weight
            decay, for inputs of at least 15,000 features of which a batch reads at most 7.5 %);
            ``None`` for epochs, batch_size and lr means the head's tuned default
            (:data:`HEAD_DEFAULTS`).
        precision: ``"float32"``, or ``"bfloat16"``: mixed-precision training steps (the
            forward pass under ``torch.autocast``; weights, loss, optimiser, scoring and saved
            model stay float32), see :class:`holoxmc.train.TrainConfig`.
        workers: SOLAR's chunk models, the linear model's label blocks, or an ensemble's
            networks (``n_models > 1``), trained in this many parallel local processes, a positive integer (each process with
            ``cores // workers`` torch threads).
        ray_address: train each SOLAR chunk, linear label block, or network of an ensemble, as
            a Ray task on this cluster (``"auto"``, an address, or ``"local"``).
        n_models: ``head="hrr"``/``"dense"``: train this many networks of the same
            configuration and rank labels by their mean score. Member ``m`` is the network
            ``seed=seed + 100·m`` would train alone (its own initialisation, label code,
            validation split and batch order). Costs ``n_models`` times the training time,
            parameters and scoring time.
        seed: seeds the initialisation, the label code, the validation split and the shuffling.
        device: ``"cpu"``, ``"cuda"``, ...
        propensity: ``(A, B)`` of the inverse propensities used for PSP@k in :meth:`evaluate`.
        progress: tqdm bar while fitting; ``None`` = only on a terminal.
        n_jobs: scikit-learn's name for ``workers``: when given, the local processes that
            train SOLAR's chunks, the linear model's label blocks or an ensemble's networks
            (``-1``: one per CPU core); a single network trains in this process either way.
            Give ``n_jobs`` or ``workers``, not both.
        random_state: scikit-learn's name for ``seed`` (a non-negative integer): when given,
            it seeds everything ``seed`` does. Give one of them.

    scikit-learn conformance: :meth:`score` returns one float (P@1 by default) for
    ``cross_val_score`` and ``GridSearchCV``; :meth:`evaluate` returns every metric; ``Y`` may
    be scikit-learn's dense 0/1 indicator array or ``load_svmlight_file(multilabel=True)``'s
    tuples of float label ids; an unfitted estimator raises :class:`NotFittedError`
    (scikit-learn's, and an ``InputError``); ``n_features_in_`` is the width of the fitted X.

    Attributes (after fit):
        model_: the served :class:`~holoxmc.models.base.FittedModel`;
        network_: the trained ``Network``, or an ``Ensemble`` of them when ``n_models > 1``
        (``solar_``: the :class:`SolarModel` for ``head="solar"``, ``linear_``: the
        :class:`~holoxmc.train.linear.LinearModel` for ``head="linear"``); n_features_, n_labels_:
        input and label sizes; inv_prop_: ``(L,)`` inverse propensities of the training
        labels; fit_results_: the trainer's :class:`~holoxmc.train.FitResult` per network
        (per-epoch history, times, and ``sparse_updates``: whether they were used);
        fit_result_: the first of them.

    Example:
        >>> import scipy.sparse as sp, numpy as np
        >>> X = sp.random(200, 50, density=0.1, format="csr", random_state=0, dtype=np.float32)
        >>> Y = (sp.random(200, 20, density=0.1, format="csr", random_state=1) > 0).astype(np.float32)
        >>> clf = XMCClassifier(dim=32, hidden=(16,), epochs=2, progress=False).fit(X, Y)
        >>> clf.predict(X[:3], k=4)[0].shape
        (3, 4)
    """

    def __init__(
        self,
        head: str = "hrr",
        backbone: str = "fc",
        *,
        dim: int = 400,
        hidden: Sequence[int] | None = None,
        dropout: float | None = None,
        linear_width: int = 0,
        head_options: dict[str, Any] | None = None,
        epochs: int | None = None,
        batch_size: int | None = None,
        lr: float | None = None,
        weight_decay: float = 0.0,
        sparse_updates: bool | Literal["auto"] = "auto",
        schedule: Schedule = "cosine",
        warmup_epochs: float = 0.0,
        grad_clip: float | None = None,
        val_fraction: float = 0.1,
        patience: int | None = None,
        refit: bool = False,
        precision: Precision = "float32",
        n_models: int = 1,
        seed: int = 0,
        device: str = "cpu",
        propensity: tuple[float, float] = DEFAULT_PROPENSITY,
        progress: bool | None = None,
        workers: int = 1,
        ray_address: str | None = None,
        n_jobs: int | None = None,
        random_state: int | None = None,
    ):
        self.head = head
        self.backbone = backbone
        self.dim = dim
        self.hidden = hidden
        self.dropout = dropout
        self.linear_width = linear_width
        self.head_options = head_options
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.sparse_updates = sparse_updates
        self.schedule = schedule
        self.warmup_epochs = warmup_epochs
        self.grad_clip = grad_clip
        self.val_fraction = val_fraction
        self.patience = patience
        self.refit = refit
        self.precision = precision
        self.n_models = n_models
        self.seed = seed
        self.device = device
        self.propensity = propensity
        self.progress = progress
        self.workers = workers
        self.ray_address = ray_address
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ settings
    def setting(self, name: str) -> Any:
        """The value of a head-dependent setting: the explicit one, else the head's default
        (``None`` where the head has none, as the linear model's network settings)."""
        value = getattr(self, name)
        defaults = FAMILIES[self.head].defaults if self.head in FAMILIES else {}
        return defaults.get(name) if value is None else value

    @property
    def random_seed(self) -> int:
        """The seed of every random stream: ``random_state`` when given, else ``seed``."""
        return int(self.seed if self.random_state is None else self.random_state)

    @property
    def n_workers(self) -> int:
        """Parallel local processes: ``n_jobs`` when given (``-1``: one per CPU core), else ``workers``."""
        if self.n_jobs is None:
            return int(self.workers)
        return int(os.cpu_count() or 1) if self.n_jobs == -1 else int(self.n_jobs)

    def member_seeds(self) -> list[int]:
        """The seed of each network ``fit`` trains: ``seed + 100·m`` for member ``m``."""
        return member_seeds(self.random_seed, self.n_models)

    def train_config(self, seed: int | None = None) -> TrainConfig:
        """The trainer's settings (:class:`~holoxmc.train.TrainConfig`) of this estimator."""
        return TrainConfig(
            epochs=self.setting("epochs"), batch_size=self.setting("batch_size"), lr=self.setting("lr"),
            weight_decay=self.weight_decay, sparse_updates=self.sparse_updates, schedule=self.schedule,
            warmup_epochs=self.warmup_epochs, grad_clip=self.grad_clip, val_fraction=self.val_fraction,
            patience=self.patience, refit=self.refit, precision=self.precision,
            seed=self.random_seed if seed is None else seed, device=self.device, progress=self.progress,
        )

    def _validate_params(self) -> Any:
        """Every setting against :data:`~holoxmc.validation.ESTIMATOR_CONSTRAINTS` and the
        head's family (which settings apply to it), before any data is read.

        Returns:
            the head's :class:`~holoxmc.models.registry.Family`.
        """
        check_params(self.get_params(), ESTIMATOR_CONSTRAINTS, SETTING_NAMES)
        kind = family(self.head)
        check_finite_options(self.head_options or {})
        if self.backbone not in kind.backbones:
            raise InputError(f"head {self.head!r} takes sparse features (backbone "
                             f"{' or '.join(map(repr, kind.backbones))}), not {self.backbone!r}")
        if self.linear_width and self.backbone != "fc":
            raise InputError("linear_width applies to the fc backbone with the hrr and dense heads")
        defaults = {name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()}
        changed = [name for name in HEAD_SPECIFIC if name not in kind.settings and getattr(self, name) != defaults[name]]
        if changed:
            raise InputError(f"{changed} do not apply to head {self.head!r}: they configure or train a network it "
                             f"does not have, or another head's (its settings: {sorted(kind.settings)}, head_options, "
                             "val_fraction, seed, workers, ray_address)")
        if self.n_jobs is not None and self.workers != 1:
            raise InputError(f"n_jobs is scikit-learn's name for workers: give one of them, not n_jobs={self.n_jobs} "
                             f"and workers={self.workers}")
        if self.random_state is not None and self.seed not in (0, self.random_state):
            raise InputError(f"random_state is scikit-learn's name for seed: give one of them, not "
                             f"random_state={self.random_state} and seed={self.seed}")
        return kind

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, Y: Any, X_val: Any = None, Y_val: Any = None, *, run_dir: str | Path | None = None,
            resume: bool = False) -> "XMCClassifier":
        """Train on ``(X, Y)``; model selection on ``(X_val, Y_val)`` or a held-out share of X.

        Args:
            X: ``(n, D)`` sparse/dense features (``backbone="fc"``) or ``(n, T)`` token ids.
            Y: ``(n, L)`` binary label matrix (sparse, or scikit-learn's dense indicator
                array), or one sequence of label ids per row (ints, or integral floats as
                ``load_svmlight_file(multilabel=True)`` gives).
            X_val, Y_val: optional validation set (never the test set).
            run_dir: write a training checkpoint there after every epoch.
            resume: continue the checkpoint in ``run_dir``.

        Returns:
            self.

        Raises:
            InputError: a bad setting or input, or a model whose sizes cannot fit in memory,
                before any training.
        """
        kind = self._validate_params()
        X = self._check_X(X, fitting=True)
        Y = check_Y(Y, X.shape[0], n_labels=None)
        if (X_val is None) != (Y_val is None):
            raise InputError("give both X_val and Y_val, or neither")
        n_features, n_labels = (int(X.shape[1]) if sp.issparse(X) else int(X.max()) + 1), int(Y.shape[1])
        if X_val is not None:
            X_val = self._check_X(X_val, known=n_features)
            Y_val = check_Y(Y_val, X_val.shape[0], n_labels=n_labels)
        check_label_statistics(n_labels)
        plan = kind.plan(self, n_labels, n_features)
        self.n_features_, self.n_labels_, self.n_features_in_ = n_features, n_labels, int(X.shape[1])
        self.inv_prop_ = np.asarray(inverse_propensity(Y, *self.propensity), dtype=np.float64)
        model, results = kind.fit(self, plan, FitData(X, Y, X_val, Y_val, run_dir, resume))
        self._set_model(model, results)
        return self

    def _set_model(self, model: FittedModel, results: list[FitResult]) -> None:
        self.model_ = model
        self.fit_results_ = results
        self.fit_result_ = results[0]

    def new_network(self, n_labels: int, input_size: int, seed: int | None = None) -> Any:
        """A freshly initialised network of this estimator's configuration (``hrr`` and
        ``dense`` heads), seeded with ``seed`` (by default the estimator's): what ``fit``
        trains, for benchmarks that drive the trainer themselves."""
        plan = self._validate_params().plan(self, n_labels, input_size)
        if not isinstance(plan, NetworkPlan):
            raise InputError(f"head {self.head!r} is not one network")
        return plan.network(self.random_seed if seed is None else seed)

    # ------------------------------------------------------------------ the fitted model
    def _served(self, attribute: str) -> Any:
        model = vars(self).get("model_")
        if model is None or self.head not in FAMILIES or FAMILIES[self.head].attribute != attribute:
            raise AttributeError(f"{type(self).__name__} has no {attribute} (head {self.head!r})")
        return FAMILIES[self.head].public(model)

    @property
    def network_(self) -> Any:
        """The trained ``Network``, or ``Ensemble`` when ``n_models > 1`` (``hrr``, ``dense``)."""
        return self._served("network_")

    @property
    def solar_(self) -> Any:
        """The :class:`~holoxmc.models.solar.SolarModel` (``head="solar"``)."""
        return self._served("solar_")

    @property
    def linear_(self) -> Any:
        """The :class:`~holoxmc.models.linear.LinearModel` (``head="linear"``)."""
        return self._served("linear_")

    @property
    def rerank_(self) -> Any:
        """The :class:`~holoxmc.models.rerank.RerankModel` (``head="rerank"``)."""
        return self._served("rerank_")

    def n_parameters(self) -> dict[str, int]:
        """``{"total": ..., "output_layer": ...}`` trainable-parameter counts."""
        self._check_fitted()
        return self.model_.parameter_counts()

    # ------------------------------------------------------------------ inference
    def predict(self, X: Any, k: int = 5, *, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` labels per row, best first. SOLAR ranks only the labels of its
        inverted-index candidates: ranks they cannot fill hold label ``-1`` and score ``-inf``
        (:mod:`holoxmc.metrics` counts them as misses).

        Shapes:
            X: ``(n, D)`` → indices ``(n, k)`` int64, scores ``(n, k)`` float32.
        """
        self._check_fitted()
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not 1 <= k <= self.n_labels_:
            raise InputError(f"k must be an integer in [1, {self.n_labels_}], got {k!r}")
        batch_size = check_batch_size(batch_size)
        return self.model_.predict_topk(self._check_X(X), int(k), batch_size=batch_size)

    def predict_above(self, X: Any, threshold: float = 0.5, *, relative: bool = True,
                      batch_size: int = 1024) -> sp.csr_matrix:
        """Every label whose confidence exceeds ``threshold`` times the row's best confidence
        (``relative``, the default) or ``threshold`` itself: a label set of its own size per
        row, as a CSR matrix of those confidences.

        The confidence is the HRR head's ``cos(p* ⊗ ŝ, c_i)`` (``|cos|`` with ``loss="abs"``),
        the dense head's ``sigmoid(logit)``, the linear model's ``sigmoid(a · margin + b)``
        (Platt-scaled on the validation margins when C was chosen on them, else ``a, b = 1, 0``),
        an ensemble's mean of its members' confidences,
        SOLAR's mean over its K chunks of the probability of the label's bucket (over every
        label, not only its inverted index's candidates).

        Appendix H of the HRR paper cuts the product ``c_i · (p* ⊗ ŝ)`` at 0.5, as the exact
        HRR of a row's labels answers ≈ 1 for each present label and ≈ 0 for the others; a
        network trained with the scale-free cosine loss answers in cosine: ``1/√k`` for each
        of ``k`` equally present labels, so the relative cut divides that scale out
        (README, "Label sets by a threshold": on Delicious, 19 labels a row, almost no cosine
        reaches 0.5).

        Shapes:
            X: ``(n, D)`` → CSR ``(n, L)`` float32, column indices sorted.

        Example:
            >>> clf.predict_above(X_test, 0.5).getrow(0).indices  # doctest: +SKIP
            array([  3,  17, 120], dtype=int32)
        """
        self._check_fitted()
        if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not math.isfinite(threshold):
            raise InputError(f"threshold must be a finite number, got {threshold!r}")
        _check_relative_threshold(float(threshold), relative)
        batch_size = check_batch_size(batch_size)
        X = self._check_X(X)
        model = self.model_
        return labels_above(lambda rows: model.confidence_chunks(X[rows]), X.shape[0], float(threshold),
                            self.n_labels_, relative=bool(relative), batch_size=batch_size)

    def tune_threshold(
        self,
        X_val: Any,
        Y_val: Any,
        thresholds: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
        *,
        relative: bool = True,
        metric: str = "micro-F1",
    ) -> tuple[float, dict[float, dict[str, float]]]:
        """The :meth:`predict_above` threshold of ``thresholds`` whose label sets score best
        by ``metric`` (``"micro-F1"`` or ``"example-F1"``, :func:`holoxmc.metrics.label_set_f1`)
        on a validation set: pass one held out from the training data, never the test set.
        The confidences are computed once, at the lowest threshold, as every other cut keeps
        a subset of those labels.

        Returns:
            ``(best threshold, {threshold: label_set_f1 of its sets})``.

        Example:
            >>> threshold, table = clf.tune_threshold(X_val, Y_val)  # doctest: +SKIP
            >>> labels = clf.predict_above(X_test, threshold)        # doctest: +SKIP
        """
        try:
            grid = [float(t) for t in thresholds if not isinstance(t, (bool, str))]
        except (TypeError, ValueError):
            grid = []
        if not grid or len(grid) != len(thresholds) or not all(math.isfinite(t) for t in grid):
            raise InputError(f"thresholds must be finite numbers, at least one, got {thresholds!r}")
        if metric not in ("micro-F1", "example-F1"):
            raise InputError(f"metric must be 'micro-F1' or 'example-F1', got {metric!r}")
        for t in grid:
            _check_relative_threshold(t, relative)
        X_val = self._check_X(X_val)
        Y_val = check_Y(Y_val, X_val.shape[0], n_labels=self.n_labels_)
        widest = self.predict_above(X_val, min(grid), relative=relative).tocoo()
        best_of_row = np.full(X_val.shape[0], -np.inf, dtype=np.float32)
        np.maximum.at(best_of_row, widest.row, widest.data)
        table = {}
        for t in grid:
            keep = widest.data > (t * best_of_row[widest.row] if relative else t)
            sets = sp.csr_matrix((widest.data[keep], (widest.row[keep], widest.col[keep])), shape=widest.shape)
            table[t] = label_set_f1(sets, Y_val)
        return max(grid, key=lambda t: table[t][metric]), table

    def decision_function(self, X: Any, *, batch_size: int = 1024) -> np.ndarray:
        """Score of every label for every row (an ``(n, L)`` dense array).

        Refuses when ``n · L`` exceeds ``MAX_DENSE_SCORES``: use :meth:`predict` (top-k)
        for large label spaces. For SOLAR, a label's score is the configured scoring summed
        over all K chunks (every label, no inverted-index candidate filtering); for the linear
        model, every label's SVM margin; for an ensemble (``n_models > 1``), the members' mean score.
        """
        self._check_fitted()
        batch_size = check_batch_size(batch_size)
        X = self._check_X(X)
        n = X.shape[0]
        if n * self.n_labels_ > MAX_DENSE_SCORES:
            raise InputError(f"{n} x {self.n_labels_} scores exceed {MAX_DENSE_SCORES:,} entries; "
                             "use predict(X, k) or pass fewer rows")
        out = np.empty((n, self.n_labels_), dtype=np.float32)
        for start in range(0, n, batch_size):
            rows = np.arange(start, min(start + batch_size, n))
            chunks = self.model_.score_chunks(X[rows])
            out[rows] = torch.cat([scores for _, scores in chunks], 1).float().cpu().numpy()
        return out

    def evaluate(self, X: Any, Y: Any, *, ks: Sequence[int] = (1, 2, 3, 4, 5)) -> dict[str, float]:
        """P@k, nDCG@k, PSP@k, PSnDCG@k (percent) of the top-k predictions against ``Y``
        (PSP with the training labels' propensities)."""
        self._check_fitted()
        if not ks or not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k >= 1 for k in ks):
            raise InputError(f"ks must be positive integers, got {ks!r}")
        X = self._check_X(X)
        Y = check_Y(Y, X.shape[0], n_labels=self.n_labels_)
        indices, _ = self.predict(X, k=min(max(ks), self.n_labels_))
        return evaluate(pad_predictions(indices, max(ks)), Y, inv_prop=self.inv_prop_, ks=tuple(int(k) for k in ks))

    def score(self, X: Any, Y: Any, *, metric: str = "P@1") -> float:
        """One metric of the top-k predictions against ``Y``, in percent (higher is better):
        ``"P@1"`` by default, any ``"P@k"``, ``"nDCG@k"``, ``"PSP@k"`` or ``"PSnDCG@k"``.
        The one number scikit-learn's model selection (``cross_val_score``, ``GridSearchCV``)
        expects; :meth:`evaluate` returns them all.
        """
        match = re.fullmatch(r"(P|nDCG|PSP|PSnDCG)@([1-9][0-9]*)", metric) if isinstance(metric, str) else None
        if match is None:
            raise InputError(f"metric must be one of {list(SCORE_FAMILIES)} at a cut-off, such as 'P@1', got {metric!r}")
        return float(self.evaluate(X, Y, ks=(int(match.group(2)),))[metric])

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write ``path/config.json`` and ``path/model.safetensors`` (atomically each).

        Returns:
            the folder.
        """
        self._check_fitted()
        path = Path(path)
        state = self.model_.save_to(path)
        state["inv_prop"] = torch.from_numpy(self.inv_prop_)
        histories = [result.history for result in self.fit_results_]
        config = {
            "format": FORMAT,
            "written_by": {"holoxmc": __version__, "torch": torch.__version__},
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in self.get_params().items()},
            "network": self.model_.network.config if isinstance(self.model_, NetworkModel) else None,
            "n_features": self.n_features_,
            "n_labels": self.n_labels_,
            "history": histories[0] if len(histories) == 1 else histories,
        }
        weights = safetensors_bytes({k: v.detach().cpu().contiguous().clone() for k, v in state.items()},
                                    metadata={"format": FORMAT, DIGEST_KEY: _scoring_digest(config)})
        atomic_write_files(path, {MODEL_FILE: weights,  # config.json, which load reads first, goes last
                                  CONFIG_FILE: json_text(finite_or_null(config), allow_nan=False).encode()})
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str | None = None) -> "XMCClassifier":
        """Rebuild a saved classifier (no pickle: JSON configuration + safetensors weights).

        Args:
            path: folder written by :meth:`save`.
            device: override the saved device (e.g. load a GPU-trained model on ``"cpu"``).
        """
        path = Path(path)
        config_path = path / CONFIG_FILE
        if not config_path.is_file():
            raise InputError(f"{path}: not a saved model (no {CONFIG_FILE})")
        config = _read_config(config_path, cls._get_param_names())
        params: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in config["params"].items()}
        if device is not None:
            params["device"] = device
        try:
            check_device(params.get("device", "cpu"))
        except InputError as exc:
            hint = "" if device is not None else " (it was saved with that device; load it with device='cpu')"
            raise InputError(f"{path}: {exc}{hint}") from None
        clf = cls(**params)
        try:
            kind = clf._validate_params()
        except InputError as exc:
            raise InputError(f"{config_path}: {exc}") from None
        clf.n_features_ = config["n_features"]
        clf.n_labels_ = config["n_labels"]
        if clf.backbone == "fc":
            clf.n_features_in_ = clf.n_features_
        model_file = path / MODEL_FILE
        shapes = tensor_shapes(model_file)
        if shapes.get("inv_prop") != (clf.n_labels_,):
            raise InputError(f"{model_file}: tensor 'inv_prop' of shape {shapes.get('inv_prop')} does not hold "
                             f"the n_labels = {clf.n_labels_} of {CONFIG_FILE}")
        if kind.attribute == "network_":  # a network family: its saved network configuration
            check_network_config(config["network"], shapes, n_features=clf.n_features_, n_labels=clf.n_labels_,
                                 where=str(config_path))
        tensors, metadata = load_state_dict_file(model_file)
        check_finite(tensors.items(), str(model_file))
        digest = metadata.get(DIGEST_KEY)
        if digest is not None and digest != _scoring_digest(config):
            raise InputError(f"{config_path}: edited after the model was saved (its scoring settings no longer "
                             f"match {MODEL_FILE}'s digest)")
        clf.inv_prop_ = tensors.pop("inv_prop").numpy()
        history = _read_history(config.get("history", []), clf.n_models, config_path)
        results = [FitResult(history=h) for h in (history if clf.n_models > 1 else [history])]
        clf._set_model(kind.load(clf, path, config, tensors), results)
        return clf

    # ------------------------------------------------------------------ validation
    def _check_fitted(self) -> None:
        check_fitted(self)

    def _check_X(self, X: Any, *, fitting: bool = False, known: int | None = None) -> sp.csr_matrix | np.ndarray:
        """Sparse float32 CSR for ``fc``; a 2-D int64 token matrix for text backbones; of
        ``known`` features (or vocabulary), by default the fitted model's (any while ``fitting``)."""
        if known is None and not fitting:
            known = self.n_features_
        if self.backbone == "fc":
            return check_X(X, True, n_features=known)
        return check_X(X, False, vocab_size=known)


def _read_config(config_path: Path, param_names: Sequence[str]) -> dict[str, Any]:
    """The contents of a saved model's ``config.json``, once it holds what loading needs."""
    config = _read_json_object(config_path)
    if config.get("format") != FORMAT:
        raise InputError(f"{config_path}: unsupported format {config.get('format')!r}, expected {FORMAT!r}")
    missing = [key for key in CONFIG_KEYS if key not in config]
    if missing:
        raise InputError(f"{config_path}: missing key {missing[0]!r}")
    if not isinstance(config["params"], dict):
        raise InputError(f"{config_path}: 'params' must be a JSON object, got {config['params']!r}")
    unknown = sorted(set(config["params"]) - set(param_names))
    if unknown:
        raise InputError(f"{config_path}: unknown params {unknown}")
    for key in ("n_features", "n_labels"):
        check_size(repr(key), config[key], where=str(config_path))
    return config


#: Key of model.safetensors' metadata holding :func:`_scoring_digest` of the saved config.
DIGEST_KEY = "scoring_config_sha256"


def _scoring_digest(config: dict[str, Any]) -> str:
    """SHA-256 of what a saved model's scores depend on besides its weights: the network
    configuration (its seed regenerates the label code), the sizes and the head's options."""
    params = config.get("params") or {}
    scoring = {key: config.get(key) for key in ("network", "n_features", "n_labels")}
    scoring |= {key: params.get(key) for key in ("head", "backbone", "head_options")}
    return hashlib.sha256(to_json(scoring, sort_keys=True).encode()).hexdigest()


def _read_history(history: Any, n_models: int, where: Path) -> list[Any]:
    """The saved per-epoch history: a list of epoch records (one list per member of an ensemble)."""
    runs = history if n_models > 1 else [history]
    if not isinstance(runs, list) or len(runs) != n_models or not all(
            isinstance(run, list) and all(isinstance(epoch, dict) for epoch in run) for run in runs):
        raise InputError(f"{where}: 'history' must be a list of epoch records"
                         f"{' per member' if n_models > 1 else ''}")
    return history


def _read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in the UTF-8 file ``path``."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise InputError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _check_relative_threshold(threshold: float, relative: bool) -> None:
    if relative and not 0.0 <= threshold < 1.0:
        raise InputError(f"a relative threshold is a fraction of the row's best confidence: give one in [0, 1) "
                         f"(at 1 no label exceeds its row's best; or relative=False, --absolute), got {threshold}")

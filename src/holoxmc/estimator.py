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

import inspect
import os
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.base import BaseEstimator

from holoxmc.errors import InputError
from holoxmc.metrics import evaluate, inverse_propensity, pad_predictions
from holoxmc.models import persist
from holoxmc.models import thresholds as label_sets
from holoxmc.models.auto import SELECTORS, check_auto_params
from holoxmc.models.base import FittedModel
from holoxmc.models.persist import CONFIG_FILE, CONFIG_KEYS, FORMAT, MODEL_FILE
from holoxmc.models.network import MEMBER_DIR, NetworkPlan
from holoxmc.models.registry import FAMILIES, HEAD_SPECIFIC, NETWORK_SETTINGS, FitData, family
from holoxmc.presets import DATASET_PRESETS, DEFAULT_PROPENSITY, HEAD_DEFAULTS, MODELS, model_params, preset_params, \
    setting_defaults
from holoxmc.seeding import member_seeds
from holoxmc.train import FitResult, TrainConfig
from holoxmc.train.trainer import Precision, Schedule
from holoxmc.validation import (
    ESTIMATOR_CONSTRAINTS, SETTING_NAMES, NotFittedError, check_backbone_settings, check_batch_size,
    check_finite_options, check_fitted, check_label_statistics, check_params, check_X, check_Y,
)

__all__ = ["XMCClassifier", "NotFittedError", "MODELS", "DATASET_PRESETS", "HEAD_DEFAULTS", "NETWORK_SETTINGS",
           "MEMBER_DIR", "model_params", "preset_params", "FORMAT", "CONFIG_FILE", "MODEL_FILE", "CONFIG_KEYS"]

#: decision_function refuses to build a score matrix larger than this many entries.
MAX_DENSE_SCORES = 50_000_000
#: Metric families :meth:`XMCClassifier.score` can return (``metric="<family>@<k>"``).
SCORE_FAMILIES = ("P", "nDCG", "PSP", "PSnDCG")


class XMCClassifier(BaseEstimator):
    """Extreme multi-label classifier: a backbone plus an HRR, dense or SOLAR output layer,
    or a linear one-vs-rest model.

    Args:
        head: ``"auto"`` (the default: the linear model, then the FC network while
            ``time_budget`` lasts, the best on validation P@1 refit on every row and kept,
            :mod:`holoxmc.models.auto`; any network or head setting is then refused: name the
            head to set it), ``"hrr"`` (``dim``-wide output, HRR loss), ``"dense"`` (``L`` logits, BCE),
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
        time_budget: ``head="auto"``: seconds within which candidates are expected to end (the linear model,
            then FC, each at its library defaults, chosen by validation P@1 and
            refit on every row; see :mod:`holoxmc.models.auto`); other heads ignore it.

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
        >>> clf = XMCClassifier(head="hrr", dim=32, hidden=(16,), epochs=2, progress=False).fit(X, Y)
        >>> clf.predict(X[:3], k=4)[0].shape
        (3, 4)
    """

    def __init__(
        self,
        head: str = "auto",
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
        time_budget: float = 60.0,
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
        self.time_budget = time_budget

    # ------------------------------------------------------------------ settings
    def setting(self, name: str) -> Any:
        """The value of a head-dependent setting: the explicit one, else the head's default
        (``None`` where the head has none, as the linear model's network settings)."""
        value = getattr(self, name)
        defaults = setting_defaults(dict(FAMILIES[self.head].defaults), self.backbone) if self.head in FAMILIES else {}
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
        defaults = {name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()}
        check_backbone_settings(self.backbone, [name for name in HEAD_SPECIFIC if getattr(self, name) != defaults[name]])
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
            resume: bool = False, word_vectors: Any = None) -> "XMCClassifier":
        """Train on ``(X, Y)``; model selection on ``(X_val, Y_val)`` or a held-out share of X.

        Args:
            X: ``(n, D)`` sparse/dense features (``backbone="fc"``) or ``(n, T)`` token ids.
            Y: ``(n, L)`` binary label matrix (sparse, or scikit-learn's dense indicator
                array), or one sequence of label ids per row (ints, or integral floats as
                ``load_svmlight_file(multilabel=True)`` gives).
            X_val, Y_val: optional validation set (never the test set).
            run_dir: write a training checkpoint there after every epoch.
            resume: continue the checkpoint in ``run_dir``.
            word_vectors: a text backbone's initial embedding rows, a
                :class:`~holoxmc.data.embeddings.WordVectors` (``read_word_vectors``).

        Returns:
            self.

        Raises:
            InputError: a bad setting or input, or a model whose sizes cannot fit in memory,
                before any training.
        """
        if self.head in SELECTORS:
            return self._fit_selected(X, Y, X_val, Y_val)
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
        if word_vectors is not None:  # rows of a text backbone's embedding table
            if self.backbone == "fc" or not isinstance(plan, NetworkPlan):
                raise InputError("word_vectors initialise the embeddings of a text backbone (cnn, lstm)")
            plan = replace(plan, word_vectors=(word_vectors.ids, word_vectors.vectors))
        self.n_features_, self.n_labels_, self.n_features_in_ = n_features, n_labels, int(X.shape[1])
        self.inv_prop_ = np.asarray(inverse_propensity(Y, *self.propensity), dtype=np.float64)
        model, results = kind.fit(self, plan, FitData(X, Y, X_val, Y_val, run_dir, resume))
        self._set_model(model, results)
        return self

    def _fit_selected(self, X: Any, Y: Any, X_val: Any, Y_val: Any) -> "XMCClassifier":
        """``head="auto"``: fit the model :func:`~holoxmc.models.auto.fit_auto` chooses and
        serve it; ``selection_`` lists the candidates tried, ``head_`` the one kept."""
        check_params(self.get_params(), ESTIMATOR_CONSTRAINTS, SETTING_NAMES)
        check_auto_params(self)
        X = self._check_X(X, fitting=True)
        Y = check_Y(Y, X.shape[0], n_labels=None)
        if (X_val is None) != (Y_val is None):
            raise InputError("give both X_val and Y_val, or neither")
        if X_val is not None:
            X_val = self._check_X(X_val, known=int(X.shape[1]))
            Y_val = check_Y(Y_val, X_val.shape[0], n_labels=int(Y.shape[1]))
        winner, self.selection_ = SELECTORS[self.head](self, X, Y, X_val, Y_val)
        for name in ("n_features_", "n_labels_", "n_features_in_", "inv_prop_"):
            setattr(self, name, getattr(winner, name))
        self._set_model(winner.model_, winner.fit_results_, head=winner.head)
        return self

    def _set_model(self, model: FittedModel, results: list[FitResult], head: str | None = None) -> None:
        self.head_ = self.head if head is None else head
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
        head = getattr(self, "head_", self.head)
        if model is None or head not in FAMILIES or FAMILIES[head].attribute != attribute:
            raise AttributeError(f"{type(self).__name__} has no {attribute} (head {head!r})")
        return FAMILIES[head].public(model)

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
        return label_sets.predict_above(self, X, threshold, relative=relative, batch_size=batch_size)

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
        return label_sets.tune_threshold(self, X_val, Y_val, thresholds, relative=relative, metric=metric)

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
        return persist.save_classifier(self, path)

    @classmethod
    def load(cls, path: str | Path, *, device: str | None = None) -> "XMCClassifier":
        """Rebuild a saved classifier (no pickle: JSON configuration + safetensors weights).

        Args:
            path: folder written by :meth:`save`.
            device: override the saved device (e.g. load a GPU-trained model on ``"cpu"``).
        """
        return persist.load_classifier(cls, path, device=device)

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


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
    >>> labels = clf.predict(test.X)  # CSR (n, L) 0/1 label sets  # doctest: +SKIP
    >>> indices, scores = clf.predict_topk(test.X, 5)  # doctest: +SKIP
    >>> clf.score(test.X, test.Y)  # P@1, one float, as scikit-learn expects  # doctest: +SKIP
    >>> clf.evaluate(test.X, test.Y)["nDCG@5"]  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
import warnings

from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.metaestimators import available_if

from holoxmc.data.groups import check_groups, near_duplicate_groups, summarise
from holoxmc.devices import check_device
from holoxmc.errors import InputError
from holoxmc.limits import check_fit_memory
from holoxmc.labels import check_classes, encode_names, encode_single, holds_names, is_single_label, names_of
from holoxmc.metrics import evaluate, inverse_propensity, pad_predictions
from holoxmc import persist, serving
from holoxmc.models import thresholds as label_sets
from holoxmc.auto import SELECTORS, check_auto_params
from holoxmc.serving import array_like
from holoxmc.models.base import FitSettings, FittedModel, dense_scores
from holoxmc.persist import CONFIG_FILE, CONFIG_KEYS, FORMAT, MODEL_FILE
from holoxmc.models.network.model import MEMBER_DIR, NetworkPlan, with_word_vectors
from holoxmc.models import registry
from holoxmc.models.registry import FAMILIES, NETWORK_SETTINGS, FitData, family, streaming_heads
from holoxmc.presets import DATASET_PRESETS, HEAD_DEFAULTS, MODELS, model_params, preset_params
from holoxmc.seeding import member_seeds
from holoxmc.train import FitResult, TrainConfig
from holoxmc.train.streaming import streamed_fit_data
from holoxmc.train.trainer import Precision, Schedule, split_validation
from holoxmc.validation import (
    NotFittedError, check_batch_size, check_fit_data, check_fitted, check_label_statistics, check_score_metric, check_Y,
    input_size,
)
from holoxmc.constraints import check_params
from holoxmc.settings import DEFAULTS, ESTIMATOR_CONSTRAINTS, SETTING_NAMES
from holoxmc.timing import Stopwatch

__all__ = ["XMCClassifier", "NotFittedError", "MODELS", "DATASET_PRESETS", "HEAD_DEFAULTS", "NETWORK_SETTINGS",
           "MEMBER_DIR", "model_params", "preset_params", "FORMAT", "CONFIG_FILE", "MODEL_FILE", "CONFIG_KEYS"]

#: decision_function refuses to build a score matrix larger than this many entries.
MAX_DENSE_SCORES = 50_000_000
#: The cuts :meth:`XMCClassifier.tune_threshold` tries by default.
THRESHOLDS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


class XMCClassifier(ClassifierMixin, BaseEstimator):
    """Extreme multi-label classifier: a backbone plus an HRR, dense or SOLAR output layer,
    or a linear one-vs-rest model.

    Every setting, its default, its allowed values and what it does is one row of
    :data:`holoxmc.settings.SETTINGS` (the user guide, ``docs/guide/models.md``, explains them by
    task); the per-head values of the settings left at ``None`` are :data:`holoxmc.presets.HEAD_DEFAULTS`.

    Args:
        head: ``"auto"`` (the default: the re-rank model, then the FC network within
            ``time_budget``, the best on validation P@1 finished on every row,
            :mod:`holoxmc.auto`; name a head to set its other settings), ``"hrr"``
            (``dim``-wide output, HRR loss), ``"dense"`` (``L`` logits, BCE), ``"solar"``
            (K chunk networks over B buckets, :mod:`holoxmc.models.solar.model`), ``"linear"``
            (one linear SVM per label, :mod:`holoxmc.models.linear.fit`) or ``"rerank"``.
        backbone: ``"fc"`` (sparse features X) or ``"cnn"``/``"lstm"`` (token-id matrices).
        dim: HRR dimension d' (``head="hrr"`` only).
        hidden, dropout, linear_width: the FC backbone (``None``: the head's default), see
            :class:`~holoxmc.backbones.FCBackbone`.
        head_options: extra keywords of the head (``{"learn_pm": True}``), of
            :class:`holoxmc.models.solar.fit.SolarConfig` (``head="solar"``) or of
            :class:`holoxmc.models.linear.fit.LinearConfig` (``head="linear"``, ``{"C": 0.5}``).
        epochs, batch_size, lr, weight_decay, sparse_updates, schedule, warmup_epochs, grad_clip,
        val_fraction, patience, time_limit, abandon_below, refit, precision: training settings, see
            :class:`holoxmc.train.TrainConfig` (``None``: the head's tuned default).
        n_models: ``hrr``/``dense``: an ensemble of this many networks (member ``m`` seeded
            ``seed + 100·m``), ranked by their mean score.
        warm_start: ``hrr``/``dense``: a ``fit`` of a fitted estimator starts from its
            networks' weights (same features, labels and network settings) instead of a fresh
            initialisation (scikit-learn's meaning; the optimiser's state starts afresh).
        seed, random_state: seed of every random stream (``random_state`` is scikit-learn's
            name; give one of them).
        workers, n_jobs, ray_address: parallel local processes (``n_jobs`` is scikit-learn's
            name, ``-1``: one per core) or a Ray cluster for SOLAR's chunks, the linear model's
            label blocks or an ensemble's networks; see the distributed-training guide.
        device: ``"cpu"``, ``"cuda"``, ...
        propensity: ``(A, B)`` of the inverse propensities used for PSP@k in :meth:`evaluate`.
        duplicate_cosine: without ``groups``, rows whose features reach this cosine
            similarity are grouped, so a validation split never holds near-copies of training
            rows (``None``: off; :mod:`holoxmc.data.groups`).
        progress: tqdm bar while fitting; ``None`` = only on a terminal.
        time_budget: ``head="auto"``: seconds within which candidates are expected to end.

    scikit-learn conformance: :meth:`score` returns one float (P@1 by default) for
    ``cross_val_score`` and ``GridSearchCV``; :meth:`evaluate` returns every metric; ``Y`` may
    be scikit-learn's dense 0/1 indicator array or ``load_svmlight_file(multilabel=True)``'s
    tuples of float label ids; an unfitted estimator raises :class:`NotFittedError`
    (scikit-learn's, and an ``InputError``); ``n_features_in_`` is the width of the fitted X.

    Attributes (after fit):
        model_: the served :class:`~holoxmc.models.base.FittedModel`; head_: its head
        (the winner for ``head="auto"``, whose candidates ``selection_`` lists);
        network_, solar_, linear_, rerank_: the served model of that head;
        n_features_, n_labels_, n_features_in_: input and label sizes; inv_prop_: ``(L,)``
        inverse propensities of the training labels; fit_results_: the trainer's
        :class:`~holoxmc.train.FitResult` per network (fit_result_: the first);
        classes_: the label names (fitted on names) or ``0 .. L-1``, the columns of
        :meth:`predict` and :meth:`predict_proba`; label_rule_: :meth:`predict`'s rule
        (:class:`~holoxmc.models.thresholds.LabelRule`).

    Example:
        >>> import scipy.sparse as sp, numpy as np
        >>> X = sp.random(200, 50, density=0.1, format="csr", random_state=0, dtype=np.float32)
        >>> Y = (sp.random(200, 20, density=0.1, format="csr", random_state=1) > 0).astype(np.float32)
        >>> clf = XMCClassifier(head="hrr", dim=32, hidden=(16,), epochs=2, progress=False).fit(X, Y)
        >>> clf.predict_topk(X[:3], 4)[0].shape
        (3, 4)
        >>> clf.predict(X[:3]).shape  # label sets: a CSR 0/1 indicator
        (3, 20)
    """

    classes_: np.ndarray  # set by fit and load

    def __init__(
        self,
        head: str = DEFAULTS["head"],
        backbone: str = DEFAULTS["backbone"],
        *,
        dim: int = DEFAULTS["dim"],
        hidden: Sequence[int] | None = DEFAULTS["hidden"],
        dropout: float | None = DEFAULTS["dropout"],
        linear_width: int = DEFAULTS["linear_width"],
        head_options: dict[str, Any] | None = DEFAULTS["head_options"],
        epochs: int | None = DEFAULTS["epochs"],
        batch_size: int | None = DEFAULTS["batch_size"],
        lr: float | None = DEFAULTS["lr"],
        weight_decay: float = DEFAULTS["weight_decay"],
        sparse_updates: bool | Literal["auto"] = DEFAULTS["sparse_updates"],
        schedule: Schedule = DEFAULTS["schedule"],
        warmup_epochs: float = DEFAULTS["warmup_epochs"],
        grad_clip: float | None = DEFAULTS["grad_clip"],
        val_fraction: float = DEFAULTS["val_fraction"],
        patience: int | None = DEFAULTS["patience"],
        time_limit: float | None = DEFAULTS["time_limit"],
        abandon_below: float | None = DEFAULTS["abandon_below"],
        refit: bool = DEFAULTS["refit"],
        precision: Precision = DEFAULTS["precision"],
        n_models: int = DEFAULTS["n_models"],
        warm_start: bool = DEFAULTS["warm_start"],
        seed: int = DEFAULTS["seed"],
        device: str = DEFAULTS["device"],
        propensity: tuple[float, float] = DEFAULTS["propensity"],
        duplicate_cosine: float | None = DEFAULTS["duplicate_cosine"],
        progress: bool | None = DEFAULTS["progress"],
        workers: int = DEFAULTS["workers"],
        ray_address: str | None = DEFAULTS["ray_address"],
        n_jobs: int | None = DEFAULTS["n_jobs"],
        random_state: int | None = DEFAULTS["random_state"],
        time_budget: float = DEFAULTS["time_budget"],
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
        self.time_limit = time_limit
        self.abandon_below = abandon_below
        self.refit = refit
        self.precision = precision
        self.n_models = n_models
        self.warm_start = warm_start
        self.seed = seed
        self.device = device
        self.propensity = propensity
        self.duplicate_cosine = duplicate_cosine
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
        return registry.head_setting(self.get_params(), name)

    @property
    def random_seed(self) -> int:
        """The seed of every random stream: ``random_state`` when given, else ``seed``."""
        return registry.random_seed(self.get_params())

    @property
    def n_workers(self) -> int:
        """Parallel local processes: ``n_jobs`` when given (``-1``: one per CPU core), else ``workers``."""
        return registry.n_workers(self.get_params())

    def member_seeds(self) -> list[int]:
        """The seed of each network ``fit`` trains: ``seed + 100·m`` for member ``m``."""
        return member_seeds(self.random_seed, self.n_models)

    def train_config(self, seed: int | None = None) -> TrainConfig:
        """The trainer's settings (:class:`~holoxmc.train.TrainConfig`) of this estimator."""
        return registry.train_config(self.get_params(), seed)

    def fit_settings(self) -> FitSettings:
        """These settings resolved and frozen, as the model families read them (the head's
        defaults where a setting is ``None``, the trainer's settings, the seed and workers that
        the scikit-learn names choose)."""
        return registry.fit_settings(self.get_params())

    def _validate_params(self) -> Any:
        """Every setting against :data:`~holoxmc.settings.ESTIMATOR_CONSTRAINTS` and the
        head's family (:func:`~holoxmc.models.registry.check_settings`), before any data is read.

        Returns:
            the head's :class:`~holoxmc.models.registry.Family`.
        """
        kind = registry.check_settings(self.get_params(), self._defaults())
        check_device(self.device)  # one that cannot hold the model (meta, an unknown type) before any data
        return kind

    @classmethod
    def _defaults(cls) -> dict[str, Any]:
        """Every keyword's default (of this class's ``__init__``)."""
        return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()}

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, Y: Any, X_val: Any = None, Y_val: Any = None, *, run_dir: str | Path | None = None,
            resume: bool = False, word_vectors: Any = None, classes: Sequence[str] | None = None,
            groups: Any = None) -> "XMCClassifier":
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
            classes: the names of Y's columns (a ``MultiLabelBinarizer``'s ``classes_``), kept
                in ``classes_``; with label-name lists as Y (``[["sports", "news"], ...]``)
                they are the sorted names, or these when given.
            groups: one value per row of X (its source, author, product family): every
                validation split carved from X (the model choice, the epoch, ``C``, the mix
                weight, ``predict``'s rule) keeps each group on one side. Without it, rows of
                near-identical features are grouped (``duplicate_cosine``). ``groups_`` says
                what was kept apart, ``validation_`` what the held-out rows scored.

        Returns:
            self.

        Raises:
            InputError: a bad setting or input, or a model whose sizes cannot fit in memory,
                before any training.
        """
        if classes is None and self.warm_start and self._names() is not None:
            classes = self.classes_.tolist()  # a warm start keeps the fitted columns
        Y, Y_val, names = self._label_input(Y, Y_val, classes)
        if self.head in SELECTORS:
            streamed_fit_data(self, X, Y, X_val, Y_val, streaming=streaming_heads())  # refuses a shard store
            self._fit_selected(X, Y, X_val, Y_val, groups)
            return self._with_labels(names)
        kind = self._validate_params()
        streamed = streamed_fit_data(self, X, Y, X_val, Y_val, streaming=streaming_heads())  # None: in memory
        X, Y, X_val, Y_val = streamed or check_fit_data(X, Y, X_val, Y_val, self.backbone)
        n_features, n_labels = int(X.shape[1]) if streamed else input_size(X), int(Y.shape[1])
        check_fit_memory(self.get_params(), n_features)  # D's per-feature memory, before any of it is allocated
        check_label_statistics(n_labels)
        settings = self.fit_settings()
        plan = kind.plan(settings, n_labels, n_features)
        if word_vectors is not None:  # rows of a text backbone's embedding table
            plan = with_word_vectors(plan, word_vectors)
        warm = self._warm_model(n_features, n_labels)
        if streamed and groups is not None:
            raise InputError("groups keep rows of one group on one side of a split carved in memory; a fit streamed "
                             "from a shard store carves none: give X_val, Y_val, or load the rows")
        codes = None if streamed else self._row_groups(X, X_val, groups, registry.carves_split(settings))
        self.n_features_, self.n_labels_, self.n_features_in_ = n_features, n_labels, int(X.shape[1])
        self.inv_prop_ = np.asarray(inverse_propensity(Y, *self.propensity), dtype=np.float64)
        watch = Stopwatch(f"fit {self.head}")  # the model's fit and predict's rule (holoxmc.timing.recording)
        model, results = kind.fit(settings, plan, FitData(X, Y, X_val, Y_val, run_dir, resume, warm, codes))
        self._set_model(model, results)
        watch.lap("model")
        self.label_rule_ = self._choose_rule(X, Y, X_val, Y_val, streamed is not None, codes,
                                             registry.holds_rows_out(settings))
        watch.lap("label_rule")
        watch.done()
        return self._with_labels(names)

    def _warm_model(self, n_features: int, n_labels: int) -> FittedModel | None:
        """The fitted model a ``warm_start`` fit starts from (``None``: a fresh fit).

        Raises:
            InputError: a fitted model of another head or of other sizes than this fit's.
        """
        model = vars(self).get("model_")
        if not self.warm_start or model is None:
            return None
        if (self.head_, self.n_features_, self.n_labels_) != (self.head, n_features, n_labels):
            raise InputError(f"warm_start continues the fitted {self.head_!r} model of {self.n_features_} features "
                             f"and {self.n_labels_} labels; this fit has head {self.head!r}, {n_features} features "
                             f"and {n_labels} labels (set warm_start=False to start afresh)")
        return model

    def _trains_networks(self) -> bool:
        """Whether :meth:`partial_fit` applies: the head trains networks that can warm-start."""
        if "warm_start" not in family(self.head).settings:
            raise AttributeError(f"partial_fit trains the network heads (hrr, dense) one epoch at a time, not head "
                                 f"{self.head!r}; the linear and re-rank models take new labels with add_labels")
        return True

    @available_if(_trains_networks)
    def partial_fit(self, X: Any, Y: Any, classes: Sequence[str] | None = None) -> "XMCClassifier":
        """One epoch over ``(X, Y)``: the first call fits a fresh network, each later one
        continues from the fitted weights (``warm_start``), for data that arrives in batches
        or does not fit in memory at once (``head="hrr"`` or ``"dense"``).

        Each call trains one epoch on every given row, with no held-out share, no schedule
        (a constant learning rate ``lr``) and a fresh optimiser state; ``predict``'s rule is
        chosen on the call's rows. ``Y`` has the fitted label columns (names: the fitted
        ``classes_``). ``tests/test_incremental.py`` measures epochs of ``partial_fit`` against
        the same epochs of one ``fit``.

        Args:
            X, Y: a batch of rows and their labels, as :meth:`fit` takes them.
            classes: the label names of ``Y``'s columns (the first call; later calls keep them).

        Returns:
            self.

        Example:
            >>> clf = XMCClassifier(head="dense", hidden=(16,), progress=False)  # doctest: +SKIP
            >>> for X_part, Y_part in batches:  # doctest: +SKIP
            ...     clf.partial_fit(X_part, Y_part)
        """
        once = {"epochs": 1, "val_fraction": 0.0, "patience": None, "refit": False, "schedule": "none",
                "warmup_epochs": 0.0, "warm_start": vars(self).get("model_") is not None}
        kept = {name: getattr(self, name) for name in once}
        self.set_params(**once)
        try:
            return self.fit(X, Y, classes=classes)
        finally:
            self.set_params(**kept)

    def _grows_labels(self) -> bool:
        """Whether :meth:`add_labels` applies: the fitted (or, unfitted, the chosen) head's
        family appends labels."""
        head = getattr(self, "head_", self.head)
        if head not in FAMILIES or FAMILIES[head].add_labels is None:
            raise AttributeError(f"add_labels appends labels to a fitted linear or re-rank model, not to head {head!r}; "
                                 "the networks fit again (warm_start) with every label")
        return True

    @available_if(_grows_labels)
    def add_labels(self, X: Any, Y: Any, *, classes: Sequence[str] | None = None) -> "XMCClassifier":
        """Append new labels to a fitted linear or re-rank model without retraining the others:
        one per-label scorer per new label, trained on ``X`` (the training rows, or any rows
        labelled for the new labels) as the fit trains a label; the existing labels' scorers,
        the linear model's calibration, the re-rank mix weight and ``predict``'s rule stay.

        The linear model's new labels are exactly those a fit of every label with the same
        ``C`` trains; the re-rank model's index grows and the new labels train against its
        shortlists (see :func:`holoxmc.models.rerank.fit.add_labels` for what differs from a
        full fit, and ``tests/test_incremental.py`` for the measured difference).

        Args:
            X: ``(n, D)`` rows of the fitted features.
            Y: their labels of the new labels only: an ``(n, L_new)`` matrix or label-id lists
                (ids ``0 .. L_new - 1``), or, for a model fitted on names, lists of the new names.
            classes: the new labels' names (a model fitted on names; default: the sorted names of ``Y``).

        Returns:
            self, with ``n_labels_``, ``classes_`` and ``inv_prop_`` grown.

        Example:
            >>> clf = XMCClassifier(head="linear").fit(X, [["sports"], ["news"]])  # doctest: +SKIP
            >>> clf.add_labels(X, [["politics"], []]).classes_.tolist()  # doctest: +SKIP
            ['news', 'sports', 'politics']
        """
        self._check_fitted()
        if self.multiclass_:
            raise InputError("add_labels appends labels to a multi-label model; this one was fitted on one class "
                             "per row: fit it again with every class")
        X = self._check_X(X)
        if self._names() is not None:
            Y, names = encode_names(Y, None if classes is None else check_classes(classes))
            known = sorted(set(names) & set(self.classes_.tolist()))
            if known:
                raise InputError(f"add_labels: {known[:3]} are labels of the model already")
        elif holds_names(Y) or classes is not None:
            raise InputError("this model was fitted on label ids: give the new labels' ids (0 .. L_new - 1) or matrix")
        else:
            Y, names = check_Y(Y, X.shape[0], None), None
        grow = FAMILIES[self.head_].add_labels
        assert grow is not None  # _grows_labels
        self.model_ = grow(self, X, Y)
        inv_prop = inverse_propensity(Y, *self.propensity)
        self.inv_prop_ = np.concatenate([self.inv_prop_, np.asarray(inv_prop, dtype=np.float64)])
        self.n_labels_ = int(self.n_labels_ + Y.shape[1])
        self.classes_ = np.arange(self.n_labels_) if names is None else np.concatenate([self.classes_, names])
        return self

    def _row_groups(self, X: Any, X_val: Any, groups: Any, carves: bool) -> np.ndarray | None:
        """The group codes of the training rows that the fit's carved validation split keeps
        apart: ``groups`` (checked) when given; else, on sparse features, the near-duplicate
        groups of ``duplicate_cosine``; ``None`` where the fit carves no split (``X_val``
        given, or ``carves`` false: the re-rank model, a fixed ``C``). Sets ``groups_``."""
        codes = None if groups is None else check_groups(groups, X.shape[0])
        if X_val is not None or not carves:
            self.groups_ = summarise(np.arange(X.shape[0]), "none: no validation split carved")
            return None
        if codes is not None:
            source = "groups"
        elif self.duplicate_cosine is not None and self.backbone == "fc":
            codes, source = near_duplicate_groups(X, float(self.duplicate_cosine)), "near-duplicates"
        else:
            self.groups_ = summarise(np.arange(X.shape[0]), "none")
            return None
        self.groups_ = summarise(codes, source)
        return codes

    def _fit_selected(self, X: Any, Y: Any, X_val: Any, Y_val: Any, groups: Any = None) -> "XMCClassifier":
        """``head="auto"``: fit the model :func:`~holoxmc.auto.fit_auto` chooses and
        serve it; ``selection_`` lists the candidates tried, ``head_`` the one kept."""
        check_params(self.get_params(), ESTIMATOR_CONSTRAINTS, SETTING_NAMES)
        check_device(self.device)
        check_auto_params(self)
        X, Y, X_val, Y_val = check_fit_data(X, Y, X_val, Y_val, self.backbone)
        check_fit_memory(self.get_params(), input_size(X))  # its first candidate's, before the split
        codes = self._row_groups(X, X_val, groups, carves=True)  # auto draws its own split
        winner, self.selection_ = SELECTORS[self.head].fit(self, X, Y, X_val, Y_val, groups=codes)
        for name in ("n_features_", "n_labels_", "n_features_in_", "inv_prop_", "label_rule_", "validation_"):
            setattr(self, name, getattr(winner, name))
        self._set_model(winner.model_, winner.fit_results_, head=winner.head)
        return self

    def _set_model(self, model: FittedModel, results: list[FitResult], head: str | None = None) -> None:
        self.head_ = self.head if head is None else head
        self.model_ = model
        self.fit_results_ = results
        self.fit_result_ = results[0]

    # ------------------------------------------------------------------ labels and predict's rule
    def _label_input(self, Y: Any, Y_val: Any, classes: Any) -> tuple[Any, Any, np.ndarray | None]:
        """``Y``, ``Y_val`` with label-name lists and 1-D class targets encoded
        (:mod:`holoxmc.labels`), and the names of the columns (``None``: integer label ids).
        Sets ``multiclass_``: whether ``Y`` is a 1-D target of one class per row."""
        if Y is None:
            raise InputError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        Y, Y_val = (np.asarray(y) if array_like(y) else y for y in (Y, Y_val))
        self.multiclass_ = is_single_label(Y)
        if self.multiclass_:  # scikit-learn's binary / multiclass y: one class per row, classes_ its values
            Y, single = encode_single(Y, classes)
            return Y, (None if Y_val is None else encode_single(Y_val, single)[0]), single
        names: np.ndarray | None = None if classes is None else check_classes(classes)
        if holds_names(Y):
            Y, names = encode_names(Y, names)
        elif names is not None and getattr(Y, "ndim", 0) == 2 and Y.shape[1] != len(names):
            raise InputError(f"classes has {len(names)} names for {Y.shape[1]} label columns")
        if Y_val is not None and holds_names(Y_val):
            if names is None:
                raise InputError("Y_val holds label names and Y holds label ids: give both in one form")
            Y_val, _ = encode_names(Y_val, names)
        return Y, Y_val, names

    def _with_labels(self, names: np.ndarray | None) -> "XMCClassifier":
        """Set ``classes_``: the label names, or ``0 .. L-1`` (:func:`holoxmc.serving.with_labels`)."""
        return serving.with_labels(self, names)

    def _label_matrix(self, Y: Any) -> Any:
        """``Y`` of label-name lists (or, for a model fitted on one class per row, a 1-D target)
        as the ``(n, L)`` matrix of ``classes_``; any other form unchanged."""
        return serving.label_matrix(self, Y)

    def _names(self) -> np.ndarray | None:
        """The label names of a model fitted on names (``None``: label ids, or classes of a 1-D target)."""
        return serving.label_names(self)

    def _choose_rule(self, X: Any, Y: Any, X_val: Any, Y_val: Any, streamed: bool,
                     groups: np.ndarray | None = None, held_out: bool = False) -> label_sets.LabelRule:
        """The rule of :meth:`predict`, chosen on validation rows: ``(X_val, Y_val)`` when
        given, else the ``val_fraction`` share drawn with the seed and ``groups`` where the fit
        held it out (``held_out``: :func:`~holoxmc.models.registry.holds_rows_out`), else
        every training row (``label_rule_.source`` says which; ``head="auto"`` keeps the rule
        its selection run chose on held-out rows).
        A fit streamed from a shard store keeps the top-1 rule. Sets ``validation_``: the
        held-out rows' P@1 (``None`` when the rule was chosen on training rows)."""
        self.validation_ = None
        if streamed:
            return label_sets.LabelRule(source="streamed fit: top-1")
        if X_val is not None:
            rows, source = (X_val, Y_val), "X_val"
        elif held_out and X.shape[0] >= 2:
            _, held = split_validation(X.shape[0], float(self.val_fraction), self.random_seed, groups)
            rows, source = (X[held], Y[held]), "val_fraction"
        else:
            rows, source = (X, Y), "training rows"
        if source != "training rows":
            top = self.model_.predict_topk(rows[0], 1)[0]
            p1 = evaluate(pad_predictions(top, 1), check_Y(rows[1], rows[0].shape[0], self.n_labels_), ks=(1,))["P@1"]
            self.validation_ = {"P@1": float(p1), "rows": int(rows[0].shape[0]), "source": source}
        return label_sets.fit_label_rule(self.model_, *rows, self.n_labels_, seed=self.random_seed, source=source)

    def _saved_labels(self) -> dict[str, Any]:
        """``config.json``'s ``label_rule`` and (fitted on names) ``classes``."""
        saved: dict[str, Any] = {}
        if hasattr(self, "label_rule_"):
            saved["label_rule"] = self.label_rule_.as_dict()
        if self._names() is not None:
            saved["classes"] = self.classes_.tolist()
        if getattr(self, "multiclass_", False):  # one class per row: predict gives classes_ entries
            saved["multiclass_classes"] = self.classes_.tolist()
        return saved

    def __sklearn_tags__(self) -> Any:
        """A multilabel classifier (``Y`` is ``(n, L)``) of sparse or dense ``X``."""
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        tags.input_tags.sparse = True
        return tags

    def new_network(self, n_labels: int, input_size: int, seed: int | None = None) -> Any:
        """A freshly initialised network of this estimator's configuration (``hrr`` and
        ``dense`` heads), seeded with ``seed`` (by default the estimator's): what ``fit``
        trains, for benchmarks that drive the trainer themselves."""
        plan = self._validate_params().plan(self.fit_settings(), n_labels, input_size)
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

    network_ = property(lambda self: self._served("network_"),
                        doc="The trained ``Network``, or ``Ensemble`` when ``n_models > 1`` (``hrr``, ``dense``).")
    solar_ = property(lambda self: self._served("solar_"),
                      doc="The :class:`~holoxmc.models.solar.model.SolarModel` (``head=\"solar\"``).")
    linear_ = property(lambda self: self._served("linear_"),
                       doc="The :class:`~holoxmc.models.linear.model.LinearModel` (``head=\"linear\"``).")
    rerank_ = property(lambda self: self._served("rerank_"),
                       doc="The :class:`~holoxmc.models.rerank.model.RerankModel` (``head=\"rerank\"``).")

    def n_parameters(self) -> dict[str, int]:
        """``{"total": ..., "output_layer": ...}`` trainable-parameter counts."""
        self._check_fitted()
        return self.model_.parameter_counts()

    # ------------------------------------------------------------------ inference
    def predict(self, X: Any, k: int | None = None, *, batch_size: int = 1024) -> sp.csr_matrix:
        """Each row's label set, as scikit-learn's multilabel indicator: a CSR ``(n, L)`` 0/1
        matrix whose columns are ``classes_`` (``f1_score(Y, clf.predict(X), average="samples")``).

        The rule (``label_rule_``, chosen during ``fit`` on validation rows, see
        ``docs/guide/sklearn.md``): every label whose calibrated probability
        (:meth:`predict_proba`) reaches one global threshold, the one of
        :data:`~holoxmc.models.thresholds.RULE_THRESHOLDS` with the best samples-F1 on those
        rows, and a row left empty gets its most probable label when that scored better there.
        A model saved without a rule (before 0.2) gives each row its top-1 label.

        ``predict(X, k)`` returns :meth:`predict_topk`'s ``(indices, scores)``, with a
        ``DeprecationWarning``, for one release. A model fitted on a 1-D ``y`` (one class per
        row, scikit-learn's binary or multiclass target) predicts a 1-D array of ``classes_``
        entries, each row's most probable class.

        Shapes:
            X: ``(n, D)`` → CSR ``(n, L)`` int64, column indices sorted (``(n,)`` for a 1-D ``y``).
        """
        if k is not None:
            warnings.warn("predict(X, k) returning (indices, scores) is deprecated and goes in 0.3: use "
                          "predict_topk(X, k); predict(X) returns the label sets, a CSR (n, L) 0/1 indicator",
                          DeprecationWarning, stacklevel=2)
            return self.predict_topk(X, k, batch_size=batch_size)
        self._check_fitted()
        batch_size = check_batch_size(batch_size)
        if self.multiclass_:  # fitted on one class per row: each row's most probable class
            return self.classes_[self.predict_topk(X, 1, batch_size=batch_size)[0][:, 0]]
        rule = getattr(self, "label_rule_", label_sets.LabelRule())
        return label_sets.label_sets(self.model_, self._check_X(X), rule, self.n_labels_, batch_size)

    def predict_labels(self, X: Any, *, batch_size: int = 1024) -> list[list[Any]]:
        """Each row's label set of :meth:`predict` as a list of ``classes_`` entries: label
        names for a model fitted on names, else label ids (``MultiLabelBinarizer.inverse_transform``'s form).

        Example:
            >>> clf.fit(X, [["sports", "news"], ["tech"]]).predict_labels(X)  # doctest: +SKIP
            [['news', 'sports'], ['tech']]
        """
        predicted = self.predict(X, batch_size=batch_size)
        if self.multiclass_:  # one class per row
            return [[value] for value in predicted.tolist()]
        return names_of(self.classes_, predicted)

    def predict_topk(self, X: Any, k: int = 5, *, batch_size: int = 1024,
                     names: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` labels per row, best first, and their scores. SOLAR ranks only the labels
        of its inverted-index candidates: ranks they cannot fill hold label ``-1`` (``None``
        with ``names``) and score :data:`~holoxmc.models.thresholds.SCORE_FLOOR`
        (:mod:`holoxmc.metrics` counts them as misses). Scores are finite: ``±inf`` become
        ``SCORE_FLOOR`` / ``SCORE_CEILING``.

        Args:
            names: give ``classes_`` entries (label names) in an object array instead of column ids.

        Shapes:
            X: ``(n, D)`` → indices ``(n, k)`` int64 (object with ``names``), scores ``(n, k)`` float32.
        """
        return serving.predict_topk(self, X, k, batch_size=batch_size, names=names)

    def predict_proba(self, X: Any, *, batch_size: int = 1024) -> np.ndarray:
        """Every label's calibrated probability for every row: an ``(n, L)`` float32 array in
        ``[0, 1]``, columns ``classes_``.

        ``sigmoid(a · confidence + b)`` of the model's confidence (:meth:`predict_above`), with
        ``(a, b)`` fitted by Platt scaling on the validation rows that chose :meth:`predict`'s
        rule (``label_rule_``); a model saved without a rule (before 0.2) gives its confidence
        clipped to ``[0, 1]``.

        Raises:
            InputError: ``n · L`` above ``MAX_DENSE_SCORES``: use :meth:`predict_topk` (or fewer rows).
        """
        self._check_fitted()
        batch_size = check_batch_size(batch_size)
        rule = getattr(self, "label_rule_", label_sets.LabelRule())
        proba = label_sets.probabilities(self.model_, self._check_X(X), rule, self.n_labels_, batch_size,
                                         MAX_DENSE_SCORES)
        if self.multiclass_:  # one class per row: each row sums to 1
            totals = proba.sum(1, keepdims=True)
            proba = np.divide(proba, totals, out=np.full_like(proba, 1.0 / proba.shape[1]), where=totals > 0)
        return proba

    def predict_above(self, X: Any, threshold: float = 0.5, *, relative: bool = True,
                      batch_size: int = 1024) -> sp.csr_matrix:
        """Every label whose confidence exceeds ``threshold`` times the row's best confidence
        (``relative``, the default) or ``threshold`` itself: a label set of its own size per
        row, as a CSR matrix of those confidences.

        The confidence is the HRR head's ``cos(p* ⊗ ŝ, c_i)``, the dense head's
        ``sigmoid(logit)``, the linear model's Platt-scaled ``sigmoid(a · margin + b)``, SOLAR's
        mean bucket probability over its K chunks, an ensemble's mean. The cut is relative by
        default because a cosine-trained network answers ``1/√k`` for each of ``k`` present
        labels, not the ≈ 1 of the HRR paper's Appendix H cut at 0.5 (``docs/guide/models.md``).

        Shapes:
            X: ``(n, D)`` → CSR ``(n, L)`` float32, column indices sorted.

        Example:
            >>> clf.predict_above(X_test, 0.5).getrow(0).indices  # doctest: +SKIP
            array([  3,  17, 120], dtype=int32)
        """
        return label_sets.predict_above(self, X, threshold, relative=relative, batch_size=batch_size)

    def tune_threshold(self, X_val: Any, Y_val: Any, thresholds: Sequence[float] = THRESHOLDS, *, relative: bool = True,
                       metric: str = "micro-F1") -> tuple[float, dict[float, dict[str, float]]]:
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

        Refuses when ``n · L`` exceeds ``MAX_DENSE_SCORES``: use :meth:`predict_topk`
        for large label spaces. Finite: a ``-inf`` score (the linear model's label that no
        training row has) is :data:`~holoxmc.models.thresholds.SCORE_FLOOR` (``-1e9``), ``+inf``
        ``SCORE_CEILING``. For SOLAR, a label's score is the configured scoring summed
        over all K chunks (every label, no inverted-index candidate filtering); for the linear
        model, every label's SVM margin; for an ensemble (``n_models > 1``), the members' mean score.
        """
        self._check_fitted()
        batch_size = check_batch_size(batch_size)
        scores = label_sets.finite_scores(
            dense_scores(self.model_, self._check_X(X), self.n_labels_, batch_size, MAX_DENSE_SCORES))
        if self.multiclass_ and self.n_labels_ == 2:  # binary y: scikit-learn's (n,) score of classes_[1]
            return scores[:, 1] - scores[:, 0]
        return scores

    def evaluate(self, X: Any, Y: Any, *, ks: Sequence[int] = (1, 2, 3, 4, 5),
                 recall_ks: Sequence[int] = ()) -> dict[str, float]:
        """P@k, nDCG@k, Recall@k, PSP@k, PSnDCG@k (percent) of the top-k predictions against
        ``Y`` (PSP with the training labels' propensities); ``recall_ks`` adds Recall at
        further cut-offs (e.g. ``(100,)``, SOLAR's Recall@100), every metric then read from
        one top-``max(ks + recall_ks)`` prediction (ranks past the model's labels are misses)."""
        return serving.evaluate(self, X, Y, ks=ks, recall_ks=recall_ks)

    def score(self, X: Any, Y: Any, *, metric: str = "P@1") -> float:
        """One metric of the top-k predictions against ``Y``, in percent (higher is better):
        ``"P@1"`` by default, any ``"P@k"``, ``"nDCG@k"``, ``"PSP@k"`` or ``"PSnDCG@k"``.
        The one number scikit-learn's model selection (``cross_val_score``, ``GridSearchCV``)
        expects; :meth:`evaluate` returns them all.
        """
        return float(self.evaluate(X, Y, ks=(check_score_metric(metric),))[metric])

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
        """``X`` as the model reads it (:func:`~holoxmc.validation.check_input`), of ``known``
        features (or vocabulary), by default the fitted model's (any while ``fitting``)."""
        return serving.check_X(self, X, fitting=fitting, known=known)

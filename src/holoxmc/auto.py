"""``head="auto"``: choose the model on a validation split, within a time budget.

The candidates train in :data:`CANDIDATES` order, each at its library defaults, on the
training rows less a seeded validation share (or on a given validation set): the
shortlist-and-re-rank model first (fast at any label count: each label trains on its
shortlist's rows only), then the FC network while the time budget lasts, on data whose
rows carry many labels only (:func:`skipped_by_rule`). A candidate starts only when the
seconds spent plus its expected cost (:func:`expected_seconds`: the longest candidate measured
so far) stay within the budget; the first candidate always runs. A
network candidate trains with what is left of the budget as its ``time_limit`` (it stops
after the epoch that crosses it and keeps its best epoch, so it overruns the budget by at
most one epoch) and the leader's validation P@1 as its ``abandon_below`` (it stops as soon as
its own curve, extrapolated optimistically, can no longer reach it:
:func:`holoxmc.train.trainer.reachable`).

The best by validation P@1 (ties: the earlier) is then made a model of every row, the
validation rows included, without a second training where its family can
(:attr:`holoxmc.models.registry.Family.finish`: the re-rank model's index is rebuilt from
every row and only its labels with a positive among the held-out rows train again,
:func:`holoxmc.models.rerank.fit.absorb_rows`; a network trains one epoch more on every row
from its best epoch's weights), else trained again on every row with the setting its
validation run chose (:func:`refit_settings`; no candidate of :data:`CANDIDATES` takes that
path today: an ensemble would). That last step comes on top of the budget.

Example:
    >>> [name for name, _ in CANDIDATES]
    ['rerank', 'fc']
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from holoxmc.errors import InputError
from holoxmc.models.registry import family
from holoxmc.presets import FC_CANDIDATE, fc_candidate_runs
from holoxmc.settings import untaken_defaults

__all__ = ["AUTO", "expected_seconds", "skipped_by_rule", "Selector", "SELECTORS", "CANDIDATES", "Trial", "SHARED_SETTINGS",
           "check_auto_params", "fit_auto", "read_trials", "refit_settings", "selection_table"]

#: The head name that selects a model.
AUTO = "auto"
#: ``(model name, estimator keywords)`` tried in this order.
#: The re-rank model replaced the one-vs-all linear model: on the panel's sets its validation
#: P@1 was at or above the linear model's on five of six in a third to a tenth of the time, and
#: the linear model cannot finish at L = 10,000 in minutes (on the sixth, Delicious, FC leads
#: both). HRR-FC never led validation, so it only cost time. The tuning log, "The candidates of
#: head='auto'", has the runs.
CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("rerank", {"head": "rerank"}),
    ("fc", {"head": "dense"}),
)
#: Settings ``head="auto"`` passes to every candidate; any other stays at the candidate's default.
SHARED_SETTINGS = frozenset({"seed", "random_state", "device", "propensity", "progress", "workers", "n_jobs",
                             "ray_address", "val_fraction", "time_budget", "backbone", "duplicate_cosine"})


@dataclass
class Trial:
    """One candidate of a selection: its validation P@1 (``None`` when skipped) and seconds."""

    model: str
    val_p1: float | None
    seconds: float
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def read_trials(value: Any, where: str) -> list[Trial]:
    """The ``"selection"`` of a saved model's ``config.json`` as :class:`Trial` records.

    Raises:
        InputError: anything but a list of ``{"model", "val_p1", "seconds", "note"}`` records.

    Example:
        >>> read_trials([{"model": "linear", "val_p1": 60.0, "seconds": 1.5, "note": ""}], "config.json")
        [Trial(model='linear', val_p1=60.0, seconds=1.5, note='')]
    """
    fields = {"model", "val_p1", "seconds", "note"}
    if not isinstance(value, list) or not all(isinstance(trial, dict) and set(trial) == fields for trial in value):
        raise InputError(f"{where}: 'selection' must be a list of {sorted(fields)} records")
    trials = [Trial(str(t["model"]), None if t["val_p1"] is None else float(t["val_p1"]), float(t["seconds"]),
                    str(t["note"])) for t in value]
    return trials


def check_auto_params(clf: Any) -> None:
    """Refuse settings that ``head="auto"`` would not pass on (each candidate trains at its defaults).

    Raises:
        InputError: a changed setting outside :data:`SHARED_SETTINGS`, or a backbone other than ``fc``.
    """
    if clf.backbone != "fc":
        raise InputError(f"head='auto' chooses among sparse-feature models (backbone 'fc'), not {clf.backbone!r}")
    defaults = type(clf)().get_params()
    changed = sorted(key for key, value in clf.get_params().items()
                     if key not in SHARED_SETTINGS | {"head"} and value != defaults[key])
    if changed:
        raise InputError(f"head='auto' trains each candidate at its library defaults, so {changed} would be ignored: "
                         "choose the model with head= (--model) to set them")


def _held_rows(clf: Any, X: Any, groups: np.ndarray | None = None) -> np.ndarray:
    """``(n,)`` booleans: the rows of ``auto``'s own validation split (``val_fraction``,
    seeded, whole ``groups`` to one side)."""
    from holoxmc.train.trainer import split_validation

    if clf.val_fraction <= 0:
        raise InputError("head='auto' chooses on a validation split: val_fraction must be above 0 "
                         "(or give X_val, Y_val)")
    if X.shape[0] < 2:  # one row cannot be both trained on and held out
        raise InputError(f"head='auto' chooses its model on held-out training rows, so it needs at least 2 rows; "
                         f"got {X.shape[0]}: give more rows, X_val and Y_val, or choose the model (head='rerank' or "
                         "'dense'; --model rerank or fc)")
    held = np.zeros(X.shape[0], bool)
    held[split_validation(X.shape[0], clf.val_fraction, clf.random_seed, groups)[1]] = True
    return held


def skipped_by_rule(name: str, Y: sp.csr_matrix) -> str:
    """Why candidate ``name`` does not train, or ``""``: the FC network only where the rows
    carry at least :data:`holoxmc.presets.FC_CANDIDATE` ``["min_labels_per_row"]`` labels on
    average (:func:`holoxmc.presets.fc_candidate_runs`), the only data on which it led a
    selection's validation rows.

    Args:
        name: the candidate (:data:`CANDIDATES`); Y: the labels of the rows it would fit on.

    Example:
        >>> Y = sp.csr_matrix(np.eye(4, dtype=np.float32))
        >>> skipped_by_rule("fc", Y)
        'skipped (1.0 labels a row: FC led selections only where rows carry 8.6 or more)'
        >>> skipped_by_rule("rerank", Y)
        ''
    """
    if name != "fc" or fc_candidate_runs(Y.nnz, Y.shape[0]):
        return ""
    return (f"skipped ({Y.nnz / max(Y.shape[0], 1):.1f} labels a row: FC led selections only where rows carry "
            f"{FC_CANDIDATE['min_labels_per_row']:g} or more)")


def expected_seconds(measured: list[float]) -> float:
    """The cost expected of the next candidate from the ``measured`` seconds of those
    trained so far: the longest of them (each candidate after the first is a
    network, dearer than what came before; 0 before any was measured).

    Example:
        >>> expected_seconds([0.4, 2.5]), expected_seconds([])
        (2.5, 0.0)
    """
    return max(measured, default=0.0)


def fit_auto(clf: Any, X: Any, Y: sp.csr_matrix, X_val: Any = None, Y_val: Any = None, *,
             groups: np.ndarray | None = None) -> tuple[Any, list[Trial]]:
    """Choose, refit and return the winning estimator for ``clf`` (``head="auto"``).

    Args:
        clf: the ``XMCClassifier`` with ``head="auto"`` (left unfitted).
        X, Y: the checked training data; X_val, Y_val: a validation set, or ``None`` to carve
            ``clf.val_fraction`` of the training rows (seeded by ``clf``'s seed), whole
            ``groups`` (``(n,)`` codes) to one side.

    Returns:
        ``(winner, trials)``: a fitted estimator of the chosen head, and one :class:`Trial`
        per candidate in order.
    """
    started = time.perf_counter()
    if X_val is None:
        held = _held_rows(clf, X, groups)
        X_fit, Y_fit, X_check, Y_check = X[~held], Y[~held], X[held], Y[held]
    else:
        X_fit, Y_fit, X_check, Y_check = X, Y, X_val, Y_val
        held = np.repeat([False, True], [X.shape[0], X_val.shape[0]])  # of the rows stacked for the winner
    shared = {key: value for key, value in clf.get_params().items() if key in SHARED_SETTINGS - {"time_budget"}}
    trials: list[Trial] = []
    best: Trial | None = None
    chosen: Any = None  # only the leader's model is held, one candidate's at a time
    for name, keywords in CANDIDATES:
        rule = skipped_by_rule(name, Y_fit) if best is not None else ""  # the first candidate always runs
        if rule:
            trials.append(Trial(name, None, 0.0, rule))
            continue
        spent = time.perf_counter() - started
        expected = expected_seconds([trial.seconds for trial in trials if trial.val_p1 is not None])
        if trials and spent + expected > clf.time_budget:
            trials.append(Trial(name, None, 0.0, f"skipped (budget: {spent:.1f} s spent, about {expected:.1f} s "
                                                 f"more expected, of {clf.time_budget:g} s)"))
            continue
        limit = _limits(keywords, clf.time_budget - spent, best)
        candidate = _candidate(clf, shared | keywords | limit)
        begun = time.perf_counter()
        with keeping_fit_rows():
            candidate.fit(X_fit, Y_fit, X_check, Y_check)
        p1 = candidate.score(X_check, Y_check)
        trials.append(Trial(name, p1, time.perf_counter() - begun, _stop_note(candidate, limit)))
        if best is None or p1 > (best.val_p1 or 0.0):  # ties: the earlier stays
            best, chosen = trials[-1], candidate
        del candidate
    assert best is not None  # the first candidate always runs
    X_all, Y_all = (X, Y) if X_val is None else (_stack(X, X_val), sp.vstack([Y, Y_val], format="csr"))
    winner, how = _finish(clf, chosen, X_all, Y_all, held, shared | dict(CANDIDATES)[best.model],
                          groups if X_val is None else None)
    source = "X_val" if X_val is not None else "val_fraction"  # the candidates saw auto's own split as X_val
    winner.label_rule_ = replace(chosen.label_rule_, source=source)  # chosen on the held-out rows, which the
    winner.validation_ = chosen.validation_ | {"source": source}  # refit trained on; what those rows scored
    best.note = "; ".join(note for note in (best.note, f"chosen, {how}") if note)
    return winner, trials


def _finish(clf: Any, chosen: Any, X_all: Any, Y_all: sp.csr_matrix, held: np.ndarray, params: dict[str, Any],
            groups: np.ndarray | None) -> tuple[Any, str]:
    """The winner on every row, and how it got there: its selection run finished on the
    held-out rows without a second training where its family can
    (:attr:`~holoxmc.models.registry.Family.finish`), else refit on every row with what its
    validation rows chose (:func:`refit_settings`)."""
    from holoxmc.timing import Stopwatch

    finish = family(chosen.head).finish
    watch = Stopwatch(f"finish {chosen.head}")  # holoxmc.timing.recording lists it
    model = None if finish is None else finish(chosen, X_all, Y_all, held)
    if model is not None:
        from holoxmc.metrics import inverse_propensity

        chosen.model_ = model
        chosen.inv_prop_ = np.asarray(inverse_propensity(Y_all, *chosen.propensity), dtype=np.float64)
        watch.lap("model")
        watch.done()
        return chosen, "finished on every row (no second fit)"
    winner = _candidate(clf, params | refit_settings(chosen))
    winner.fit(X_all, Y_all, groups=groups)  # not found again
    for name in family(winner.head).kept_from_selection:  # as a linear model's Platt scaling
        setattr(winner.model_, name, getattr(chosen.model_, name))
    return winner, "refit on every row"


@contextmanager
def keeping_fit_rows() -> Iterator[None]:
    """Within it, a re-rank fit leaves the rows its labels trained on with its model, so that
    the winner can be finished on the held-out rows without a second fit
    (:data:`holoxmc.models.rerank.fit.KEEP_FIT_ROWS`)."""
    from holoxmc.models.rerank.fit import KEEP_FIT_ROWS

    token = KEEP_FIT_ROWS.set(True)
    try:
        yield
    finally:
        KEEP_FIT_ROWS.reset(token)


def _candidate(clf: Any, params: dict[str, Any]) -> Any:
    """``clf`` cloned with ``params``, and every setting that the candidate's head does not take
    at its default (:func:`holoxmc.settings.untaken_defaults`: ``time_budget``, the re-rank
    model's ``val_fraction``): a candidate refuses a setting it would ignore."""
    from sklearn.base import clone

    return clone(clf).set_params(**(params | untaken_defaults(params["head"])))


def _limits(keywords: dict[str, Any], remaining: float, leader: Trial | None) -> dict[str, Any]:
    """A network candidate's ``time_limit`` (what is left of the budget) and ``abandon_below``
    (the leader's validation P@1: it stops once it cannot catch up); ``{}`` for a head that
    trains no network.

    Example:
        >>> _limits({"head": "dense"}, 42.5, Trial("rerank", 61.0, 2.0)), _limits({"head": "rerank"}, 42.5, None)
        ({'time_limit': 42.5, 'abandon_below': 61.0}, {})
    """
    settings = family(keywords["head"]).settings
    limits: dict[str, Any] = {"time_limit": max(remaining, 0.0)} if "time_limit" in settings else {}
    if "abandon_below" in settings and leader is not None and leader.val_p1 is not None:
        limits["abandon_below"] = min(max(leader.val_p1, 0.0), 100.0)
    return limits


def _stop_note(candidate: Any, limit: dict[str, Any]) -> str:
    """How a network candidate stopped early: ``"stopped by the budget after epoch 6 of 20"``,
    ``"abandoned after epoch 5 of 20: it could not reach the leader"``."""
    results = getattr(candidate, "fit_results_", None) or []
    if not limit or not results or not results[0].stopped_early:
        return ""
    epochs = f"epoch {len(results[0].history)} of {candidate.setting('epochs')}"
    if results[0].stopped_by == "abandon_below":
        return f"abandoned after {epochs}: it could not reach the leader"
    return f"stopped by the budget after {epochs}"


def _stack(X: Any, X_val: Any) -> Any:
    return sp.vstack([X, X_val], format="csr") if sp.issparse(X) else np.concatenate([X, X_val])


def refit_settings(candidate: Any) -> dict[str, Any]:
    """The settings that retrain a fitted ``candidate`` on every row with what its
    validation rows chose, without choosing again: its family's
    :attr:`~holoxmc.models.registry.Family.refit_from` (the linear model's ``C``, the re-rank model's ``alpha``; a network's
    best epoch as its number of epochs, trained without a validation share, so the schedule
    then ends at that epoch).

    Raises:
        InputError: a head whose family cannot be refit from a selection run.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> refit_settings(NS(head="hrr", fit_results_=[NS(best_epoch=7)]))
        {'epochs': 7, 'val_fraction': 0.0}
    """
    refit_from = family(candidate.head).refit_from
    if refit_from is None:
        raise InputError(f"head {candidate.head!r} cannot be refit from a selection run")
    return refit_from(candidate)


@dataclass(frozen=True)
class Selector:
    """A head that chooses a model rather than names one.

    Attributes:
        fit: ``(estimator, X, Y, X_val, Y_val, groups=codes) -> (fitted winner, trials)``.
        settings: the estimator settings that apply to it alone.
        jobs_apart: whether its candidates may train as independent jobs (``workers``, ``ray_address``).
    """

    fit: Callable[..., tuple[Any, list[Trial]]]
    settings: frozenset[str] = frozenset()
    jobs_apart: bool = False


#: Heads that choose a model rather than name one: ``head -> Selector``.
SELECTORS: dict[str, Selector] = {AUTO: Selector(fit_auto, frozenset({"time_budget"}), jobs_apart=True)}


def selection_table(trials: list[Trial]) -> str:
    """The candidates of a selection as printed lines.

    Example:
        >>> print(selection_table([Trial("linear", 61.5, 2.0, "chosen"), Trial("fc", None, 0.0, "skipped")]))
        model     val P@1   seconds
        linear      61.50       2.0  chosen
        fc              -         -  skipped
    """
    lines = [f"{'model':<8} {'val P@1':>8} {'seconds':>9}"]
    for trial in trials:
        p1 = "-" if trial.val_p1 is None else f"{trial.val_p1:.2f}"
        seconds = "-" if trial.val_p1 is None else f"{trial.seconds:.1f}"
        lines.append(f"{trial.model:<8} {p1:>8} {seconds:>9}  {trial.note}".rstrip())
    return "\n".join(lines)

"""``head="auto"``: choose the model on a validation split, within a time budget.

The candidates train in :data:`CANDIDATES` order, each at its library defaults, on the
training rows less a seeded validation share (or on a given validation set): the linear
model first (fast and strong on small and mid-sized sets), then the networks while the
time budget lasts. The best by validation P@1 (ties: the earlier) is trained again with
``refit=True`` — its settings chosen on the same validation rows, then retrained on every
row — and kept. A candidate starts only while the seconds spent are under the budget, so
the budget can be overrun by at most the candidate running when it runs out; the winner's
refit comes on top.

Example:
    >>> [name for name, _ in CANDIDATES]
    ['linear', 'hrr-fc', 'fc']
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import scipy.sparse as sp
from sklearn.base import clone

from holoxmc.errors import InputError

__all__ = ["AUTO", "SELECTORS", "CANDIDATES", "Trial", "SHARED_SETTINGS", "check_auto_params", "fit_auto", "read_trials",
           "selection_table"]

#: The head name that selects a model.
AUTO = "auto"
#: ``(model name, estimator keywords)`` tried in this order.
CANDIDATES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("linear", {"head": "linear"}),
    ("hrr-fc", {"head": "hrr"}),
    ("fc", {"head": "dense"}),
)
#: Settings ``head="auto"`` passes to every candidate; any other stays at the candidate's default.
SHARED_SETTINGS = frozenset({"seed", "random_state", "device", "propensity", "progress", "workers", "n_jobs",
                             "ray_address", "val_fraction", "time_budget", "backbone"})


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


def _validation_split(clf: Any, X: Any, Y: sp.csr_matrix) -> tuple[Any, sp.csr_matrix, Any, sp.csr_matrix]:
    from holoxmc.train.trainer import split_validation

    if clf.val_fraction <= 0:
        raise InputError("head='auto' chooses on a validation split: val_fraction must be above 0 "
                         "(or give X_val, Y_val)")
    train_rows, val_rows = split_validation(X.shape[0], clf.val_fraction, clf.random_seed)
    return X[train_rows], Y[train_rows], X[val_rows], Y[val_rows]


def fit_auto(clf: Any, X: Any, Y: sp.csr_matrix, X_val: Any = None, Y_val: Any = None) -> tuple[Any, list[Trial]]:
    """Choose, refit and return the winning estimator for ``clf`` (``head="auto"``).

    Args:
        clf: the ``XMCClassifier`` with ``head="auto"`` (left unfitted).
        X, Y: the checked training data; X_val, Y_val: a validation set, or ``None`` to carve
            ``clf.val_fraction`` of the training rows (seeded by ``clf``'s seed).

    Returns:
        ``(winner, trials)``: a fitted estimator of the chosen head, and one :class:`Trial`
        per candidate in order.
    """
    started = time.perf_counter()
    X_fit, Y_fit, X_check, Y_check = (X, Y, X_val, Y_val) if X_val is not None else _validation_split(clf, X, Y)
    shared = {key: value for key, value in clf.get_params().items() if key in SHARED_SETTINGS - {"time_budget"}}
    trials: list[Trial] = []
    for name, keywords in CANDIDATES:
        spent = time.perf_counter() - started
        if trials and spent >= clf.time_budget:
            trials.append(Trial(name, None, 0.0, f"skipped (budget: {spent:.1f} s of {clf.time_budget:g} s spent)"))
            continue
        candidate = clone(clf).set_params(**(shared | keywords))
        begun = time.perf_counter()
        candidate.fit(X_fit, Y_fit, X_check, Y_check)
        trials.append(Trial(name, candidate.score(X_check, Y_check), time.perf_counter() - begun))
    scored = [trial for trial in trials if trial.val_p1 is not None]
    best = max(scored, key=lambda trial: (trial.val_p1, -trials.index(trial)))
    keywords = dict(CANDIDATES)[best.model]
    winner = clone(clf).set_params(**(shared | keywords | {"refit": True}))
    winner.fit(X_fit, Y_fit, X_check, Y_check)  # the same rows choose its epoch or C; then all rows retrain it
    best.note = "chosen, refit on every row"
    return winner, trials


#: Heads that choose a model rather than name one: ``head -> fit function``.
SELECTORS = {AUTO: fit_auto}


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

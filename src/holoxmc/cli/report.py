"""What a training run reports: :func:`fit_and_report` (fit, time top-5 prediction, evaluate
on a test set) and the CLI's metric table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from holoxmc.metrics import evaluate, pad_predictions
from holoxmc.models.registry import FAMILIES
from holoxmc.validation import check_Y

if TYPE_CHECKING:  # the table and cut-offs of evaluate and predict need no estimator (nor torch)
    from holoxmc.estimator import XMCClassifier

__all__ = ["fit_and_report", "metrics_table", "recall_cutoffs", "validation_report", "REPORT_FAMILIES"]

#: Metric families reported on a test set (each at k = 1..5, percent).
REPORT_FAMILIES = ("P", "nDCG", "PSP", "PSnDCG", "Recall")
_KS = (1, 2, 3, 4, 5)
#: Recall's extra cut-off (SOLAR's Recall@100), reported where the model has that many labels.
RECALL_AT = 100


def fit_and_report(
    clf: XMCClassifier,
    X_train: Any,
    Y_train: Any,
    X_test: Any,
    Y_test: Any,
    *,
    run_dir: str | Path | None = None,
    resume: bool = False,
    fit_params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fit ``clf`` (with ``fit_params``, such as ``word_vectors``), time top-5 prediction on
    the test set and evaluate it.

    Returns:
        ``{"test": {"P@1".."P@5", "nDCG@1..5", "PSP@1..5", "PSnDCG@1..5", "Recall@1..5",
        "Recall@100" (with at least 100 labels; predictions then take the top 100)}, "train_seconds",
        "epoch_seconds", "best_epoch", "sparse_updates", "predict_ms_per_point", "params":
        {"total", "output_layer"}}`` (metrics in percent; PSP with the training-label
        propensities), plus ``candidates_per_point`` for SOLAR. SOLAR's ``epoch_seconds``
        sum its chunks; its ``best_epoch`` and ``sparse_updates`` are per chunk, so ``None``.
        The linear model has no epochs (``epoch_seconds`` empty, ``best_epoch`` ``None``)
        and adds ``fits``: ``{"C", "seconds", "unconverged_labels"}`` of every liblinear fit,
        with ``"val"`` for the C grid's and ``"refit": True`` for the refit; its
        ``train_seconds`` sum those fits' label blocks (over every worker, like an ensemble's
        members), without the validation passes.
        An ensemble's ``epoch_seconds`` are its members' in turn, and its ``best_epoch``
        and ``sparse_updates`` are lists, one entry per member.

    Example:
        >>> report = fit_and_report(XMCClassifier(), train.X, train.Y, test.X, test.Y)  # doctest: +SKIP
        >>> print(metrics_table(report["test"]))  # doctest: +SKIP
    """
    clf.fit(X_train, Y_train, run_dir=run_dir, resume=resume, **(fit_params or {}))
    Y_test = check_Y(Y_test, X_test.shape[0], n_labels=clf.n_labels_)
    X_test = clf._check_X(X_test)
    extra: dict[str, Any] = {}
    recall_ks = recall_cutoffs(clf.n_labels_)
    started = time.perf_counter()  # the top-5 prediction alone is timed
    indices = _top(clf, X_test, min(max(_KS), clf.n_labels_), extra)
    predict_ms = 1000.0 * (time.perf_counter() - started) / X_test.shape[0]
    if recall_ks:  # the missing ranks of a model with fewer labels are misses
        indices = _top(clf, X_test, min(RECALL_AT, clf.n_labels_), {})
    metrics = evaluate(pad_predictions(indices, max(_KS + recall_ks)), Y_test, inv_prop=clf.inv_prop_, ks=_KS,
                       recall_ks=recall_ks)
    test = {f"{family}@{k}": metrics[f"{family}@{k}"] for family in REPORT_FAMILIES for k in _KS}
    test.update({f"Recall@{k}": metrics[f"Recall@{k}"] for k in recall_ks})
    if hasattr(clf, "selection_"):
        extra["selection"] = [trial.as_dict() for trial in clf.selection_]
    extra |= validation_report(clf, test["P@1"])
    return extra | FAMILIES[clf.head_].report(clf.fit_results_) | {
        "test": test,
        "train_seconds": float(sum(result.train_seconds for result in clf.fit_results_)),
        "predict_ms_per_point": predict_ms,
        "params": clf.n_parameters(),
    }


def validation_report(clf: Any, test_p1: float) -> dict[str, Any]:
    """``metrics.json``'s ``"groups"`` (what the validation splits kept apart:
    :class:`~holoxmc.data.groups.GroupSummary`) and ``"validation"`` (the held-out rows' P@1,
    and its gap to the test P@1: how much validation overrated), where the fit has them.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> validation_report(NS(validation_={"P@1": 70.0, "rows": 9, "source": "X_val"}), 66.5)
        {'validation': {'P@1': 70.0, 'rows': 9, 'source': 'X_val', 'gap_to_test_P@1': 3.5}}
    """
    out: dict[str, Any] = {}
    if getattr(clf, "groups_", None) is not None:
        out["groups"] = clf.groups_.as_dict()
    validation = getattr(clf, "validation_", None)
    if validation is not None:
        out["validation"] = validation | {"gap_to_test_P@1": round(validation["P@1"] - test_p1, 4)}
    return out


def recall_cutoffs(n_labels: int) -> tuple[int, ...]:
    """The extra Recall cut-offs a report shows: ``(RECALL_AT,)`` where the model has that
    many labels, else none.

    Example:
        >>> recall_cutoffs(30), recall_cutoffs(983)
        ((), (100,))
    """
    return (RECALL_AT,) if n_labels >= RECALL_AT else ()


def _top(clf: Any, X: Any, k: int, extra: dict[str, Any]) -> Any:
    """The top-``k`` label ids of ``clf`` on ``X``; for SOLAR, its candidates per point go in ``extra``."""
    from holoxmc.models.solar.model import SolarModel

    if isinstance(clf.model_, SolarModel):
        indices, _, candidates = clf.model_.predict(X, k=k)
        extra["candidates_per_point"] = float(candidates.mean())
        return indices
    return clf.predict_topk(X, k=k)[0]


def metrics_table(metrics: dict[str, float], title: str = "") -> str:
    """A k × metric table (percent) of the families present in ``metrics``, and a last line
    ``Recall@100`` where ``metrics`` has it.

    Example:
        >>> print(metrics_table({"P@1": 50.0, "Recall@1": 25.0, "Recall@100": 75.0}, title="run"))
        run
        k           P    Recall
        1       50.00     25.00
        Recall@100: 75.00
    """
    families = [f for f in REPORT_FAMILIES if f"{f}@1" in metrics]
    ks = [k for k in _KS if f"P@{k}" in metrics]
    lines = [title] if title else []
    lines.append("k  " + "".join(f"{f:>10}" for f in families))
    lines += [f"{k:<3}" + "".join(f"{metrics[f'{f}@{k}']:>10.2f}" for f in families) for k in ks]
    if f"Recall@{RECALL_AT}" in metrics:
        lines.append(f"Recall@{RECALL_AT}: {metrics[f'Recall@{RECALL_AT}']:.2f}")
    return "\n".join(lines)

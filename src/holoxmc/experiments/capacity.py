"""Binding-capacity evidence for the HRR projection (HRR paper, Fig. 1 and App. D.1–D.2).

Three measurements, all on statements ``S = bundle_{i≤n} bind(x_i, y_i)`` of random pairs:

* **Fig. 1 — responses.** For ``d = 256`` and ``T`` bound terms, the response
  ``xᵀ(S ⊗ y†)`` for pairs present in ``S`` (should be ≈ 1) and for fresh pairs absent from
  it (≈ 0), naive HRR (N(0, 1/d) vectors, exact inverse ``y†`` of eq. 2) against projected
  HRR (π applied to the vectors, eq. 3). Mean and standard deviation over the individual
  responses of all trials.
* **App. D.1, Figs. 5–6 — capacity.** Protocol of App. D.1: draw ``n`` pairs and ``n``
  distractors ``z_j`` the same way, unbind every ``y_i`` from ``S`` to get ``x̂_i``; item
  ``i`` is a retrieval error when some distractor is more cosine-similar to ``x̂_i`` than
  ``x_i`` is. The error rate is the fraction of the ``n`` items in error, averaged over the
  trials (10 by default). ``n`` runs over the √2 grid ``round(√2^j)`` (deduplicated); the
  capacity is the largest grid ``n`` before the first one whose mean error rate exceeds the
  threshold (3 %). The curves of error rate against ``n`` are Fig. 6.
* **App. D.2, Fig. 7 — response range.** Same responses as Fig. 1 for ``n`` up to 2¹⁶
  (at most ``queries`` present and ``queries`` absent pairs are probed per trial).

Output layout (:func:`write_capacity_outputs`): ``capacity.json`` is *nested* JSON, so the
dotted names resolve key by key — ``fig1.terms``, ``fig1.projected.present_mean``,
``fig1.naive.absent_std``, ``capacity.dims``, ``capacity.hrr``, ``capacity.hrr_projected``,
``capacity.map_c``, ``capacity.vtb``, ``fig7.n``, ``fig7.projected.present_mean`` … are all
lists aligned with their ``terms``/``dims``/``n`` list. CSVs (``fig1.csv``,
``capacity.csv``, ``retrieval_errors.csv``, ``fig7.csv``) and PNGs (``fig1_response.png``,
``fig5_capacity.png``, ``fig6_retrieval_error.png``, ``fig7_response_range.png``) sit
beside it; they are written all or nothing (:func:`output_folder` checks the folder before
a long run).

Randomness: every (figure, method, d) cell draws from its own ``torch.Generator`` seeded
from ``(seed, figure, method, d)``, so a cell's numbers do not depend on which other cells
run (quick and full runs agree where they overlap).

Example:
    >>> config = CapacityConfig.smoke()
    >>> results = run_capacity(config, seed=0)
    >>> results["capacity"]["hrr_projected"][-1] > results["capacity"]["hrr"][-1]
    True
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from holoxmc.errors import InputError, check_number_types
from holoxmc.experiments.vsa import VSAS, VSA
from holoxmc.io import atomic_write_bytes, json_text
from holoxmc.plotting import figure_class, require_matplotlib

__all__ = [
    "CapacityConfig",
    "sqrt2_grid",
    "response_statistics",
    "retrieval_error_rates",
    "capacity_curve",
    "run_capacity",
    "output_folder",
    "write_capacity_outputs",
    "summary_table",
]

#: Methods of Figs. 5–6, in plotting order.
CAPACITY_METHODS: tuple[str, ...] = ("hrr", "hrr_approx_inverse", "hrr_projected", "map_c", "vtb")
#: Methods of Figs. 1 and 7: the JSON names them ``naive`` and ``projected``.
RESPONSE_METHODS: dict[str, str] = {"naive": "hrr", "projected": "hrr_projected"}
#: Elements per chunk of trials, bounding the memory of the retrieval test (~256 MiB).
_CHUNK_ELEMENTS = 1 << 26
#: Files of :func:`write_capacity_outputs`, in the order it writes them.
OUTPUT_FILES: tuple[str, ...] = (
    "fig1.csv", "fig7.csv", "capacity.csv", "retrieval_errors.csv", "fig1_response.png",
    "fig5_capacity.png", "fig6_retrieval_error.png", "fig7_response_range.png", "capacity.json",
)


def sqrt2_grid(max_n: int) -> list[int]:
    """The √2 grid ``round(√2^j)``, deduplicated, up to ``max_n`` (App. D.1).

    Example:
        >>> sqrt2_grid(40)
        [1, 2, 3, 4, 6, 8, 11, 16, 23, 32]
    """
    values: list[int] = []
    j = 0
    while (n := round(math.sqrt(2) ** j)) <= max_n:
        if not values or n != values[-1]:
            values.append(n)
        j += 1
    return values


@dataclass(frozen=True)
class CapacityConfig:
    """Sizes of the three measurements. :meth:`full` follows the paper, :meth:`quick`
    is the ~1-minute version, :meth:`smoke` the seconds-long one used by the tests.

    Attributes:
        fig1_dim: dimension of Fig. 1 (paper: 256).
        fig1_terms: numbers ``T`` of bound terms (paper: up to 1024).
        fig1_trials: independent statements per ``T``.
        capacity_dims: distinct dimensions of Figs. 5–6; perfect squares when a method
            needs them (VTB).
        capacity_trials: trials per ``(method, d, n)`` (paper: 10).
        capacity_threshold: error rate that ends the capacity (paper: 3 %).
        capacity_max_n: largest ``n`` tried; a capacity equal to it is a lower bound.
        capacity_stop_error: stop a Fig. 6 curve once the mean error rate reaches this;
            above ``capacity_threshold``, so a curve never stops before its capacity.
        fig7_dim: dimension of Fig. 7 (paper: 256).
        fig7_n: bundle sizes ``n`` of Fig. 7 (paper: up to 2¹⁶).
        fig7_trials: independent statements per ``n``.
        queries: present and absent pairs probed per statement in Figs. 1 and 7.
        methods: distinct names in :data:`VSAS` measured in Figs. 5–6.

    The sequence fields take any non-empty sequence (a list too) and store it as a tuple.
    """

    fig1_dim: int = 256
    fig1_terms: tuple[int, ...] = tuple(sqrt2_grid(1024))
    fig1_trials: int = 20
    capacity_dims: tuple[int, ...] = (64, 144, 256, 400, 576, 784, 1024, 1600, 2304, 3136, 4096)
    capacity_trials: int = 10
    capacity_threshold: float = 0.03
    capacity_max_n: int = 1 << 14
    capacity_stop_error: float = 0.5
    fig7_dim: int = 256
    fig7_n: tuple[int, ...] = tuple(2**k for k in range(17))
    fig7_trials: int = 5
    queries: int = 1024
    methods: tuple[str, ...] = field(default=CAPACITY_METHODS)

    @classmethod
    def full(cls) -> CapacityConfig:
        """The paper's sizes: T ≤ 1024, d up to 4096 = 64², n up to 2¹⁶ (a few minutes)."""
        return cls()

    @classmethod
    def quick(cls) -> CapacityConfig:
        """Well under a minute on 2 CPU cores: T ≤ 1024, d ≤ 1024, n ≤ 2¹³, fewer trials."""
        return cls(
            fig1_trials=10,
            capacity_dims=(64, 144, 256, 400, 576, 1024),
            capacity_stop_error=0.2,
            fig7_n=tuple(2**k for k in range(14)),
            fig7_trials=2,
            queries=512,
        )

    @classmethod
    def smoke(cls) -> CapacityConfig:
        """Seconds: the same code paths at toy sizes (tests, doctests)."""
        return cls(
            fig1_terms=(1, 16, 256, 1024),
            fig1_trials=4,
            capacity_dims=(64, 256),
            capacity_trials=5,
            capacity_stop_error=0.1,
            fig7_n=(1, 64, 4096),
            fig7_trials=1,
            queries=256,
        )

    def __post_init__(self) -> None:
        for name in ("fig1_terms", "capacity_dims", "fig7_n"):
            object.__setattr__(self, name, _sizes(name, getattr(self, name)))
        object.__setattr__(self, "methods", _sequence("methods", self.methods))
        check_number_types(self)
        for name in ("fig1_dim", "fig1_trials", "capacity_trials", "capacity_max_n", "fig7_dim",
                     "fig7_trials", "queries"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be >= 1, got {getattr(self, name)}")
        unknown = [m for m in self.methods if not isinstance(m, str) or m not in VSAS]
        if unknown:
            raise InputError(f"unknown methods {unknown}; known: {sorted(VSAS)}")
        for name in ("capacity_dims", "methods"):
            if len(set(getattr(self, name))) < len(getattr(self, name)):
                raise InputError(f"{name} must not repeat, got {getattr(self, name)}")
        self._check_square_dims()
        if not 0 < self.capacity_threshold < 1:
            raise InputError(f"capacity_threshold must lie in (0, 1), got {self.capacity_threshold}")
        if self.capacity_stop_error <= self.capacity_threshold:
            raise InputError(f"capacity_stop_error must be above capacity_threshold "
                             f"({self.capacity_threshold}), got {self.capacity_stop_error}")

    def _check_square_dims(self) -> None:
        """Every capacity dimension is a perfect square if a method needs it (VTB)."""
        square = [m for m in self.methods if VSAS[m].needs_square_dim]
        other = [d for d in self.capacity_dims if math.isqrt(d) ** 2 != d]
        if square and other:
            raise InputError(f"{', '.join(square)} needs perfect-square capacity_dims, got {other[0]}")


def _sequence(name: str, value: object) -> tuple[Any, ...]:
    """``value`` as a tuple; :class:`InputError` unless it is a non-empty, non-string sequence."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InputError(f"{name} must be a sequence, got {value!r}")
    if not value:
        raise InputError(f"{name} must not be empty")
    return tuple(value)


def _sizes(name: str, value: object) -> tuple[int, ...]:
    """``value`` as a non-empty tuple of ints ``>= 1`` (sizes or dimensions)."""
    values = _sequence(name, value)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
            raise InputError(f"{name} must hold integers >= 1, got {v!r}")
    return tuple(int(v) for v in values)


def _generator(seed: int, *parts: object) -> torch.Generator:
    """A local generator for one experiment cell, seeded from ``seed`` (an int ``>= 0``) and
    the cell's name."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"seed must be an integer >= 0, got {seed!r}")
    key = zlib.crc32("/".join(map(str, parts)).encode())
    state = np.random.SeedSequence([seed, key]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


def _draw(
    vsa: VSA, batch: int, counts: Sequence[int], d: int, generator: torch.Generator
) -> tuple[Tensor, ...]:
    """Draw, for each of ``batch`` trials, blocks of ``counts`` vectors: ``(batch, count, d)``.

    Trial-major order (all blocks of trial 1, then of trial 2, …) keeps the random stream
    the same however the trials are chunked. ``torch.randn`` fills 16 values at a time, so
    one request for the whole chunk equals one request per trial only when each trial draws
    a multiple of 16 numbers: then one request is made (faster), otherwise one per trial.
    """
    total = sum(counts)
    if total * d % 16 == 0:
        vectors = vsa.random(batch * total, d, generator=generator)
    else:
        vectors = torch.cat([vsa.random(total, d, generator=generator) for _ in range(batch)])
    return vectors.reshape(batch, total, d).split(list(counts), dim=1)


def response_statistics(
    vsa: VSA,
    d: int,
    sizes: Sequence[int],
    *,
    trials: int,
    queries: int,
    generator: torch.Generator,
) -> dict[str, list[float]]:
    """Mean and std of the responses ``xᵀ unbind(S, y)`` to present and absent pairs.

    Each trial draws ``max(sizes)`` pairs once; the statement of size ``n`` bundles the
    first ``n`` of them (statements are nested across sizes, so every point is a valid
    sample but neighbouring points are correlated). The first ``min(n, queries)`` bound
    pairs are probed as *present*, ``queries`` pairs drawn apart from the statement as
    *absent*. Statistics pool all individual responses of all trials; trials run in
    memory-bounded chunks.

    Args:
        vsa: the architecture (its ``unbind`` defines ``y†``).
        d: dimension.
        sizes: bundle sizes ``n``.
        trials: statements per size.
        queries: probes per statement and case.
        generator: local random generator.

    Returns:
        ``present_mean``, ``present_std``, ``absent_mean``, ``absent_std``: lists aligned
        with ``sizes``.

    Example:
        >>> from holoxmc.experiments.vsa import VSAS
        >>> g = torch.Generator().manual_seed(0)
        >>> stats = response_statistics(VSAS["hrr_projected"], 256, [8], trials=2, queries=8, generator=g)
        >>> abs(stats["present_mean"][0] - 1) < 0.2 and abs(stats["absent_mean"][0]) < 0.2
        True
    """
    max_n = max(sizes)
    chunk = max(1, _CHUNK_ELEMENTS // (4 * max(max_n, queries) * d))
    present: list[list[Tensor]] = [[] for _ in sizes]
    absent: list[list[Tensor]] = [[] for _ in sizes]
    for start in range(0, trials, chunk):
        batch = min(chunk, trials - start)
        x, y, x_absent, y_absent = _draw(vsa, batch, (max_n, max_n, queries, queries), d, generator)
        bound = vsa.bind(x, y)
        for i, n in enumerate(sizes):
            statement = vsa.bundle(bound[:, :n], dim=-2).unsqueeze(-2)  # (batch, 1, d)
            k = min(n, queries)
            present[i].append((x[:, :k] * vsa.unbind(statement, y[:, :k])).sum(-1).flatten())
            absent[i].append((x_absent * vsa.unbind(statement, y_absent)).sum(-1).flatten())
    out: dict[str, list[float]] = {
        key: [] for key in ("present_mean", "present_std", "absent_mean", "absent_std")
    }
    for case, responses in (("present", present), ("absent", absent)):
        for parts in responses:
            values = torch.cat(parts).double()
            out[f"{case}_mean"].append(float(values.mean()))
            out[f"{case}_std"].append(float(values.std(correction=0)))
    return out


def retrieval_error_rates(
    vsa: VSA, d: int, n: int, *, trials: int, generator: torch.Generator
) -> Tensor:
    """Per-trial fraction of ``n`` bound items lost to one of ``n`` distractors (App. D.1).

    Item ``i`` is an error when ``max_j cos(x̂_i, z_j) > cos(x̂_i, x_i)`` with
    ``x̂_i = unbind(S, y_i)``. Trials are batched, in chunks that bound memory.

    Returns:
        ``(trials,)`` float tensor of error rates in [0, 1].

    Example:
        >>> from holoxmc.experiments.vsa import VSAS
        >>> g = torch.Generator().manual_seed(0)
        >>> float(retrieval_error_rates(VSAS["hrr_projected"], 256, 4, trials=3, generator=g).max())
        0.0
    """
    chunk = max(1, _CHUNK_ELEMENTS // (n * max(n, d)))
    rates = []
    for start in range(0, trials, chunk):
        batch = min(chunk, trials - start)
        x, y, distractors = _draw(vsa, batch, (n, n, n), d, generator)
        statement = vsa.bundle(vsa.bind(x, y), dim=-2).unsqueeze(-2)
        retrieved = torch.nn.functional.normalize(vsa.unbind(statement, y), dim=-1)
        true_similarity = (retrieved * torch.nn.functional.normalize(x, dim=-1)).sum(-1)
        distractor_similarity = retrieved @ torch.nn.functional.normalize(distractors, dim=-1).mT
        errors = distractor_similarity.amax(dim=-1) > true_similarity
        rates.append(errors.float().mean(dim=-1))
    return torch.cat(rates)


def capacity_curve(
    vsa: VSA,
    d: int,
    *,
    trials: int,
    threshold: float,
    max_n: int,
    stop_error: float,
    generator: torch.Generator,
) -> dict[str, Any]:
    """Walk the √2 grid of ``n`` until the mean error rate reaches ``stop_error``.

    Returns:
        ``capacity`` (largest grid ``n`` before the first mean error rate above
        ``threshold``; 0 if already ``n = 1`` fails), ``interpolated`` (where the error
        curve crosses ``threshold``, interpolated linearly in ``log n`` between that grid
        point and the first failing one: finer than the √2 grid), ``censored`` (no failure
        up to ``max_n``, so both are lower bounds), and the Fig. 6 curve ``n``,
        ``error_mean``, ``error_std`` (std over trials).
    """
    curve: dict[str, Any] = {"n": [], "error_mean": [], "error_std": []}
    capacity, failed, interpolated = 0, False, 0.0
    for n in sqrt2_grid(max_n):
        rates = retrieval_error_rates(vsa, d, n, trials=trials, generator=generator).double()
        mean = float(rates.mean())
        if not failed and mean > threshold:
            interpolated = _crossing(curve, n, mean, threshold)
        curve["n"].append(n)
        curve["error_mean"].append(mean)
        curve["error_std"].append(float(rates.std(correction=0)))
        failed = failed or mean > threshold
        if not failed:
            capacity = interpolated = n
        if mean >= stop_error:
            break
    return {"capacity": capacity, "interpolated": interpolated, "censored": not failed, **curve}


def _crossing(curve: dict[str, Any], n_fail: int, error_fail: float, threshold: float) -> float:
    """``n`` where the error crosses ``threshold`` between the last passing grid point of
    ``curve`` and ``(n_fail, error_fail)``, linear in ``log n``."""
    if not curve["n"]:
        return 0.0
    n_pass, error_pass = curve["n"][-1], curve["error_mean"][-1]
    fraction = (threshold - error_pass) / (error_fail - error_pass)
    return float(math.exp(math.log(n_pass) + fraction * (math.log(n_fail) - math.log(n_pass))))


def _linear_fit(dims: Sequence[int], values: Sequence[float]) -> dict[str, float] | None:
    """Least-squares line ``capacity ≈ slope·d + intercept`` and its R²; ``None`` for fewer
    than two dimensions, where no line is determined."""
    if len(dims) < 2:
        return None
    x, y = np.asarray(dims, dtype=float), np.asarray(values, dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else 0.0
    return {"slope": float(slope), "intercept": float(intercept), "r2": r2}


def run_capacity(
    config: CapacityConfig,
    seed: int = 0,
    *,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run Fig. 1, Figs. 5–6 and Fig. 7; return the nested results (see module docstring).

    Args:
        config: sizes; :meth:`CapacityConfig.quick` or :meth:`CapacityConfig.full`.
        seed: master seed; every cell derives its own local generator from it.
        progress: called with a short message after each part (e.g. ``print``).

    Returns:
        ``{"config", "seed", "seconds", "fig1", "capacity", "fig7"}``.
    """
    say = progress or (lambda message: None)
    seconds: dict[str, float] = {}
    results: dict[str, Any] = {"config": asdict(config), "seed": seed, "seconds": seconds}

    def response_figure(name: str, dim: int, grid: Sequence[int], grid_key: str, trials: int) -> None:
        """Present/absent response statistics of every response method over ``grid``."""
        start = time.perf_counter()
        figure: dict[str, Any] = {"dim": dim, "trials": trials, "queries": config.queries, grid_key: list(grid)}
        for key, method in RESPONSE_METHODS.items():
            figure[key] = response_statistics(
                VSAS[method], dim, grid, trials=trials, queries=config.queries,
                generator=_generator(seed, name, method, dim),
            )
        results[name] = figure
        seconds[name] = time.perf_counter() - start
        say(f"{name} done in {seconds[name]:.1f}s")

    response_figure("fig1", config.fig1_dim, config.fig1_terms, "terms", config.fig1_trials)

    start = time.perf_counter()
    capacity: dict[str, Any] = {
        "dims": list(config.capacity_dims),
        "threshold": config.capacity_threshold,
        "trials": config.capacity_trials,
    }
    curves: dict[str, dict[str, Any]] = {}
    censored: dict[str, list[bool]] = {}
    interpolated: dict[str, list[float]] = {}
    for method in config.methods:
        vsa = VSAS[method]
        curves[method], capacity[method], censored[method], interpolated[method] = {}, [], [], []
        for d in config.capacity_dims:
            curve = capacity_curve(
                vsa, d, trials=config.capacity_trials, threshold=config.capacity_threshold,
                max_n=config.capacity_max_n, stop_error=config.capacity_stop_error,
                generator=_generator(seed, "capacity", method, d),
            )
            capacity[method].append(curve.pop("capacity"))
            interpolated[method].append(curve.pop("interpolated"))
            censored[method].append(curve.pop("censored"))
            curves[method][str(d)] = curve
        say(f"capacity {method}: {capacity[method]}")
    capacity["censored"] = censored
    capacity["interpolated"] = interpolated
    capacity["linear_fit"] = {
        m: _linear_fit(config.capacity_dims, interpolated[m]) for m in config.methods
    }
    capacity["error_curves"] = curves
    results["capacity"] = capacity
    seconds["capacity"] = time.perf_counter() - start

    response_figure("fig7", config.fig7_dim, config.fig7_n, "n", config.fig7_trials)
    return results


def _csv(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


def _response_rows(section: dict[str, Any], sizes_key: str) -> list[list[object]]:
    rows: list[list[object]] = []
    for key in RESPONSE_METHODS:
        stats = section[key]
        for i, n in enumerate(section[sizes_key]):
            for case in ("present", "absent"):
                rows.append([key, case, n, stats[f"{case}_mean"][i], stats[f"{case}_std"][i]])
    return rows


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    return buffer.getvalue()


def _plot_responses(section: dict[str, Any], sizes_key: str, title: str, xlabel: str) -> bytes:
    Figure = figure_class()
    figure = Figure(figsize=(6.5, 4.2))
    axes = figure.subplots()
    sizes = np.asarray(section[sizes_key])
    for key in RESPONSE_METHODS:
        for case in ("present", "absent"):
            mean = np.asarray(section[key][f"{case}_mean"])
            std = np.asarray(section[key][f"{case}_std"])
            (line,) = axes.plot(sizes, mean, marker=".", label=f"{key} {case}")
            axes.fill_between(sizes, mean - std, mean + std, color=line.get_color(), alpha=0.2)
    axes.axhline(1.0, color="black", linestyle="--", linewidth=0.8)
    axes.axhline(0.0, color="black", linestyle=":", linewidth=0.8)
    axes.set_xscale("log", base=2)
    axes.set_yscale("symlog", linthresh=1.0)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("response xᵀ(S ⊗ y†)  (mean ± std)")
    axes.set_title(title)
    axes.legend(fontsize=8)
    return _png(figure)


def _plot_capacity(capacity: dict[str, Any]) -> bytes:
    Figure = figure_class()
    figure = Figure(figsize=(6.5, 4.2))
    axes = figure.subplots()
    markers = "osD^v<>"
    for i, method in enumerate(capacity["error_curves"]):
        (line,) = axes.plot(
            capacity["dims"], capacity["interpolated"][method], marker=markers[i % len(markers)],
            markersize=5, alpha=0.85, label=VSAS[method].label,
        )
        axes.step(capacity["dims"], capacity[method], where="post", color=line.get_color(), alpha=0.25)
    axes.set_xlabel("dimension d")
    axes.set_ylabel(f"capacity n (≤ {capacity['threshold']:.0%} error; faint: √2 grid)")
    axes.set_title("Binding capacity vs dimension (App. D.1, Fig. 5)")
    axes.legend(fontsize=8)
    return _png(figure)


def _plot_errors(capacity: dict[str, Any]) -> bytes:
    Figure = figure_class()
    methods = list(capacity["error_curves"])
    figure = Figure(figsize=(3.2 * len(methods), 3.4))
    for axes, method in zip(figure.subplots(1, len(methods), sharey=True, squeeze=False)[0], methods):
        for d, curve in capacity["error_curves"][method].items():
            n, mean, std = (np.asarray(curve[k]) for k in ("n", "error_mean", "error_std"))
            (line,) = axes.plot(n, mean, label=f"d={d}")
            axes.fill_between(n, mean - std, mean + std, color=line.get_color(), alpha=0.2)
        axes.axhline(capacity["threshold"], color="black", linestyle=":", linewidth=0.8)
        axes.set_xscale("log", base=2)
        axes.set_title(VSAS[method].label, fontsize=9)
        axes.set_xlabel("n pairs (= n distractors)")
    figure.axes[0].set_ylabel("P(retrieval error)")
    figure.axes[0].legend(fontsize=7)
    return _png(figure)


@contextmanager
def output_folder(out_dir: str | os.PathLike) -> Iterator[Path]:
    """Create ``out_dir`` and check that it takes the output files, before a long run; if
    the ``with`` block fails, remove the folders this created (when still empty).

    Raises:
        InputError: ``out_dir`` cannot be created or written, a folder stands where an
            output file goes, or matplotlib (``pip install holoxmc[plot]``) is missing.
    """
    require_matplotlib()  # the figures are drawn at the end of the run
    out = Path(out_dir)
    created = [folder for folder in (out, *out.parents) if not folder.exists()]  # deepest first
    _probe(out)
    try:
        yield out
    except BaseException:
        for folder in created:
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def _probe(out: Path) -> None:
    """Create ``out`` and write a temporary file in it; :class:`InputError` if that fails."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out) as probe:
            probe.write(b"0")
    except OSError as exc:
        blocking = [folder for folder in (out, *out.parents) if folder.exists() and not folder.is_dir()]
        reason = f"{blocking[0]} is not a folder" if blocking else exc.strerror or str(exc)
        raise InputError(f"{out}: cannot write the outputs there ({reason})") from exc
    taken = [name for name in OUTPUT_FILES if (out / name).is_dir()]
    if taken:
        raise InputError(f"{out / taken[0]} is a folder; the capacity experiment writes a file there")


def write_capacity_outputs(results: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``capacity.json``, the CSVs and the PNG plots into ``out_dir``, all or nothing:
    every file is rendered first, written into a temporary folder inside ``out_dir``, then
    moved into place; on a failure none of this call's files remain.

    Returns:
        The paths written.
    """
    files = _render_outputs(results)
    with output_folder(out_dir) as out:
        _install(files, out)
    return [out / name for name in files]


def _render_outputs(results: dict[str, Any]) -> dict[str, bytes]:
    """The contents of every output file, by name, in the order of :data:`OUTPUT_FILES`."""
    fig1, capacity, fig7 = results["fig1"], results["capacity"], results["fig7"]
    response_header = ("method", "case", "n", "mean", "std")
    methods = list(capacity["error_curves"])
    tables = {
        "fig1.csv": _csv(response_header, _response_rows(fig1, "terms")),
        "fig7.csv": _csv(response_header, _response_rows(fig7, "n")),
        "capacity.csv": _csv(
            ("method", "d", "capacity", "interpolated", "censored"),
            [
                [m, d, capacity[m][i], capacity["interpolated"][m][i], capacity["censored"][m][i]]
                for m in methods
                for i, d in enumerate(capacity["dims"])
            ],
        ),
        "retrieval_errors.csv": _csv(
            ("method", "d", "n", "error_mean", "error_std"),
            [
                [m, d, n, mean, std]
                for m in methods
                for d, curve in capacity["error_curves"][m].items()
                for n, mean, std in zip(curve["n"], curve["error_mean"], curve["error_std"])
            ],
        ),
    }
    files = {name: text.encode("utf-8") for name, text in tables.items()}
    files["fig1_response.png"] = _plot_responses(
        fig1, "terms", f"Fig. 1: responses, d={fig1['dim']}", "T bound terms"
    )
    files["fig5_capacity.png"] = _plot_capacity(capacity)
    files["fig6_retrieval_error.png"] = _plot_errors(capacity)
    files["fig7_response_range.png"] = _plot_responses(
        fig7, "n", f"Fig. 7: response range, d={fig7['dim']}", "n bound pairs"
    )
    files["capacity.json"] = json_text(results, allow_nan=False).encode("utf-8")
    return files


def _install(files: dict[str, bytes], out: Path) -> None:
    """Write ``files`` into a temporary folder inside ``out``, then move them into ``out``;
    on a failure remove the files already moved (a file they replaced is gone too)."""
    staging = Path(tempfile.mkdtemp(prefix=".capacity-", dir=out))
    moved: list[Path] = []
    try:
        for name, data in files.items():
            atomic_write_bytes(staging / name, data)
        for name in files:
            os.replace(staging / name, out / name)
            moved.append(out / name)
    except BaseException as exc:
        for path in moved:
            path.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise InputError(f"{out}: cannot write the outputs ({exc.strerror or exc})") from exc
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def summary_table(results: dict[str, Any]) -> str:
    """Markdown tables of the headline numbers: Fig. 1 at its largest T, and capacity vs d."""
    fig1, capacity = results["fig1"], results["capacity"]
    last = len(fig1["terms"]) - 1
    lines = [
        f"Fig. 1, d={fig1['dim']}, T={fig1['terms'][last]} bound terms:",
        "",
        "| HRR | present mean ± std | absent mean ± std |",
        "|---|---|---|",
    ]
    for key in RESPONSE_METHODS:
        s = fig1[key]
        lines.append(
            f"| {key} | {s['present_mean'][last]:.3f} ± {s['present_std'][last]:.3f} "
            f"| {s['absent_mean'][last]:.3f} ± {s['absent_std'][last]:.3f} |"
        )
    methods = list(capacity["error_curves"])
    lines += [
        "",
        f"Capacity (largest n with ≤ {capacity['threshold']:.0%} retrieval error, "
        f"{capacity['trials']} trials; ≥ = no failure up to the largest n tried):",
        "",
        "| d | " + " | ".join(VSAS[m].label for m in methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    for i, d in enumerate(capacity["dims"]):
        cells = [
            ("≥" if capacity["censored"][m][i] else "")
            + f"{capacity[m][i]} ({capacity['interpolated'][m][i]:.0f})"
            for m in methods
        ]
        lines.append(f"| {d} | " + " | ".join(cells) + " |")
    fits = capacity["linear_fit"]
    lines.append("| slope per d (R²) | " + " | ".join(_fit_cell(fits[m]) for m in methods) + " |")
    lines.append("")
    lines.append(
        "Cells: largest √2-grid n (in parentheses: the 3 % crossing interpolated in log n); "
        "slope and R² of a least-squares line through the interpolated capacities."
    )
    return "\n".join(lines)


def _fit_cell(fit: dict[str, float] | None) -> str:
    """``slope (R²)`` of a linear fit, or a dash where there is none."""
    return "—" if fit is None else f"{fit['slope']:.4f} ({fit['r2']:.2f})"

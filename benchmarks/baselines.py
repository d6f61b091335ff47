"""holoxmc against the XMC libraries users have today, side by side in one run on this
machine: omikuji (Parabel-like balanced 2-means trees of linear classifiers, its default
hyper-parameters), napkinXC's probabilistic label tree (``PLT``, its defaults) and PECOS's
XR-Linear (PIFA label embeddings, hierarchical k-means, its default training and beam
search, over L2-normalised rows as PECOS's own datasets are: on the raw Bibtex and
Delicious counts it lost about 10 P@1), against holoxmc's FC, HRR-FC and linear one-vs-rest
models with the presets ``holoxmc train DATA`` uses.

Every model sees the same training split and is scored on the whole test split with
``holoxmc.metrics.evaluate`` (P@k; PSP@k with the training-label propensities, A = 0.55,
B = 1.5). Times are wall clock: ``fit`` (holoxmc: including its validation passes and the
refit phase of the presets that refit; omikuji: including writing its input file) and
top-5 prediction over the test split, per point. Every library gets ``--threads``.

PECOS (``libpecos``) pins numpy < 2 and scipy < 1.14, so it lives in its own environment and
its rows are added to the same results file from there (the other rows are kept).

Usage:
    python benchmarks/baselines.py --datasets bibtex delicious debtags --threads 2
    # one model per process, so that its peak_rss_mb is its own (the peak of the whole process):
    python benchmarks/baselines.py --datasets synthetic --data-option preset=amazon-670k-like \
        --models hrr-fc --overrides '{"epochs": 5, "head_options": {"code": "circulant", "cache_codes": false}}'
    # → benchmarks/results/baselines.json (merged per dataset and model) and a table
    python -m venv .venv-pecos && .venv-pecos/bin/pip install torch==2.13.0 libpecos && .venv-pecos/bin/pip install -e .
    .venv-pecos/bin/python benchmarks/baselines.py --models pecos-xrlinear --threads 2
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize

from holoxmc.cli.data import add_data_options, data_options
from holoxmc.cli.train import train_params
from holoxmc.presets import dataset_preset
from holoxmc.data import load, write_xml_repo
from holoxmc.estimator import XMCClassifier
from holoxmc.io import atomic_write_json
from holoxmc.metrics import evaluate, inverse_propensity

OUT = Path("benchmarks/results/baselines.json")
HOLOXMC_MODELS = ("fc", "hrr-fc", "linear")
BASELINES = ("omikuji", "napkinxc-plt", "pecos-xrlinear")

Fit = Callable[[sp.csr_matrix, sp.csr_matrix], Callable[[sp.csr_matrix], np.ndarray]]


def holoxmc_model(dataset: str, model: str, overrides: dict) -> Fit:
    def fit(X: sp.csr_matrix, Y: sp.csr_matrix) -> Callable[[sp.csr_matrix], np.ndarray]:
        params = train_params(dataset, model, {}, preset=dataset_preset(dataset)) | {"progress": False}
        params |= {key: dict(params.get(key) or {}) | value if key == "head_options" else value
                   for key, value in overrides.items()}
        clf = XMCClassifier(**params).fit(X, Y)
        return lambda X_test: clf.predict_topk(X_test, k=5)[0]
    return fit


def omikuji_train(X: sp.csr_matrix, Y: sp.csr_matrix, threads: int) -> Any:
    """An omikuji model at its default hyper-parameters (trained from an XML-repo file)."""
    import omikuji

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.txt"
        write_xml_repo(path, X, Y)
        return omikuji.Model.train_on_data(str(path), omikuji.Model.default_hyper_param(), n_threads=threads)


def omikuji_top(model: Any, X: sp.csr_matrix, k: int) -> np.ndarray:
    """``(n, k)`` top labels of an omikuji model, ``-1`` where it gives fewer."""
    X = sp.csr_matrix(X)
    rows = []
    for i in range(X.shape[0]):
        row = X[i]
        pairs = model.predict(list(zip(row.indices.tolist(), row.data.tolist())), top_k=k)
        rows.append([label for label, _ in pairs] + [-1] * (k - len(pairs)))
    return np.asarray(rows, dtype=np.int64)


def omikuji_model(threads: int) -> Fit:
    def fit(X: sp.csr_matrix, Y: sp.csr_matrix) -> Callable[[sp.csr_matrix], np.ndarray]:
        model = omikuji_train(X, Y, threads)
        return lambda X_test: omikuji_top(model, X_test, 5)
    return fit


def napkinxc_model(threads: int, verbose: bool = False) -> Fit:
    """napkinXC's PLT at its defaults; ``verbose`` prints its own progress (its steps), so that
    a run stopped midway shows where."""
    from napkinxc.models import PLT

    def fit(X: sp.csr_matrix, Y: sp.csr_matrix) -> Callable[[sp.csr_matrix], np.ndarray]:
        folder = tempfile.TemporaryDirectory(prefix="napkinxc-")  # removed once ``predict`` is dropped
        model = PLT(folder.name, threads=threads, seed=0, verbose=int(verbose))
        model.fit(X, [row.indices.tolist() for row in Y])

        def predict(X_test: sp.csr_matrix, _folder: tempfile.TemporaryDirectory = folder) -> np.ndarray:
            rows = model.predict(X_test, top_k=5)
            return np.asarray([list(r) + [-1] * (5 - len(r)) for r in rows], dtype=np.int64)
        return predict
    return fit


def pecos_model(threads: int, verbose: bool = False) -> Fit:
    """PECOS XR-Linear at its recommended settings (PIFA label features, hierarchical k-means
    index); ``verbose`` prints each of the three steps as it starts, so that a run stopped
    midway shows where."""
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    def step(name: str) -> None:
        if verbose:
            print(f"pecos: {name}", flush=True)

    def fit(X: sp.csr_matrix, Y: sp.csr_matrix) -> Callable[[sp.csr_matrix], np.ndarray]:
        X, Y = normalize(X.astype(np.float32)), Y.astype(np.float32)
        step("label features (pifa)")
        label_features = LabelEmbeddingFactory.create(Y, X, method="pifa")
        step("label tree (hierarchical k-means)")
        tree = Indexer.gen(label_features, threads=threads)
        step("linear rankers of every layer")
        model = XLinearModel.train(X, Y, C=tree, threads=threads)

        def predict(X_test: sp.csr_matrix) -> np.ndarray:
            scores = model.predict(normalize(X_test.astype(np.float32)), only_topk=5, threads=threads).tocsr()
            row = np.repeat(np.arange(scores.shape[0]), np.diff(scores.indptr))
            order = np.lexsort((-scores.data, row))  # by row, then by falling score
            top5 = np.full((scores.shape[0], 5), -1, dtype=np.int64)
            top5[row[order], np.arange(len(order)) - scores.indptr[row[order]]] = scores.indices[order]
            return top5
        return predict
    return fit


def measure(fit: Fit, train, test, repeats: int = 1) -> dict:
    """Fit once; top-5 of the test rows ``repeats`` times (the median ms a row is reported,
    every repeat's in ``predict_ms_repeats``; the first repeat's predictions are scored)."""
    started = time.perf_counter()
    predict = fit(train.X, train.Y)
    fit_seconds = time.perf_counter() - started
    times, runs = [], []
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        runs.append(predict(test.X))
        times.append(1000 * (time.perf_counter() - started) / test.X.shape[0])
        del runs[1:]  # the first repeat's predictions are scored
    top5 = runs[0]
    predict_ms = float(np.median(times))
    metrics = evaluate(top5, test.Y, inv_prop=inverse_propensity(train.Y), ks=(1, 3, 5))  # -1: no prediction
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KB; the whole process so far
    return {"fit_seconds": fit_seconds, "predict_ms_per_point": predict_ms, "peak_rss_mb": peak_mb,
            **({"predict_ms_repeats": times} if repeats > 1 else {}),
            **{key: metrics[key] for key in ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["bibtex", "delicious", "debtags"])
    parser.add_argument("--models", nargs="+", default=["omikuji", "napkinxc-plt", *HOLOXMC_MODELS],
                        choices=[*BASELINES, *HOLOXMC_MODELS])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--overrides", type=json.loads, default={},
                        help="JSON XMCClassifier keywords over holoxmc's presets (head_options merge)")
    add_data_options(parser)
    args = parser.parse_args()
    options = data_options(args)
    suffix = "[" + ",".join(f"{key}={value}" for key, value in options.items()) + "]" if options else ""
    torch.set_num_threads(args.threads)
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    results["machine"] = (f"{platform.machine()}, {args.threads} threads per library, torch {torch.__version__}; "
                          f"{time.strftime('%Y-%m-%d')}")
    keys = [dataset + suffix for dataset in args.datasets]  # the results file's key: dataset and options
    for dataset, key in zip(args.datasets, keys):
        train, test = load(dataset, "train", **options), load(dataset, "test", **options)
        for model in args.models:
            fit = {"omikuji": lambda: omikuji_model(args.threads), "napkinxc-plt": lambda: napkinxc_model(args.threads),
                   "pecos-xrlinear": lambda: pecos_model(args.threads)}.get(
                       model, lambda: holoxmc_model(dataset, model, args.overrides))()
            row = measure(fit, train, test)
            if model in HOLOXMC_MODELS and args.overrides:
                row["overrides"] = args.overrides
            results.setdefault(key, {})[model] = row
            shown = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
            print(json.dumps({"dataset": key, "model": model} | shown), flush=True)
            atomic_write_json(OUT, results)
    print("\n| dataset | model | P@1 | P@3 | P@5 | PSP@1 | PSP@5 | fit s | top-5 ms/pt |\n|---|---|---|---|---|---|---|---|---|")
    for key in keys:
        for model, r in results[key].items():
            print(f"| {key} | {model} | {r['P@1']:.2f} | {r['P@3']:.2f} | {r['P@5']:.2f} | {r['PSP@1']:.2f} | "
                  f"{r['PSP@5']:.2f} | {r['fit_seconds']:.1f} | {r['predict_ms_per_point']:.3f} |")

if __name__ == "__main__":
    main()

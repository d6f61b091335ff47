"""Top-5 of the linear model on a test split by its three ways of scoring, side by side.

* ``0.2.0``: holoxmc 0.2.0's ``LinearModel.predict``, written out here (scikit-learn's
  ``normalize``, torch's ``embedding_bag`` on the dense weight table, ``torch.topk``);
* ``torch loaded``: this tree's ``LinearModel.predict`` in a process that has imported torch
  (the estimator's): ``normalize_rows``, ``embedding_bag``, ``best_columns``;
* ``no torch``: the same with torch counted as not loaded (``holoxmc predict`` of a linear
  run): ``embedding_bag_sums``, the same sums in NumPy.

One model trained with a fixed ``C``; the three alternate, median of ``--repeats``, ms per row
for a first batch of 1, 10, 100 rows and the whole split; then whether each gives 0.2.0's
top-5 labels and bit-identical scores.

Usage:
    HOLOXMC_DATA=../shared/data python benchmarks/linear_paths.py --dataset bibtex --repeats 21 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from sklearn.preprocessing import normalize

import holoxmc.models.linear.model as linear
from holoxmc.data import load
from holoxmc.data.batch import SparseBatch
from holoxmc.models.linear.fit import LinearConfig, fit_linear


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="bibtex")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train, test = load(args.dataset, "train"), load(args.dataset, "test")
    model, _ = fit_linear(train.X, train.Y, LinearConfig(C=1.0))
    table = torch.from_numpy(model.weights.toarray())

    def release_0_2(X: sp.csr_matrix, k: int = 5, batch_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
        n = X.shape[0]
        indices, scores = np.empty((n, k), np.int64), np.empty((n, k), np.float32)
        for start in range(0, n, batch_size):
            rows = slice(start, min(start + batch_size, n))
            batch = SparseBatch.from_csr(normalize(sp.csr_matrix(X[rows], dtype=np.float32)))
            out = F.embedding_bag(batch.indices, table, batch.offsets, mode="sum",
                                  per_sample_weights=batch.values).numpy()
            out += model.bias
            top = torch.from_numpy(out).topk(k, dim=1)
            indices[rows], scores[rows] = top.indices.numpy(), top.values.numpy()
        return indices, scores

    torch_for = linear._torch_for

    def no_torch(X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
        linear._torch_for = lambda products: None  # as in a process that has not imported torch
        try:
            return model.predict(X, 5)
        finally:
            linear._torch_for = torch_for

    scorers = {"0.2.0": release_0_2, "torch loaded": lambda X: model.predict(X, 5), "no torch": no_torch}
    X = test.X
    for scorer in scorers.values():
        scorer(X[:10])
    print(f"{args.dataset}: D = {model.n_features}, L = {model.n_labels}, {X.shape[0]} test rows, "
          f"{torch.get_num_threads()} torch threads, medians of {args.repeats}, ms per row")
    print("| rows | " + " | ".join(scorers) + " |")
    print("|---|" + "---|" * len(scorers))
    for rows in (1, 10, 100, X.shape[0]):
        seconds: dict[str, list[float]] = {name: [] for name in scorers}
        for _ in range(args.repeats):
            for name, scorer in scorers.items():
                started = time.perf_counter()
                scorer(X[:rows])
                seconds[name].append(time.perf_counter() - started)
        print(f"| {rows} | " + " | ".join(f"{1e3 * statistics.median(s) / rows:.4f}" for s in seconds.values()) + " |",
              flush=True)
    reference = release_0_2(X)
    for name in ("torch loaded", "no torch"):
        indices, scores = scorers[name](X)
        print(f"{name}: 0.2.0's top-5 labels {np.array_equal(indices, reference[0])}, "
              f"bit-identical scores {np.array_equal(scores, reference[1])}")


if __name__ == "__main__":
    main()

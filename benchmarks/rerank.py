"""Shortlist recall of candidate retrievers for a shortlist-and-re-rank model (issue 32 item 3).

On ``make_realistic`` data, each retriever proposes ``k`` labels per test row; recall@k is
the share of the test rows' true labels that the shortlist holds, pooled over rows. The
ceiling is the share of test labels seen in training (no retriever built from the training
rows can propose a label it never saw). Retrievers:

* ``pifa-exact``: PIFA label centroids (the L2-normalised mean TF-IDF row of a label's
  positive training rows), scored by a sparse product ``X @ C.T`` and a per-row top-k.
* ``pifa-kmeans``: the same centroids clustered by MiniBatchKMeans into ``~sqrt(L)``
  clusters; a row scores the cluster centres, keeps the best ``--beam`` clusters and scores
  only their labels exactly.

Usage:
    python benchmarks/rerank.py --labels 10000 --points 30000 --features 20000 --beam 10
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
from sklearn.cluster import MiniBatchKMeans
from sklearn.preprocessing import normalize

from holoxmc.data import make_realistic

KS = (50, 100, 200)


def pifa_centroids(X: sp.csr_matrix, Y: sp.csr_matrix) -> sp.csr_matrix:
    """``(L, D)`` L2-normalised mean feature row of each label's positives (empty rows stay 0)."""
    return normalize(sp.csr_matrix(Y.T @ X, dtype=np.float32), norm="l2", axis=1, copy=False)


def topk_rows(S: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest entries of each row of dense ``S``, best first."""
    k = min(k, S.shape[1])
    part = np.argpartition(-S, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(S, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def exact_shortlists(X: sp.csr_matrix, C: sp.csr_matrix, k: int, batch: int = 512) -> list[np.ndarray]:
    """Top-``k`` labels of ``X @ C.T`` per row, in row batches."""
    out: list[np.ndarray] = []
    CT = C.T.tocsc()
    for start in range(0, X.shape[0], batch):
        S = (X[start:start + batch] @ CT).toarray()
        out.extend(topk_rows(S, k))
    return out


def kmeans_shortlists(X: sp.csr_matrix, C: sp.csr_matrix, k: int, beam: int, seed: int) -> list[np.ndarray]:
    """Top-``k`` labels among those of the ``beam`` best MiniBatchKMeans clusters per row."""
    n_clusters = max(2, int(np.sqrt(C.shape[0])))
    km = MiniBatchKMeans(n_clusters=n_clusters, random_state=seed, n_init=1, batch_size=2048).fit(C)
    centres = normalize(km.cluster_centers_.astype(np.float32))
    members = [np.flatnonzero(km.labels_ == c) for c in range(n_clusters)]
    best = topk_rows(np.asarray(X @ centres.T), beam)
    out: list[np.ndarray] = []
    for i in range(X.shape[0]):
        labels = np.concatenate([members[c] for c in best[i]])
        scores = np.asarray((C[labels] @ X[i].T).todense()).ravel()
        out.append(labels[topk_rows(scores[None, :], k)[0]])
    return out


def recall(shortlists: list[np.ndarray], Y: sp.csr_matrix, k: int) -> float:
    """Pooled share of the true labels of ``Y``'s rows found in the first ``k`` shortlisted."""
    hit = total = 0
    for i, short in enumerate(shortlists):
        truth = Y.indices[Y.indptr[i]:Y.indptr[i + 1]]
        hit += np.isin(truth, short[:k]).sum()
        total += len(truth)
    return hit / max(total, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=30_000)
    parser.add_argument("--features", type=int, default=20_000)
    parser.add_argument("--beam", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    train, test = make_realistic(args.points, args.labels, args.features, seed=args.seed)
    seen = np.asarray(train.Y.sum(axis=0)).ravel() > 0
    ceiling = seen[test.Y.indices].mean()
    C = pifa_centroids(train.X, train.Y)
    print(f"L={args.labels} n_train={args.points} n_test={test.X.shape[0]} D={args.features} "
          f"ceiling={ceiling:.3f}")
    print("| retriever | " + " | ".join(f"recall@{k} (/ceiling)" for k in KS) + " | shortlist s (all test rows) |")
    print("|---|" + "---|" * (len(KS) + 1))
    for name in ("pifa-exact", "pifa-kmeans"):
        started = time.perf_counter()
        if name == "pifa-exact":
            short = exact_shortlists(test.X, C, KS[-1])
        else:
            short = kmeans_shortlists(test.X, C, KS[-1], args.beam, args.seed)
        seconds = time.perf_counter() - started
        row = [f"{recall(short, test.Y, k):.3f} ({recall(short, test.Y, k) / ceiling:.2f})" for k in KS]
        print(f"| {name} | " + " | ".join(row) + f" | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()

"""The ``xr`` head's design choice on a raw-text set's validation rows (never its test split):
a text network's pooled embedding beside TF-IDF, for a linear one-vs-rest model.

Trains the HRR text network once (``--backbone``, its CLI defaults) on the training rows less
the trainer's validation split (10 %, seed 0), selecting its epoch on those rows; then fits the
linear model (C 0.3, the library default) on the training rows' ``[TF-IDF, w · embedding]``
for every weight ``w`` of ``--weights`` (0: TF-IDF alone, the ``linear`` model) and prints
P@1/P@3/P@5 on the validation rows and each fit's seconds.

Example:
    python benchmarks/text_fusion.py debtags --backbone lstm --weights 0 0.5 1 2 --threads 1
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize

from holoxmc.data import load
from holoxmc.data.batch import input_batch
from holoxmc.estimator import XMCClassifier
from holoxmc.metrics import evaluate
from holoxmc.models.linear.fit import LinearConfig, fit_linear
from holoxmc.train.trainer import split_validation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", help="a raw-text set (registry name or folder)")
    parser.add_argument("--backbone", choices=["cnn", "lstm"], default="lstm")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.0, 0.5, 1.0, 2.0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = load(args.data, "train", features="tokens")
    X, T, Y = data.X.tocsr(), data.tokens, data.Y.tocsr()
    rows, held = split_validation(X.shape[0], 0.1, 0)
    start = time.perf_counter()
    clf = XMCClassifier(head="hrr", backbone=args.backbone, seed=0).fit(T[rows], Y[rows], T[held], Y[held])
    print(f"network: {time.perf_counter() - start:.0f} s, best epoch {clf.fit_result_.best_epoch}", flush=True)
    backbone = clf.network_.eval().backbone
    with torch.no_grad():
        embedding = normalize(np.concatenate([backbone(input_batch(T, np.arange(s, min(s + 1024, len(T))))).numpy()
                                              for s in range(0, len(T), 1024)]))
    for weight in args.weights:
        features = X if weight == 0 else sp.hstack([X, sp.csr_matrix(weight * embedding)], format="csr",
                                                   dtype=np.float32)
        start = time.perf_counter()
        model, _ = fit_linear(features[rows], Y[rows], LinearConfig(C=0.3))
        indices, _ = model.predict(features[held], k=5)
        metrics = evaluate(indices, Y[held], ks=(1, 3, 5))
        print(f"w={weight}: " + ", ".join(f"{k} {metrics[k]:.2f}" for k in ("P@1", "P@3", "P@5"))
              + f", fit {time.perf_counter() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main()

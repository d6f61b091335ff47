"""Do learned label vectors draw together? HRR Table 5's learned c_p, looked into.

Trains the paper's HRR-FC (3 x 512, d' = 400; HRR Table 5's first row) twice on one data set,
with fixed and with learned label vectors (``head_options={"learn_labels": True}``), and
reports test P@1 / P@5 and how alike the trained label vectors are: the mean cosine between
two different labels' projected vectors, over all pairs and over the 50 most frequent labels.
Fixed vectors are near-orthogonal (mean about 0); vectors that drift together score alike.

Example:
    HOLOXMC_DATA=../shared/data python benchmarks/learned_labels.py --dataset delicious --epochs 20
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from holoxmc.data import load
from holoxmc.estimator import XMCClassifier
from holoxmc.presets import paper_params


def label_cosines(clf: XMCClassifier, Y, top: int = 50) -> tuple[float, float]:
    """Mean cosine between different labels' vectors: all pairs, and the ``top`` most frequent labels'.
    For unit vectors the pairs' sum is ``|sum v|^2 - n``, so no ``L x L`` matrix is formed."""
    head = next(m for m in clf.network_.modules() if hasattr(m, "label_chunks"))

    def mean_pair_cosine(unit: torch.Tensor) -> float:
        n = unit.shape[0]
        return float((unit.sum(0).double().square().sum() - n) / (n * (n - 1)))

    with torch.no_grad():
        vectors = torch.cat([chunk for _, chunk in head.label_chunks()])
        vectors = vectors / vectors.norm(dim=1, keepdim=True)
        frequent = torch.as_tensor(np.argsort(-np.asarray(Y.sum(0)).ravel())[:top])
        return mean_pair_cosine(vectors), mean_pair_cosine(vectors[frequent])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="delicious")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train = load(args.dataset, "train")
    test = load(args.dataset, "test", widths=(train.n_features, train.n_labels))
    print("| label vectors | epochs | P@1 | P@5 | mean cos, all pairs | mean cos, 50 most frequent |")
    print("|---|---|---|---|---|---|")
    for learned in (False, True):
        params = paper_params(args.dataset, "hrr-fc") | {"hidden": (512,) * 3, "dim": 400, "epochs": args.epochs,
                                                          "seed": 0, "progress": False}
        if learned:
            params["head_options"] = params["head_options"] | {"learn_labels": True}
        clf = XMCClassifier(**params).fit(train.X, train.Y)
        scores = clf.evaluate(test.X, test.Y)
        everyone, frequent = label_cosines(clf, train.Y)
        print(f"| {'learned' if learned else 'fixed'} | {args.epochs} | {scores['P@1']:.2f} | {scores['P@5']:.2f} "
              f"| {everyone:.3f} | {frequent:.3f} |", flush=True)


if __name__ == "__main__":
    main()

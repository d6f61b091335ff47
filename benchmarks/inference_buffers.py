"""Top-5 prediction time of the FC backbone's inference path (bias and ReLU in place, no
fresh ``(B, width)`` buffer) against the allocating forward it replaced, side by side.

The previous forward is kept here as the reference: both run on the same untrained preset
networks (decoding time does not depend on the weights), interleaved per repeat, on the
whole test split; the medians and the median of per-repeat ratios are printed, and the
two paths' top-5 indices and scores are checked to be identical.

Usage:
    python benchmarks/inference_buffers.py bibtex --threads 2 --repeats 10
    python benchmarks/inference_buffers.py delicious --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np
import torch
from torch import Tensor

from holoxmc.backbones import FCBackbone
from holoxmc.backbones.network import Ensemble
from holoxmc.data import load
from holoxmc.data.batch import SparseBatch
from holoxmc.estimator import XMCClassifier, preset_params
from holoxmc.train import predict_topk


def allocating_forward(self: FCBackbone, x: SparseBatch) -> Tensor:
    """The forward before 2026-11-24: a new tensor for the bias sum and for each ReLU."""
    weights = x.values.to(self.input_bias.dtype)
    h = self.input_layer(x.indices, x.offsets, per_sample_weights=weights) + self.input_bias
    h = self.dropout(self.activation(h))
    for layer in self.layers:
        h = self.dropout(self.activation(layer(h)))
    if self.linear_width:
        h = torch.cat([h, self.linear_path(x.indices, x.offsets, per_sample_weights=weights)], dim=1)
    return h


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    test = load(args.dataset, "test")

    def network(model: str, seed: int) -> torch.nn.Module:
        clf = XMCClassifier(**preset_params(args.dataset, model))
        return clf.new_network(test.n_labels, test.n_features, seed).eval()

    models = {"fc": network("fc", 0), "hrr-fc": network("hrr-fc", 0)}
    n_models = preset_params(args.dataset, "hrr-fc").get("n_models", 1)
    if n_models > 1:
        models[f"hrr-fc x{n_models}"] = Ensemble([network("hrr-fc", 100 * m) for m in range(n_models)]).eval()
    forwards = {"allocating": allocating_forward, "in place": FCBackbone.forward}
    ms: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(args.repeats):
            for variant, forward in forwards.items():
                FCBackbone.forward = forward
                for name, model in models.items():
                    predict_topk(model, test.X[:64], 5)  # warm-up (a foldable HRR head folds here)
                    started = time.perf_counter()
                    predict_topk(model, test.X, 5)
                    ms.setdefault((name, variant), []).append(1000 * (time.perf_counter() - started) / len(test))
        for name, model in models.items():
            results = []
            for forward in forwards.values():
                FCBackbone.forward = forward
                results.append(predict_topk(model, test.X, 5))
            same = all(np.array_equal(a, b) for a, b in zip(*results))
            old, new = ms[(name, "allocating")], ms[(name, "in place")]
            print(f"{name}: {statistics.median(old):.4f} -> {statistics.median(new):.4f} ms per point, paired "
                  f"{statistics.median(a / b for a, b in zip(old, new)):.2f}x, identical top-5: {same}")
    finally:
        FCBackbone.forward = forwards["in place"]


if __name__ == "__main__":
    sys.exit(main())

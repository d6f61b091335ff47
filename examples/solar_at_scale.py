"""SOLAR at scale, made small: many labels, K independent chunk networks, inverted indices.

SOLAR (Medini et al., ICLR 2021) gives each label a sparse code: one of B buckets in each of
K chunks. Each chunk is a small network with B outputs, trained on its own (no
communication between chunks), so its cost grows with B, not with the label count L. At
inference each chunk's ``top_buckets`` best buckets are read through an inverted index
(bucket -> labels) and a label is a candidate once ``min_freq`` chunks retrieve it.

Here L = 5,000 labels on a synthetic set of 2,000 rows (seconds on a CPU); the same code
ran at L = 670,091 (docs: Results, "SOLAR"). ``workers=2`` would train the chunks in two
local processes and ``ray_address=...`` on a Ray cluster (examples/ray_distributed.py).

Run: ``python examples/solar_at_scale.py``.
"""

from __future__ import annotations

from holoxmc import XMCClassifier, load


def main() -> None:
    sizes = {"n_points": 2000, "n_test": 300, "n_labels": 5000, "n_features": 1000, "labels_per_point": 3.0,
             "zipf_exponent": 1.0, "seed": 0}
    train, test = load("synthetic", **sizes), load("synthetic", split="test", **sizes)
    print(f"L = {train.n_labels:,} labels, {train.X.shape[0]:,} training rows")

    solar = {"n_chunks": 4, "n_buckets": 500, "top_buckets": 20}  # K, B, m (SolarConfig's fields)
    clf = XMCClassifier(head="solar", head_options=solar, hidden=(64,), epochs=5, seed=0, progress=False)
    clf.fit(train.X, train.Y)
    print(f"parameters: {clf.n_parameters()} (a dense output layer alone would hold {64 * train.n_labels:,})")

    metrics = clf.evaluate(test.X, test.Y, ks=(1, 5), recall_ks=(100,))
    print({name: round(value, 2) for name, value in metrics.items() if name in ("P@1", "P@5", "Recall@100")})
    top, _ = clf.predict_topk(test.X[:2], 5)  # ranks its candidates cannot fill hold label -1
    print("top-5 label ids of two rows:", top.tolist())
    assert metrics["P@1"] > 10, "SOLAR should rank a frequent label first"


if __name__ == "__main__":
    main()

"""Would an approximate nearest-neighbour index (faiss) speed up HRR decoding at millions
of labels? Exact top-k against faiss's inverted-file index over the same decoding keys.

An HRR head ranks label ``i`` by ``query · key_i`` with ``key_i = p ⊗ c_i``: random unit
vectors drawn from the seed. The queries here are the best a trained network could give:
the exact sum of the keys of ``--labels-per-point`` planted labels (Amazon-670K: 5.45 on
average; here 5 per row) plus a little noise, so the planted labels are the exact top 5
of every row. Reported, side by side in one process:

* exact top-5 through ``HRRHead.topk`` with the random code (its cached key table, one
  matmul per chunk) and with the circulant code (no table, one FFT per group): ms per
  query, and the share of planted labels it returns (1.0 by construction);
* faiss ``IndexIVFFlat`` (inner product, ``--lists`` k-means cells trained on 100,000 keys)
  over the random code's keys, for each ``--probes`` value: build seconds, ms per query
  and the share of planted labels among its top 5 (its recall).

Usage (needs ``pip install faiss-cpu``, part of the ``bench`` extra):
    .venv/bin/python benchmarks/ann_decoding.py --labels 670091 --threads 2
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

from holoxmc import hrr
from holoxmc.heads.hrr import HRRHead


def planted_queries(keys: torch.Tensor, n_queries: int, per_row: int, noise: float,
                    generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(queries (n, d), planted label ids (n, per_row))``: each query the sum of its planted
    labels' keys plus Gaussian noise of norm about ``noise``."""
    planted = torch.randint(0, keys.shape[0], (n_queries, per_row), generator=generator)
    noise_part = torch.randn(n_queries, keys.shape[1], generator=generator) * noise / keys.shape[1] ** 0.5
    return keys[planted].sum(1) + noise_part, planted


def recall(found: np.ndarray, planted: np.ndarray) -> float:
    """Mean share of each row's planted labels among its found ones."""
    return float(np.mean([len(set(f) & set(p)) / len(p) for f, p in zip(found.tolist(), planted.tolist())]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labels", type=int, default=670_091)
    parser.add_argument("--dim", type=int, default=400)
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--labels-per-point", type=int, default=5)
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--lists", type=int, default=2048)
    parser.add_argument("--probes", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import faiss  # a benchmark-only dependency

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    print(f"{platform.machine()}, {os.cpu_count()} cores, {args.threads} threads, torch {torch.__version__}, "
          f"faiss {faiss.__version__}; L = {args.labels:,}, d' = {args.dim}, {args.queries} queries, "
          f"{args.labels_per_point} planted labels each")
    k = args.labels_per_point
    generator = torch.Generator().manual_seed(0)
    rows = []
    with torch.no_grad():
        head = HRRHead(1, args.labels, args.dim, seed=0)  # the random code, prebound keys cached
        keys = head.present_keys
        queries, planted = planted_queries(keys, args.queries, k, args.noise, generator)
        # Without a key table the circulant head unbinds p from its output, so its planted
        # outputs bind p to the sum of the label vectors c_i.
        circulant = HRRHead(1, args.labels, args.dim, seed=0, code="circulant", cache_codes=False)
        label_vectors = torch.cat([vectors for _, vectors in circulant.label_chunks()])
        c_sums, c_planted = planted_queries(label_vectors, args.queries, k, args.noise, generator)
        c_queries = hrr.bind(circulant.roles()[0], c_sums)
        for name, decoder, q, p in [("exact, random code (key table)", head, queries, planted),
                                    ("exact, circulant code (FFT, no table)", circulant, c_queries, c_planted)]:
            decoder.topk(q[:8], k)  # warm-up
            started = time.perf_counter()
            found = decoder.topk(q, k)[1]
            seconds = time.perf_counter() - started
            rows.append((name, "–", 1000 * seconds / len(q), recall(found.numpy(), p.numpy())))

        keys_np = keys.numpy()
        sample = np.random.default_rng(0).choice(args.labels, min(100_000, args.labels), replace=False)
        started = time.perf_counter()
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(args.dim), args.dim, args.lists, faiss.METRIC_INNER_PRODUCT)
        index.train(keys_np[sample])
        index.add(keys_np)
        build = time.perf_counter() - started
        for probes in args.probes:
            index.nprobe = probes
            started = time.perf_counter()
            _, found_np = index.search(queries.numpy(), k)
            seconds = time.perf_counter() - started
            rows.append((f"faiss IVF, {args.lists} lists, {probes} probed", f"{build:.1f}",
                         1000 * seconds / len(queries), recall(found_np, planted.numpy())))
    print("| decoder | build s | top-5 ms per query | planted labels found |")
    print("|---|---|---|---|")
    for name, build_s, ms, share in rows:
        print(f"| {name} | {build_s} | {ms:.3f} | {share:.3f} |")


if __name__ == "__main__":
    main()

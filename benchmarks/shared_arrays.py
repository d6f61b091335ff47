"""Shared arrays mapped from files against pickled into each worker: the re-rank fit's
training shortlists in two worker processes, interleaved repeats, on the first ``--rows``
training rows of a realistic preset (the PIFA index of all of them, 1000 postings).

``mapped``: :func:`holoxmc.distributed.run_jobs` as it is (arrays of 1 MiB or more mapped
read-only from temporary files); ``copied``: ``MAP_BYTES`` past every array, so each worker
unpickles its own copy (the behaviour before stage 11).

Usage:
    python benchmarks/shared_arrays.py --preset realistic-670k --rows 32768 --repeats 2
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp

from holoxmc.data import load
from holoxmc.distributed import jobs
from holoxmc.models.rerank import RerankModel, l2_rows
from holoxmc.train.rerank import pifa_index, training_shortlists


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="realistic-670k")
    parser.add_argument("--rows", type=int, default=32768)
    parser.add_argument("--shortlist", type=int, default=88)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    train = load(args.preset, "train")
    X, Y = l2_rows(train.X), sp.csr_matrix(train.Y, dtype=np.float32)
    index = pifa_index(X, Y, 1000)
    model = RerankModel(index.T, sp.csc_matrix((X.shape[1], Y.shape[1]), dtype=np.float32),
                        np.zeros(Y.shape[1], np.float32), args.shortlist, 0.0)
    default = jobs.MAP_BYTES
    for _ in range(args.repeats):
        for mode, limit in (("mapped", default), ("copied", 1 << 62)):
            jobs.MAP_BYTES = limit
            started = time.perf_counter()
            training_shortlists(model, X[:args.rows], workers=2)
            print(f"{mode}: {time.perf_counter() - started:.1f} s for {args.rows} rows", flush=True)
    jobs.MAP_BYTES = default


if __name__ == "__main__":
    main()

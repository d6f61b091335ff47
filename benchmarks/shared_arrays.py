"""Shared arrays mapped from files against pickled into each worker, and both against
threads: the re-rank fit's training shortlists in two worker processes or two threads,
interleaved repeats, on the first ``--rows`` training rows of a realistic preset (the PIFA
index of all of them, 1000 postings).

``mapped``: row blocks as jobs of :func:`holoxmc.distributed.run_jobs` in two worker
processes (arrays of 1 MiB or more mapped read-only from temporary files); ``copied``:
``MAP_BYTES`` past every array, so each worker unpickles its own copy (the behaviour before
stage 11); ``threads``: :func:`holoxmc.models.rerank.fit.training_shortlists` as it is, two threads
of this process (stage 12). The shortlists must be the same.

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
from holoxmc.models.rerank.model import RerankModel
from holoxmc.sparse import l2_rows
from holoxmc.models.rerank.fit import _Block, _shortlist_block, pifa_index, training_shortlists


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
    rows, default, reference = X[:args.rows], jobs.MAP_BYTES, None
    half = -(-args.rows // 2048) * 1024  # two blocks of whole batches
    blocks = [_Block(0, min(half, args.rows)), _Block(min(half, args.rows), args.rows)]
    for _ in range(args.repeats):
        for mode, limit in (("mapped", default), ("copied", 1 << 62), ("threads", default)):
            jobs.MAP_BYTES = limit
            started = time.perf_counter()
            if mode == "threads":
                labels = training_shortlists(model, rows, workers=2)
            else:
                labels = np.concatenate(jobs.run_jobs(_shortlist_block, blocks, (model, rows, model.shortlist), workers=2, gpu=False))
            print(f"{mode}: {time.perf_counter() - started:.1f} s for {args.rows} rows", flush=True)
            reference = labels if reference is None else reference
            assert np.array_equal(labels, reference)
    jobs.MAP_BYTES = default


if __name__ == "__main__":
    main()

"""Dense Adam against sparse updates (Adam's steps computed only on the input-layer rows a
batch reads, ``sparse_updates=True``; see ``holoxmc.train.optim.CatchUpAdam``), as measured here.

Every part trains with freed memory kept mapped, as the trainer does
(``TrainConfig.reuse_memory``; ``benchmarks/heap_reuse.py`` measures that setting itself).

Parts:

* ``steps``: one training step of an FC network (2x512, dense head, L = 1000, batch 64,
  100 uniformly drawn features per row) at growing D, both ways, alternating; median
  milliseconds per step. It shows where sparse updates pay: the share of rows one batch touches.
* ``crossover``: the same step on a grid of D and features per row, from tables dense
  Adam steps cheaply (D = 2,000) to read shares where it wins; the grid behind
  ``sparse_updates="auto"`` (``holoxmc.train.optim.choose_sparse_updates``).
* ``text``: one HRR-CNN and one HRR-LSTM training step on Debtags' token ids (vocabulary
  46,986, batch 64, 256 tokens), both ways, alternating with the order swapped every
  repeat; median milliseconds per step.
* ``epochs``: seconds per epoch, FC and HRR-FC (library defaults, or those with
  ``--epoch-overrides``, stored under their own key), dense and sparse
  updates interleaved in one process (``hrr_vs_dense.side_by_side``), on Debtags (real
  TF-IDF rows, D = 19,749) and on synthetic sets with the features of Amazon-670K
  (D = 135,909) and of D = 10^6.
* ``accuracy``: the same models trained both ways with ``holoxmc.estimator.fit_and_report``
  (validation split carved from train, best epoch by validation P@1); test P@1/3/5 and
  training seconds, on Debtags and the Amazon-670K-like synthetic set.

Usage:
    python benchmarks/sparse_updates.py --parts steps epochs --threads 1
    python benchmarks/sparse_updates.py --parts crossover --threads 1
    python benchmarks/sparse_updates.py --parts text --threads 1
    python benchmarks/sparse_updates.py --parts accuracy --threads 2
    # results are merged by part into benchmarks/results/sparse_updates.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn

from holoxmc.backbones import build_network
from holoxmc.data import load, make_synthetic
from holoxmc.data.batch import LabelBatch, SparseBatch, input_batch, label_batch
from holoxmc.cli.report import fit_and_report
from holoxmc.estimator import XMCClassifier
from holoxmc.io import atomic_write_json
from holoxmc.train.heap import reuse_freed_memory
from holoxmc.train.optim import build_optimizers, sparse_update_tables, watching

from hrr_vs_dense import side_by_side

OUT = Path("benchmarks/results/sparse_updates.json")
MODELS = {"fc": {"head": "dense"}, "hrr-fc": {"head": "hrr"}}


def both_ways(make_network: Callable[[], nn.Module]) -> dict[bool, tuple[nn.Module, list[torch.optim.Optimizer]]]:
    """Two copies of a network with their optimisers: dense Adam (``False``) and sparse updates (``True``)."""
    runs = {}
    for sparse in (False, True):
        network = make_network()
        tables = sparse_update_tables(network, sparse)
        runs[sparse] = (network, build_optimizers(network, tables, lr=1e-3, weight_decay=0.0, device=torch.device("cpu")))
    return runs


def timed_step(network: nn.Module, optimizers: list[torch.optim.Optimizer], x, y: LabelBatch) -> float:
    """Milliseconds of one training step: forward and loss, backward, the optimisers' steps."""
    started = time.perf_counter()
    loss = network.loss(x, y)
    for optimizer in optimizers:
        optimizer.zero_grad(set_to_none=True)
    loss.backward()
    for optimizer in optimizers:
        optimizer.step()
    return 1000 * (time.perf_counter() - started)


def step_ms(n_features: int, repeats: int, steps: int = 12, per_row: int = 100, batch: int = 64) -> dict:
    """Median ms per step, dense Adam vs sparse updates, alternating per repeat."""
    generator = torch.Generator().manual_seed(0)
    labels = LabelBatch.from_csr(sp.random(batch, 1000, density=0.005, format="csr", random_state=0, dtype=np.float32))
    runs = both_ways(lambda: build_network("fc", "dense", n_features=n_features, n_labels=1000, hidden=[512, 512], seed=0))
    times: dict[bool, list[float]] = {False: [], True: []}
    shares = []
    with reuse_freed_memory():  # as the trainer runs its steps (``TrainConfig.reuse_memory``)
        for _ in range(repeats):
            for sparse, (network, optimizers) in runs.items():
                with watching(optimizers, network):  # sparse updates catch rows up before reads, as in training
                    for step in range(steps):
                        indices = torch.randint(0, n_features, (batch * per_row,), generator=generator)
                        shares.append(len(torch.unique(indices)) / n_features)
                        x = SparseBatch(indices, torch.arange(0, batch * per_row, per_row), torch.ones(batch * per_row), n_features)
                        milliseconds = timed_step(network, optimizers, x, labels)
                        if step >= 2:  # the first steps allocate the optimiser state
                            times[sparse].append(milliseconds)
    dense, sparse = statistics.median(times[False]), statistics.median(times[True])
    return {"D": n_features, "draws_per_batch_over_D": batch * per_row / n_features,
            "read_share": statistics.mean(shares), "dense_ms": dense, "sparse_ms": sparse, "speedup": dense / sparse}


def text_step_ms(backbone: str, repeats: int, steps: int = 8, batch: int = 64) -> dict:
    """Median ms per HRR-``backbone`` step on Debtags' token ids, dense Adam vs sparse
    updates; the two alternate, in swapped order every repeat."""
    data = load("debtags", "train", features="tokens", max_length=256)
    vocab = int(data.tokens.max()) + 1
    order = np.random.default_rng(0).permutation(len(data))
    clf = XMCClassifier(head="hrr", backbone=backbone)
    runs = both_ways(lambda: clf.new_network(data.n_labels, vocab).train())
    times: dict[bool, list[float]] = {False: [], True: []}
    with reuse_freed_memory():  # as the trainer runs its steps
        for repeat in range(repeats):
            for sparse in (False, True) if repeat % 2 == 0 else (True, False):
                network, optimizers = runs[sparse]
                with watching(optimizers, network):
                    for step in range(steps):
                        rows = order[(repeat * steps + step) * batch : (repeat * steps + step + 1) * batch]
                        milliseconds = timed_step(network, optimizers, input_batch(data.tokens, rows), label_batch(data.Y, rows))
                        if step >= 1:
                            times[sparse].append(milliseconds)
    dense, sparse = statistics.median(times[False]), statistics.median(times[True])
    return {"backbone": backbone, "vocabulary": vocab, "dense_ms": dense, "sparse_ms": sparse, "speedup": dense / sparse,
            "all": {"dense": times[False], "sparse": times[True]}}


def synthetic(n_features: int, n_points: int):
    return make_synthetic(n_points, 5_000, n_features, n_test=n_points // 4, labels_per_point=5.45, seed=0,
                          name=f"synthetic-D{n_features}")


def sets(names: list[str], n_points: int):
    for name in names:
        if name == "debtags":
            yield name, load("debtags", "train"), load("debtags", "test")
        else:
            yield name, *synthetic(int(name.removeprefix("synthetic-D")), n_points)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", nargs="+", default=["steps", "epochs", "accuracy"],
                        choices=["steps", "crossover", "text", "epochs", "accuracy"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--step-features", type=int, nargs="+", default=[20_000, 50_000, 100_000, 200_000, 1_000_000])
    parser.add_argument("--crossover", nargs="+", default=["2000:2,5,10", "5000:5,10,20,40", "10000:5,10,16,30",
                                                           "15000:12,24,36", "20000:10,30,60,100", "50000:100,250"],
                        metavar="D:PER_ROW,...", help="the crossover grid: D and the features drawn per row")
    parser.add_argument("--epoch-sets", nargs="+", default=["debtags", "synthetic-D135909", "synthetic-D1000000"])
    parser.add_argument("--epoch-points", type=int, default=3_200, help="training points of the synthetic timing sets")
    parser.add_argument("--epoch-overrides", type=json.loads, default={},
                        help='JSON XMCClassifier keywords over the library defaults in the epochs part, e.g. \'{"hidden": [2048]}\'')
    parser.add_argument("--accuracy-sets", nargs="+", default=["debtags", "synthetic-D135909"])
    parser.add_argument("--accuracy-points", type=int, default=20_000)
    parser.add_argument("--accuracy-epochs", type=int, default=None, help="default: the library's 20")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = json.loads(OUT.read_text()) if OUT.exists() else {}
    machine = f"{platform.machine()}, {torch.get_num_threads()} torch threads, torch {torch.__version__}"

    if "steps" in args.parts:
        rows = []
        for n_features in args.step_features:
            rows.append(step_ms(n_features, args.repeats))
            print(json.dumps(rows[-1]), flush=True)
        results["steps"] = {"machine": machine, "repeats": args.repeats, "rows": rows}

    if "crossover" in args.parts:
        rows = []
        for point in args.crossover:
            n_features, per_rows = point.split(":")
            for per_row in per_rows.split(","):
                rows.append(step_ms(int(n_features), args.repeats, per_row=int(per_row)) | {"per_row": int(per_row)})
                print(json.dumps(rows[-1]), flush=True)
        results["crossover"] = {"machine": machine, "repeats": args.repeats, "rows": rows}

    if "text" in args.parts:
        rows = []
        for backbone in ("cnn", "lstm"):
            rows.append(text_step_ms(backbone, args.repeats))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "all"}), flush=True)
        results["text"] = {"machine": machine, "repeats": args.repeats, "rows": rows}

    if "epochs" in args.parts:
        rows = []
        for name, train, _ in sets(args.epoch_sets, args.epoch_points):
            params = {f"{model} {'sparse' if flag else 'dense'}":
                      base | args.epoch_overrides | {"sparse_updates": flag, "progress": False}
                      for model, base in MODELS.items() for flag in (False, True)}
            seconds = side_by_side(params, train.X, train.Y, args.repeats)["epoch_seconds"]
            row = {"set": name, "points": len(train), "D": train.n_features, "L": train.n_labels,
                   "seconds": {k: statistics.median(v) for k, v in seconds.items()}, "all": seconds}
            rows.append(row)
            print(json.dumps(row["seconds"] | {"set": name}), flush=True)
        key = "epochs" + (f" {json.dumps(args.epoch_overrides, sort_keys=True)}" if args.epoch_overrides else "")
        results[key] = {"machine": machine, "repeats": args.repeats, "overrides": args.epoch_overrides, "rows": rows}

    if "accuracy" in args.parts:
        rows = results.get("accuracy", {}).get("rows", [])
        for name, train, test in sets(args.accuracy_sets, args.accuracy_points):
            for model, base in MODELS.items():
                for flag in (False, True):
                    params = base | {"sparse_updates": flag, "progress": False}
                    if args.accuracy_epochs is not None:
                        params["epochs"] = args.accuracy_epochs
                    report = fit_and_report(XMCClassifier(**params), train.X, train.Y, test.X, test.Y)
                    row = {"set": name, "points": len(train), "D": train.n_features, "model": model,
                           "sparse_updates": flag, "epochs": params.get("epochs", 20),
                           "best_epoch": report["best_epoch"], "train_seconds": report["train_seconds"],
                           **{k: report["test"][k] for k in ("P@1", "P@3", "P@5")}}
                    rows = [r for r in rows if (r["set"], r["model"], r["sparse_updates"]) != (name, model, flag)]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        results["accuracy"] = {"machine": f"{platform.machine()}, {torch.get_num_threads()} torch threads", "rows": rows}

    atomic_write_json(OUT, results)


if __name__ == "__main__":
    main()

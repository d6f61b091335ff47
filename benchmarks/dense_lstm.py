"""Why the dense-head LSTM ranked the most frequent label first, and what its prior bias changes.

Parts:
  steps    Debtags, the first steps of the dense-head LSTM at its defaults (Adam, lr 2e-3, batch
           128): the loss, per-layer gradient norms and medians against Adam's epsilon, then
           after ``--steps`` steps the backbone output's mean and spread across rows, its dead
           units, and P@1 on 500 of the trainer's validation rows, for three starts of the head's
           biases: as before (U(+-1/sqrt(fan_in))), ``-log L`` and the labels' log-odds.
  heldout  A bag-of-words set (Bibtex, Delicious) read as sequences of its word ids: the dense
           LSTM with and without ``prior_bias``, P@1/P@5 on 10 % of the training rows held out
           (never the test split); each row's first ``--length`` word ids.

Example:
    python benchmarks/dense_lstm.py steps --steps 60
    python benchmarks/dense_lstm.py heldout bibtex --length 48
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from holoxmc.backbones.network import build_network
from holoxmc.backbones.tokens import clip_tokens
from holoxmc.data import load
from holoxmc.data.batch import label_batch
from holoxmc.estimator import XMCClassifier
from holoxmc.experiments.reproduce import _tokens_from_features
from holoxmc.metrics import evaluate
from holoxmc.presets import BACKBONE_DEFAULTS, BACKBONE_OPTIONS
from holoxmc.train.trainer import split_validation

BIASES = ("uniform", "minus-log-L", "log-odds")


def _p_at_1(net: torch.nn.Module, X: np.ndarray, Y, rows: np.ndarray) -> float:
    net.eval()
    with torch.no_grad():
        top = net.topk(torch.as_tensor(X[rows], dtype=torch.long), 1)[1][:, 0].numpy()
    net.train()
    return 100.0 * float(np.mean([Y[r, t] for r, t in zip(rows.tolist(), top.tolist())]))


def _report_gradients(net: torch.nn.Module, step: int, loss: float, eps: float) -> None:
    print(f"step {step}: loss {loss:.5f}")
    for name, p in net.named_parameters():
        g = p.grad.abs()
        print(f"    {name:36s} |g| {p.grad.norm():.2e}  median |g| {g.median():.1e}  share below eps {(g < eps).float().mean():.2f}")


def _backbone_summary(net, X: np.ndarray, rows: np.ndarray, max_length: int) -> str:
    net.eval()
    with torch.no_grad():
        tokens = clip_tokens(torch.as_tensor(X[rows], dtype=torch.long), max_length)
        h = net.backbone(tokens)
    net.train()
    return (f"output mean {h.mean():.3f}, spread across rows {h.std(0).mean():.3f}, "
            f"dead units {100 * (h.amax(0) == 0).float().mean():.0f} %")


def part_steps(steps: int) -> None:
    train = load("debtags", "train", features="tokens")
    X, Y = train.tokens, train.Y.tocsr()
    fit_rows, val_rows = split_validation(X.shape[0], 0.1, 0)
    settings, sizes = BACKBONE_DEFAULTS["lstm"], BACKBONE_OPTIONS["lstm"]
    share = (np.asarray(Y[fit_rows].sum(0)).ravel() + 0.5) / (len(fit_rows) + 1.0)
    for bias in BIASES:
        net = build_network("lstm", "dense", n_labels=Y.shape[1], vocab_size=train.tokens.max() + 1, seed=0,
                            dropout=settings["dropout"], **sizes)
        with torch.no_grad():
            if bias == "minus-log-L":
                net.head.linear.bias.fill_(-math.log(Y.shape[1]))
            elif bias == "log-odds":
                net.head.linear.bias.copy_(torch.as_tensor(np.log(share / (1 - share)), dtype=torch.float32))
        optimizer = torch.optim.Adam(net.parameters(), lr=settings["lr"])
        order = np.random.default_rng(0).permutation(fit_rows)
        started, losses = time.perf_counter(), []
        for step in range(steps):
            rows = order[step * settings["batch_size"]:][: settings["batch_size"]]
            loss = net.loss(torch.as_tensor(X[rows], dtype=torch.long), label_batch(Y, rows))
            optimizer.zero_grad()
            loss.backward()
            if bias == "uniform" and step in (0, 20, steps - 1):
                _report_gradients(net, step, loss.item(), optimizer.defaults["eps"])
            optimizer.step()
            losses.append(loss.item())
        print(f"bias {bias}: loss first 10 steps {np.mean(losses[:10]):.4f}, last 10 {np.mean(losses[-10:]):.4f}; "
              f"validation P@1 (500 rows) {_p_at_1(net, X, Y, val_rows[:500]):.2f}; "
              f"{_backbone_summary(net, X, val_rows[:200], sizes['max_length'])}; {time.perf_counter() - started:.0f} s",
              flush=True)
    most = np.asarray(Y[fit_rows].sum(0)).ravel().argmax()
    print(f"most frequent label's share of those 500 rows: {100 * Y[val_rows[:500], most].mean():.2f}")


def part_heldout(name: str, length: int) -> None:
    train = load(name, "train")
    X, Y = _tokens_from_features(train.X.tocsr(), length), train.Y.tocsr()
    fit_rows, held_out = split_validation(X.shape[0], 0.1, 1)
    most = np.asarray(Y[fit_rows].sum(0)).ravel().argmax()
    print(f"{name}: {X.shape[0]} rows, {Y.shape[1]} labels; most frequent label's P@1 on the held-out rows "
          f"{100 * Y[held_out, most].mean():.2f}", flush=True)
    for prior in (False, True):
        started = time.perf_counter()
        clf = XMCClassifier(head="dense", backbone="lstm", progress=False, head_options={"prior_bias": prior, "max_length": length})
        clf.fit(X[fit_rows], Y[fit_rows])
        metrics = evaluate(clf.predict_topk(X[held_out], k=5)[0], Y[held_out])
        print(f"prior_bias={prior}: held-out P@1 {metrics['P@1']:.2f}, P@5 {metrics['P@5']:.2f}; "
              f"{time.perf_counter() - started:.0f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=("steps", "heldout"))
    parser.add_argument("dataset", nargs="?", default="bibtex")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--length", type=int, default=48, help="heldout: word ids read per row")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    part_steps(args.steps) if args.part == "steps" else part_heldout(args.dataset, args.length)


if __name__ == "__main__":
    main()

"""Training step time of the text backbones (CNN, attention BiLSTM) on a CPU: the same
training batches of a text set's token ids go through each variant (a backbone and its
keywords, HRR head), one Adam step each, variants interleaved per repeat; the median
wall time per step is printed, and the ratio to the first variant.

The first LSTM variant is the backbone as it was before this benchmark's fixes:
``"packed": true`` runs the BiLSTM on packed sequences, ``"trim": false`` reads every batch
at the tokenizer's full width.

Usage:
    python benchmarks/text_step.py debtags --repeats 5 --steps 20
    python benchmarks/text_step.py debtags --variants '{"backbone": "lstm", "trim": false}' '{"backbone": "lstm"}'
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from holoxmc.backbones import lstm as lstm_module
from holoxmc.backbones.lstm import AttentionLSTMBackbone
from holoxmc.backbones.network import build_network
from holoxmc.data import load
from holoxmc.data.batch import input_batch, label_batch
from holoxmc.presets import BACKBONE_OPTIONS

#: The backbones as the HRR paper's appendix sizes them, then holoxmc's defaults.
DEFAULT_VARIANTS = [
    {"backbone": "lstm", "packed": True, "trim": False, "embed_dim": 300, "hidden_size": 256, "fc_size": 256,
     "max_length": None},
    {"backbone": "lstm", "embed_dim": 300, "hidden_size": 256, "fc_size": 256, "max_length": None},
    {"backbone": "lstm"},
    {"backbone": "cnn", "embed_dim": 300, "n_filters": 32, "max_length": 256},
    {"backbone": "cnn"},
]


def packed_states(self: Any, inputs: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The BiLSTM's states as the backbone computed them before: on packed sequences."""
    packed = pack_padded_sequence(inputs, lengths.cpu(), batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=inputs.shape[1])[0]


@contextmanager
def as_before(trim: bool, packed: bool) -> Iterator[None]:
    """With ``trim=False``, the LSTM reads every batch at its full padded width; with
    ``packed=True``, it runs on packed sequences."""
    original, states = lstm_module.clip_tokens, AttentionLSTMBackbone.bidirectional_states
    if not trim:
        lstm_module.clip_tokens = lambda tokens, max_length: tokens  # type: ignore[assignment]
    if packed:
        AttentionLSTMBackbone.bidirectional_states = packed_states  # type: ignore[method-assign]
    try:
        yield
    finally:
        lstm_module.clip_tokens, AttentionLSTMBackbone.bidirectional_states = original, states  # type: ignore[method-assign]


def step_seconds(variant: dict[str, Any], batches: list[tuple[Any, Any]], vocab: int, n_labels: int) -> float:
    """Median wall seconds of one training step (forward, loss, backward, Adam) over ``batches``."""
    options = dict(variant)
    backbone, trim, packed = options.pop("backbone"), options.pop("trim", True), options.pop("packed", False)
    options = BACKBONE_OPTIONS[backbone] | options
    network = build_network(backbone, "hrr", vocab_size=vocab, n_labels=n_labels, dim=400, seed=0, **options)
    optimizer = torch.optim.Adam(network.parameters(), lr=1e-3)
    times = []
    with as_before(trim, packed):
        for tokens, labels in batches:
            start = time.perf_counter()
            optimizer.zero_grad()
            network.loss(tokens, labels).backward()
            optimizer.step()
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("--variants", nargs="*", type=json.loads, default=DEFAULT_VARIANTS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    train = load(args.dataset, "train", features="tokens")
    rng = np.random.default_rng(0)
    rows = [rng.choice(len(train), args.batch_size, replace=False) for _ in range(args.steps)]
    batches = [(input_batch(train.tokens, r), label_batch(train.Y, r)) for r in rows]
    vocab = int(train.tokens.max()) + 1
    medians: list[list[float]] = [[] for _ in args.variants]
    print(f"{args.dataset}: {args.steps} steps of {args.batch_size} rows, {args.repeats} repeats, "
          f"{args.threads} threads; width {train.tokens.shape[1]}", flush=True)
    for repeat in range(args.repeats):
        for i, variant in enumerate(args.variants):
            medians[i].append(step_seconds(variant, batches, vocab, train.n_labels))
            print(f"repeat {repeat}: {json.dumps(variant)} {1000 * medians[i][-1]:.1f} ms/step", flush=True)
    first = statistics.median(medians[0])
    for variant, values in zip(args.variants, medians):
        ms = 1000 * statistics.median(values)
        print(f"{json.dumps(variant):110s} {ms:9.1f} ms/step  x{first / (ms / 1000):5.2f}", flush=True)


if __name__ == "__main__":
    main()

"""HRR-FC variants that were tried on the validation split and NOT adopted.

Each variant is installed by patching the library at run time, so none of them lives in
``holoxmc``; this script exists so that the tuning log's rows (``benchmarks/TUNING.md``) can be re-run. It runs
one :func:`tune_hrr.run_trial` (validation only, the test split is never loaded) and
appends the result, tagged with the variant, to ``--log``.

Variants (``{"name": ..., **their parameters}``):

* ``contrast``: decode with ``ŝ·(p⊗c − m⊗c)`` instead of ``ŝ·(p⊗c)``.
* ``no_jn``: train without ``J_n`` (``J_p``, plus ``J_r`` when the preset has the ranking term).
* ``hinge``: add ``λ·Σ relu(cos(p*⊗ŝ, c))`` over ``samples`` uniformly drawn absent labels.
* ``ema``: evaluate and keep an exponential moving average of the weights (``decay``).
* ``l2_input``: L2-normalise every input row.
* ``input_dropout``: drop input features with probability ``p`` while training.
* ``orthogonal_code``: for L ≤ d', label vectors that are exactly orthogonal (circular
  shifts of one projected vector: unitary, so their shifts are orthonormal).
* ``jp_mean``: ``J_p`` averaged over a row's present labels instead of summed.
* ``raw_bias``: with ``label_bias``, the ranking logits and decoding use the raw score
  ``ŝ·(p⊗c) + b`` instead of ``τ·cos + b`` (decoding could then fold the two layers).
* ``bce_ranking``: with ``label_bias``, replace the ranking softmax by binary cross-entropy
  over all labels of ``τ·cos + b`` (``reduce``: ``"sum"`` or ``"mean"`` over labels).
* ``bias_step_scale``: the label bias as ``scale · raw`` (``torch.nn.utils.parametrize``),
  so one Adam step moves it ``scale`` times further; ``scale = τ`` is the bias in cosine
  units, logits ``τ·(cos + β)``.
* ``head_lr``: the HRR output layer trained with ``scale`` times the learning rate of the
  rest of the network (Adam parameter groups).
* ``learned_scale``: τ (``ranking_scale``) learned with the network, stored as ``log τ``
  and initialised at the preset's value; the loss then runs on autograd, since the fused
  node takes τ as a constant.
* ``low_rank``: the HRR output layer factored as ``(dim × rank)(rank × in)`` (``rank``, 160
  by default: L = 159 on Bibtex, so the decoded scores, linear in ``ŝ``, lose nothing), to
  bring a d' = 800 network's step to FC's cost.
* ``code_draw``: not a method but a noise gauge: the same random label code drawn from
  another stream (``stream``), to see how far one code draw moves a configuration.

``--pseudo-test`` scores the variant on a pseudo-test carved from the training split
(``refit_check.check``: standard protocol and refit) instead of on the validation split.

Usage:
    python benchmarks/tune_hrr_rejected.py delicious '{"name": "ema", "decay": 0.999}' --seed 1
    python benchmarks/tune_hrr_rejected.py bibtex '{"name": "orthogonal_code"}' --overrides '{"dim": 192}'
    python benchmarks/tune_hrr_rejected.py delicious '{"name": "bce_ranking", "reduce": "mean"}'
    python benchmarks/tune_hrr_rejected.py delicious '{"name": "bias_step_scale", "scale": 10}' --pseudo-test
    python benchmarks/tune_hrr_rejected.py bibtex '{"name": "head_lr", "scale": 5}' --overrides '{"dim": 160}'
    python benchmarks/tune_hrr_rejected.py bibtex '{"name": "code_draw", "stream": 500}'
    python benchmarks/tune_hrr_rejected.py bibtex '{"name": "low_rank", "rank": 160}' --overrides '{"refit": false}'
    python benchmarks/tune_hrr_rejected.py debtags '{"name": "code_draw", "stream": 500}' --threads 2
    python benchmarks/tune_hrr_rejected.py bibtex '{"name": "learned_scale"}' --overrides '{"head_options": {"ranking": 1.0, "label_bias": true}}' --pseudo-test
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from pathlib import Path

import torch
from torch.nn import functional as F
from torch.nn.utils import parametrize

import refit_check
import tune_hrr
from holoxmc.backbones import fc as fc_module
from holoxmc.codes import hrr as code_module
from holoxmc.data.batch import SparseBatch
from holoxmc.heads.hrr import HRRHead
from holoxmc.io import atomic_write_text
from holoxmc.train import trainer as trainer_module


def contrast(options: dict) -> None:
    HRRHead._folding_pays = lambda self: False

    def keys(self):
        for start in range(0, self.n_labels, self.code.chunk_size):
            stop = start + self.code.chunk_size
            yield start, self.present_keys[start:stop] - self.missing_keys[start:stop]

    HRRHead._decoding_keys = keys


def no_jn(options: dict) -> None:
    def loss(self, out, labels):
        query = F.normalize(out, dim=-1)
        sum_p, _ = self._present_key_sums(labels, out.dtype)
        row_scores = (query * sum_p).sum(-1)
        total = labels.indices.shape[0] - row_scores.sum()
        if self.ranking:
            total = total + self.ranking * self._ranking_loss(query, labels, row_scores)
        return total / out.shape[0]

    HRRHead.loss = loss


def hinge(options: dict) -> None:
    paper_loss = HRRHead.loss

    def loss(self, out, labels):
        drawn = torch.randint(self.n_labels, (options.get("samples", 256),))
        candidates, inverse = torch.unique(torch.cat([labels.indices, drawn]), return_inverse=True)
        cos = F.normalize(out, dim=-1) @ self.present_keys.index_select(0, candidates).T
        present = torch.zeros_like(cos)
        present[labels.row_ids(), inverse[: labels.indices.shape[0]]] = 1.0
        penalty = (F.relu(cos) * (1 - present)).sum() / out.shape[0]
        return paper_loss(self, out, labels) + options.get("weight", 0.1) * penalty

    HRRHead.loss = loss


def ema(options: dict) -> None:
    decay, averages, selected = options.get("decay", 0.999), {}, {}
    adam_step, evaluate, copy_state = torch.optim.Adam.step, trainer_module.evaluate_topk, trainer_module._copy_state

    def step(self, *args, **kwargs):
        result = adam_step(self, *args, **kwargs)
        with torch.no_grad():
            for p in (p for group in self.param_groups for p in group["params"]):
                averages.setdefault(p, p.detach().clone()).mul_(decay).add_(p.detach(), alpha=1 - decay)
        return result

    def evaluate_average(network, *args, **kwargs):
        params = list(network.parameters())
        current = [p.detach().clone() for p in params]
        with torch.no_grad():
            for p in params:
                p.copy_(averages.get(p, p))
        torch.autograd.graph.increment_version(params)
        metrics = evaluate(network, *args, **kwargs)
        selected["state"] = copy_state(network)
        with torch.no_grad():
            for p, value in zip(params, current):
                p.copy_(value)
        torch.autograd.graph.increment_version(params)
        return metrics

    torch.optim.Adam.step = step
    trainer_module.evaluate_topk = evaluate_average
    trainer_module._copy_state = lambda module: selected.get("state") or copy_state(module)


def _reweight_inputs(transform) -> None:
    forward = fc_module.FCBackbone.forward

    def patched(self, x: SparseBatch):
        return forward(self, SparseBatch(x.indices, x.offsets, transform(self, x), x.n_features))

    fc_module.FCBackbone.forward = patched


def l2_input(options: dict) -> None:
    def normalise(self, x: SparseBatch):
        counts = torch.diff(torch.cat([x.offsets, torch.tensor([x.indices.shape[0]])]))
        rows = torch.repeat_interleave(torch.arange(len(x)), counts)
        norms = torch.zeros(len(x)).index_add_(0, rows, x.values**2).sqrt().clamp_min(1e-12)
        return x.values / norms[rows]

    _reweight_inputs(normalise)


def input_dropout(options: dict) -> None:
    p = options.get("p", 0.3)

    def drop(self, x: SparseBatch):
        if not self.training:
            return x.values
        return x.values * (torch.rand(x.values.shape[0]) >= p).to(x.values.dtype) / (1 - p)

    _reweight_inputs(drop)


def orthogonal_code(options: dict) -> None:
    def spectrum(self, j):
        start, stop = self.chunk_bounds(j)
        generator = code_module.local_generator(self.seed, 0, 99)
        base = code_module._projected_gaussian_spectrum(1, self.dim, generator, self.dtype)
        shifts = torch.floor(torch.arange(start, stop, dtype=torch.float64) * self.dim / self.n_labels)
        phase = -2 * math.pi * shifts[:, None] * torch.arange(self.dim // 2 + 1, dtype=torch.float64) / self.dim
        return base * torch.polar(torch.ones_like(phase), phase).to(base.dtype)

    code_module.HRRLabelCode._chunk_spectrum = spectrum


def _paper_terms(head: HRRHead, out: torch.Tensor, labels) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Unit ``ŝ``, per-row summed present cosines, and ``Σ J_n`` (fixed roles, cosine loss)."""
    unit = F.normalize(out, dim=-1, eps=1e-8)
    sum_p, sum_m = head._present_key_sums(labels, out.dtype)
    j_negative = ((unit * sum_m).sum(-1) / sum_m.norm(dim=-1).clamp_min(1e-8)).sum()
    return unit, (unit * sum_p).sum(-1), j_negative


def code_draw(options: dict) -> None:
    def spectrum(self, j):
        start, stop = self.chunk_bounds(j)
        generator = code_module.local_generator(self.seed, 0, options.get("stream", 500) + j)
        return code_module._projected_gaussian_spectrum(stop - start, self.dim, generator, self.dtype)

    code_module.HRRLabelCode._chunk_spectrum = spectrum


def jp_mean(options: dict) -> None:
    def loss(self, out, labels):
        unit, row_scores, j_negative = _paper_terms(self, out, labels)
        counts = labels.counts()
        total = ((counts > 0).to(out.dtype) - row_scores / counts.clamp_min(1)).sum() + j_negative
        if self.ranking:
            total = total + self.ranking * self._ranking_loss(unit, labels, row_scores)
        return total / out.shape[0]

    HRRHead.loss = loss


def raw_bias(options: dict) -> None:
    def loss(self, out, labels):
        unit, row_scores, j_negative = _paper_terms(self, out, labels)
        total = labels.indices.shape[0] - row_scores.sum() + j_negative
        counts = labels.counts()
        bias_sums = torch.zeros(out.shape[0]).index_add(0, labels.row_ids(), self.label_bias[labels.indices])
        sum_p, _ = self._present_key_sums(labels, out.dtype)
        mean_positive = ((out * sum_p).sum(-1) + bias_sums) / counts.clamp_min(1)
        drawn = torch.randint(self.n_labels, (self.ranking_candidates,))
        log_absent = torch.logsumexp(out @ self._ranking_keys(drawn).T + self.label_bias[drawn], 1)
        share = (self.n_labels - counts).to(out.dtype) / self.ranking_candidates
        log_partition = torch.logaddexp(torch.log(counts.clamp_min(1).to(out.dtype)) + mean_positive,
                                        torch.log(share) + log_absent)
        j_rank = ((log_partition - mean_positive) * (counts > 0).to(out.dtype)).sum()
        return (total + self.ranking * j_rank) / out.shape[0]

    def decoding_scores(self, out):
        return self._label_scores(out, self.label_bias)

    HRRHead.loss = loss
    HRRHead._decoding_scores = decoding_scores


def bce_ranking(options: dict) -> None:
    def loss(self, out, labels):
        unit, row_scores, j_negative = _paper_terms(self, out, labels)
        total = labels.indices.shape[0] - row_scores.sum() + j_negative
        logits = torch.cat([s for _, s in self._label_scores(self.ranking_scale * unit, self.label_bias)], 1)
        target = torch.zeros_like(logits)
        target[labels.row_ids(), labels.indices] = 1.0
        bce = F.binary_cross_entropy_with_logits(logits, target, reduction="sum")
        if options.get("reduce", "sum") == "mean":
            bce = bce / self.n_labels
        return (total + self.ranking * bce) / out.shape[0]

    HRRHead.loss = loss


class _Scaled(torch.nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, raw: torch.Tensor) -> torch.Tensor:
        return self.scale * raw

    def right_inverse(self, value: torch.Tensor) -> torch.Tensor:
        return value / self.scale


def bias_step_scale(options: dict) -> None:
    init = HRRHead.__init__

    @functools.wraps(init)
    def scaled_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.label_bias is not None:
            parametrize.register_parametrization(self, "label_bias", _Scaled(options.get("scale", 10.0)))

    HRRHead.__init__ = scaled_init


def head_lr(options: dict) -> None:
    scale, head_ids = options.get("scale", 5.0), set()
    init = HRRHead.__init__

    @functools.wraps(init)
    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        head_ids.update(id(p) for p in self.linear.parameters())

    class ScaledAdam(torch.optim.Adam):
        def __init__(self, params, **kwargs):
            params = list(params)
            groups = [{"params": [p for p in params if id(p) not in head_ids]},
                      {"params": [p for p in params if id(p) in head_ids], "scale": scale}]
            super().__init__(groups, **kwargs)

        def step(self, *args, **kwargs):
            for group in self.param_groups:
                group["lr"] *= group.get("scale", 1.0)
            result = super().step(*args, **kwargs)
            for group in self.param_groups:
                group["lr"] /= group.get("scale", 1.0)
            return result

    HRRHead.__init__ = recording_init
    trainer_module.torch.optim.Adam = ScaledAdam


def learned_scale(options: dict) -> None:
    init = HRRHead.__init__

    @functools.wraps(init)
    def learning_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.log_ranking_scale = torch.nn.Parameter(torch.tensor(math.log(self._scale_init)))

    def get_scale(self):
        return self.log_ranking_scale.exp() if "log_ranking_scale" in self._parameters else self._scale_init

    def set_scale(self, value):
        self._scale_init = float(value)

    def loss(self, out, labels):  # the autograd path: the fused node takes τ as a constant
        unit, row_scores, j_negative = _paper_terms(self, out, labels)
        total = labels.indices.shape[0] - row_scores.sum() + j_negative
        return (total + self.ranking * self._ranking_loss(unit, labels, row_scores)) / out.shape[0]

    HRRHead.__init__ = learning_init
    HRRHead.ranking_scale = property(get_scale, set_scale)
    HRRHead.loss = loss


class _LowRankLinear(torch.nn.Module):
    """``h ↦ (h Aᵀ) Bᵀ + b`` with ``A: (rank, in)``, ``B: (dim, rank)``; ``weight`` is the product,
    so that the head's folding and device/dtype queries read it as they read ``nn.Linear``'s."""

    def __init__(self, in_features: int, rank: int, out_features: int) -> None:
        super().__init__()
        self.down = torch.nn.Linear(in_features, rank, bias=False)
        self.up = torch.nn.Linear(rank, out_features)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.up(self.down(h))

    @property
    def weight(self) -> torch.Tensor:
        return self.up.weight @ self.down.weight

    @property
    def bias(self) -> torch.Tensor:
        return self.up.bias


def low_rank(options: dict) -> None:
    rank, init = options.get("rank", 160), HRRHead.__init__

    @functools.wraps(init)
    def factored_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        generator = torch.Generator().manual_seed(int(kwargs.get("seed", 0)) + 7919)
        factored = _LowRankLinear(self.in_features, rank, self.dim)
        for layer in (factored.down, factored.up):
            bound = 1 / math.sqrt(layer.in_features)
            with torch.no_grad():
                layer.weight.uniform_(-bound, bound, generator=generator)
        with torch.no_grad():
            factored.up.bias.zero_()
        self.linear = factored

    HRRHead.__init__ = factored_init


VARIANTS = {f.__name__: f for f in (contrast, no_jn, hinge, ema, l2_input, input_dropout, orthogonal_code,
                                    jp_mean, raw_bias, bce_ranking, bias_step_scale, head_lr, code_draw,
                                    learned_scale, low_rank)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset")
    parser.add_argument("variant", help='JSON: {"name": one of %s, ...parameters}' % sorted(VARIANTS))
    parser.add_argument("--overrides", default="{}", help="JSON XMCClassifier keywords over the dataset preset")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default="benchmarks/results/tune_hrr_rejected.jsonl")
    parser.add_argument("--pseudo-test", action="store_true", help="score on a pseudo-test carved from train")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    variant = json.loads(args.variant)
    VARIANTS[variant["name"]](variant)
    if args.pseudo_test:
        overrides = json.loads(args.overrides)
        result = refit_check.check(args.dataset, "hrr-fc", args.seed, overrides) | {"overrides": overrides}
    else:
        result = tune_hrr.run_trial(args.dataset, "hrr-fc", json.loads(args.overrides) | {"seed": args.seed})
    line = json.dumps(result | {"variant": variant})
    print(line, flush=True)
    log = Path(args.log)
    atomic_write_text(log, (log.read_text(encoding="utf-8") if log.exists() else "") + line + "\n")


if __name__ == "__main__":
    sys.exit(main())

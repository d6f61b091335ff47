"""The HRR output layer (HRR paper, section 4): the network predicts a ``d'``-wide vector
``ŝ`` instead of ``L`` logits, trained so that unbinding it with the *present* role ``p``
retrieves the present labels and unbinding with the *missing* role ``m`` retrieves none.

Loss per example, with ``Y^p`` its present labels and unit-norm label vectors ``c``:

* ``loss="cosine"`` (the paper's eqs. 6–7)::

      J_p = Σ_{c ∈ Y^p} (1 − cos(p* ⊗ ŝ, c))      J_n = cos(m* ⊗ ŝ, Σ_{c ∈ Y^p} c)

* ``loss="abs"`` (the authors' released code, ``spp_loss`` in
  ``Learning-with-Holographic-Reduced-Representations/lib/model.py``): cosines are taken
  in absolute value and ``J_n`` is a sum of per-label terms instead of one cosine with the
  sum::

      J_p = Σ_{c ∈ Y^p} (1 − |cos(p* ⊗ ŝ, c)|)    J_n = Σ_{c ∈ Y^p} |cos(m* ⊗ ŝ, c)|

  A label is then "present" when its cosine is near ±1, so decoding ranks by
  ``|score|`` in this mode (as the authors' inference does).

The loss is the batch mean of ``J_p + J_n``. An example without labels contributes 0.

``ranking=λ > 0`` adds a label-ranking term (ours, not the paper's): ``J_p`` and ``J_n``
only ask the present labels to line up with ``p* ⊗ ŝ``; nothing pushes the absent labels'
scores below them. ``J_r`` is a softmax over a set ``C`` of candidate labels of the scaled
cosines ``τ·cos(p* ⊗ ŝ, c)``, averaged over the present labels::

      J_r = −(1/|Y^p|) Σ_{c ∈ Y^p} log softmax_{c' ∈ C}(τ·cos(p* ⊗ ŝ, c'))_c

``C`` is every label when ``L ≤ ranking_candidates``. Otherwise the softmax's
partition function is estimated (sampled softmax): ``S = ranking_candidates`` labels are
drawn uniformly per batch (with the torch RNG, which the trainer seeds per epoch) and
``Σ_{c'} e^{τ·cos} ≈ |Y^p|·e^{τ·mean_{c ∈ Y^p} cos} + (L − |Y^p|)/S · Σ_{drawn} e^{τ·cos}``
(the present labels' mass from their mean score, which ``J_p`` has already computed), so
the cost, ``O(B·S·d')`` per batch, does not grow with L. The loss is then the batch mean
of ``J_p + J_n + λ·J_r``.

``label_bias=True`` (with ``ranking > 0``) adds a learned bias ``b_c`` per label to the
ranking logits, ``τ·cos(p* ⊗ ŝ, c) + b_c``: the labels' prior, which a dense layer holds
in its bias and the HRR scores otherwise have to encode in the direction of ``ŝ``. It is
``L`` floats (a dense layer has ``L·(in_features + 1)``), and decoding then ranks by the
same logits.

Cost per batch: only the ``|Y^p|`` present label vectors are touched (gathered from the
cached code, or regenerated): ``O(|Y^p|·d')`` plus, when p and m are learned or the code is
not cached, one real FFT of ``ŝ`` and one inverse FFT giving ``p* ⊗ ŝ`` and ``m* ⊗ ŝ``
together (``O(B·d' log d')``); never ``O(L)`` (the ranking term adds ``O(B·S·d')``).
Every label vector is projected, hence has unit norm, and projected roles are unitary
(``‖p* ⊗ ŝ‖ = ‖ŝ‖``), so each cosine is one dot product:
``cos(p* ⊗ ŝ, c) = ŝ · (p ⊗ c) / ‖ŝ‖``. With fixed roles the head caches the keys
``p ⊗ c_i`` and ``m ⊗ c_i`` and the loss and decoding contain no FFT at all.

Decoding scores every label with the paper's ``score_i = c_i · (p* ⊗ ŝ)`` (appendix H),
or ``τ·cos(p* ⊗ ŝ, c_i) + b_i`` with ``label_bias``, one label chunk at a time with a
running top-k merge, so memory is ``O(B · label_chunk)``; :meth:`HRRHead.topk_hidden`
folds the two linear maps into one when that is cheaper (not with ``label_bias``: the
cosine needs ``‖ŝ‖``). With ``code="circulant"`` (:class:`HRRLabelCode`, ``circulant``)
the labels come in groups of ``d'`` circular shifts of one vector ``b_g``, and a group's
``d'`` scores are one unbinding, ``(b_g* ⊗ (p* ⊗ ŝ))_s``: one FFT of the query, then per
group a spectrum product and an inverse FFT, ``O(L log d')`` per example instead of the
``O(L·d')`` matrix product (and the exact ranking term is computed the same way). The
threshold mode uses the cosine ``cos(p* ⊗ ŝ, c_i) > 0.5`` (appendix H; the bias is not
part of it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import scipy.sparse as sp
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from holoxmc import hrr
from holoxmc.codes.hrr import HRRLabelCode, Stream, local_generator
from holoxmc.data.batch import LabelBatch
from holoxmc.errors import InputError
from holoxmc.heads.decoding import above_threshold, running_topk
from holoxmc.settings import option_default
from holoxmc.heads.dense import reset_linear_

__all__ = ["HRRHead"]

_NORM_EPS = 1e-8


def _shift_correlation(query_spectrum: Tensor, key_spectra: Tensor, dim: int, n_scores: int) -> Tensor:
    """``query · roll(key_g, s)`` for every group ``g`` and shift ``s``: the circular
    correlation ``irfft(Q · conj(K_g))`` per group, flattened, first ``n_scores`` columns.

    Shapes:
        query_spectrum: ``(B, dim//2 + 1)`` complex; key_spectra: ``(G, dim//2 + 1)``
        complex → ``(B, n_scores)`` with ``n_scores ≤ G·dim``.
    """
    return torch.fft.irfft(query_spectrum.unsqueeze(1) * key_spectra.conj(), n=dim, dim=-1).flatten(1)[:, :n_scores]


def _shift_convolution(grad: Tensor, key_spectra: Tensor, dim: int) -> Tensor:
    """The adjoint of :func:`_shift_correlation` (circular convolution with each key,
    summed over groups): one real FFT of the score gradient and one inverse.

    Shapes:
        grad: ``(B, n)``, n ≤ G·dim; key_spectra: ``(G, dim//2 + 1)`` → ``(B, dim)``.
    """
    n_groups = key_spectra.shape[0]
    grad = F.pad(grad, (0, n_groups * dim - grad.shape[1])).reshape(grad.shape[0], n_groups, dim)
    return torch.fft.irfft((torch.fft.rfft(grad, dim=-1) * key_spectra).sum(1), n=dim, dim=-1)


class _ShiftScores(torch.autograd.Function):
    """:func:`_shift_correlation` of ``query`` against fixed keys (no gradient), with
    :func:`_shift_convolution` as its backward, where autograd through ``rfft`` would take
    a full complex FFT.

    ``forward(query, query_spectrum, key_spectra, n)``: ``query_spectrum`` is
    ``rfft(query)``, computed once by the caller for all label chunks.
    """

    @staticmethod
    def forward(ctx, query: Tensor, query_spectrum: Tensor, key_spectra: Tensor, n_scores: int) -> Tensor:
        ctx.save_for_backward(key_spectra)
        ctx.dim = query.shape[-1]
        return _shift_correlation(query_spectrum, key_spectra, ctx.dim, n_scores)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None]:
        (key_spectra,) = ctx.saved_tensors
        return _shift_convolution(grad, key_spectra, ctx.dim), None, None, None


class _ExactRankingLoss(torch.autograd.Function):
    """``Σ_rows (J_p + J_n + λ·J_r)`` of :meth:`HRRHead.loss` in one autograd node, for the
    common case of a prebound cosine head with the exact ranking term.

    The cosines ``u · (p ⊗ c_i)`` of every label (``u = ŝ/‖ŝ‖``) are computed once, for
    the softmax; the present labels' sum ``J_p`` needs is gathered from them, and their
    part of the gradient joins the softmax's in one adjoint product. Autograd would record
    some 40 small operations and replay each in backward; the gradient written out is
    ``∂/∂ŝ = (g − u(u·g))/‖ŝ‖`` with
    ``g = Σ_i (λτ·softmax_i − [i ∈ Y^p]·(1 + λτ/|Y^p|))·(p⊗c_i) + Σ_{Y^p} m⊗c / ‖Σ_{Y^p} m⊗c‖``,
    and ``∂/∂b_i = λ·(Σ_rows softmax_i − Σ_{rows with i} 1/|Y^p|)`` (rows without labels
    have no ranking term). Checked against the autograd reference in the tests.

    ``forward(out, bias, head, labels)``: ``bias`` may be None.
    """

    @staticmethod
    def forward(ctx, out: Tensor, bias: Tensor | None, head: "HRRHead", labels: LabelBatch) -> Tensor:
        norm = out.norm(dim=1, keepdim=True).clamp_min(_NORM_EPS)
        unit = out / norm
        sum_m = head._key_sums(head.missing_keys, labels, out.dtype)
        unit_m = sum_m / sum_m.norm(dim=1, keepdim=True).clamp_min(_NORM_EPS)
        rows, counts = labels.row_ids(), labels.counts()
        per_row = counts.clamp_min(1).to(out.dtype)
        weight = head.ranking * (counts > 0).to(out.dtype)  # λ, or 0 for a row without labels
        logits = head._exact_scores(unit)  # the cosines, scaled in place below
        row_scores = out.new_zeros(len(out)).index_add_(0, rows, logits[rows, labels.indices])
        positive = head.ranking_scale * row_scores
        logits.mul_(head.ranking_scale)
        if bias is not None:
            logits += bias
            positive.index_add_(0, rows, bias.index_select(0, labels.indices))
        top = logits.amax(1, keepdim=True)
        softmax = logits.sub_(top).exp_()
        partition = softmax.sum(1, keepdim=True)
        log_partition = (top + partition.log()).squeeze(1)
        softmax /= partition
        total = (labels.indices.shape[0] - row_scores.sum() + (unit * unit_m).sum()
                 + (weight * (log_partition - positive / per_row)).sum())
        ctx.save_for_backward(unit, norm, unit_m, softmax, weight, per_row, labels.indices, rows)
        ctx.head, ctx.has_bias = head, bias is not None
        return total

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor | None, None, None]:
        if getattr(ctx, "backward_done", False):
            raise RuntimeError("the HRR head's exact ranking loss reuses its saved softmax in place "
                               "and supports one backward pass per forward (no retain_graph=True)")
        ctx.backward_done = True
        unit, norm, unit_m, softmax, weight, per_row, indices, rows = ctx.saved_tensors
        tau = ctx.head.ranking_scale
        weighted = softmax.mul_(weight.unsqueeze(1))  # λ·softmax; the saved softmax is not needed again
        present = (weight / per_row).index_select(0, rows)  # λ/|Y^p| per present label
        grad_bias = None
        if ctx.has_bias:
            grad_bias = grad * weighted.sum(0).index_add_(0, indices, present, alpha=-1)
        # λ·softmax_i − [i ∈ Y^p]·(1/τ + λ/|Y^p|), times τ after the adjoint product
        weighted.index_put_((rows, indices), present.add_(1 / tau).neg_(), accumulate=True)
        grad_unit = ctx.head._exact_scores_adjoint(weighted).mul_(tau).add_(unit_m)
        tangent = grad_unit - unit * (unit * grad_unit).sum(1, keepdim=True)
        grad_out = torch.where(norm > _NORM_EPS, tangent, grad_unit) / norm  # F.normalize's clamp
        return grad * grad_out, grad_bias, None, None


class HRRHead(nn.Module):
    """A ``d'``-wide output layer decoded through a seeded HRR label code.

    Args:
        in_features: width of the backbone output.
        n_labels: number of labels L.
        dim: HRR dimension d' (the output width).
        seed: seed of the label code, the roles p, m and the weight initialisation.
        learn_pm: learn p and m (stored before projection, projected in every forward).
        learn_labels: learn the label vectors (an ``(L, d')`` parameter stored before
            projection, initialised with the code; only the gathered rows are projected in
            the loss). Learned vectors are stored scaled by ``√d'`` (entries of order 1):
            π ignores the scale, which only sets how far one Adam step (≈ lr per entry)
            moves a vector; at the ``1/√d'`` scale of the code, learned labels collapse
            (Bibtex P@1 35 instead of 61).
        loss: ``"cosine"`` (paper) or ``"abs"`` (authors' code); see the module docstring.
        ranking: weight λ of the label-ranking term ``J_r`` (module docstring); 0, the
            default, trains with the paper's ``J_p + J_n`` alone.
        ranking_scale: τ, the scale of the cosines inside the ranking softmax.
        ranking_candidates: S, the labels drawn per batch to estimate ``J_r``'s partition
            function (``J_r`` is exact over all labels when L is at most S).
        label_bias: learn a bias per label in the ranking logits and decode by
            ``τ·cos + b`` (module docstring); needs ``ranking > 0`` and ``loss="cosine"``.
        code: ``"random"`` (the paper's i.i.d. label vectors) or ``"circulant"`` (groups of
            ``dim`` circular shifts of one vector; decoding and the exact ranking term by
            FFT, see the module docstring); not with ``learn_labels``.
        label_chunk: labels per chunk when decoding (memory ``B · label_chunk`` scores;
            16,384 keeps a chunk's scores cache-sized). A memory setting only: the code
            is the same whatever its value (:data:`holoxmc.codes.hrr.DRAW_BLOCK`).
        cache_codes: keep the code in memory for fast gathers and decoding: with fixed
            roles as the two ``(L, d')`` key matrices ``p ⊗ c_i`` and ``m ⊗ c_i``
            (``2·L·d'`` floats; no FFT is left in the loss or decoding), with
            ``learn_pm`` as the ``(L, d')`` code. When False, present labels are
            regenerated from the seed and memory stays ``O(label_chunk · d')``, but with
            the random code a batch then regenerates every chunk it touches (drawing up
            to ``DRAW_BLOCK`` rows for one): train uncached with ``code="circulant"``,
            whose labels are read as rolled group vectors (one gather, nothing redrawn;
            the code itself is ``≈ L`` floats).
            Ignored with ``learn_labels``.

    Shapes:
        forward: ``(B, in_features)`` → ``(B, dim)`` (the predicted statement ``ŝ``).

    Example:
        >>> import scipy.sparse as sp
        >>> head = HRRHead(16, n_labels=1000, dim=64)
        >>> out = head(torch.randn(2, 16))
        >>> labels = LabelBatch.from_csr(sp.csr_matrix(([1.0, 1.0], ([0, 0], [3, 999])), shape=(2, 1000)))
        >>> bool(torch.isfinite(head.loss(out, labels)))
        True
        >>> head.topk(out, 5)[1].shape
        torch.Size([2, 5])
    """

    # Declared so that type checkers know what ``nn.Module.__getattr__`` returns; the
    # buffers and parameters exist only in the configurations that register them.
    linear: nn.Linear
    label_bias: nn.Parameter | None
    roles_raw: nn.Parameter
    labels_raw: nn.Parameter
    roles_fixed: Tensor
    present_keys: Tensor
    missing_keys: Tensor
    label_cache: Tensor
    group_keys: Tensor

    def __init__(
        self,
        in_features: int,
        n_labels: int,
        dim: int = 400,
        *,
        seed: int = 0,
        learn_pm: bool = option_default("hrr", "learn_pm"),
        learn_labels: bool = option_default("hrr", "learn_labels"),
        loss: Literal["cosine", "abs"] = option_default("hrr", "loss"),
        ranking: float = option_default("hrr", "ranking"),
        ranking_scale: float = 10.0,
        ranking_candidates: int = 512,
        label_bias: bool = option_default("hrr", "label_bias"),
        code: Literal["random", "circulant"] = option_default("hrr", "code"),
        label_chunk: int = 16384,
        cache_codes: bool = option_default("hrr", "cache_codes"),
    ) -> None:
        super().__init__()
        if loss not in ("cosine", "abs"):
            raise InputError(f"loss must be 'cosine' or 'abs', got {loss!r}")
        if in_features < 1:
            raise InputError(f"in_features must be >= 1, got {in_features}")
        if ranking < 0 or ranking_scale <= 0 or ranking_candidates < 1:
            raise InputError(
                f"need ranking >= 0, ranking_scale > 0 and ranking_candidates >= 1; "
                f"got {ranking}, {ranking_scale}, {ranking_candidates}"
            )
        if label_bias and (ranking == 0 or loss != "cosine"):
            raise InputError("label_bias is trained by the ranking term: it needs ranking > 0 and loss='cosine'")
        if code not in ("random", "circulant"):
            raise InputError(f"code must be 'random' or 'circulant', got {code!r}")
        if code == "circulant" and learn_labels:
            raise InputError("learn_labels trains free label vectors, which cannot stay circulant: "
                             "use code='random' with learn_labels")
        self.in_features = int(in_features)
        self.n_labels = int(n_labels)
        self.dim = int(dim)
        self.loss_kind = loss
        self.ranking = float(ranking)
        self.ranking_scale = float(ranking_scale)
        self.ranking_candidates = int(ranking_candidates)
        self.code = HRRLabelCode(n_labels, dim, seed=seed, chunk_size=label_chunk, circulant=code == "circulant")
        self.linear = nn.Linear(self.in_features, self.dim)
        reset_linear_(self.linear, local_generator(seed, Stream.HEAD_INIT))
        self._folded: tuple[tuple[int, ...], Tensor, Tensor] | None = None
        self.label_bias = nn.Parameter(torch.zeros(self.n_labels)) if label_bias else None

        roles_raw = torch.stack([self.code.present_raw, self.code.missing_raw])
        if learn_pm:
            self.roles_raw = nn.Parameter(roles_raw * self.dim**0.5)  # π is scale-free; see learn_labels
        else:
            self.register_buffer("roles_fixed", torch.stack([self.code.present, self.code.missing]), persistent=False)
        if learn_labels:
            # π(√d'·c) = c: the code itself, at Adam-friendly scale, as pre-projection values.
            self.labels_raw = nn.Parameter(self.code.full() * self.dim**0.5)
        elif cache_codes and not learn_pm:
            keys = torch.cat([self.code.bound_chunk(j, self.roles_fixed) for j in range(self.code.n_chunks)])
            self.register_buffer("present_keys", keys[:, 0].contiguous(), persistent=False)  # p ⊗ c_i
            self.register_buffer("missing_keys", keys[:, 1].contiguous(), persistent=False)  # m ⊗ c_i
        elif cache_codes:
            self.register_buffer("label_cache", self.code.full(), persistent=False)
        group_keys = self.code.group_spectra  # set exactly when the code is circulant
        if group_keys is not None:
            # The spectra a decoding query is unbound with, per group: F(p ⊗ b_g) for the
            # prebound query ŝ, F(b_g) for the unbound query p* ⊗ ŝ. Stored as real
            # (…, 2) pairs so that ``module.to(dtype)`` converts them like any buffer.
            if self.prebound:
                group_keys = group_keys * torch.fft.rfft(self.roles_fixed[0], dim=-1)
            self.register_buffer("group_keys", torch.view_as_real(group_keys).contiguous(), persistent=False)

    @property
    def learn_pm(self) -> bool:
        return hasattr(self, "roles_raw")

    @property
    def learn_labels(self) -> bool:
        return hasattr(self, "labels_raw")

    @property
    def prebound(self) -> bool:
        """Whether the code is cached already bound to the fixed roles (``p ⊗ c_i``,
        ``m ⊗ c_i``), which removes every FFT from the loss and from decoding."""
        return hasattr(self, "present_keys")

    def forward(self, h: Tensor) -> Tensor:
        return self.linear(h)

    # ------------------------------------------------------------------ code access
    def roles(self) -> Tensor:
        """The projected roles ``[p, m]``, shape ``(2, dim)``."""
        return hrr.projection(self.roles_raw) if self.learn_pm else self.roles_fixed

    def label_vectors(self, labels: Tensor) -> Tensor:
        """Projected (unit-norm) vectors of the given label ids, ``(n,)`` → ``(n, dim)``."""
        if self.learn_labels:
            raw = self.labels_raw.index_select(0, labels)
            return hrr.projection(raw) if raw.shape[0] else raw  # (MKL rejects empty FFTs)
        if hasattr(self, "label_cache"):
            return self.label_cache.index_select(0, labels)
        return self.code.gather(labels).to(device=self.linear.weight.device,
                                           dtype=self.linear.weight.dtype)

    def label_chunks(self) -> Iterator[tuple[int, Tensor]]:
        """Yield ``(start, vectors)`` over all labels, ``label_chunk`` rows at a time."""
        step = self.code.chunk_size
        for start in range(0, self.n_labels, step):
            if self.learn_labels:
                yield start, hrr.projection(self.labels_raw[start : start + step])
            elif hasattr(self, "label_cache"):
                yield start, self.label_cache[start : start + step]
            else:
                vectors = self.code.chunk(start // step)
                yield start, vectors.to(device=self.linear.weight.device,
                                        dtype=self.linear.weight.dtype)

    # ------------------------------------------------------------------ unbinding
    def _unbind(self, out: Tensor, n_roles: int) -> Tensor:
        """``roles[:n_roles]* ⊗ ŝ`` from one rfft of ``ŝ``.

        Shapes:
            out: ``(B, dim)`` → ``(B, n_roles, dim)``.
        """
        roles = self.roles()[:n_roles].to(out.dtype)
        spectrum = torch.fft.rfft(out, dim=-1).unsqueeze(1) * torch.conj(torch.fft.rfft(roles, dim=-1))
        return torch.fft.irfft(spectrum, n=self.dim, dim=-1)

    # ------------------------------------------------------------------ training
    def loss(self, out: Tensor, labels: LabelBatch) -> Tensor:
        """``mean_batch(J_p + J_n)`` touching only the present labels' vectors.

        The cosine loss needs, per example, only the sum of its present label vectors:
        ``Σ_c cos(q, c) = q · Σ_c c`` for a unit query ``q``. That sum is one
        ``embedding_bag`` over the cached code (no ``|Y^p| × d'`` temporary). With fixed
        roles no FFT is needed either: ``p`` is unitary after projection, so
        ``cos(p* ⊗ ŝ, c) = ŝ · (p ⊗ c) / ‖ŝ‖`` with the cached key ``p ⊗ c`` (likewise
        for ``m``); otherwise ``ŝ`` is unbound by one FFT round trip.

        With fixed roles, cached keys, the cosine loss and the exact ranking term (the
        Delicious preset) the whole loss is one autograd node with its gradient written out,
        :class:`_ExactRankingLoss`.

        Shapes:
            out: ``(B, dim)``; labels: ``B`` rows → scalar.
        """
        if self.prebound and self.loss_kind == "cosine" and self.ranking and self.n_labels <= self.ranking_candidates:
            bias = None if self.label_bias is None else self.label_bias.to(out.dtype)
            return _ExactRankingLoss.apply(out, bias, self, labels) / len(out)
        if self.prebound:
            unit = F.normalize(out, dim=-1, eps=_NORM_EPS)
            query_p = query_m = unit
        else:
            unbound = F.normalize(self._unbind(out, 2), dim=-1, eps=_NORM_EPS)
            query_p, query_m = unbound[:, 0], unbound[:, 1]
        n_present = labels.indices.shape[0]
        if self.loss_kind == "abs":
            rows = labels.row_ids()
            keys_p, keys_m = self._present_keys(labels)
            present_scores = (query_p.index_select(0, rows) * keys_p).sum(-1).abs()
            row_scores = present_scores.new_zeros(out.shape[0]).index_add(0, rows, present_scores)
            j_negative = (query_m.index_select(0, rows) * keys_m).sum(-1).abs().sum()
        else:
            sum_p, sum_m = self._present_key_sums(labels, out.dtype)
            row_scores = (query_p * sum_p).sum(-1)
            sum_norm = sum_m.norm(dim=-1).clamp_min(_NORM_EPS)
            j_negative = ((query_m * sum_m).sum(-1) / sum_norm).sum()
        total = n_present - row_scores.sum() + j_negative
        if self.ranking:
            total = total + self.ranking * self._ranking_loss(query_p, labels, row_scores)
        return total / out.shape[0]

    def _ranking_loss(self, query: Tensor, labels: LabelBatch, row_scores: Tensor) -> Tensor:
        """``Σ_rows J_r`` (module docstring): exact over all labels when
        ``L ≤ ranking_candidates``, otherwise with the sampled partition function.

        ``J_r = log Z − mean_{c ∈ Y^p} (τ·score_c + b_c)`` for a row with labels, so the
        present labels enter only through ``row_scores`` (their summed scores, which
        ``J_p`` has computed already) and their biases, and the exact form is one matmul
        and a ``logsumexp``.

        Shapes:
            query: ``(B, dim)`` unit ``p* ⊗ ŝ`` (or unit ``ŝ`` when prebound);
            row_scores: ``(B,)`` → scalar.
        """
        counts = labels.counts()
        labelled = (counts > 0).to(query.dtype)
        positive = self.ranking_scale * row_scores
        if self.label_bias is not None:
            present_bias = self.label_bias.to(query.dtype).index_select(0, labels.indices)
            positive = positive + torch.segment_reduce(present_bias, "sum", offsets=labels.indptr)
        mean_positive = positive / counts.clamp_min(1).to(query.dtype)
        scaled = query * self.ranking_scale
        if self.n_labels <= self.ranking_candidates:
            logits = torch.cat([scores for _, scores in self._label_scores(scaled, self.label_bias)], 1)
            return ((torch.logsumexp(logits, dim=1) - mean_positive) * labelled).sum()
        drawn = torch.randint(self.n_labels, (self.ranking_candidates,), device=labels.indices.device)
        bias = None if self.label_bias is None else self.label_bias.index_select(0, drawn)
        log_absent = torch.logsumexp(self._chunk_scores(scaled, self._ranking_keys(drawn), bias), dim=1)
        absent_share = (self.n_labels - counts).to(query.dtype) / self.ranking_candidates  # 0 → log = −inf: no term
        # log Z ≈ log(|Y^p|·e^{mean positive} + (L − |Y^p|)/S · Σ_drawn e^{score})
        log_partition = torch.logaddexp(
            torch.log(counts.clamp_min(1).to(query.dtype)) + mean_positive, torch.log(absent_share) + log_absent
        )
        return ((log_partition - mean_positive) * labelled).sum()

    def _exact_scores(self, query: Tensor) -> Tensor:
        """``query · (p ⊗ c_i)`` for every label at once, prebound heads only (the exact
        ranking term's logits before scaling): one matmul, or one FFT per group.

        Shapes:
            query: ``(B, dim)`` → ``(B, L)``.
        """
        if self.code.circulant:
            spectra = torch.view_as_complex(self.group_keys)
            return _shift_correlation(torch.fft.rfft(query, dim=-1), spectra, self.dim, self.n_labels)
        return query @ self.present_keys.T

    def _exact_scores_adjoint(self, grad: Tensor) -> Tensor:
        """The transpose of :meth:`_exact_scores`: ``Σ_i grad_i (p ⊗ c_i)``, ``(B, L)`` → ``(B, dim)``."""
        if self.code.circulant:
            return _shift_convolution(grad, torch.view_as_complex(self.group_keys), self.dim)
        return grad @ self.present_keys

    def _ranking_keys(self, label_ids: Tensor) -> Tensor:
        """The vectors the decoding score dots the query with (``p ⊗ c`` when prebound,
        else ``c``) for ``label_ids``.

        Shapes:
            label_ids: ``(n,)`` → ``(n, dim)``.
        """
        if self.prebound:
            return self.present_keys.index_select(0, label_ids)
        return self.label_vectors(label_ids)

    def _present_keys(self, labels: LabelBatch) -> tuple[Tensor, Tensor]:
        """Per present label, the vectors its p- and m-cosines are taken against.

        Shapes:
            → two ``(n_present, dim)`` tensors (the same tensor unless prebound).
        """
        if self.prebound:
            return self.present_keys.index_select(0, labels.indices), self.missing_keys.index_select(0, labels.indices)
        vectors = self.label_vectors(labels.indices)
        return vectors, vectors

    def _present_key_sums(self, labels: LabelBatch, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """Per example, the sums of :meth:`_present_keys` over its present labels.

        Shapes:
            → two ``(B, dim)`` tensors.
        """
        if self.prebound:
            return self._key_sums(self.present_keys, labels, dtype), self._key_sums(self.missing_keys, labels, dtype)
        if hasattr(self, "label_cache"):
            sums = self._key_sums(self.label_cache, labels, dtype)
            return sums, sums
        vectors = self.label_vectors(labels.indices).to(dtype)
        sums = vectors.new_zeros(len(labels), self.dim).index_add(0, labels.row_ids(), vectors)
        return sums, sums

    @staticmethod
    def _key_sums(table: Tensor, labels: LabelBatch, dtype: torch.dtype) -> Tensor:
        """Per example, the sum of ``table``'s rows of its present labels (one
        ``embedding_bag``), ``(L, dim)`` → ``(B, dim)``."""
        return F.embedding_bag(labels.indices, table.to(dtype), labels.indptr[:-1], mode="sum")

    # ------------------------------------------------------------------ decoding
    def _query(self, out: Tensor, *, unit: bool) -> Tensor:
        """The query whose dot product with the decoding keys gives ``c_i · (p* ⊗ ŝ)``
        (``unit=False``) or the cosine ``cos(p* ⊗ ŝ, c_i)`` (``unit=True``)."""
        query = out if self.prebound else self._unbind(out, 1)[:, 0]
        return F.normalize(query, dim=-1, eps=_NORM_EPS) if unit else query

    def _decoding_keys(self) -> Iterator[tuple[int, Tensor]]:
        """``(start, keys)`` per label chunk: ``p ⊗ c_i`` when prebound, else ``c_i``."""
        if self.prebound:
            step = self.code.chunk_size
            for start in range(0, self.n_labels, step):
                yield start, self.present_keys[start : start + step]
        else:
            yield from self.label_chunks()

    def _decoding_scores(self, out: Tensor) -> Iterator[tuple[int, Tensor]]:
        """``(start, scores)`` label chunks of the decoding score: ``c_i · (p* ⊗ ŝ)``, or
        with ``label_bias`` the ranking logit ``τ·cos(p* ⊗ ŝ, c_i) + b_i``."""
        if self.label_bias is None:
            return self._label_scores(self._query(out, unit=False))
        return self._label_scores(self.ranking_scale * self._query(out, unit=True), self.label_bias)

    def _label_scores(self, query: Tensor, bias: Tensor | None = None) -> Iterator[tuple[int, Tensor]]:
        """``(start, scores)`` per label chunk, ``scores = query · key_i (+ b_i)`` over the
        keys of :meth:`_decoding_keys` (``|…|`` with ``loss="abs"``). With the circulant
        code a chunk is whole groups, each scored by one unbinding: the spectrum of
        ``query`` times the conjugate group key spectrum, inverse-transformed, gives
        ``query · roll(key_g, s)`` for every shift ``s``.

        Shapes:
            query: ``(B, dim)`` → chunks ``(B, n)`` covering labels ``[start, start + n)``.
        """
        if not self.code.circulant:
            for start, keys in self._decoding_keys():
                yield start, self._chunk_scores(query, keys, None if bias is None else bias[start : start + len(keys)])
            return
        spectrum = torch.fft.rfft(query.detach(), dim=-1)  # shared by every chunk; _ShiftScores differentiates
        groups_per_chunk = max(1, self.code.chunk_size // self.dim)
        for group in range(0, self.code.n_groups, groups_per_chunk):
            start = group * self.dim
            keys = torch.view_as_complex(self.group_keys[group : group + groups_per_chunk])
            scores = _ShiftScores.apply(query, spectrum, keys, min(len(keys) * self.dim, self.n_labels - start))
            if bias is not None:
                scores = scores + bias[start : start + scores.shape[1]].to(scores.dtype)
            yield start, scores.abs() if self.loss_kind == "abs" else scores

    def _chunk_scores(self, query: Tensor, keys: Tensor, bias: Tensor | None = None) -> Tensor:
        keys = keys.to(query.dtype)
        scores = query @ keys.T if bias is None else torch.addmm(bias.to(query.dtype), query, keys.T)
        return scores.abs() if self.loss_kind == "abs" else scores

    def scores(self, out: Tensor) -> Tensor:
        """Score ``c_i · (p* ⊗ ŝ)`` of every label (``|…|`` with ``loss="abs"``;
        ``τ·cos + b_i`` with ``label_bias``), ``(B, dim)`` → ``(B, L)``; for small L only."""
        return torch.cat([scores for _, scores in self._decoding_scores(out)], 1)

    def topk(self, out: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """The ``k`` best labels per row by score ``c_i · (p* ⊗ ŝ)``, best first (with
        ``loss="abs"``, by its absolute value; with ``label_bias``, by ``τ·cos + b_i``),
        one label chunk at a time.

        Shapes:
            out: ``(B, dim)`` → scores ``(B, k)`` float, indices ``(B, k)`` int64.
        """
        return running_topk(self._decoding_scores(out), min(k, self.n_labels))

    def topk_hidden(self, h: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """``topk(self(h), k)``, computed the cheaper way.

        Scores are linear in ``h``: ``ŝ · (p ⊗ c_i) = h · (W^T (p ⊗ c_i)) + b · (p ⊗ c_i)``.
        When ``L · in_features < d' · (in_features + L)`` (few labels, e.g. L < ~1,800 for
        in_features = 512, d' = 400) and no gradient is needed, the two layers are folded
        into one ``(L, in_features)`` matrix, cached until the weights change, so decoding
        costs what a dense output layer costs. Otherwise (and with ``label_bias``, whose
        cosine needs ``‖ŝ‖``) it is ``topk(self(h), k)``.

        Shapes:
            h: ``(B, in_features)`` → scores ``(B, k)``, indices ``(B, k)``.
        """
        return running_topk(self.score_chunks(h), min(k, self.n_labels))

    def score_chunks(self, h: Tensor) -> Iterator[tuple[int, Tensor]]:
        """``(start, scores)`` label chunks of the decoding scores of :meth:`topk`, computed
        from the backbone output ``h`` (folded as :meth:`topk_hidden` explains, when that pays).

        Shapes:
            h: ``(B, in_features)`` → chunks ``(B, n)`` covering labels ``[start, start + n)``.
        """
        if torch.is_grad_enabled() or not self._folding_pays():
            return self._decoding_scores(self(h))
        weight, bias = self._folded_decoder()
        return iter([(0, self._chunk_scores(h, weight, bias))])

    def _folding_pays(self) -> bool:
        """Whether the folded ``(L, in_features)`` product costs fewer multiply-adds than
        ``ŝ`` and its scores (``d'·L`` of them, or an FFT per group with the circulant
        code, counted as nothing)."""
        small = self.n_labels <= self.code.chunk_size
        unfolded = self.dim * (self.in_features + (0 if self.code.circulant else self.n_labels))
        return self.prebound and small and self.label_bias is None and self.n_labels * self.in_features < unfolded

    def _folded_decoder(self) -> tuple[Tensor, Tensor]:
        weight, bias = self.linear.weight, self.linear.bias
        version = (weight._version, bias._version, weight.data_ptr(), bias.data_ptr(), self.present_keys.data_ptr())
        if self._folded is None or self._folded[0] != version:
            keys = self.present_keys.to(weight.dtype)
            self._folded = (version, keys @ weight, keys @ bias)
        return self._folded[1], self._folded[2]

    def threshold(self, out: Tensor, threshold: float = 0.5) -> sp.csr_matrix:
        """Every label whose cosine ``cos(p* ⊗ ŝ, c_i)`` exceeds ``threshold`` (appendix H's
        cut, 0.5 by default; ``|cos|`` with ``loss="abs"``; see :meth:`confidence_chunks` for
        what a trained network's cosines are), as a CPU ``scipy.sparse`` CSR matrix of them.

        Shapes:
            out: ``(B, dim)`` → CSR ``(B, L)``.
        """
        return above_threshold(self._label_scores(self._query(out, unit=True)), threshold, self.n_labels)

    def confidence_chunks(self, h: Tensor) -> Iterator[tuple[int, Tensor]]:
        """``(start, cos)`` label chunks of the cosines :meth:`threshold` compares, computed
        from the backbone output ``h``: ``cos(p* ⊗ ŝ, c_i)`` (``|cos|`` with ``loss="abs"``).
        An absent label's is ≈ 0; a present one's ≈ 1 when it is the row's only label, but
        ``1/√k`` when ``k`` labels are equally present (hence the relative cut of
        ``XMCClassifier.predict_above``).

        Shapes:
            h: ``(B, in_features)`` → chunks ``(B, n)`` covering labels ``[start, start + n)``.
        """
        return self._label_scores(self._query(self(h), unit=True))

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

Cost per batch: one real FFT of ``ŝ`` and one inverse FFT giving ``p* ⊗ ŝ`` and
``m* ⊗ ŝ`` together, then only the ``|Y^p|`` present label vectors are touched (gathered
from the cached code, or regenerated): ``O(B·d' log d' + |Y^p|·d')``, never ``O(L)``.
Because every label vector is projected it has unit norm, so a cosine is a dot product
with the normalised query.

Decoding scores every label, ``score_i = c_i · (p* ⊗ ŝ) / ‖p* ⊗ ŝ‖`` (a cosine; the
ranking equals the paper's ``c_i^T (p* ⊗ ŝ)``), one label chunk at a time with a running
top-k merge, so memory is ``O(B · label_chunk)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np
import scipy.sparse as sp
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from holoxmc import hrr
from holoxmc.codes.hrr import HRRLabelCode, local_generator
from holoxmc.data.batch import LabelBatch
from holoxmc.errors import InputError
from holoxmc.heads.dense import reset_linear_

__all__ = ["HRRHead"]

_INIT_STREAM = 2
_NORM_EPS = 1e-8


class HRRHead(nn.Module):
    """A ``d'``-wide output layer decoded through a seeded HRR label code.

    Args:
        in_features: width of the backbone output.
        n_labels: number of labels L.
        dim: HRR dimension d' (the output width).
        seed: seed of the label code, the roles p, m and the weight initialisation.
        learn_pm: learn p and m (stored before projection, projected in every forward).
        learn_labels: learn the label vectors (an ``(L, d')`` parameter stored before
            projection; only the gathered rows are projected in the loss).
        loss: ``"cosine"`` (paper) or ``"abs"`` (authors' code); see the module docstring.
        label_chunk: labels per chunk when generating or decoding the code.
        cache_codes: keep the projected ``(L, d')`` code in memory (fast label gathers and
            decoding). When False, present labels are regenerated chunk by chunk from the
            seed; memory stays ``O(label_chunk · d')``. Ignored with ``learn_labels``.

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

    def __init__(
        self,
        in_features: int,
        n_labels: int,
        dim: int = 400,
        *,
        seed: int = 0,
        learn_pm: bool = False,
        learn_labels: bool = False,
        loss: Literal["cosine", "abs"] = "cosine",
        label_chunk: int = 65536,
        cache_codes: bool = True,
    ) -> None:
        super().__init__()
        if loss not in ("cosine", "abs"):
            raise InputError(f"loss must be 'cosine' or 'abs', got {loss!r}")
        if in_features < 1:
            raise InputError(f"in_features must be >= 1, got {in_features}")
        self.in_features = int(in_features)
        self.n_labels = int(n_labels)
        self.dim = int(dim)
        self.loss_kind = loss
        self.code = HRRLabelCode(n_labels, dim, seed=seed, chunk_size=label_chunk)
        self.linear = nn.Linear(self.in_features, self.dim)
        reset_linear_(self.linear, local_generator(seed, _INIT_STREAM))

        roles_raw = torch.stack([self.code.present_raw, self.code.missing_raw])
        if learn_pm:
            self.roles_raw = nn.Parameter(roles_raw)
        else:
            self.register_buffer("roles_fixed", hrr.projection(roles_raw), persistent=False)
        if learn_labels:
            self.labels_raw = nn.Parameter(self.code.full(projected=False))
        elif cache_codes:
            self.register_buffer("label_cache", self.code.full(), persistent=False)

    @property
    def learn_pm(self) -> bool:
        return hasattr(self, "roles_raw")

    @property
    def learn_labels(self) -> bool:
        return hasattr(self, "labels_raw")

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
    def _unbind_unit(self, out: Tensor, n_roles: int) -> Tensor:
        """``roles[:n_roles]* ⊗ ŝ``, normalised to unit length, from one rfft of ``ŝ``.

        Shapes:
            out: ``(B, dim)`` → ``(B, n_roles, dim)``.
        """
        roles = self.roles()[:n_roles].to(out.dtype)
        spectrum = torch.fft.rfft(out, dim=-1).unsqueeze(1) * torch.conj(torch.fft.rfft(roles, dim=-1))
        unbound = torch.fft.irfft(spectrum, n=self.dim, dim=-1)
        return F.normalize(unbound, dim=-1, eps=_NORM_EPS)

    # ------------------------------------------------------------------ training
    def loss(self, out: Tensor, labels: LabelBatch) -> Tensor:
        """``mean_batch(J_p + J_n)`` touching only the present labels' vectors.

        Shapes:
            out: ``(B, dim)``; labels: ``B`` rows → scalar.
        """
        rows = labels.row_ids()
        batch = out.shape[0]
        present_and_missing = self._unbind_unit(out, 2)
        query_p, query_m = present_and_missing[:, 0], present_and_missing[:, 1]
        vectors = self.label_vectors(labels.indices).to(out.dtype)
        n_present = vectors.shape[0]
        if self.loss_kind == "cosine":
            cos_present = (query_p.index_select(0, rows) * vectors).sum(-1)
            label_sum = out.new_zeros(batch, self.dim).index_add(0, rows, vectors)
            sum_norm = label_sum.norm(dim=-1).clamp_min(_NORM_EPS)
            j_negative = ((query_m * label_sum).sum(-1) / sum_norm).sum()
            j_positive = n_present - cos_present.sum()
        else:
            cosines = (present_and_missing.index_select(0, rows) * vectors.unsqueeze(1)).sum(-1)
            j_positive = n_present - cosines[:, 0].abs().sum()
            j_negative = cosines[:, 1].abs().sum()
        return (j_positive + j_negative) / batch

    # ------------------------------------------------------------------ decoding
    def _query(self, out: Tensor) -> Tensor:
        return self._unbind_unit(out, 1)[:, 0]

    def _chunk_scores(self, query: Tensor, vectors: Tensor) -> Tensor:
        scores = query @ vectors.to(query.dtype).T
        return scores.abs() if self.loss_kind == "abs" else scores

    def scores(self, out: Tensor) -> Tensor:
        """Cosine score of every label, ``(B, dim)`` → ``(B, L)`` (small L only)."""
        query = self._query(out)
        return torch.cat([self._chunk_scores(query, vectors) for _, vectors in self.label_chunks()], 1)

    def topk(self, out: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """The ``k`` best labels per row by cosine score, best first.

        Shapes:
            out: ``(B, dim)`` → scores ``(B, k)`` float, indices ``(B, k)`` int64.
        """
        k = min(k, self.n_labels)
        query = self._query(out)
        best_scores: Tensor | None = None
        best_indices: Tensor | None = None
        for start, vectors in self.label_chunks():
            scores, indices = torch.topk(self._chunk_scores(query, vectors), min(k, vectors.shape[0]), dim=1)
            indices = indices + start
            if best_scores is not None:
                scores = torch.cat([best_scores, scores], 1)
                indices = torch.cat([best_indices, indices], 1)
                scores, order = torch.topk(scores, min(k, scores.shape[1]), dim=1)
                indices = indices.gather(1, order)
            best_scores, best_indices = scores, indices
        return best_scores, best_indices

    def threshold(self, out: Tensor, threshold: float = 0.5) -> sp.csr_matrix:
        """Every label whose cosine score exceeds ``threshold`` (appendix H: ≈1 present,
        ≈0 absent), as a CPU ``scipy.sparse`` CSR matrix of scores.

        Shapes:
            out: ``(B, dim)`` → CSR ``(B, L)``.
        """
        query = self._query(out)
        rows, cols, values = [], [], []
        for start, vectors in self.label_chunks():
            scores = self._chunk_scores(query, vectors)
            r, c = torch.nonzero(scores > threshold, as_tuple=True)
            rows.append(r.cpu().numpy())
            cols.append((c + start).cpu().numpy())
            values.append(scores[r, c].detach().cpu().numpy())
        shape = (out.shape[0], self.n_labels)
        predicted = sp.csr_matrix((np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))), shape=shape)
        predicted.sort_indices()
        return predicted

"""Dense HRR label codes: one projected HRR vector per label plus the roles *present* (p)
and *missing* (m) (HRR paper, section 4).

Nothing here is stored: every vector is regenerated from ``(seed, n_labels, dim)``. Label
``i`` is row ``i mod DRAW_BLOCK`` of the draws of the generator seeded by
``(seed, i // DRAW_BLOCK)``, so any chunk of labels can be made alone, bit-identically,
and ``chunk_size`` (the rows per chunk handed out for decoding) does not change the vectors
(up to the last bits of an inverse FFT over another number of rows); the ``L × d'`` matrix
never has to exist in memory. :meth:`HRRLabelCode.materialize` caches it
when the caller wants the speed and has the memory. All draws happen on the CPU in float64
and are cast afterwards, so a seed gives the same code on every device.

``circulant=True`` (ours, not the paper's) draws only ``G = ⌈L/d'⌉`` vectors ``b_g`` and
gives label ``i = g·d' + s`` the circular shift by ``s`` of ``b_g``: ``c_i = b_g ⊗ δ_s``
(``δ_s`` the unit impulse at ``s``, itself a unitary HRR). Each group of ``d'`` labels is
then exactly orthonormal (the shifts of a unitary vector are), groups are as independent
as random codes, the code is ``G·d' ≈ L`` numbers instead of ``L·d'`` (any label's vector
is one gather from the ``b_g``, so an uncached code costs nothing to read), and the scores
of a whole group against any query ``q`` are one unbinding: ``q · (b_g ⊗ δ_s) =
(b_g* ⊗ q)_s``, so decoding all labels costs ``O(L log d')`` instead of ``O(L·d')``.

Example:
    >>> code = HRRLabelCode(n_labels=1000, dim=64, seed=3, chunk_size=256)
    >>> rows = code.gather(torch.tensor([5, 700]))
    >>> torch.equal(rows[1], code.chunk(2)[700 - 512])
    True
    >>> code.pm_residual < 1e-6
    True
    >>> shifted = HRRLabelCode(n_labels=1000, dim=64, seed=3, circulant=True)
    >>> group_1 = shifted.gather(torch.tensor([64, 64 + 5]))  # label 64 + s: group 1 rolled by s
    >>> torch.equal(group_1[1], torch.roll(group_1[0], 5))
    True
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterator

import torch
from torch import Tensor

from holoxmc import hrr
from holoxmc.errors import InputError
from holoxmc.seeding import Stream, local_generator  # their one home; re-exported here

__all__ = ["HRRLabelCode", "local_generator", "Stream", "DRAW_BLOCK"]


#: Labels per random stream of the (non-circulant) code. Fixed, so that a label's vector does not
#: depend on ``chunk_size``; equal to ``HRRHead``'s default ``label_chunk``, which set the streams
#: before the two were separated, so codes drawn then are drawn again bit-identically.
DRAW_BLOCK = 16384

# Alternating Gram–Schmidt / projection rounds used to make π(m) orthogonal to π(p).
_MAX_ORTHOGONAL_ROUNDS = 200
_ORTHOGONAL_TOLERANCE = 1e-12


def _gaussian(n: int, dim: int, generator: torch.Generator) -> Tensor:
    """``n`` float64 vectors with i.i.d. N(0, 1/dim) entries (the paper's initialisation)."""
    return torch.randn(n, dim, generator=generator, dtype=torch.float64) / dim**0.5


def _projected_gaussian_spectrum(n: int, dim: int, generator: torch.Generator, dtype: torch.dtype) -> Tensor:
    """The real-FFT spectra of ``n`` vectors distributed exactly as ``π(x)``,
    ``x ~ N(0, I/dim)``: ``irfft(spectrum, n=dim)`` gives the vectors.

    The DFT of an i.i.d. Gaussian vector has independent, uniformly distributed phases at
    the non-real frequencies and a symmetric real value at DC (and at Nyquist for even
    ``dim``); π keeps only those phases (signs at DC/Nyquist). Drawing the phases directly
    gives the same distribution as ``hrr.projection`` of a Gaussian draw at a fraction of
    the cost (no Gaussian draw, no forward FFT). Phases are drawn in float32 whatever
    ``dtype``, so float32 and float64 codes agree.

    Shapes:
        → complex ``(n, dim // 2 + 1)``.
    """
    n_freq = dim // 2 + 1
    phase = torch.rand(n, n_freq, generator=generator).to(dtype) * (2 * math.pi)
    spectrum = torch.polar(torch.ones_like(phase), phase)
    real_bins = [0, n_freq - 1] if dim % 2 == 0 else [0]
    spectrum[:, real_bins] = torch.where(phase[:, real_bins] < math.pi, 1.0, -1.0).to(spectrum.dtype)
    return spectrum


class HRRLabelCode:
    """The seeded dense HRR code of ``n_labels`` labels in ``dim`` dimensions.

    Args:
        n_labels: number of labels L.
        dim: code dimension d'.
        seed: the code's seed; the same seed gives the same vectors everywhere.
        chunk_size: rows per chunk handed out by :meth:`chunk` (memory of one chunk:
            ``chunk_size·dim``); it does not change the vectors.
        dtype: float32 or float64 of the returned vectors.
        circulant: label ``g·dim + s`` is the circular shift by ``s`` of the group vector
            ``b_g`` (module docstring) instead of an independent draw.

    Attributes:
        present: π(p), shape ``(dim,)``.
        missing: π(m), shape ``(dim,)``, orthogonal to ``present`` (see :attr:`pm_residual`).
        present_raw, missing_raw: p and m before projection (initial values of learnable roles).
        group_spectra: with ``circulant``, the real-FFT spectra of the group vectors ``b_g``,
            complex ``(n_groups, dim // 2 + 1)``; ``None`` otherwise.

    Label vectors are distributed as ``π(N(0, I/d'))`` (the paper's initialisation), drawn
    directly in the Fourier domain (see :func:`_projected_gaussian_spectrum`); being projected, each
    has unit norm. p is drawn as a Gaussian and projected with :func:`hrr.projection`.
    """

    def __init__(
        self,
        n_labels: int,
        dim: int = 400,
        *,
        seed: int = 0,
        chunk_size: int = 8192,
        dtype: torch.dtype = torch.float32,
        circulant: bool = False,
    ) -> None:
        if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in (n_labels, dim, chunk_size)):
            raise InputError(f"n_labels, dim and chunk_size must be integers; got {n_labels!r}, {dim!r}, {chunk_size!r}")
        if n_labels < 1 or dim < 2 or chunk_size < 1:
            raise InputError(
                f"need n_labels >= 1, dim >= 2, chunk_size >= 1; got {n_labels}, {dim}, {chunk_size}"
            )
        self.n_labels = int(n_labels)
        self.dim = int(dim)
        self.seed = int(seed)
        self.chunk_size = int(chunk_size)
        self.dtype = dtype
        self._cache: Tensor | None = None
        # (block, next row, generator) of the last random draw, so that consecutive ranges
        # continue one generator instead of redrawing the block's rows before them.
        self._next_draw: tuple[int, int, torch.Generator] | None = None
        p_raw, m_raw = self._draw_roles()
        self.present_raw = p_raw.to(dtype)
        self.missing_raw = m_raw.to(dtype)
        self.present = hrr.projection(p_raw).to(dtype)
        self.missing = hrr.projection(m_raw).to(dtype)
        self.group_spectra = (
            _projected_gaussian_spectrum(self.n_groups, self.dim, local_generator(self.seed, Stream.CIRCULANT_BASE),
                                         dtype)
            if circulant else None
        )
        # The group vectors b_g themselves: any label's vector is a rolled row of them.
        self._group_vectors = None if self.group_spectra is None else torch.fft.irfft(self.group_spectra, n=dim)

    @property
    def circulant(self) -> bool:
        return self.group_spectra is not None

    @property
    def n_groups(self) -> int:
        """``⌈L / dim⌉``: the groups of a circulant code (``dim`` labels each, the last may be short)."""
        return -(-self.n_labels // self.dim)

    def _draw_roles(self) -> tuple[Tensor, Tensor]:
        """p ~ π(N(0, I/d')); m is made orthogonal to π(p) by Gram–Schmidt *before* its
        projection, and the pair (orthogonalise, project) is repeated until π(m) ⟂ π(p)
        (alternating projections; one round alone leaves |p·m| ≈ 1e-3 to 1e-2)."""
        p_raw, m_raw = _gaussian(2, self.dim, local_generator(self.seed, Stream.ROLES))
        p = hrr.projection(p_raw)
        m = m_raw
        residual = math.inf
        for _ in range(_MAX_ORTHOGONAL_ROUNDS):
            m = m - (m @ p) / (p @ p) * p
            projected = hrr.projection(m)
            residual = abs(float(projected @ p))
            if residual < _ORTHOGONAL_TOLERANCE:
                break
            m = projected
        else:  # small d' leaves few unit-magnitude vectors to choose from
            warnings.warn(f"π(m) is not orthogonal to π(p) at dim={self.dim}, seed={self.seed}: |p·m| = "
                          f"{residual:.1e} after {_MAX_ORTHOGONAL_ROUNDS} rounds", RuntimeWarning, stacklevel=3)
        return p_raw, m

    @property
    def pm_residual(self) -> float:
        """``|cos(π(p), π(m))|`` after projection, in the code's dtype (0 = orthogonal)."""
        p, m = self.present.double(), self.missing.double()
        return abs(float(p @ m / (p.norm() * m.norm())))

    @property
    def n_chunks(self) -> int:
        return -(-self.n_labels // self.chunk_size)

    @property
    def nbytes(self) -> int:
        """Memory of the full ``L × d'`` matrix in the code's dtype."""
        return self.n_labels * self.dim * torch.empty((), dtype=self.dtype).element_size()

    @property
    def is_materialized(self) -> bool:
        return self._cache is not None

    def chunk_bounds(self, j: int) -> tuple[int, int]:
        """Label range ``[start, stop)`` of chunk ``j``."""
        if not 0 <= j < self.n_chunks:
            raise InputError(f"chunk {j} out of range [0, {self.n_chunks})")
        start = j * self.chunk_size
        return start, min(start + self.chunk_size, self.n_labels)

    def chunk(self, j: int) -> Tensor:
        """Label vectors of chunk ``j``, regenerated from the seed.

        Shapes:
            → ``(stop - start, dim)`` with ``(start, stop) = chunk_bounds(j)``.
        """
        start, stop = self.chunk_bounds(j)
        if self._cache is not None:
            return self._cache[start:stop]
        if self._group_vectors is not None:
            return self._circulant_rows(self._group_vectors, torch.arange(start, stop))
        return torch.fft.irfft(self._chunk_spectrum(j), n=self.dim, dim=-1)

    def _circulant_rows(self, group_vectors: Tensor, labels: Tensor) -> Tensor:
        """Vectors of a circulant code's labels as rolled group vectors, ``c_{g·d'+s}[t] =
        b_g[(t − s) mod d']``: a gather, ``O(n·d')``, with no chunk generated.

        Shapes:
            group_vectors: ``(n_groups, dim)``; labels: ``(n,)`` int64 → ``(n, dim)``.
        """
        groups, shifts = torch.div(labels, self.dim, rounding_mode="floor"), labels % self.dim
        positions = (torch.arange(self.dim) - shifts[:, None]) % self.dim
        return torch.gather(group_vectors.index_select(0, groups), 1, positions)

    def bound_chunk(self, j: int, roles: Tensor) -> Tensor:
        """``roles ⊗ c_i`` for the labels of chunk ``j`` (e.g. the keys ``p ⊗ c_i``,
        ``m ⊗ c_i``), computed from the chunk's spectrum with one inverse FFT.

        Shapes:
            roles: ``(k, dim)`` → ``(stop - start, k, dim)``.
        """
        roles_spectrum = torch.fft.rfft(roles.to(self.dtype), dim=-1)
        if self._cache is not None:
            start, stop = self.chunk_bounds(j)
            spectrum = torch.fft.rfft(self._cache[start:stop], dim=-1)
        else:
            spectrum = self._chunk_spectrum(j)
        return torch.fft.irfft(spectrum.unsqueeze(1) * roles_spectrum, n=self.dim, dim=-1)

    def _chunk_spectrum(self, j: int) -> Tensor:
        start, stop = self.chunk_bounds(j)
        if self.group_spectra is None:
            return self._random_spectrum(start, stop)
        # Shifting by s multiplies frequency k by e^{-2πi·k·s/d'} (phases in float64).
        labels = torch.arange(start, stop)
        shifts = (labels % self.dim).to(torch.float64)
        phase = (-2 * math.pi / self.dim) * shifts[:, None] * torch.arange(self.dim // 2 + 1, dtype=torch.float64)
        ramp = torch.polar(torch.ones_like(phase), phase).to(self.group_spectra.dtype)
        return self.group_spectra[labels // self.dim] * ramp

    def _random_spectrum(self, start: int, stop: int) -> Tensor:
        """Spectra of the random code's labels ``[start, stop)``, drawn block by block
        (module docstring); each row consumes the same draws, so a range continues the
        generator that drew the rows before it, or skips them.

        Shapes:
            → complex ``(stop - start, dim // 2 + 1)``.
        """
        pieces = []
        while start < stop:
            block, row = divmod(start, DRAW_BLOCK)
            end = min(stop, (block + 1) * DRAW_BLOCK)
            generator = self._generator_at(block, row)
            pieces.append(_projected_gaussian_spectrum(end - start, self.dim, generator, self.dtype))
            self._next_draw = (block, row + end - start, generator)
            start = end
        return pieces[0] if len(pieces) == 1 else torch.cat(pieces)

    def _generator_at(self, block: int, row: int) -> torch.Generator:
        """The generator of ``block`` positioned to draw its row ``row`` next."""
        if self._next_draw is not None and self._next_draw[0] == block and self._next_draw[1] <= row:
            _, next_row, generator = self._next_draw
        else:
            next_row, generator = 0, local_generator(self.seed, Stream.LABELS, block)
        for skip_from in range(next_row, row, 1024):  # discard rows before ``row``, 1,024 at a time
            torch.rand(min(1024, row - skip_from), self.dim // 2 + 1, generator=generator)
        return generator

    def chunks(self) -> Iterator[tuple[int, Tensor]]:
        """Yield ``(start, vectors)`` for every chunk in label order."""
        for j in range(self.n_chunks):
            yield self.chunk_bounds(j)[0], self.chunk(j)

    def full(self) -> Tensor:
        """The whole ``(L, dim)`` matrix (not cached; see :meth:`materialize`)."""
        if self._cache is not None:
            return self._cache
        return torch.cat([vectors for _, vectors in self.chunks()])

    def materialize(self) -> Tensor:
        """Build and keep the projected ``(L, dim)`` matrix so :meth:`gather` and
        :meth:`chunk` become lookups. Costs :attr:`nbytes` of memory."""
        if self._cache is None:
            self._cache = self.full()
        return self._cache

    def gather(self, labels: Tensor) -> Tensor:
        """Projected vectors of the given label ids: from the cache, as rolled group vectors
        (circulant code: ``O(n·d')``, nothing regenerated), or by regenerating only the
        chunks that contain them.

        Shapes:
            labels: ``(n,)`` int64 → ``(n, dim)`` on the CPU.
        """
        labels = labels.to("cpu", torch.int64)
        if self._cache is not None:
            return self._cache.index_select(0, labels)
        if self._group_vectors is not None:
            return self._circulant_rows(self._group_vectors, labels)
        out = torch.empty(labels.shape[0], self.dim, dtype=self.dtype)
        # Read from whole chunks, so that gathered vectors equal the chunks' bit for bit (an
        # inverse FFT's last bits can depend on how many rows it transforms at once).
        chunk_of = torch.div(labels, self.chunk_size, rounding_mode="floor")
        for j in torch.unique(chunk_of).tolist():
            rows = torch.nonzero(chunk_of == j).squeeze(1)
            start, _ = self.chunk_bounds(j)
            out[rows] = self.chunk(j).index_select(0, labels[rows] - start)
        return out

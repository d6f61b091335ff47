"""Every random stream holoxmc derives from a user seed, in one place.

A model is reproducible from its seed alone: weights, label codes, validation splits,
batch orders and dropout masks all come from local generators keyed by the seed (the
global RNGs are never read). The derivations here are fixed: changing one changes every
saved model's reproduction and every reported figure.

* :class:`Stream` numbers the torch streams of one network (``local_generator(seed, stream)``).
* :func:`member_seed`: member ``m`` of an ensemble trains with ``seed + 100·m``.
* :func:`epoch_seed`: the torch seed (dropout) of training epoch ``e``.
* :func:`chunk_seed`: SOLAR chunk ``k``'s seed for one purpose (codes, hashing, init, training).

Example:
    >>> member_seeds(3, 3)
    [3, 103, 203]
    >>> Stream.CIRCULANT_BASE is Stream.FC_INIT
    True
"""

from __future__ import annotations

import enum

import numpy as np
import torch

__all__ = ["Stream", "ALIASED_STREAMS", "local_generator", "MEMBER_SEED_STEP", "member_seed", "member_seeds",
           "epoch_seed", "chunk_seed", "holdout_generator"]


class Stream(enum.IntEnum):
    """The torch streams derived from one seed (``local_generator(seed, stream, ...)``); a
    new use takes a number no other use has.

    One alias is kept on purpose: ``CIRCULANT_BASE`` has ``FC_INIT``'s number (3), so a
    circulant code's group phases and an FC backbone's first weights, drawn from one seed,
    are the same uniform draws. They meet nowhere in the network (one sets the input
    layer's starting point, the other fixed output directions), and every saved model and
    reported figure was made with it; :data:`ALIASED_STREAMS` lists it, and a test holds
    every other number distinct.
    """

    LABELS = 0
    ROLES = 1
    HEAD_INIT = 2  # the dense and the HRR head: a network has one of them
    FC_INIT = 3
    CIRCULANT_BASE = FC_INIT  # an alias, see the class docstring
    CNN_INIT = 4
    LSTM_INIT = 5
    LINEAR_PATH = 77


#: Stream names that share another stream's number, deliberately: ``{alias: stream}``.
ALIASED_STREAMS: dict[str, str] = {"CIRCULANT_BASE": "FC_INIT"}

#: Member ``m`` of an ensemble is the network ``seed + MEMBER_SEED_STEP · m`` trains alone.
MEMBER_SEED_STEP = 100


def local_generator(seed: int, *key: int) -> torch.Generator:
    """A CPU ``torch.Generator`` for the independent stream ``key`` of ``seed``.

    Streams are derived with :class:`numpy.random.SeedSequence` (``spawn_key=key``), so
    different keys give statistically independent generators and nothing touches the global
    RNG.

    Example:
        >>> a = torch.rand(2, generator=local_generator(0, 1, 7))
        >>> torch.equal(a, torch.rand(2, generator=local_generator(0, 1, 7)))
        True
    """
    state = np.random.SeedSequence(entropy=int(seed), spawn_key=tuple(int(k) for k in key))
    low, high = state.generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed((int(high) << 32 | int(low)) & (2**63 - 1))


def member_seed(seed: int, member: int) -> int:
    """The seed of member ``member`` of an ensemble: ``seed + 100·member``.

    Example:
        >>> member_seed(1, 2)
        201
    """
    return int(seed) + MEMBER_SEED_STEP * int(member)


def member_seeds(seed: int, n_models: int) -> list[int]:
    """The seeds of an ``n_models``-network ensemble (``[seed]`` for one network)."""
    return [member_seed(seed, member) for member in range(int(n_models))]


def epoch_seed(seed: int, epoch: int) -> int:
    """The 63-bit torch seed of training epoch ``epoch`` (its dropout masks).

    Example:
        >>> epoch_seed(0, 1) == epoch_seed(0, 1) != epoch_seed(0, 2)
        True
    """
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1, dtype=np.uint64)[0]) >> 1


def chunk_seed(seed: int, chunk: int, purpose: str) -> int:
    """A 31-bit seed for one SOLAR chunk and one purpose, derived from the model seed.

    Different purposes (``"labels"``, ``"features"``, ``"init"``, ``"train"``) give unrelated streams.

    Example:
        >>> chunk_seed(0, 1, "labels") == chunk_seed(0, 1, "labels") != chunk_seed(0, 2, "labels")
        True
    """
    tag = int.from_bytes(purpose.encode("utf-8")[:8].ljust(8, b"\0"), "little")
    state = np.random.SeedSequence([int(seed), int(chunk), tag]).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


def holdout_generator(seed: int) -> np.random.Generator:
    """The generator of a held-out test split carved from one data file
    (``holoxmc train FILE --test-fraction F``), unrelated to every training stream.

    Example:
        >>> a = holdout_generator(0).permutation(5)
        >>> bool((a == holdout_generator(0).permutation(5)).all())
        True
    """
    return np.random.default_rng(np.random.SeedSequence([int(seed), chunk_seed(seed, 0, "holdout")]))

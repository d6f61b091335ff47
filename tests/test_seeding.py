"""Every seed derivation has one home (``holoxmc.seeding``), and the one stream alias is explicit."""

from __future__ import annotations

import torch

from holoxmc import seeding
from holoxmc.codes import hrr as code_hrr
from holoxmc.models.solar import codes as code_solar
from holoxmc.estimator import XMCClassifier
from holoxmc.seeding import ALIASED_STREAMS, Stream, chunk_seed, epoch_seed, local_generator, member_seeds
from holoxmc.train import trainer


def test_streams_are_distinct_but_for_the_documented_alias():
    names = list(Stream.__members__)
    values = [Stream.__members__[name].value for name in names]
    aliases = {name for name in names if Stream.__members__[name].name != name}
    assert aliases == set(ALIASED_STREAMS)
    assert all(Stream[alias] is Stream[target] for alias, target in ALIASED_STREAMS.items())
    assert len({Stream[name].value for name in names if name not in aliases}) == len(names) - len(aliases)
    assert sorted(set(values)) == sorted(Stream[name].value for name in names if name not in aliases)
    assert Stream.CIRCULANT_BASE.value == 3 == Stream.FC_INIT.value  # the value saved models were drawn with


def test_the_code_modules_use_the_one_home():
    assert code_hrr.Stream is Stream and code_hrr.local_generator is local_generator
    assert code_solar.chunk_seed is chunk_seed


def test_derivations_are_the_ones_saved_models_were_made_with():
    assert member_seeds(7, 3) == XMCClassifier(seed=7, n_models=3).member_seeds() == [7, 107, 207]
    assert all(epoch_seed(s, e) == trainer._epoch_seed(s, e) for s in (0, 5) for e in (1, 2, 30))
    first = torch.rand(3, generator=local_generator(11, Stream.FC_INIT))
    assert torch.equal(first, torch.rand(3, generator=local_generator(11, Stream.CIRCULANT_BASE)))
    assert not torch.equal(first, torch.rand(3, generator=local_generator(11, Stream.CNN_INIT)))
    assert chunk_seed(0, 1, "labels") != chunk_seed(0, 1, "features")
    assert seeding.MEMBER_SEED_STEP == 100

"""The served models: what ``XMCClassifier.fit`` returns and ``XMCClassifier.load`` reads.

Every model satisfies one protocol, :class:`~holoxmc.models.base.FittedModel` (top-k,
confidence and score chunks, save, parameter counts):

* :class:`holoxmc.models.network.model.NetworkModel`: one :class:`~holoxmc.backbones.Network` or
  an :class:`~holoxmc.backbones.Ensemble` of them (the ``hrr`` and ``dense`` heads);
* :class:`holoxmc.models.solar.model.SolarModel`: SOLAR's K chunk networks and inverted index;
* :class:`holoxmc.models.linear.model.LinearModel`: one linear SVM per label.

:mod:`holoxmc.models.registry` maps each head name to its family: how it fits, its default
settings, the settings that apply to it, and how it loads. The fitting code itself stays in
:mod:`holoxmc.train`.
"""

from holoxmc.models.base import FittedModel

__all__ = ["FittedModel"]

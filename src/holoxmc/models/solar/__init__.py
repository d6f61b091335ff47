"""SOLAR (Medini et al., ICLR 2021): sparse, load-balanced K x B label codes, K chunk
classifiers trained with zero communication, and inverted-index decoding.

Stages by role: :mod:`~holoxmc.models.solar.codes` (the label codes and inverted index),
:mod:`~holoxmc.models.solar.head` (one chunk's B-bucket output layer),
:mod:`~holoxmc.models.solar.fit` (the K chunks as independent jobs of the shared trainer) and
:mod:`~holoxmc.models.solar.model` (the served model: load, decode, top-k).
"""

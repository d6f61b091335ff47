"""Shortlist and re-rank: a retriever proposes labels, per-label sparse linear scorers re-score them.

Stages by role: :mod:`~holoxmc.models.rerank.clusters` (balanced label clusters),
:mod:`~holoxmc.models.rerank.matcher` (the clustered retriever),
:mod:`~holoxmc.models.rerank.model` (the served model: retriever + scorers + mix) and
:mod:`~holoxmc.models.rerank.fit` (shortlists, per-label scorers, the mix weight).
"""

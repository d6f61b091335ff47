"""The networks: HRR and dense heads on the FC / XML-CNN / attention-LSTM backbones, trained by
the shared :class:`~holoxmc.train.Trainer`.

Stages by role: :mod:`~holoxmc.models.network.model` (fit and serve one network or an
ensemble) and :mod:`~holoxmc.models.network.fusion` (a text network fused with the linear
model's scores).
"""

"""The linear one-vs-rest model: one L2-regularised linear SVM per label (DiSMEC's design).

Stages by role: :mod:`~holoxmc.models.linear.fit` (liblinear per label block, as jobs) and
:mod:`~holoxmc.models.linear.model` (the served model).
"""

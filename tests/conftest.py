"""Fixtures shared by several test modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from holoxmc.data import make_synthetic
from holoxmc.data.readers import write_xml_repo


@pytest.fixture(scope="session")
def toy(tmp_path_factory) -> Path:
    """A small dataset folder in the XML-repository format: toy_train.txt, toy_test.txt
    (800 / 200 points, 120 features, 30 labels)."""
    folder = tmp_path_factory.mktemp("data") / "toy"
    train, test = make_synthetic(800, 30, 120, n_test=200, labels_per_point=2.0, seed=2)
    write_xml_repo(folder / "toy_train.txt", train.X, train.Y)
    write_xml_repo(folder / "toy_test.txt", test.X, test.Y)
    return folder

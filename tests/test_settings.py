"""Every setting is declared once (holoxmc.settings) and everything else reads that declaration:
the estimator's signature and checks, the command line's options and their help, the head
configurations' defaults."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import subprocess
import sys
from collections import Counter

import pytest

from holoxmc.cli import build_parser
from holoxmc.cli.options import add_setting_options, flagged_settings
from holoxmc.estimator import XMCClassifier
from holoxmc.heads.hrr import HRRHead
from holoxmc.models.linear.fit import LinearConfig
from holoxmc.models.rerank.fit import RerankConfig
from holoxmc.models.solar.config import SolarConfig
from holoxmc.settings import (DEFAULTS, ESTIMATOR_CONSTRAINTS, HEAD_OPTIONS, SETTING, SETTINGS, PerHead, default_text,
                              option_default)

ESTIMATOR_PARAMS = [name for name in inspect.signature(XMCClassifier.__init__).parameters if name != "self"]
CONFIGS = {"hrr": HRRHead, "solar": SolarConfig, "linear": LinearConfig, "rerank": RerankConfig}


def test_every_setting_is_declared_once() -> None:
    assert [name for name, n in Counter(s.name for s in SETTINGS).items() if n > 1] == []
    assert [flag for flag, n in Counter(s.flag for s in SETTINGS if s.flag).items() if n > 1] == []


def test_every_estimator_keyword_is_a_row_of_the_table_with_its_default() -> None:
    assert sorted(ESTIMATOR_PARAMS) == sorted(DEFAULTS) == sorted(ESTIMATOR_CONSTRAINTS)
    signature = inspect.signature(XMCClassifier.__init__).parameters
    assert {name: signature[name].default for name in ESTIMATOR_PARAMS} == dict(DEFAULTS)


def test_every_setting_has_a_flag_or_a_stated_reason_never_both() -> None:
    assert [s.name for s in SETTINGS if bool(s.flag) == bool(s.reason)] == []


def test_every_default_meets_its_own_constraint() -> None:
    for s in SETTINGS:
        for default in (s.default.values() if isinstance(s.default, PerHead) else [s.default]):
            assert any(c is None and default is None or c is not None and c.accepts(default) for c in s.allowed), s.name


@pytest.mark.parametrize("head", sorted(CONFIGS))
def test_head_configurations_start_from_the_table(head: str) -> None:
    config = CONFIGS[head]
    if dataclasses.is_dataclass(config):
        defaults = {f.name: f.default for f in dataclasses.fields(config)}
    else:
        defaults = {name: p.default for name, p in inspect.signature(config.__init__).parameters.items()}
    rows = [s for s in SETTINGS if s.head_option and head in s.heads]
    assert rows and {s.name: defaults[s.name] for s in rows} == {s.name: option_default(head, s.name) for s in rows}
    assert set(HEAD_OPTIONS[head].values()) == {s.name for s in rows}


def _train_parser() -> argparse.ArgumentParser:
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices["train"]


def test_train_has_a_flag_for_each_flagged_setting_and_its_help_names_the_real_default() -> None:
    actions = {a.dest: a for a in _train_parser()._actions}
    for name in flagged_settings():
        setting = SETTING[name]
        action = actions[setting.dest]
        assert setting.flag in action.option_strings
        assert action.default is None  # not given: the preset, then the table's default
        assert f"(default: {default_text(setting)})".replace("%", "%%") in " ".join(action.help.split())


def test_help_prints_the_defaults() -> None:
    out = subprocess.run([sys.executable, "-m", "holoxmc", "train", "--help"], capture_output=True, text=True,
                         check=True).stdout
    flat = " ".join(out.split())
    assert "--warmup-epochs" in flat and "--grad-clip" in flat
    assert "(default: 10)" in flat  # --top-buckets: SolarConfig's, the one value
    assert "chosen on the validation split from 0.3" in flat  # --C: the real grid


def test_a_flag_reaches_the_estimator_keyword(tmp_path) -> None:
    from holoxmc.cli.train import _OVERRIDES, train_params

    parser = argparse.ArgumentParser()
    add_setting_options(parser)
    args = parser.parse_args(["--warmup-epochs", "1.5", "--grad-clip", "2", "--chunks", "4"])
    params = train_params("synthetic", "solar", {key: getattr(args, key) for key in (*_OVERRIDES, "chunks")})
    assert params["warmup_epochs"] == 1.5 and params["grad_clip"] == 2.0 and params["head_options"] == {"n_chunks": 4}


def test_an_option_of_a_trained_run_names_the_run_as_its_default() -> None:
    parser = argparse.ArgumentParser()
    add_setting_options(parser, ["top_buckets"], saved=True)
    assert "(default: the run's setting)" in " ".join(parser.format_help().split())


def test_one_flag_serves_a_head_option_two_families_share(tmp_path) -> None:
    from holoxmc.cli.train import train_params

    assert train_params("synthetic", "solar", {"loss": "sampled"})["head_options"] == {"loss": "sampled"}
    assert train_params("synthetic", "hrr-fc", {"loss": "abs"})["head_options"] == {"loss": "abs"}
    with pytest.raises(Exception, match="--loss applies to"):
        train_params("synthetic", "linear", {"loss": "full"})


def test_a_setting_without_a_flag_cannot_be_added_as_one() -> None:
    with pytest.raises(KeyError, match="scikit-learn's name"):
        add_setting_options(argparse.ArgumentParser(), ["n_jobs"])

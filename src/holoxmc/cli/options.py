"""The ``holoxmc train`` options of the settings, built from their one declaration
(:data:`holoxmc.settings.SETTINGS`): type, choices and help follow each setting's allowed forms,
and ``--help`` states its real default. Standard library only, as the parser must be.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_setting_options(parser, ["epochs", "schedule"])
    >>> parser.parse_args(["--epochs", "3"]).epochs, parser.parse_args([]).schedule is None
    (3, True)
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from typing import Any

from holoxmc.constraints import Instance, Integer, IntegerSequence, Options, Real
from holoxmc.settings import SETTING, SETTINGS, Setting, default_text

__all__ = ["add_setting_options", "flagged_settings", "setting_keywords"]


def flagged_settings() -> list[str]:
    """The names of the settings that have a ``holoxmc train`` flag, in table order."""
    return [s.name for s in SETTINGS if s.flag]


def _argument_type(setting: Setting) -> dict[str, Any]:
    """argparse ``type`` / ``choices`` / ``action`` of a setting, from its allowed forms."""
    from holoxmc.cli import finite_float, non_negative_int, positive_int

    forms = [form for form in setting.allowed if form is not None]
    if "action" in setting.cli:
        return {}
    if any(isinstance(f, Instance) and f.kind is bool for f in forms) or \
            any(isinstance(f, Options) and True in f.values for f in forms):
        return {"action": argparse.BooleanOptionalAction}
    form = forms[0]
    if isinstance(form, Options):
        return {"choices": list(form.values)}
    if isinstance(form, IntegerSequence):
        return {"type": positive_int}
    if isinstance(form, Integer):
        return {"type": positive_int if form.low == 1 else non_negative_int if form.low == 0 else int}
    if isinstance(form, Real):
        return {"type": finite_float}
    return {"type": str}


def setting_keywords(setting: Setting, *, saved: bool = False) -> dict[str, Any]:
    """The ``add_argument`` keywords of a setting's flag (``saved``: an option of a trained run,
    whose default is the setting the run was saved with)."""
    default = "the run's setting" if saved else default_text(setting)
    help_text = f"{setting.help} (default: {default})".replace("%", "%%")
    return {"dest": setting.dest, "default": None, "help": help_text, **_argument_type(setting), **setting.cli}


def add_setting_options(parser: argparse.ArgumentParser, names: Iterable[str] | None = None, *,
                        saved: bool = False) -> None:
    """Add the flag of every named setting (default: every setting with one) to ``parser``.

    Args:
        parser: the (sub)parser.
        names: the settings, by name (each must have a flag).
        saved: the options re-set a trained run's setting (``evaluate``, ``predict``).
    """
    for name in flagged_settings() if names is None else names:
        setting = SETTING[name]
        if not setting.flag:
            raise KeyError(f"setting {name!r} has no command-line flag ({setting.reason})")
        parser.add_argument(setting.flag, **setting_keywords(setting, saved=saved))

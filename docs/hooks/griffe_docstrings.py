"""A griffe extension for the API reference: reads holoxmc's docstring conventions.

The code's docstrings use ``Example:`` (griffe's Google parser knows only ``Examples:``, and
would render the doctests as Markdown) and document related parameters together
(``X_val, Y_val: ...``), which the parser would read as one unknown parameter. Both are
rewritten here, before parsing, so that ``mkdocs build --strict`` still reports every other
docstring fault.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SECTION = re.compile(r"^(\s*)(Args|Arguments|Parameters|Attributes):\s*$")
_NAMES = r"[A-Za-z_]\w*(?:,\s*[A-Za-z_]\w*)+"
_CONTINUED = re.compile(rf"^\s+(?:{_NAMES}|[A-Za-z_]\w*),\s*$")
_GROUP = re.compile(rf"^(\s+)({_NAMES}):\s?(.*)$")


def _split_groups(lines: list[str]) -> list[str]:
    """One entry per name for ``a, b: description`` lines inside parameter sections."""
    out: list[str] = []
    section_indent: int | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        if line.strip() and section_indent is not None and indent <= section_indent:
            section_indent = None
        header = _SECTION.match(line)
        if header:
            section_indent = len(header.group(1))
        elif section_indent is not None:
            joined, j = line, i
            while _CONTINUED.match(joined) and j + 1 < len(lines):
                j += 1
                joined = joined.rstrip() + " " + lines[j].strip()
            group = _GROUP.match(joined)
            if group:
                pad, names, text = group.groups()
                first, *rest = [name.strip() for name in names.split(",")]
                block = [f"{pad}{first}: {text}"]
                i = j + 1
                while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(pad)):
                    block.append(lines[i])
                    i += 1
                blanks = len(block) - len("\n".join(block).rstrip().split("\n"))
                out.extend(block[:len(block) - blanks])
                out.extend(f"{pad}{name}: see `{first}`." for name in rest)
                out.extend([""] * blanks)
                continue
        out.append(line)
        i += 1
    return out


#: A Sphinx role (``:class:`~a.b.C```, ``:func:`f```, ``:data:``, ``:mod:``, ``:meth:``, ``:attr:``).
_ROLE = re.compile(r":(?:class|func|data|mod|meth|attr|exc|obj):`(~?)([^`]+)`")


def _role_as_code(match: re.Match[str]) -> str:
    """The role's target as inline code: its last name after ``~`` (Sphinx's short form)."""
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def rewrite(text: str) -> str:
    """The docstring ``text`` in the form griffe's Google parser reads, its Sphinx roles as
    inline code (Markdown would show ``:class:`` and the backticks literally).

    Example:
        >>> rewrite("A :class:`~holoxmc.models.base.FittedModel` of :mod:`holoxmc.models`.")
        'A `FittedModel` of `holoxmc.models`.'
    """
    text = _ROLE.sub(_role_as_code, text)
    text = re.sub(r"^(\s*)Example:\s*$", r"\1Examples:", text, flags=re.M)
    return "\n".join(_split_groups(text.split("\n")))


class HoloxmcDocstrings(griffe.Extension):
    """Rewrites each docstring (see the module docstring) when griffe loads its object."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)

"""The package layout keeps its promise: imports only point down. No import cycle between
files, none between packages, and no private name imported from another module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
ROOT = SRC / "holoxmc"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _resolve(module: str, name: str | None) -> str | None:
    """The holoxmc module an import names (``from a import b``: ``a.b`` when that is a module)."""
    if name and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    return module if module in MODULES else None


def _imports(module: str) -> list[tuple[str, list[str]]]:
    """(imported holoxmc module, names taken from it) for every import in ``module``, at any depth
    (function-level imports included), skipping ``if TYPE_CHECKING`` blocks."""
    path = MODULES[module]
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, list[str]]] = []
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out += [(target, []) for alias in node.names if (target := _resolve(alias.name, None))]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if not base.startswith("holoxmc"):
                continue
            for alias in node.names:
                target = _resolve(base, alias.name)
                if target:
                    out.append((target, [] if target == f"{base}.{alias.name}" else [alias.name]))
    return out


def _graph(key) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        for target, _ in _imports(module):
            a, b = key(module), key(target)
            if a != b and not (a == "holoxmc" or b == "holoxmc"):  # the package root re-exports the API
                graph.setdefault(a, set()).add(b)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (a list of nodes, the first repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def _package(module: str) -> str:
    """A module's package: its folder (a top-level module is a node of its own)."""
    path = MODULES[module]
    if path.parent == ROOT:
        return module
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def test_no_file_cycle() -> None:
    assert _cycle(_graph(lambda m: m)) is None


def test_no_package_cycle() -> None:
    assert _cycle(_graph(_package)) is None


def test_no_private_name_imported_across_modules() -> None:
    taken = [(module, target, name) for module in MODULES for target, names in _imports(module)
             for name in names if name.startswith("_") and not name.startswith("__")]
    assert taken == []


@pytest.mark.parametrize("graph, found", [({"a": {"b"}, "b": {"a"}}, ["a", "b", "a"]), ({"a": {"b"}, "b": set()}, None)])
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], found: list[str] | None) -> None:
    assert _cycle(graph) == found

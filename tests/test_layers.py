"""Layers point down only: cli/testing → providers → reload → interaction → core."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests._imports import imported, module_name

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hotseam"

# What each layer may import from hotseam (besides itself). ``testing`` and the pytest plugin
# sit at the top with the CLI: they drive reloads and install scripted providers.
ALLOWED = {
    "core": set(),
    "interaction": {"core"},
    "reload": {"core", "interaction"},
    "providers": {"core", "interaction"},
    "testing": {"core", "interaction", "reload", "providers"},
    "cli": {"core", "interaction", "reload", "providers"},
}


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2 or (parts[1].startswith("_") and parts[1] != "__main__"):
        return "core"
    if parts[1] == "pytest_plugin":
        return "testing"
    if parts[1] == "__main__":
        return "cli"
    return parts[1]


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_only(path: Path) -> None:
    """No module imports from a layer above its own."""
    own = _layer(module_name(path))
    bad = []
    for name, line in imported(path):
        target = _layer(name)
        # "hotseam.x.Name" where Name is a class, not a module, resolves to x's layer.
        if target != own and target not in ALLOWED[own] and target in ALLOWED:
            bad.append(f"line {line}: {name} ({target})")
    assert not bad, f"{own} module {path.name} imports a higher layer: {bad}"


def _module_graph() -> dict[str, set[str]]:
    """Every hotseam module and the hotseam modules it imports, wherever the import is (at
    the top, inside a function, under ``TYPE_CHECKING``): an import dodged into a function
    is still a dependency. ``from package import name`` points at the submodule when
    ``name`` is one, else at the package."""
    modules = {module_name(path) for path in SOURCES}
    graph: dict[str, set[str]] = {}
    for path in SOURCES:
        name = module_name(path)
        by_statement: dict[int, set[str]] = {}
        for target, line in imported(path):
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target in modules and target != name:
                by_statement.setdefault(line, set()).add(target)
        graph[name] = set()
        for targets in by_statement.values():
            # "from .x import y" names both .x and .x.y: the most specific is imported.
            graph[name].update(
                t for t in targets if not any(o.startswith(t + ".") for o in targets)
            )
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle_anywhere() -> None:
    """No module of hotseam imports, however indirectly, a module that imports it back —
    counting imports inside functions and under TYPE_CHECKING (#22)."""
    assert _cycles(_module_graph()) == []


def test_the_circle_check_finds_a_circle() -> None:
    """The check above can fail: a two-module and a three-module circle are found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": {"a"}}
    assert _cycles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_the_core_is_read_from_the_bottom_up() -> None:
    """The order the core package's docstring gives is the order of its imports: each core
    module imports only modules listed before it."""
    import hotseam._core

    order = re.findall(r"``(_[a-z_]+)``", hotseam._core.__doc__ or "")
    listed = [f"hotseam._core.{name}" for name in order if name.startswith("_") and name[1] != "_"]
    graph = _module_graph()
    core = sorted(name for name in graph if name.startswith("hotseam._core."))
    assert sorted(listed) == core, "the docstring lists every core module once"
    for position, module in enumerate(listed):
        later = set(listed[position:])
        assert not graph[module] & later, f"{module} imports a module listed after it"

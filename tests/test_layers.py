"""Layers point down only: cli/testing → providers → reload → interaction → core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[str, int]]:
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((target, node.lineno))
            found.extend((f"{target}.{alias.name}", node.lineno) for alias in node.names)
    return [(name, line) for name, line in found if name.split(".")[0] == "hotseam"]


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_only(path: Path) -> None:
    """No module imports from a layer above its own."""
    own = _layer(_module_name(path))
    bad = []
    for name, line in _imports(path):
        target = _layer(name)
        # "hotseam.x.Name" where Name is a class, not a module, resolves to x's layer.
        if target != own and target not in ALLOWED[own] and target in ALLOWED:
            bad.append(f"line {line}: {name} ({target})")
    assert not bad, f"{own} module {path.name} imports a higher layer: {bad}"

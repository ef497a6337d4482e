"""No back doors: a private module is imported only from inside the package that owns it.

The rule, for every import anywhere in ``src/hotseam`` (at the top, inside a function,
under ``TYPE_CHECKING``; ``import a.b``, ``from a import b``, relative forms, and
``importlib.import_module("…")`` with a literal name):

* a name whose component starts with one underscore (``_m``, not a dunder) is private to
  the package that contains it: the **owner** of ``hotseam.x._m`` (and of anything under
  it, ``hotseam.x._m.y``) is ``hotseam.x``; where several components are private, the
  last one decides (``hotseam.providers._acp._form`` is owned by
  ``hotseam.providers._acp``);
* such a name may be imported only by the owner itself or a module inside it.

So what two packages share lives in a module both may import by name: a private
subpackage's ``__init__`` is the package-internal name its siblings use
(``hotseam.providers._kit`` from anywhere in ``hotseam.providers``; ``hotseam._core``
from anywhere in ``hotseam``), and a layer's ``__init__`` exports what the layers above
use (public names in ``__all__``; names for hotseam's own packages only, re-exported
explicitly and left out of ``__all__``). ``from package import _name`` counts even when
``_name`` is not a module. Layers still point down (``tests/test_layers.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._imports import imported, module_name

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "hotseam"
SOURCES = sorted(PACKAGE.rglob("*.py"))


def _modules(root: Path) -> set[str]:
    names = set()
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def private_part(name: str, modules: set[str]) -> tuple[str, str] | None:
    """The private module ``name`` reaches and the package that owns it, or ``None``.

    The owner is the parent of the last private component. A private attribute that is
    not a module (``from ._logging import _stderr_sink``) is its module's business: the
    module's owner decides."""
    parts = name.split(".")
    while parts and ".".join(parts) not in modules and len(parts) > 1:
        if ".".join(parts[:-1]) in modules:  # parts[-1] is an attribute of a module
            parts = parts[:-1]
            break
        parts = parts[:-1]
    private = [i for i, part in enumerate(parts) if part.startswith("_") and part[:2] != "__"]
    if not private:
        return None
    return ".".join(parts[: private[-1] + 1]), ".".join(parts[: private[-1]])


def back_doors(path: Path, root: Path = PACKAGE) -> list[str]:
    """The imports of ``path`` that reach into another package's private module, one entry
    per line and private module."""
    module = module_name(path, root)
    modules = _modules(root)
    bad: dict[tuple[int, str], str] = {}
    for name, line in imported(path, root):
        found = private_part(name, modules)
        if found is None:
            continue
        target, home = found
        if module != home and not module.startswith(home + "."):
            bad[(line, target)] = f"line {line}: {target} (private to {home})"
    return [bad[key] for key in sorted(bad)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_of_another_packages_private_module(path: Path) -> None:
    """Each module imports private modules of its own package only."""
    bad = back_doors(path)
    assert not bad, f"{module_name(path)} imports private modules of other packages: {bad}"


def test_the_rule_reads_every_import_form(tmp_path: Path) -> None:
    """The check sees relative, absolute, ``import a.b``, function-level and dynamic
    imports, and allows a package's own private modules, a sibling private package's
    ``__init__`` and a private helper of a sibling module."""
    root = tmp_path / "hotseam"
    for name in (
        "providers/_mcp/_own.py",
        "providers/_acp/_form.py",
        "providers/_kit/__init__.py",
        "interaction/_pending.py",
        "interaction/_runs.py",
        "reload/_guard.py",
        "_core/__init__.py",
    ):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("", encoding="utf-8")
    (root / "providers" / "_mcp" / "_x.py").write_text(
        "from .._acp._form import Form, type_name\n"  # 1: another package's private module
        "from .._kit import JsonLines\n"  # 2: a sibling's package-internal name: allowed
        "from ._own import thing, _helper\n"  # 3: its own package's: allowed
        "def f():\n"
        "    import hotseam.interaction._pending\n"  # 5: function level, absolute
        "    from ...interaction import _runs\n"  # 6: a private module taken from a package
        "    from ... import _core\n"  # 7: hotseam._core is hotseam's: allowed
        "    importlib.import_module('hotseam.reload._guard')\n",  # 8: dynamic
        encoding="utf-8",
    )
    assert back_doors(root / "providers" / "_mcp" / "_x.py", root) == [
        "line 1: hotseam.providers._acp._form (private to hotseam.providers._acp)",
        "line 5: hotseam.interaction._pending (private to hotseam.interaction)",
        "line 6: hotseam.interaction._runs (private to hotseam.interaction)",
        "line 8: hotseam.reload._guard (private to hotseam.reload)",
    ]

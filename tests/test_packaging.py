"""Installed as users install it: every third-party module that ``src/`` imports is declared,
by the base requirements or by the extra whose surface imports it, and a surface used
without its extra says which extra to install, in one line.

The dev environment has every extra installed, so "without the extra" is made here by
hiding the extra's modules in a fresh interpreter (``sys.modules[name] = None``: both
``import`` and ``importlib.util.find_spec`` then find nothing). ``.ci/wheel-check`` does
the same with the built wheel in real virtual environments, one per extra.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests._timing import scaled

from hotseam._extras import EXTRAS
from hotseam.cli import _EXTRA_COMMANDS
from hotseam.cli._extras import COMMAND_EXTRAS

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "hotseam"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

# Where each extra's surface lives (paths relative to src/hotseam); everything else is the
# base install's and may import only what the base requirements declare.
AREAS = {
    "acp": ("providers/_acp/", "providers/acp.py", "cli/_acp_agent.py"),
    "mcp": ("providers/_mcp/", "providers/mcp.py"),
    "web": ("providers/_web/", "providers/web.py", "cli/_inbox_cmd.py"),
    "postgres": ("interaction/_journal/_postgres.py",),
}

# Modules present by construction where they are imported, so not declared: pytest loads
# the pytest plugin, and trio is imported only inside functions that run on trio.
HOSTED = {"pytest": ("pytest_plugin.py",), "trio": None}
# Modules that exist for type checkers only (typeshed's stubs of the standard library).
STUBS = {"_typeshed"}


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def _self_extras(requirement: str) -> list[str]:
    """``hotseam[acp,web]`` → ``["acp", "web"]``; ``[]`` for another distribution."""
    match = re.match(r"\s*hotseam\[([^\]]*)\]", requirement)
    return [extra.strip() for extra in match.group(1).split(",")] if match else []


def declared(project: dict[str, object], extra: str | None) -> set[str]:
    """The distributions the base requirements declare, plus those of ``extra`` with the
    extras it names of hotseam itself (``hotseam[acp,web]``), recursively."""
    base = project["dependencies"]
    extras = project["optional-dependencies"]
    assert isinstance(base, list)
    assert isinstance(extras, dict)
    names = {_name(requirement) for requirement in base}
    pending, seen = [extra] if extra else [], set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for requirement in extras[current]:
            inner = _self_extras(requirement)
            if inner:
                pending.extend(inner)
            else:
                names.add(_name(requirement))
    return names


@dataclass(frozen=True)
class Import:
    path: str  # relative to src/hotseam
    line: int
    module: str  # the top-level module
    in_function: bool
    type_checking: bool
    guarded: bool = False  # under try/except ImportError or contextlib.suppress(ImportError)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _names(node: ast.expr | None) -> set[str]:
    if node is None:
        return set()
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts))
    if isinstance(node, ast.Name):
        return {node.id}
    return {node.attr} if isinstance(node, ast.Attribute) else set()


def _guards(node: ast.AST) -> bool:
    """A ``try`` that catches ImportError, or ``with contextlib.suppress(ImportError)``."""
    if isinstance(node, ast.Try):
        return any(_names(handler.type) & _IMPORT_ERRORS for handler in node.handlers)
    if isinstance(node, ast.With):
        return any(
            isinstance(item.context_expr, ast.Call)
            and _names(item.context_expr.func) == {"suppress"}
            and any(_names(arg) & _IMPORT_ERRORS for arg in item.context_expr.args)
            for item in node.items
        )
    return False


def third_party_imports(package: Path) -> list[Import]:
    """Every absolute import of a module that is neither the standard library's nor
    hotseam's, wherever it is: at the top, inside a function, under ``TYPE_CHECKING``."""
    found: list[Import] = []

    def walk(
        nodes: Iterable[ast.AST],
        path: str,
        in_function: bool,
        type_checking: bool,
        guarded: bool = False,
    ) -> None:
        for node in nodes:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top not in ("hotseam", "__future__"):
                    found.append(
                        Import(path, node.lineno, top, in_function, type_checking, guarded)
                    )
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                walk(node.body, path, in_function, True, guarded)
                walk(node.orelse, path, in_function, type_checking, guarded)
                continue
            if isinstance(node, ast.Try) and _guards(node):
                walk(node.body, path, in_function, type_checking, True)
                rest = [*node.handlers, *node.orelse, *node.finalbody]
                walk(rest, path, in_function, type_checking, guarded)
                continue
            inner = in_function or isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
            )
            walk(ast.iter_child_nodes(node), path, inner, type_checking, guarded or _guards(node))

    for source in sorted(package.rglob("*.py")):
        path = source.relative_to(package).as_posix()
        walk([ast.parse(source.read_text(encoding="utf-8"))], path, False, False)
    return found


def area(path: str) -> str | None:
    """The extra whose surface the file at ``path`` is, or ``None`` for the base."""
    for extra, prefixes in AREAS.items():
        if any(path == prefix or path.startswith(prefix) for prefix in prefixes if prefix):
            return extra
    return None


def undeclared(
    imports: list[Import],
    project: dict[str, object],
    distributions: dict[str, list[str]],
) -> list[str]:
    """What is wrong: each import whose distribution its file's requirements do not declare."""
    extras = project["optional-dependencies"]
    assert isinstance(extras, dict)
    anywhere = set().union(*(declared(project, extra) for extra in extras))
    problems = []
    for found in imports:
        where = f"src/hotseam/{found.path}:{found.line}: {found.module}"
        if found.module in STUBS and found.type_checking:
            continue
        if found.module in HOSTED:
            hosts = HOSTED[found.module]
            if hosts is None and not found.in_function:
                problems.append(f"{where} is imported at module level (only inside functions)")
            elif hosts is not None and found.path not in hosts:
                problems.append(f"{where} is imported outside {', '.join(hosts)}")
            continue
        owners = {_name(name) for name in distributions.get(found.module, [])}
        if not owners:
            problems.append(f"{where} belongs to no installed distribution")
            continue
        extra = area(found.path)
        # An import that only type checkers run, or one that is ready for its module to be
        # missing, needs its distribution declared somewhere (an extra, the dev set-up).
        optional = found.type_checking or found.guarded
        allowed = anywhere if optional else declared(project, extra)
        if not owners & allowed:
            owner = sorted(owners)[0]
            needed = f"the {extra} extra" if extra else "the base requirements"
            elsewhere = [e for e in extras if owner in declared(project, e)]
            hint = f" (declared by {', '.join(elsewhere)})" if elsewhere else ""
            problems.append(f"{where}: {owner} is not declared by {needed}{hint}")
    return problems


def test_every_third_party_import_is_declared() -> None:
    """Each third-party module src/ imports is declared by the base requirements, or by the
    extra of the surface whose file imports it (a module used only under an extra is
    imported only there)."""
    problems = undeclared(
        third_party_imports(PACKAGE),
        PYPROJECT["project"],
        importlib.metadata.packages_distributions(),
    )
    assert problems == []


def test_the_check_finds_an_undeclared_import() -> None:
    """The check above can fail: sniffio taken out of the requirements, the SDK of ACP
    imported by a base module, trio imported at module level are each reported."""
    project = {**PYPROJECT["project"]}
    project["dependencies"] = [r for r in project["dependencies"] if _name(r) != "sniffio"]
    distributions = importlib.metadata.packages_distributions()
    imports = third_party_imports(PACKAGE)
    problems = undeclared(imports, project, distributions)
    assert any("reload/_guard.py" in p and "sniffio is not declared" in p for p in problems)
    assert any("cli/_agent_loop.py" in p and "sniffio" in p for p in problems)
    planted = [
        Import("reload/_planted.py", 1, "acp", in_function=True, type_checking=False),
        Import("reload/_planted.py", 2, "trio", in_function=False, type_checking=False),
    ]
    assert undeclared(planted, PYPROJECT["project"], distributions) == [
        "src/hotseam/reload/_planted.py:1: acp: agent-client-protocol is not declared by the "
        "base requirements (declared by acp, all, dev)",
        "src/hotseam/reload/_planted.py:2: trio is imported at module level "
        "(only inside functions)",
    ]


def test_the_walk_sees_imports_in_functions_and_under_type_checking(tmp_path: Path) -> None:
    """Imports dodged into a function or a TYPE_CHECKING block are found, and marked so."""
    (tmp_path / "m.py").write_text(
        textwrap.dedent(
            """
            import typing
            if typing.TYPE_CHECKING:
                from acp.schema import X
            else:
                import mcp
            def f():
                import starlette.types
            class C:
                async def g(self):
                    if True:
                        from psycopg import sql
            try:
                import hypercorn
            except (OSError, ImportError):
                import trio
            with contextlib.suppress(ModuleNotFoundError):
                import mcp_types
            """
        )
    )
    found = third_party_imports(tmp_path)
    assert [(i.module, i.in_function, i.type_checking, i.guarded) for i in found] == [
        ("acp", False, True, False),
        ("mcp", False, False, False),
        ("starlette", True, False, False),
        ("psycopg", True, False, False),
        ("hypercorn", False, False, True),
        ("trio", False, False, False),
        ("mcp_types", False, False, True),
    ]


def test_the_extras_table_matches_pyproject() -> None:
    """hotseam._extras names, for each extra, exactly the modules of the distributions that
    the extra adds to the base; `all` holds every extra and `dev` holds `all`."""
    project = PYPROJECT["project"]
    base = declared(project, None)
    distributions = importlib.metadata.packages_distributions()
    for extra, modules in EXTRAS.items():
        brought = {_name(d) for module in modules for d in distributions[module]}
        assert brought == declared(project, extra) - base, extra
    everything = set().union(*(declared(project, extra) for extra in EXTRAS))
    assert declared(project, "all") == everything
    assert declared(project, "dev") >= everything
    assert set(AREAS) == set(EXTRAS)
    assert set(COMMAND_EXTRAS) == _EXTRA_COMMANDS


def test_python_versions_are_declared() -> None:
    """requires-python and the classifiers say the same versions."""
    project = PYPROJECT["project"]
    assert project["requires-python"] == ">=3.11"
    listed = {c.rpartition(":: ")[2] for c in project["classifiers"] if re.search(r"3\.\d+$", c)}
    assert listed == {"3.11", "3.12", "3.13"}


# -- without the extras (their modules hidden in a fresh interpreter) ----------------------

EVERY_EXTRA = sorted({module for modules in EXTRAS.values() for module in modules})

_HIDE = "import sys\nfor _name in {hidden!r}:\n    sys.modules[_name] = None\n"


def _python(
    code: str, hidden: list[str], *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _HIDE.format(hidden=hidden) + code, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=scaled(60),
        cwd=ROOT,
        check=False,
    )


def test_the_base_imports_without_any_extra() -> None:
    """Every module outside the extras' surfaces imports with no extra installed (the
    pytest plugin included: pytest is the host that loads it)."""
    base = sorted(
        ".".join(("hotseam", *Path(path).with_suffix("").parts)).removesuffix(".__init__")
        for path in (p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py"))
        if area(path) is None and not path.endswith("__main__.py")
    )
    code = textwrap.dedent(
        """
        import importlib
        failed = []
        for name in sys.argv[1:]:
            try:
                importlib.import_module(name)
            except ImportError as error:
                failed.append(f"{name}: {error}")
        print("\\n".join(failed))
        """
    )
    result = _python(code, EVERY_EXTRA, *base)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""
    assert len(base) > 100


@pytest.mark.parametrize(
    ("module", "extra", "hidden"),
    [
        ("hotseam.providers.acp", "acp", ["acp"]),
        ("hotseam.providers.mcp", "mcp", ["mcp", "mcp_types"]),
        ("hotseam.providers.web", "web", ["starlette"]),
        ("hotseam.providers.web", "web", ["hypercorn"]),
    ],
)
def test_a_surface_imported_without_its_extra_names_it(
    module: str, extra: str, hidden: list[str]
) -> None:
    """``import hotseam.providers.acp`` without the acp extra raises an ImportError whose
    message is the extra to install (not the SDK's ModuleNotFoundError)."""
    code = textwrap.dedent(
        f"""
        try:
            import {module}
        except ImportError as error:
            print(type(error).__name__, isinstance(error, ImportError), error, sep="|")
        """
    )
    result = _python(code, hidden)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"MissingExtraError|True|{module} needs the {extra} extra: pip install 'hotseam[{extra}]'"
    )


@pytest.mark.parametrize(
    ("argv", "hidden", "line"),
    [
        (["acp"], ["acp"], "hotseam acp needs the acp extra: pip install 'hotseam[acp]'"),
        (["acp", "--help"], ["acp"], "hotseam acp needs the acp extra: pip install 'hotseam[acp]'"),
        (["mcp", "."], ["mcp"], "hotseam mcp needs the mcp extra: pip install 'hotseam[mcp]'"),
        (
            ["mcp", "."],
            ["hypercorn"],
            "hotseam mcp needs the mcp extra: pip install 'hotseam[mcp]'",
        ),
        (["inbox"], ["hypercorn"], "hotseam inbox needs the web extra: pip install 'hotseam[web]'"),
        (
            ["run", "--web", "examples"],
            ["starlette"],
            "hotseam run: --web needs the web extra: pip install 'hotseam[web]'",
        ),
        (
            ["dev", "--web", "examples"],
            ["hypercorn"],
            "hotseam dev: --web needs the web extra: pip install 'hotseam[web]'",
        ),
        (
            ["run", "--journal", "postgresql://u:secret@127.0.0.1:1/db", "examples"],
            ["psycopg"],
            "hotseam run: the journal postgresql://u:***@127.0.0.1:1/db needs the postgres "
            "extra: pip install 'hotseam[postgres]'",
        ),
        (
            ["journal", "list", "--journal", "postgresql://127.0.0.1:1/db"],
            ["psycopg"],
            "hotseam journal: the journal postgresql://127.0.0.1:1/db needs the postgres "
            "extra: pip install 'hotseam[postgres]'",
        ),
    ],
)
def test_a_command_without_its_extra_is_one_line(
    argv: list[str], hidden: list[str], line: str
) -> None:
    """A command or option whose extra is missing stops at once: one line on stderr naming
    the extra, exit 2, nothing on stdout, no traceback."""
    code = "from hotseam.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    result = _python(code, hidden, *argv)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n")


def test_help_version_and_the_demo_need_no_extra() -> None:
    """``hotseam --help``, ``--version`` and a piped ``hotseam demo`` run on the base."""
    code = "from hotseam.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    helped = _python(code, EVERY_EXTRA, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "acp" in helped.stdout
    assert "inbox" in helped.stdout
    version = _python(code, EVERY_EXTRA, "--version")
    assert (version.returncode, version.stdout.startswith("hotseam ")) == (0, True)
    demo = _python(code, EVERY_EXTRA, "demo", stdin="2\n\nteal\nno\n")
    assert demo.returncode == 0, demo.stderr
    assert "Storage: sqlite" in demo.stdout
    assert "Theme: teal" in demo.stdout

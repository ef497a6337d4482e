"""Every example on every page (README.md and docs/**/*.md) runs as the page says.

A ```python block followed by "prints" and a ```text block runs as a script and prints
exactly that. A block that starts with ``# test_`` is a test file and passes under pytest.
A block that defines ``setup(scope)`` and uses no name it does not define or import is a
provider module: a real Reloader loads it in strict mode (set up, unloaded, set up again,
nothing left over); one that only imports and defines executes. Every other Python block
is a fragment (it uses names the page defines around it) and must at least compile. A
```toml block with ``[tool.hotseam]`` is read by hotseam's own configuration reader.
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
import tempfile
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests._pytester import run_pytest
from tests._timing import scaled

from hotseam import Context
from hotseam.cli._config import load_config
from hotseam.reload import ModuleState
from hotseam.testing import ReloadDriver, assert_no_provider

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.S | re.M
)
PRINTS = re.compile(r"\s*prints\s*\n\s*```text\n(?P<out>.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int
    lang: str
    code: str
    prints: str | None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def is_test_file(self) -> bool:
        return self.code.startswith("# test_")

    @property
    def defines_setup(self) -> bool:
        return bool(re.search(r"^(async )?def setup\(", self.code, re.M))


def _blocks() -> list[Block]:
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            body = textwrap.dedent(match["body"]) if match["indent"] else match["body"]
            after = PRINTS.match(text, match.end())
            blocks.append(
                Block(
                    page=page,
                    line=text.count("\n", 0, match.start()) + 1,
                    lang=match["lang"],
                    code=body,
                    prints=after["out"] if after else None,
                )
            )
    return blocks


BLOCKS = _blocks()
PYTHON = [block for block in BLOCKS if block.lang == "python"]


@functools.cache
def _undefined_names() -> dict[str, list[str]]:
    """For each Python block (by ``where``), the names it uses without defining them.

    One ruff run (pyflakes' F821) over all blocks: what tells a complete module from a
    fragment.
    """
    with tempfile.TemporaryDirectory() as folder:
        files = {}
        for number, block in enumerate(PYTHON):
            path = Path(folder) / f"block_{number}.py"
            path.write_text(block.code, encoding="utf-8")
            files[str(path)] = block.where
        completed = subprocess.run(
            [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache",
             "--select", "F821", "--output-format", "json", *files],
            capture_output=True, text=True, timeout=scaled(60), check=False,
        )  # fmt: skip
    undefined: dict[str, list[str]] = {where: [] for where in files.values()}
    for finding in json.loads(completed.stdout):
        undefined[files[finding["filename"]]].append(finding["message"])
    return undefined


def _only_definitions(code: str) -> bool:
    """Whether a block's top level only imports, defines and assigns (safe to execute)."""
    try:
        tree = ast.parse(code)  # top-level await is a fragment's
    except SyntaxError:
        return False
    definitions = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef,
                   ast.ClassDef, ast.Assign, ast.AnnAssign)  # fmt: skip
    return all(
        isinstance(node, definitions)
        or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        for node in tree.body
    )


def _kind(block: Block) -> str:
    if block.prints is not None:
        return "prints"
    if block.is_test_file:
        return "test file"
    if _undefined_names()[block.where]:
        return "fragment"
    if block.defines_setup:
        return "provider module"
    return "module" if _only_definitions(block.code) else "fragment"


def _ids(blocks: list[Block]) -> list[str]:
    return [block.where for block in blocks]


def test_the_pages_have_examples_of_each_kind() -> None:
    """Guard against the patterns silently matching nothing."""
    kinds = [_kind(block) for block in PYTHON]
    assert kinds.count("prints") >= 4
    assert kinds.count("test file") >= 1
    assert kinds.count("provider module") >= 4
    assert kinds.count("module") >= 1
    assert any("[tool.hotseam]" in block.code for block in BLOCKS if block.lang == "toml")


PRINTING = [block for block in PYTHON if block.prints is not None]


@pytest.mark.parametrize("block", PRINTING, ids=_ids(PRINTING))
def test_example_prints_what_the_page_says(block: Block, tmp_path: Path) -> None:
    """Each ```python block followed by 'prints' runs and prints exactly that."""
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-W", "error", str(script)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, f"{block.where}:\n{completed.stderr}"
    assert completed.stdout == block.prints, block.where
    assert completed.stderr == ""


TEST_FILES = [block for block in PYTHON if block.is_test_file]


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
@pytest.mark.parametrize("block", TEST_FILES, ids=_ids(TEST_FILES))
def test_test_file_passes_with_the_leak_check(
    block: Block, strict: bool, pytester: pytest.Pytester
) -> None:
    """A test file shown on a page runs as a user would run it, and every test passes."""
    pytester.makepyfile(test_from_docs=block.code)
    options = ["--hotseam-leak-check", "-W", "error"]
    if strict:
        options.append("--hotseam-strict")
    result = run_pytest(pytester, *options, hypothesis="hypothesis" in block.code)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 1, result.stdout.str()
    assert set(outcomes) == {"passed"}, result.stdout.str()


PROVIDER_MODULES = [block for block in PYTHON if _kind(block) == "provider module"]


@pytest.mark.anyio
@pytest.mark.parametrize("block", PROVIDER_MODULES, ids=_ids(PROVIDER_MODULES))
async def test_provider_module_loads_strictly(block: Block, tmp_path: Path) -> None:
    """A complete provider module is set up, disposed and set up again by a real Reloader
    with nothing left over, and unloading it leaves no provider."""
    context = Context("docs")
    async with ReloadDriver(context, tmp_path / "providers", strict=True) as driver:
        status = await driver.load("docs_example.py", block.code)
        assert status.state is ModuleState.ACTIVE, block.where
        driver.delete("docs_example.py")
        (await driver.reload()).raise_for_errors()
        assert_no_provider(context)


MODULES = [block for block in PYTHON if _kind(block) == "module"]


@pytest.mark.parametrize("block", MODULES, ids=_ids(MODULES))
def test_module_executes(block: Block) -> None:
    """A block of imports and definitions that uses no undefined name executes: what it
    imports exists."""
    exec(compile(block.code, block.where, "exec"), {"__name__": "docs_example"})


FRAGMENTS = [block for block in PYTHON if _kind(block) == "fragment"]


@pytest.mark.parametrize("block", FRAGMENTS, ids=_ids(FRAGMENTS))
def test_fragment_compiles(block: Block) -> None:
    """A fragment (it uses names defined around it on the page) is valid Python; top-level
    ``await`` and ``async with`` are allowed, as in an async function's body."""
    compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


TOML = [block for block in BLOCKS if block.lang == "toml" and "[tool.hotseam]" in block.code]


@pytest.mark.parametrize("block", TOML, ids=_ids(TOML))
def test_configuration_example_is_read_by_hotseam(block: Block, tmp_path: Path) -> None:
    """Each ``[tool.hotseam]`` example is valid configuration: known keys, right kinds."""
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(block.code, encoding="utf-8")
    config = load_config(pyproject)
    assert config.values == tomllib.loads(block.code)["tool"]["hotseam"], block.where

"""The documentation site cannot fall behind the code it describes.

The API reference names every public name of each public package (its ``__all__``) and
nothing else; the CLI reference is generated from the real parsers (``docs/_ext/cli_help.py``)
and covers every command; README.md, read on its own outside the site, links only to files
that exist. (Links between the site's pages, anchors and cross-references in docstrings are
checked by ``make docs``: ``mkdocs build --strict`` fails on any of them.)
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tests._timing import scaled

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PUBLIC_PACKAGES = [
    "hotseam",
    "hotseam.interaction",
    "hotseam.interaction.journal",
    "hotseam.interaction.approvals",
    "hotseam.reload",
    "hotseam.testing",
    "hotseam.pytest_plugin",
    "hotseam.providers.acp",
    "hotseam.providers.mcp",
    "hotseam.providers.scripted",
    "hotseam.providers.terminal",
    "hotseam.providers.web",
]
DIRECTIVE = re.compile(r"^::: (?P<identifier>[\w.]+)\s*$", re.M)


def _documented() -> set[str]:
    """Every identifier rendered by a ``::: identifier`` directive of the API reference."""
    return {
        match["identifier"]
        for page in sorted((DOCS / "api").glob("*.md"))
        for match in DIRECTIVE.finditer(page.read_text(encoding="utf-8"))
    }


def test_every_public_package_has_a_public_all() -> None:
    """The list above covers every public package under ``hotseam.providers``."""
    providers = importlib.import_module("hotseam.providers")
    found = {
        f"hotseam.providers.{path.stem}"
        for path in Path(str(providers.__file__)).parent.glob("*.py")
        if not path.stem.startswith("_")
    }
    assert found <= set(PUBLIC_PACKAGES)


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_api_reference_covers_every_public_name(package: str) -> None:
    """Each name in ``package.__all__`` is rendered by the API reference, and the reference
    renders no name of ``package`` that is not public."""
    module = importlib.import_module(package)
    public = set(module.__all__)
    documented = {
        identifier.rpartition(".")[2]
        for identifier in _documented()
        if identifier.rpartition(".")[0] == package and identifier not in PUBLIC_PACKAGES
    }
    assert public - documented == set(), f"missing from docs/api/*.md ('::: {package}.NAME')"
    assert documented - public == set(), f"documented but not in {package}.__all__"


def test_api_reference_renders_nothing_outside_the_public_packages() -> None:
    """No directive renders a private module's object directly."""
    stray = {
        identifier
        for identifier in _documented()
        if identifier.rpartition(".")[0] not in PUBLIC_PACKAGES
        and identifier not in PUBLIC_PACKAGES  # a package's own docstring
    }
    assert stray == set()


def _cli_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_help", DOCS / "_ext" / "cli_help.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_COMMON = {"the", "a", "an", "and", "of", "to", "its", "it", "is", "in", "s", "or", "for"}


def _first_sentence_words(text: str) -> list[str]:
    sentence = re.split(r"(?<=\.)\s", " ".join(text.split()), maxsplit=1)[0]
    return [word for word in re.findall(r"[a-z]+", sentence.lower()) if word not in _COMMON]


@pytest.mark.parametrize("page", sorted((DOCS / "api").glob("*.md")), ids=lambda p: p.name)
def test_an_api_page_does_not_open_by_repeating_its_module(page: Path) -> None:
    """A page whose module docstring renders under its own opening paragraph says
    something else first: not the docstring's opening words again, nor the same sentence
    in other words (most of its words shared)."""
    text = page.read_text(encoding="utf-8")
    rendered = re.search(r"^::: (\S+)\n    options:\n      members: false", text, re.MULTILINE)
    if rendered is None:
        return  # no module docstring shown: nothing to repeat
    opening = text.split(":::", 1)[0].split("\n", 1)[1]  # the prose under the title
    doc = importlib.import_module(rendered.group(1)).__doc__ or ""
    page_words = _first_sentence_words(opening)
    doc_words = _first_sentence_words(doc.split("\n\n")[0])
    assert page_words[:3] != doc_words[:3], (page_words, doc_words)
    shared = set(page_words) & set(doc_words)
    assert len(shared) / len(set(page_words) | set(doc_words)) < 0.3, shared


def test_cli_reference_has_a_marker_for_every_command() -> None:
    """docs/cli.md places the help of ``hotseam`` and of each of its subcommands."""
    hook = _cli_hook()
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    markers = [match["command"] for match in hook.MARKER.finditer(text)]
    assert markers == ["", *hook.commands()]


@pytest.mark.parametrize("command", ["", "dev", "status"])
def test_cli_reference_is_what_the_command_prints(command: str) -> None:
    """The help the build puts on the page is byte for byte what ``hotseam`` prints."""
    hook = _cli_hook()
    arguments = [command, "--help"] if command else ["--help"]
    completed = subprocess.run(
        [sys.executable, "-m", "hotseam", *arguments],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
        env={**os.environ, "COLUMNS": str(hook.WIDTH)},
    )
    assert completed.returncode == 0, completed.stderr
    assert hook.help_text(command) == completed.stdout


LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")


def test_readme_links_point_at_files_that_exist() -> None:
    """README.md is read on its own (a repository's front page): its relative links work."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [match["target"] for match in LINK.finditer(text)]
    relative = [target for target in targets if not re.match(r"[a-z]+:", target)]
    assert len(relative) >= 10
    missing = [
        target
        for target in relative
        if not target.startswith("#") and not (ROOT / target.partition("#")[0]).exists()
    ]
    assert missing == []

"""Fixtures of the reload tests: a probe module that provider files report to, and files."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from hotseam import Context
from hotseam.interaction import AskUserQuestionRequest

from ._support import Probe

QUESTION = AskUserQuestionRequest("Which database?", options=None)


@pytest.fixture(name="probe")
def _probe() -> Iterator[Probe]:
    """``import reload_probe`` in a provider file gives it this object's module."""
    probe = Probe()
    module = ModuleType("reload_probe")
    module.__dict__.update(probe=probe, log=probe.log)
    sys.modules["reload_probe"] = module
    yield probe
    del sys.modules["reload_probe"]


@pytest.fixture(name="context")
def _context() -> Context:
    return Context("reload-test")


@pytest.fixture(name="folder")
def _folder(tmp_path: Path) -> Path:
    """A folder of provider modules (the watched path)."""
    folder = tmp_path / "providers"
    folder.mkdir()
    return folder


def write(path: Path, source: str) -> Path:
    """Write dedented ``source`` to ``path`` (creating folders)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path

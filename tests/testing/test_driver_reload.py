"""``ReloadDriver.reload``: as a save does, it reloads only what changed; ``force=True``
makes a new generation of an unchanged file (what ``hotseam reload`` does), as its
docstring and docs/testing.md say."""

from __future__ import annotations

from pathlib import Path

import pytest

from hotseam.testing import ReloadDriver

pytestmark = pytest.mark.anyio

UI = "def setup(scope):\n    scope.defer(lambda: None)\n"
DOCS = Path(__file__).parents[2] / "docs"


async def test_an_unchanged_file_makes_a_new_generation_only_when_forced(
    hotseam_reloader: ReloadDriver,
) -> None:
    status = await hotseam_reloader.load("ui.py", UI)
    assert status.generation == 1
    same = await hotseam_reloader.reload("ui.py")
    assert not same.committed
    assert hotseam_reloader.status("ui.py").generation == 1
    forced = await hotseam_reloader.reload("ui.py", force=True)
    assert [s.generation for s in forced.committed] == [2]
    hotseam_reloader.write("ui.py", UI + "# edited\n")
    edited = await hotseam_reloader.reload("ui.py")
    assert [s.generation for s in edited.committed] == [3]


def test_the_docstring_and_the_guide_say_so() -> None:
    doc = " ".join((ReloadDriver.reload.__doc__ or "").split())
    assert "makes **no new generation**" in doc
    assert "``force=True`` reloads it anyway" in doc
    guide = " ".join((DOCS / "testing.md").read_text(encoding="utf-8").split())
    assert "a file left as it is makes **no new generation**" in guide
    assert 'reload("my_ui.py", force=True)' in guide

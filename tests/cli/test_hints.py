"""One-time hints for a helper nothing uses and a relative import in a plain folder (a
``setup`` that does not take the scope needs none: its load error says it)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest

from hotseam import Context
from hotseam.cli._hints import Hints
from hotseam.reload import Reloader

pytestmark = pytest.mark.anyio


class Lines:
    """A logger that keeps what the CLI would print."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str, **fields: Any) -> None:
        self.lines.append(text)


def _write(path: Path, source: str) -> None:
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")


async def test_each_mistake_gets_one_hint(tmp_path: Path) -> None:
    folder = tmp_path / "hinted"
    folder.mkdir()
    _write(folder / "hint_rel.py", "from . import hint_words\n\ndef setup(scope):\n    pass\n")
    _write(folder / "hint_sig.py", "import os\n\n\ndef setup():\n    pass\n")
    _write(folder / "hint_lonely.py", "Y = 2\n")
    _write(folder / "hint_words.py", "WORD = 'used'\n")
    _write(
        folder / "hint_ui.py",
        """
        import hint_words

        def setup(scope):
            pass
        """,
    )
    log = Lines()
    reloader = Reloader(Context("hints"), [folder], watch=False)
    hints = Hints(reloader, log)
    async with anyio.create_task_group() as tg:
        tg.start_soon(hints.run)
        async with reloader:
            await reloader.reload(force=True)  # the same mistakes again: no second hint
            with anyio.fail_after(5):
                while len(log.lines) < 2:  # noqa: ASYNC110 - the hints settle on a timer
                    await anyio.sleep(0.05)
    shown = folder.relative_to(Path.cwd()) if folder.is_relative_to(Path.cwd()) else folder
    assert sorted(log.lines) == sorted(
        [
            f"hint: {shown}/hint_lonely.py: no setup(scope) found; loaded as a helper (no "
            "provider imports it, so it provides nothing)",
            f"hint: {shown}/hint_rel.py:1: {shown}/ is a plain folder (no __init__.py), so its "
            "modules are top-level: write 'import hint_words' instead of 'from . import "
            "hint_words', or add an __init__.py to make it a package",
        ]
    )

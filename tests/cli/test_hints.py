"""One-time hints for a helper nothing uses, a relative import in a plain folder and an
address in use (a ``setup`` that does not take the scope needs none: its load error says
it)."""

from __future__ import annotations

import socket
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._timing import scaled

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
            with anyio.fail_after(scaled(5)):
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


LISTENER = """
import socket

PORT = {port}


def setup(scope):
    listener = socket.create_server(("127.0.0.1", PORT))  # BIND
    scope.defer(listener.close)
"""


async def test_an_address_in_use_points_to_scope_carry(tmp_path: Path) -> None:
    """Taken by another process at the first load; held by the module's own serving
    generation at a reload: each time a hint toward scope.carry, at the bind's line."""
    folder = tmp_path / "listening"
    folder.mkdir()
    with socket.socket() as taken:  # another process's port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        _write(folder / "hint_busy.py", LISTENER.format(port=busy))
        with socket.socket() as probe:  # a free port for the module that reloads itself
            probe.bind(("127.0.0.1", 0))
            free = probe.getsockname()[1]
        _write(folder / "hint_self.py", LISTENER.format(port=free))
        log = Lines()
        reloader = Reloader(Context("hints-port"), [folder], watch=False)
        hints = Hints(reloader, log)
        async with anyio.create_task_group() as tg:
            tg.start_soon(hints.run)
            async with reloader:
                (folder / "hint_self.py").write_text(
                    (folder / "hint_self.py").read_text() + "# saved again\n"
                )
                result = await reloader.reload(folder / "hint_self.py")
                assert [event.error.type for event in result.aborted] == ["OSError"]
                with anyio.fail_after(scaled(5)):
                    while len(log.lines) < 2:  # noqa: ASYNC110 - the hints settle on a timer
                        await anyio.sleep(0.05)
    shown = folder.relative_to(Path.cwd()) if folder.is_relative_to(Path.cwd()) else folder
    line = (
        textwrap.dedent(LISTENER)
        .lstrip("\n")
        .splitlines()
        .index('    listener = socket.create_server(("127.0.0.1", PORT))  # BIND')
        + 1
    )
    carry = (
        "create the listening socket once with scope.carry('listener', make_socket) and every "
        "generation gets the same bound socket (see 'Carrying state and resources across "
        "reloads' in docs/providers.md)"
    )
    assert sorted(log.lines) == [
        f"hint: {shown}/hint_busy.py:{line}: the address is in use, by another process or by a "
        "module that still holds it (one being unloaded, or renamed); if this module serves "
        f"it, {carry}, so that its next generations keep it",
        f"hint: {shown}/hint_self.py:{line}: the address is held by generation 1 of this "
        "module, which serves until the new one is set up (a reload never leaves a gap): "
        f"{carry}",
    ]

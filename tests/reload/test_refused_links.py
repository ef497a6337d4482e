"""A symbolic link that leads out of the watched folders is named as a refused link.

``reload()`` (and ``hotseam reload``) of such a link said "'ui.py' is not under a watched
path", though the path is spelled right under one (issue 21, item 17): the link is named,
with where it leads and the policy that refuses it.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from cli._support import HELD_PROVIDER, Process, hotseam  # the CLI helpers (tests/cli)
from hotseam import Context
from hotseam.reload import Reloader, ReloadPathError

from .conftest import write

pytestmark = pytest.mark.anyio


async def test_reload_of_a_link_out_of_the_watched_folder_names_the_link(
    context: Context, folder: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    write(outside / "ui.py", "X = 1\n")
    write(outside / "kit" / "tool.py", "X = 1\n")
    (folder / "ui.py").symlink_to(outside / "ui.py")
    (folder / "kit").symlink_to(outside / "kit")
    write(folder / "real.py", "X = 1\n")
    async with Reloader(context, [folder], watch=False) as reloader:
        with pytest.raises(ReloadPathError) as refused:
            await reloader.reload(folder / "ui.py")
        assert str(refused.value) == (
            f"{str(folder / 'ui.py')!r} is a symbolic link to {outside / 'ui.py'}, outside the "
            "watched paths: refused, as when the watched folders are loaded (only code under "
            "the watched paths runs; a link is followed only when it leads inside them)"
        )
        with pytest.raises(ReloadPathError) as through:
            await reloader.reload(folder / "kit" / "tool.py")
        assert f"goes through the symbolic link {folder / 'kit'} -> {outside / 'kit'}" in str(
            through.value
        )
        with pytest.raises(ReloadPathError, match="is not under a watched path"):
            await reloader.reload(outside / "ui.py")  # spelled outside: nothing to explain


def test_hotseam_reload_of_a_refused_link_names_it(tmp_path: Path) -> None:
    write(tmp_path / "providers" / "ui.py", HELD_PROVIDER)
    write(tmp_path / "elsewhere" / "evil.py", "X = 1\n")
    (tmp_path / "providers" / "evil.py").symlink_to(tmp_path / "elsewhere" / "evil.py")
    runtime = tmp_path / "rt"
    process = Process("run", "providers", cwd=tmp_path, runtime=runtime)
    try:
        process.expect(r"hotseam run: watching providers")
        refused = hotseam("reload", "providers/evil.py", cwd=tmp_path, runtime=runtime)
    finally:
        process.finish(signal.SIGTERM)
    assert refused.returncode == 2
    assert re.fullmatch(
        r"hotseam reload: '\S+/providers/evil\.py' is a symbolic link to \S+/elsewhere/evil\.py,"
        r" outside the watched paths: refused, .*\n",
        refused.stderr,
    ), refused.stderr

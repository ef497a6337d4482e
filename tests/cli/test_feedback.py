"""Reload feedback that tells the truth: each module's own time, a progress line for a slow
load, what a ``setup`` must accept, and the real path behind a module-name clash."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
import structlog

from hotseam import Context
from hotseam.reload import ReloadAborted, Reloader

pytestmark = pytest.mark.anyio


def _write(path: Path, source: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path


SLOW_SETUP = """
import anyio

async def setup(scope):
    await anyio.sleep({seconds})
"""


async def test_each_reload_line_shows_its_module_s_own_time(tmp_path: Path) -> None:
    """In a batch where one setup takes 0.3 s, the quick module's line does not."""
    _write(tmp_path / "fb_a_slow.py", SLOW_SETUP.format(seconds=0.3))
    _write(tmp_path / "fb_b_quick.py", "def setup(scope):\n    pass\n")
    async with Reloader(Context("feedback"), [tmp_path], watch=False) as reloader:
        result = await reloader.reload(force=True)
    lines = {event.module: event for event in result.committed}
    quick = lines["fb_b_quick"]
    assert quick.duration_ms >= 300  # the batch waited for the slow one
    shown = float(re.search(r" in ([\d.]+) ms$", quick.summary).group(1))  # type: ignore[union-attr]
    assert shown < 300
    assert shown == pytest.approx(quick.load_ms, abs=1)


async def test_a_body_or_setup_running_over_a_second_gets_a_progress_line(
    tmp_path: Path,
) -> None:
    """One line when the module body passes a second, one when its setup does."""
    _write(
        tmp_path / "fb_sluggish.py",
        "import time\ntime.sleep(1.1)\n" + SLOW_SETUP.format(seconds=1.1),
    )
    with structlog.testing.capture_logs() as logs:
        async with Reloader(Context("feedback"), [tmp_path], watch=False):
            pass
    slow = [log for log in logs if log["event"] == "reload.slow"]
    assert [(log["module"], log["phase"]) for log in slow] == [
        ("fb_sluggish", "executing"),
        ("fb_sluggish", "setting up"),
    ]
    assert slow[0]["summary"].endswith("fb_sluggish.py: still running after 1 s (time bound 10 s)")
    assert slow[1]["summary"].endswith("fb_sluggish.py: still running after 1 s (time bound 30 s)")


async def test_a_setup_that_does_not_take_the_scope_says_what_it_must_accept(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "fb_nosig.py", "import os\n\n\ndef setup():\n    pass\n")
    async with Reloader(Context("feedback"), [tmp_path], watch=False) as reloader:
        result = await reloader.reload(force=True)
    (aborted,) = result.aborted
    assert isinstance(aborted, ReloadAborted)
    assert aborted.error.message.startswith(
        "setup must accept one argument, the scope: 'def setup(scope):' or 'async def "
        "setup(scope):'; "
    )
    assert aborted.error.message.endswith("fb_nosig.py has 'setup()'")
    assert aborted.error.location == f"{tmp_path / 'fb_nosig.py'}:4"


async def test_a_name_clash_names_the_real_module_and_suggests_a_rename(tmp_path: Path) -> None:
    """A watched json.py would shadow the json module this process imported."""
    _write(tmp_path / "json.py", "def setup(scope):\n    pass\n")
    async with Reloader(Context("feedback"), [tmp_path], watch=False) as reloader:
        result = await reloader.reload(force=True)
    (aborted,) = result.aborted
    assert aborted.error.type == "ModuleNameClashError"
    assert f"(from {json.__file__})" in aborted.error.message
    assert f"rename {tmp_path / 'json.py'} (for example to json_ui.py)" in aborted.error.message

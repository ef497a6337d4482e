"""The testing kit: it loads an existing providers folder, hides hotseam's frames from the
failures it reports, and names where each leftover registration or carried value was
made."""

from __future__ import annotations

import textwrap
from pathlib import Path

import anyio
import pytest
from tests._pytester import run_pytest

from hotseam import Context, Scope, Seam
from hotseam.testing import ReloadDriver, StrictModeError, strict_setup

pytestmark = pytest.mark.anyio

LEAKY = """
from hotseam import Seam

THING = Seam("kit-thing")


def setup(scope):
    scope.context.provide(THING, object())  # LEAK: not through the scope
"""

USERS_TESTS = """
import pytest
from hotseam.testing import assert_generation_active

PROVIDERS = {providers!r}


@pytest.mark.anyio
async def test_loads_the_folder(hotseam_reloader):
    statuses = await hotseam_reloader.load_folder(PROVIDERS)
    assert [status.module for status in statuses] == ["kit_look", "kit_ui"]
    hotseam_reloader.write("kit_ui.py", "import kit_look\\n\\ndef setup(scope):\\n    pass\\n")
    await hotseam_reloader.reload("kit_ui.py")
    assert_generation_active(hotseam_reloader, "kit_ui.py", 2)


@pytest.mark.anyio
async def test_fails_in_my_own_line(hotseam_reloader):
    await hotseam_reloader.load_folder(PROVIDERS)
    assert_generation_active(hotseam_reloader, "kit_ui.py", 7)  # MY-LINE
"""


def test_a_providers_folder_is_copied_and_the_kit_hides_its_frames(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    providers = tmp_path / "providers"
    providers.mkdir()
    (providers / "kit_look.py").write_text("WORD = 'hi'\n")
    (providers / "kit_ui.py").write_text("import kit_look\n\n\ndef setup(scope):\n    pass\n")
    original = (providers / "kit_ui.py").read_text()
    pytester.makepyfile(
        test_users=USERS_TESTS.format(providers=str(providers)), test_raising=RAISING_TESTS
    )
    result = run_pytest(pytester, "-p", "anyio")
    result.assert_outcomes(passed=2, failed=6)  # each test on asyncio and trio
    output = result.stdout.str()
    assert "expected generation 7 of kit_ui to be active" in output
    assert "# MY-LINE" in output
    assert "hotseam/testing/_driver.py" not in output  # the kit's own frames are hidden
    assert (providers / "kit_ui.py").read_text() == original  # the copy was edited
    # hotseam's frames are hidden from the failures it reports: a ReloadError ends at the
    # test's own line, with no _events.py under it
    assert "1 module(s) failed to load" in output
    assert ">       result.raise_for_errors()  # MY-RAISE" in output
    assert "# MY-LOAD" in output
    raising = RAISING_TESTS.lstrip("\n").splitlines()
    for mark in ("# MY-RAISE", "# MY-LOAD"):
        line = next(n for n, text in enumerate(raising, 1) if text.endswith(mark))
        assert f"test_raising.py:{line}: ReloadError" in output
    assert "hotseam/reload/_events.py" not in output


@pytest.mark.hotseam_leak_check(False)
async def test_strict_mode_names_where_each_leftover_was_registered(tmp_path: Path) -> None:
    context = Context("kit")
    async with ReloadDriver(context, tmp_path, strict=True) as driver:
        with pytest.raises(StrictModeError) as caught:
            await driver.load("kit_leaky.py", textwrap.dedent(LEAKY))
    leftover = context.registration(Seam[object]("kit-thing"))
    assert leftover is not None
    await leftover.dispose()
    line = (
        textwrap.dedent(LEAKY)
        .splitlines()
        .index("    scope.context.provide(THING, object())  # LEAK: not through the scope")
    )
    assert (
        f"provider for seam 'kit-thing' still active in context 'kit' (registered at "
        f"{tmp_path / 'kit_leaky.py'}:{line + 1})"
    ) in str(caught.value)


@pytest.mark.hotseam_leak_check(False)
async def test_strict_mode_loads_a_folder_twice_and_finds_its_leftovers(tmp_path: Path) -> None:
    folder = tmp_path / "providers"
    folder.mkdir()
    (folder / "kit_clean.py").write_text("def setup(scope):\n    pass\n")
    context = Context("kit-folder")
    async with ReloadDriver(context, tmp_path / "copy", strict=True) as driver:
        (status,) = await driver.load_folder(folder)
    assert (status.module, status.generation) == ("kit_clean", 2)  # set up, unloaded, again

    (folder / "kit_leaky2.py").write_text(textwrap.dedent(LEAKY).replace("kit-thing", "kit-2"))
    async with ReloadDriver(context, tmp_path / "copy2", strict=True) as driver:
        with pytest.raises(StrictModeError, match=r"kit_leaky2\.py:\d+\)"):
            await driver.load_folder(folder)
    leftover = context.registration(Seam[object]("kit-2"))
    assert leftover is not None
    await leftover.dispose()


RAISING_TESTS = """
import pytest


@pytest.mark.anyio
async def test_reload_fails(hotseam_reloader):
    hotseam_reloader.write("kit_broken.py", "def setup(scope):\\n    raise ValueError('no')\\n")
    result = await hotseam_reloader.reload("kit_broken.py")
    result.raise_for_errors()  # MY-RAISE


@pytest.mark.anyio
async def test_load_fails(hotseam_reloader):
    await hotseam_reloader.load("kit_broken2.py", "def setup(scope):\\n    1 / 0\\n")  # MY-LOAD
"""


def test_fulltrace_still_shows_hotseam_frames(pytester: pytest.Pytester) -> None:
    """The frames hidden from a failure hotseam reports are there with --fulltrace."""
    pytester.makepyfile(test_raising=RAISING_TESTS)
    full = run_pytest(pytester, "-p", "anyio", "-k", "reload_fails and asyncio", "--fulltrace")
    full.assert_outcomes(failed=1)
    assert "hotseam/reload/_events.py" in full.stdout.str()


CLOSABLE_WITHOUT_DISPOSE = """
class Buffer:
    def close(self):
        pass


def setup(scope):
    scope.carry("buffer", Buffer)  # CARRY: closable, but nothing says how to close it
"""


@pytest.mark.hotseam_leak_check(False)
async def test_a_carried_value_let_go_without_dispose_names_its_carry_line(
    tmp_path: Path,
) -> None:
    source = textwrap.dedent(CLOSABLE_WITHOUT_DISPOSE).lstrip("\n")
    line = source.splitlines().index(
        '    scope.carry("buffer", Buffer)  # CARRY: closable, but nothing says how to close it'
    )
    async with ReloadDriver(Context("kit-carry"), tmp_path, strict=True) as driver:
        with pytest.raises(StrictModeError) as caught:
            await driver.load("kit_closable.py", source)
    assert (
        f"carried value 'buffer' (Buffer) was let go without being closed (carried at "
        f"{tmp_path / 'kit_closable.py'}:{line + 1}; give carry() a dispose=, or carry a "
        "context manager)"
    ) in str(caught.value)


@pytest.mark.hotseam_leak_check(False)
async def test_strict_setup_names_the_carry_line_too() -> None:
    async with Context("kit-carry-setup").scope("root") as root:
        with pytest.raises(StrictModeError) as caught:
            await strict_setup(_carries_a_closable, parent=root, name="carrier")
    lines = (await anyio.Path(__file__).read_text(encoding="utf-8")).splitlines()
    line = lines.index('    scope.carry("file", _Closable)  # CARRY-HERE') + 1
    assert f"(carried at {__file__}:{line}; give carry() a dispose=" in str(caught.value)


class _Closable:
    def close(self) -> None:
        pass


def _carries_a_closable(scope: Scope) -> None:
    scope.carry("file", _Closable)  # CARRY-HERE

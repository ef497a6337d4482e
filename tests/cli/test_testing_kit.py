"""The testing kit: it loads an existing providers folder, hides its own frames from
failure tracebacks, and names where each leftover registration was made."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hotseam import Context, Seam
from hotseam.testing import ReloadDriver, StrictModeError

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
    pytester.makepyfile(test_users=USERS_TESTS.format(providers=str(providers)))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "anyio")
    result.assert_outcomes(passed=2, failed=2)  # each test on asyncio and trio
    output = result.stdout.str()
    assert "expected generation 7 of kit_ui to be active" in output
    assert "# MY-LINE" in output
    assert "hotseam/testing/_driver.py" not in output  # the kit's own frames are hidden
    assert (providers / "kit_ui.py").read_text() == original  # the copy was edited


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

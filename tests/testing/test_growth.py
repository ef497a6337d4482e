"""The growth mode on planted defects: reloading a provider again and again fails when
something keeps growing, naming what grew and where it was allocated; a clean provider is
stable."""

from __future__ import annotations

import asyncio
import gc
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hotseam import Context, Scope
from hotseam.testing import GrowthError, ReloadDriver, assert_reload_stable

from .conftest import PLANTED, planted_line

pytestmark = pytest.mark.anyio


@pytest.fixture
def shared_helpers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The planted long-lived helpers importable; their state emptied after the test."""
    monkeypatch.syspath_prepend(str(PLANTED / "shared"))
    yield
    import planted_bus
    import planted_cache

    planted_bus.BUS.listeners.clear()
    planted_cache._providers.clear()


async def test_a_listener_added_on_each_reload_fails_naming_what_grew_and_where(
    tmp_path: Path, shared_helpers: None
) -> None:
    async with ReloadDriver(Context("growth"), tmp_path) as driver:
        await driver.load_folder(PLANTED / "listener")
        with pytest.raises(GrowthError) as caught:
            await assert_reload_stable(driver, "listener_ui.py", reloads=4, warmup=1)
    text = str(caught.value)
    assert text.startswith(
        "reloading listener_ui.py 4 times after 1 warm-up reload(s), these kept growing:\n"
        "  live generations: 1 → 5 (+1.0 per reload)\n"
    ), text
    assert (
        "kept alive by: planted_bus.py's module dict['BUS'] → Bus object.listeners → list[0] "
        "→ the function on_change of listener_ui.py generation 1"
    ) in text


async def test_a_cache_growing_on_each_reload_fails_naming_the_allocating_line(
    tmp_path: Path, shared_helpers: None
) -> None:
    async with ReloadDriver(Context("growth-memory"), tmp_path) as driver:
        await driver.load_folder(PLANTED / "history")
        with pytest.raises(GrowthError) as caught:
            await assert_reload_stable(driver, "history_ui.py", reloads=4, warmup=1)
    text = str(caught.value)
    assert re.search(
        r"these kept growing:\n  memory \(tracemalloc\): [\d.]+ KiB → [\d.]+ KiB "
        r"\(\+\d+\.\d KiB per reload\)\n",  # the page is 16 KiB a reload
        text,
    ), text
    assert "live generations" not in text  # a string is kept, not the generation
    # the growth is named by the line that allocated it, in the user's file, not in the
    # temporary copy the driver reloads
    top = text.split("memory that grew most, by the traceback that allocated it:\n")[1]
    sites = [line for line in top.splitlines() if line.startswith("  +")]
    # the planted line is among the sites (other threads of the process may allocate too:
    # tracemalloc traces them all)
    assert any(line.endswith(f"allocated at {planted_line('history')}") for line in sites), top
    assert str(tmp_path) not in text


@pytest.mark.parametrize("frames", [1, 10, 60])
async def test_a_cache_growing_is_found_however_deep_the_traces_reach(
    tmp_path: Path, shared_helpers: None, frames: int
) -> None:
    """The provider's own allocation is the code under test's even when its traceback
    reaches the reload driver that ran it (every one does, given frames enough)."""
    async with ReloadDriver(Context("growth-deep"), tmp_path) as driver:
        await driver.load_folder(PLANTED / "history")
        with pytest.raises(GrowthError, match=r"memory \(tracemalloc\)"):
            await assert_reload_stable(
                driver, "history_ui.py", reloads=4, warmup=1, trace_frames=frames
            )


async def test_scopes_opened_on_a_long_lived_scope_fail_on_registrations(
    tmp_path: Path, shared_helpers: None
) -> None:
    """The installed leak tracker (hotseam's plugin) sees each scope and effect made
    outside the generation, wherever it hangs."""
    import planted_app

    async with Scope("planted app") as app:
        planted_app.APP = app
        async with ReloadDriver(Context("growth-scopes"), tmp_path) as driver:
            await driver.load_folder(PLANTED / "child_scope")
            with pytest.raises(GrowthError) as caught:
                await assert_reload_stable(driver, "child_scope_ui.py", reloads=3, warmup=1)
    planted_app.APP = None
    assert re.search(r"  registrations: (\d+) → \d+ \(\+2\.0 per reload\)\n", str(caught.value))


async def test_a_task_started_on_each_reload_fails_on_tasks(
    tmp_path: Path, anyio_backend: tuple[str, dict[str, object]]
) -> None:
    if anyio_backend[0] != "asyncio":
        pytest.skip("asyncio.create_task is asyncio's")
    try:
        async with ReloadDriver(Context("growth-tasks"), tmp_path) as driver:
            await driver.load_folder(PLANTED / "orphan_task")
            with pytest.raises(
                GrowthError, match=r"\n  tasks: (\d+) → \d+ \(\+[\d.]+ per reload\)"
            ):
                await assert_reload_stable(driver, "orphan_task_ui.py", reloads=3, warmup=1)
    finally:
        orphans = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "poll"]
        for task in orphans:
            task.cancel()
        await asyncio.gather(*orphans, return_exceptions=True)


async def test_a_thread_started_on_each_reload_fails_on_threads(tmp_path: Path) -> None:
    try:
        async with ReloadDriver(Context("growth-threads"), tmp_path) as driver:
            await driver.load_folder(PLANTED / "stray_thread")
            with pytest.raises(GrowthError, match=r"\n  threads: (\d+) → \d+ \(\+[\d.]+ per"):
                await assert_reload_stable(driver, "stray_thread_ui.py", reloads=3, warmup=1)
    finally:
        strays = [t for t in threading.enumerate() if t.name == "stray-server"]
        for thread in strays:
            thread._target.__globals__["STOP"].set()  # type: ignore[attr-defined]
        for thread in strays:
            thread.join()


async def test_a_socket_opened_on_each_reload_fails_on_file_descriptors(tmp_path: Path) -> None:
    before = _sockets()
    try:
        async with ReloadDriver(Context("growth-fds"), tmp_path) as driver:
            await driver.load_folder(PLANTED / "open_socket")
            with pytest.raises(GrowthError, match=r"file descriptors: (\d+) → \d+ \(\+[\d.]+ per"):
                await assert_reload_stable(driver, "open_socket_ui.py", reloads=3, warmup=1)
    finally:
        for sock in _sockets() - before:  # the planted defect closes them only at exit
            sock.close()


async def test_a_clean_provider_is_stable(tmp_path: Path) -> None:
    async with ReloadDriver(Context("growth-clean"), tmp_path) as driver:
        driver.write(
            "clean_ui.py",
            """
            from hotseam.interaction import USER_INTERACTION
            from hotseam.providers.scripted import ScriptedProvider

            def setup(scope):
                scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: "yes"))
            """,
        )
        await driver.reload("clean_ui.py")
        report = await assert_reload_stable(driver, "clean_ui.py", reloads=4, warmup=2)
    assert report.grown == []
    for counter in ("registrations", "live generations", "tasks", "file descriptors"):
        assert len(set(report.series[counter])) == 1, (counter, report.series[counter])
    # Threads are not held to one value: a worker thread of the event loop's pool (or of
    # another test in this process) may start or end between two measurements; one that
    # kept rising would be in report.grown.
    assert "threads" in report.series


async def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    async with ReloadDriver(Context("growth-args"), tmp_path) as driver:
        with pytest.raises(ValueError, match="need reloads >= 2"):
            await assert_reload_stable(driver, reloads=1)


def _sockets() -> set[socket.socket]:
    return {
        obj for obj in gc.get_objects() if isinstance(obj, socket.socket) and obj.fileno() != -1
    }


def test_a_growth_failure_ends_at_the_users_line(planted_report: dict[str, str]) -> None:
    """As the kit's other failures: hotseam's frames are hidden, the test's line is shown."""
    text = planted_report["test_growth[asyncio]"]
    assert ">       await assert_reload_stable(hotseam_reloader, " in text
    assert "# MINE" in text
    assert "E       hotseam.testing.GrowthError: reloading history_ui.py 3 times" in text
    assert "_growth.py" not in text
    assert "hotseam/reload/" not in text  # the allocation tracebacks leave hotseam out too

"""Zombie generations on planted defects: the leak check names each generation still alive
after its scope closed and the reference chain, from a root, that keeps it alive; a carried
value let go without being closed names its carry line."""

from __future__ import annotations

import re

import pytest

from .conftest import planted_line


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_listener_left_on_a_long_lived_object_is_a_zombie_with_its_chain(
    planted_report: dict[str, str], backend: str
) -> None:
    text = planted_report[f"test_listener[{backend}]"]
    assert "2 generation(s) are still alive after their scope closed" in text
    for generation in (1, 2):
        assert re.search(
            rf"==== zombie {generation}/2: listener_ui\.py generation {generation} ====\n"
            r"    kept alive by: planted_bus\.py's module dict\['BUS'\] → Bus object\.listeners"
            rf" → list\[\d\] → the function on_change of listener_ui\.py generation "
            rf"{generation}\n",
            text,
        ), text


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_listener_left_on_a_watched_helper_is_a_zombie_with_its_chain(
    planted_report: dict[str, str], backend: str
) -> None:
    """The bus is a module of the watched folder: the close unloads it with the providers,
    so the generations it held are garbage once the driver closed; they were zombies while
    it served, and are reported as such (the look is made before the close)."""
    text = planted_report[f"test_watched_listener[{backend}]"]
    assert "1 generation(s) are still alive after their scope closed" in text, text
    assert re.search(
        r"==== zombie 1/1: watched_listener_ui\.py generation 1 ====\n"
        r"    kept alive by: event_bus\.py's module dict\['BUS'\] → list\[0\] → bound method "
        r"Listener\.on_change\.__func__ → function Listener\.on_change\.__globals__ → the "
        r"module dict of watched_listener_ui\.py generation 1\n",
        text,
    ), text
    assert "stored at" not in text  # tracemalloc does not trace here


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_with_tracemalloc_the_zombie_names_the_line_that_stored_the_reference(
    planted_report: dict[str, str], backend: str
) -> None:
    """The bound method on the bus was made by the provider's ``setup``: that line is named,
    in the user's file (not the driver's copy)."""
    text = planted_report[f"test_watched_listener_traced[{backend}]"]
    line = planted_line("watched_listener")
    assert (
        f"    stored at: {line} (bound method Listener.on_change made there): "
        "event_bus.BUS.append(Listener().on_change)  # PLANTED"
    ) in text, text


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_helpers_cache_holding_the_old_provider_is_a_zombie_with_its_chain(
    planted_report: dict[str, str], backend: str
) -> None:
    text = planted_report[f"test_cache[{backend}]"]
    assert re.search(
        r"kept alive by: planted_cache\.py's module dict\['_providers'\] → list\[\d\] → "
        r"CachedUI object \(its class\) → the class CachedUI of cache_ui\.py generation 1\n",
        text,
    ), text


def test_a_thread_holding_its_generation_names_the_thread_as_the_root(
    planted_report: dict[str, str],
) -> None:
    text = planted_report["test_stray_thread[asyncio]"]
    assert re.search(
        r"kept alive by: threading\.py's module dict\['_active'\] → dict\[\d+\] → Thread "
        r"object\._target → the function serve of stray_thread_ui\.py generation 1",
        text,
    ), text


def test_an_escaped_task_is_not_also_reported_as_a_zombie(planted_report: dict[str, str]) -> None:
    """The escape check keeps the orphan task to report it: the kit's own records are no root."""
    assert "zombie" not in planted_report["test_orphan_task[asyncio]"]
    assert "zombie" not in planted_report["test_pending_timer[asyncio]"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_carried_value_without_dispose_names_its_carry_line(
    planted_report: dict[str, str], backend: str
) -> None:
    text = planted_report[f"test_carried[{backend}]"]
    assert (
        "carried value 'buffer' (Buffer) was let go without being closed (carried at "
        f"{planted_line('carried')}; give carry() a dispose=, or carry a context manager)"
    ) in text

"""Shared fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from hypothesis import settings
from tests import _timing
from tests._timing import scaled

pytest_plugins = ["pytester"]

# Hypothesis profiles. "hotseam" is the suite's (`make test`): Hypothesis's own 100 examples,
# which the property tests whose examples are costly (marked ``examples``: the invariant
# machines, the multi-question model) take a share of. "stress" (`make test-stress`, which CI
# runs: ``--hypothesis-profile=stress``) gives those tests today's full counts, 4 times more.
settings.register_profile("hotseam", max_examples=100)
settings.register_profile("stress", max_examples=400)
settings.load_profile("hotseam")  # --hypothesis-profile loads another after this


def pytest_report_header() -> str:
    """Say which time factor stretched the deadlines (HOTSEAM_TEST_TIME_SCALE, or measured)."""
    return f"hotseam: deadlines scaled by {_timing.TIME_SCALE:g} (HOTSEAM_TEST_TIME_SCALE)"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """pytest-timeout's default (``--timeout``, ``PYTEST_TIMEOUT`` or the ini ``timeout``) is a
    deadline like any other: stretch it by the suite's time factor before the plugin reads
    it. 0 (no timeout) stays 0. Under pytest-xdist the factor first counts the workers."""
    workers = config.getoption("numprocesses", None)
    if isinstance(workers, int) and workers > 0 and not hasattr(config, "workerinput"):
        _timing.share_cores_with(workers)
    if config.getoption("hotseam_thread_grace", None) is None:
        # How long the escape check waits for a thread still stopping: a wait like any other.
        config.option.hotseam_thread_grace = scaled(float(config.getini("hotseam_thread_grace")))
    if not config.pluginmanager.hasplugin("timeout"):
        return
    chosen = config.getoption("timeout", None)
    if chosen is None:
        chosen = os.environ.get("PYTEST_TIMEOUT") or config.getini("timeout") or None
    if chosen is not None:
        _TIMEOUT_BASE[0] = float(chosen)
        config.option.timeout = scaled(float(chosen))


# pytest-timeout's default before stretching (``None``: not set); and each test's own.
_TIMEOUT_BASE: list[float | None] = [None]
_OWN_TIMEOUT = pytest.StashKey[float]()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A ``@pytest.mark.timeout(N)`` of a test is stretched like the default: a scaled copy
    of the marker goes first, where pytest-timeout looks."""
    for item in items:
        marker = item.get_closest_marker("timeout")
        if marker is None or not marker.args or not marker.args[0]:
            continue
        seconds, *rest = marker.args
        item.stash[_OWN_TIMEOUT] = float(seconds)
        item.add_marker(
            pytest.mark.timeout(scaled(float(seconds)), *rest, **marker.kwargs), append=False
        )


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Stretch each test's timeout again as it starts, by the factor of that moment: a load
    that rose since the collection (:func:`tests._timing.scaled` follows it) must not time
    out a test whose own deadlines follow it. Outside pytest-timeout's own wrapper, which
    reads the marker first. The factor of that moment is held for the test (its deadlines
    keep their ratios) and let go after it."""
    _timing.pin()
    marker = item.get_closest_marker("timeout")
    if _OWN_TIMEOUT in item.stash:
        seconds: float | None = item.stash[_OWN_TIMEOUT]
    else:  # the default, unless the test set its own some other way (0: none)
        seconds = _TIMEOUT_BASE[0] if marker is None else None
    if seconds and item.config.pluginmanager.hasplugin("timeout"):
        rest = marker.args[1:] if marker is not None else ()
        kwargs = marker.kwargs if marker is not None else {}
        item.add_marker(pytest.mark.timeout(scaled(seconds), *rest, **kwargs), append=False)
    try:
        yield
    finally:
        _timing.unpin()


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {"debug": True}), id="asyncio"),
        pytest.param(("trio", {}), id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """Run each ``@pytest.mark.anyio`` test on both anyio backends."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _private_state_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What hotseam keeps between runs (the web inbox's token, the journal) goes to a folder
    of the test's own, never the user's home; the processes a test starts inherit it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    """Undo structlog configuration a test made (capture_logs leaves it 'configured')."""
    yield
    structlog.reset_defaults()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 2 MiB tmpfs (root only), unmounted at the end: a disk that fills up."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root (this test fills a real file system)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)

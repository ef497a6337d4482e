"""hotseam's pytest plugin: disposal-lifecycle testing (registered via ``pytest11``; what
each fixture, check and option does: ``docs/testing.md``).

The ``hotseam_`` fixtures give a test a context, a scope, a scripted provider, a strict
setup, a reload driver, its leak tracker and a way to allow survivors. The checks run at
teardown on a test that passed, after every fixture was torn down: the leak check (scopes
and registrations left open, zombie generations of ``hotseam_reloader``, carried values
let go unclosed) and the escape check (tasks, timers, threads, fds), each turned on by an
option, an ini option or a marker; strict mode likewise.

A failure that hotseam reports (a :class:`~hotseam.HarnessError`, a ``DisposalError``, an
``AssertionError`` of the kit) is shown without hotseam's own frames, as pytest hides its
own: the traceback ends at the test's line. ``--fulltrace`` shows them all.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import pytest

from ._core import (
    Context,
    DisposalError,
    HarnessError,
    Scope,
    Tracker,
    carried_since,
    carry_mark,
    set_tracker,
)
from .testing import (
    ALLOWABLE,
    THREAD_GRACE,
    EscapeWatch,
    LeakTracker,
    active_watch,
    forget_origins,
    forget_told,
    format_escapes,
    format_leaks,
    format_zombies,
    name_originals,
    strict_setup,
    told_carried,
)

if TYPE_CHECKING:
    # Imported by the fixtures that use them: this module is loaded by every pytest run of
    # a project that installs hotseam, most of whose tests need neither.
    from .providers.scripted import ScriptedProvider
    from .testing import ReloadDriver

__all__ = [
    "hotseam_allow_leaks",
    "hotseam_context",
    "hotseam_leaks",
    "hotseam_provider",
    "hotseam_reloader",
    "hotseam_scope",
    "hotseam_setup",
]

_TRACKER = pytest.StashKey[LeakTracker]()
_PREVIOUS = pytest.StashKey[Tracker | None]()
_CALL_PASSED = pytest.StashKey[bool]()
_LEAK_CHECK = pytest.StashKey[bool]()
_CARRY_MARK = pytest.StashKey[int]()
_ESCAPES = pytest.StashKey[EscapeWatch]()
_DRIVERS = pytest.StashKey[list["ReloadDriver"]]()
_ALLOWED = pytest.StashKey[set[str]]()
_HOTSEAM_DIRS = tuple(
    {str(Path(__file__).parent) + os.sep, str(Path(__file__).resolve().parent) + os.sep}
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hotseam", "hotseam disposal-lifecycle testing")
    leaks = "fail tests that pass but leave hotseam scopes or registrations open"
    _switch(parser, group, "leak_check", leaks, leaks)
    _switch(
        parser,
        group,
        "escape_check",
        "fail tests that pass but leave asyncio tasks, timers, threads or file "
        "descriptors behind (named by the line that created them)",
        "fail tests that pass but leave tasks, timers, threads or fds behind",
    )
    group.addoption(
        "--hotseam-thread-grace",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long the escape check waits for a thread still stopping at the end of a "
        f"test (default {THREAD_GRACE:g}; more on a busy machine)",
    )
    parser.addini(
        "hotseam_thread_grace",
        default=str(THREAD_GRACE),
        help="seconds the escape check waits for a thread still stopping at a test's end",
    )
    _switch(
        parser,
        group,
        "strict",
        "set components up, dispose and set up again (React StrictMode style)",
        "set components up twice with a dispose between (strict mode)",
    )


def _switch(
    parser: pytest.Parser, group: pytest.OptionGroup, key: str, option_help: str, ini_help: str
) -> None:
    """An on/off check: ``--hotseam-<key>`` and the ini option ``hotseam_<key>``."""
    group.addoption(
        f"--hotseam-{key.replace('_', '-')}", action="store_true", default=None, help=option_help
    )
    parser.addini(f"hotseam_{key}", type="bool", default=False, help=ini_help)


_MARKERS = (
    "hotseam_leak_check(enabled=True): check this test for leaked hotseam scopes and "
    "registrations (or, with False, don't)",
    "hotseam_escape_check(enabled=True): check this test for asyncio tasks, timers, "
    "threads and file descriptors that outlive it (or, with False, don't)",
    "hotseam_allow_leaks(*kinds): these kinds ('tasks', 'timers', 'threads', 'fds', "
    "'generations') are expected to outlive this test (none given: all of them)",
    "hotseam_strict(enabled=True): set components up, dispose and set up again in this "
    "test (or, with False, don't)",
)


def pytest_configure(config: pytest.Config) -> None:
    for marker in _MARKERS:
        config.addinivalue_line("markers", marker)


def _enabled(item: pytest.Item, name: str) -> bool:
    marker = item.get_closest_marker(name)
    if marker is not None:
        return bool(marker.args[0]) if marker.args else bool(marker.kwargs.get("enabled", True))
    if item.config.getoption(name, default=None):
        return True
    return bool(item.config.getini(name))


def _thread_grace(config: pytest.Config) -> float:
    """``--hotseam-thread-grace``, else the ini ``hotseam_thread_grace``."""
    chosen = config.getoption("hotseam_thread_grace", default=None)
    if chosen is not None:
        return float(chosen)
    ini = config.getini("hotseam_thread_grace")
    try:
        return float(ini)
    except ValueError:
        raise pytest.UsageError(
            f"hotseam_thread_grace = {ini!r}: expected seconds, such as 0.5"
        ) from None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Install the test's leak tracker (and escape watch) before its fixtures run, so they
    are tracked too."""
    tracker = LeakTracker()
    item.stash[_TRACKER] = tracker
    item.stash[_LEAK_CHECK] = _enabled(item, "hotseam_leak_check")
    item.stash[_CARRY_MARK] = carry_mark()
    forget_told()
    item.stash[_PREVIOUS] = set_tracker(tracker)
    markers = list(item.iter_markers("hotseam_allow_leaks"))
    escape_check = _enabled(item, "hotseam_escape_check")
    if markers or escape_check:
        # The watch validates the marker's kinds even when the check is off.
        watch = EscapeWatch(thread_grace=_thread_grace(item.config))
        for marker in markers:
            watch.allow(*(marker.args or ALLOWABLE))
        item.stash[_ALLOWED] = watch.allowed
        if escape_check:
            watch.start()
            item.stash[_ESCAPES] = watch
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    """A fixture wider than the test (module, session) may keep what it starts: the escape
    watch does not note it."""
    # a wider fixture's request is its module's or session's, not the test's: ask the
    # escape check which watch is on
    watch = active_watch() if fixturedef.scope != "function" else None
    if watch is None:
        return (yield)
    watch.stop()
    try:
        return (yield)
    finally:
        watch.start(keep_fds=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    if call.excinfo is not None and not item.config.getoption("fulltrace", False):
        _hide_hotseam_frames(call.excinfo)
    report = yield
    if report.when == "call":
        item.stash[_CALL_PASSED] = report.passed
    return report


def _hide_hotseam_frames(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    """Leave hotseam's frames out of a failure hotseam reports (its own errors and the
    kit's assertions); any other exception keeps them (it may be a bug of hotseam's).

    pytest rebuilds a traceback from the raw one when it cuts it at the test function, so
    the frames are unlinked from the raw traceback itself (``tb_next`` is writable), as well
    as filtered from pytest's view of it.
    """
    if not isinstance(excinfo.value, HarnessError | DisposalError | AssertionError):
        return
    kept: list[TracebackType] = []
    tb: TracebackType | None = excinfo.tb
    while tb is not None:
        if not kept or not _is_hotseam(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    for current, following in zip(kept, [*kept[1:], None], strict=True):
        current.tb_next = following
    excinfo.traceback = excinfo.traceback.filter(lambda entry: not _is_hotseam(entry.path))


def _is_hotseam(path: Path | str) -> bool:
    return str(path).startswith(_HOTSEAM_DIRS)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """After every fixture was torn down, uninstall the tracker and report leaks."""
    try:
        result = yield
    finally:
        tracker = item.stash.get(_TRACKER, None)
        if tracker is not None:
            set_tracker(item.stash.get(_PREVIOUS, None))
        watch = item.stash.get(_ESCAPES, None)
        if watch is not None:
            watch.stop()
    # Only a test that passed is checked: a failing test's leaks are noise (VS Code does
    # the same); its own failure is what the user needs to see.
    try:
        if item.stash.get(_CALL_PASSED, False):
            reports = _reports(item, tracker, watch)
            if reports:
                pytest.fail(name_originals("\n\n".join(reports)), pytrace=False)
    finally:
        forget_origins()
        # the item lives for the session: let the drivers and the watch's records go
        item.stash[_DRIVERS] = []
        if watch is not None:
            del item.stash[_ESCAPES]
    return result


def _reports(
    item: pytest.Item, tracker: LeakTracker | None, watch: EscapeWatch | None
) -> list[str]:
    """The leak check's and the escape check's reports of a test that passed."""
    reports: list[str] = []
    if tracker is not None and item.stash.get(_LEAK_CHECK, False):
        leaks = tracker.leaks()
        if leaks:
            reports.append(format_leaks(leaks))
        told = told_carried()  # strict mode named them to the test already
        dropped = [
            found
            for found in carried_since(item.stash.get(_CARRY_MARK, 0))
            if "was let go without being closed" in found and found not in told
        ]
        zombies = (
            []
            if "generations" in item.stash.get(_ALLOWED, set())
            else [zombie for driver in item.stash.get(_DRIVERS, []) for zombie in driver.zombies()]
        )
        if zombies:
            reports.append(format_zombies(zombies))
        if dropped:
            reports.append(
                f"{len(dropped)} carried value(s) were let go without being closed:\n"
                + "\n".join(f"  {found}" for found in dropped)
            )
    if watch is not None:
        escapes = watch.escapes()
        if escapes:
            reports.append(format_escapes(escapes))
    return reports


# -- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
def hotseam_context(request: pytest.FixtureRequest) -> Context:
    """A fresh context named after the test."""
    return Context(f"test:{request.node.name}")


@pytest.fixture
async def hotseam_scope(hotseam_context: Context) -> AsyncIterator[Scope]:
    """An open root scope on ``hotseam_context``; closed (and its failures raised) after."""
    async with Scope("hotseam_scope", context=hotseam_context) as scope:
        yield scope


@pytest.fixture
async def hotseam_provider(hotseam_scope: Scope) -> ScriptedProvider:
    """A scripted user-interaction provider installed in ``hotseam_context``."""
    from .interaction import USER_INTERACTION
    from .providers.scripted import ScriptedProvider

    provider = ScriptedProvider(name="hotseam_provider")
    hotseam_scope.provide(USER_INTERACTION, provider)
    return provider


SetupHarness = Callable[..., Awaitable[Scope]]


@pytest.fixture
def hotseam_setup(request: pytest.FixtureRequest, hotseam_scope: Scope) -> SetupHarness:
    """``await hotseam_setup(setup, name=..., probe=...)``: set a component up in a child scope.

    In strict mode (option, ini or marker) it sets up, disposes and sets up again, failing
    with :class:`~hotseam.testing.StrictModeError` when the second setup finds leftovers.
    """
    strict = _enabled(request.node, "hotseam_strict")

    async def setup(
        component: Callable[[Scope], Any],
        *,
        name: str = "component",
        probe: Callable[[], object] | None = None,
    ) -> Scope:
        return await strict_setup(
            component, parent=hotseam_scope, name=name, probe=probe, strict=strict
        )

    return setup


@pytest.fixture
async def hotseam_reloader(
    request: pytest.FixtureRequest, hotseam_context: Context, tmp_path: Path
) -> AsyncIterator[ReloadDriver]:
    """A reload driver on ``tmp_path / "providers"``; every generation is disposed after."""
    from .testing import ReloadDriver

    strict = _enabled(request.node, "hotseam_strict")
    async with ReloadDriver(hotseam_context, tmp_path / "providers", strict=strict) as driver:
        request.node.stash.setdefault(_DRIVERS, []).append(driver)
        yield driver
        node = request.node.stash
        if (
            node.get(_LEAK_CHECK, False)
            and node.get(_CALL_PASSED, False)
            and "generations" not in node.get(_ALLOWED, set())
        ):
            # Before the close: a generation a watched helper holds is garbage after it.
            driver.note_zombies()


@pytest.fixture
def hotseam_allow_leaks(request: pytest.FixtureRequest) -> Callable[..., None]:
    """``hotseam_allow_leaks("threads")`` or ``hotseam_allow_leaks(my_thread)``: the escape
    check expects these kinds, or these objects, to outlive the test."""
    watch: EscapeWatch | None = request.node.stash.get(_ESCAPES, None)
    if watch is not None:
        return watch.allow
    return EscapeWatch().allow  # the check is off: kinds are still validated


@pytest.fixture
def hotseam_leaks(request: pytest.FixtureRequest) -> LeakTracker:
    """The leak tracker of this test (installed even when the leak check is off)."""
    tracker: LeakTracker = request.node.stash[_TRACKER]
    return tracker

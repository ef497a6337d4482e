"""A watchdog for the event loop of ``hotseam dev`` and ``hotseam run``.

Provider code that blocks the loop's thread (a synchronous ``setup`` that sleeps) escapes
every time bound and deafens the process. The watchdog makes that visible and escapable
(invariant 7): a loop task *pets* it every :data:`PET_INTERVAL`; a thread that sees no pet
for ``threshold`` seconds logs ``loop.blocked`` once, naming the innermost frame outside
hotseam (``loop.unblocked`` follows). Signal handlers still run while the loop is blocked,
so a second stop signal makes the thread log what the loop runs and exit with ``128 +
signal number``, as uvicorn does (disposers do not run: the loop is not free)."""

from __future__ import annotations

import contextlib
import signal
import sys
import sysconfig
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import anyio

from ..reload import is_library_file
from ._agent import shown_path
from ._stdio_cmd import STOP_SIGNALS

PET_INTERVAL = 0.25
"""Seconds between two pets of a free loop."""

SIGNAL_GRACE = 0.5
"""A stop signal counts as unhandled once the loop has not run for this long after it (a
free loop pets within :data:`PET_INTERVAL`)."""

_CHECK_INTERVAL = 0.1
_STACK_DEPTH = 8
_STDLIB = sysconfig.get_path("stdlib") + "/"


@dataclass(frozen=True, slots=True)
class BlockedFrame:
    """Where the loop thread is: the frame to blame, and the stack that leads to it."""

    module: str
    function: str
    file: str
    line: int
    stack: str

    @property
    def location(self) -> str:
        return f"{shown_path(Path(self.file))}:{self.line}"


def blocked_frame(thread_id: int) -> BlockedFrame | None:
    """The innermost frame of ``thread_id`` outside hotseam, anyio, asyncio and trio (the
    innermost frame if all are), with the user frames of its stack formatted below it."""
    frames: list[FrameType] = []
    frame = sys._current_frames().get(thread_id)
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    if not frames:
        return None
    frames.reverse()  # outermost first
    shown = [frame for frame in frames if not _hidden(frame.f_code.co_filename)]
    user = [frame for frame in shown if not _stdlib(frame.f_code.co_filename)]
    blamed = (user or shown or frames)[-1]
    summary = traceback.StackSummary.extract(
        ((frame, frame.f_lineno) for frame in (shown or frames)[-_STACK_DEPTH:]),
        capture_locals=False,
    )
    stack = "Stack of the event-loop thread (most recent call last):\n" + "".join(summary.format())
    return BlockedFrame(
        module=str(blamed.f_globals.get("__name__", "?")),
        function=blamed.f_code.co_name,
        file=blamed.f_code.co_filename,
        line=blamed.f_lineno,
        stack=stack.rstrip("\n"),
    )


class LoopWatchdog:
    """Report stalls of the event loop; turn a second stop signal during one into an exit.
    ``threshold``: the stall warning (``None``: no warnings, the forced exit kept)."""

    def __init__(self, threshold: float | None, log: Any, exit: Callable[[int], None]) -> None:
        self.threshold = threshold
        self._log = log
        self._exit = exit
        # Reentrant: the signal handler takes it in the loop thread, which may hold it (a pet).
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._last_pet = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._signals: list[tuple[int, float]] = []  # unhandled stop signals: (number, when)
        self._reported_pet: float | None = None  # the pet a stall warning was logged after
        self._hinted_pet: float | None = None  # the pet a 'send it again' hint was logged after

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Pet the loop and watch it while the block runs. Enter it in the loop thread, and
        inside the backend's signal receiver: our handlers are chained in front of its."""
        self._loop_thread = threading.get_ident()
        self._last_pet = time.monotonic()
        previous = self._chain_handlers()
        thread = threading.Thread(target=self._watch, name="hotseam: loop watchdog", daemon=True)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pet)
                thread.start()
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self._stopped.set()
            self._wake.set()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    # -- in the loop thread ----------------------------------------------------------------------

    async def _pet(self) -> None:
        while True:
            with self._lock:
                self._last_pet = time.monotonic()
                self._signals.clear()
            await anyio.sleep(PET_INTERVAL)

    def _chain_handlers(self) -> dict[int, Any]:
        """Put a counting handler in front of the current one (the backend's), which still
        receives every signal; only possible in the main thread."""
        previous: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return previous
        for signum in STOP_SIGNALS:
            handler = signal.getsignal(signum)
            if not callable(handler):  # nobody routes it: it already stops the process
                continue

            def counting(number: int, frame: FrameType | None, chained: Any = handler) -> None:
                # No Event.set() here: the loop thread may hold its lock when interrupted.
                with self._lock:
                    self._signals.append((number, time.monotonic()))
                chained(number, frame)

            previous[signum] = handler
            signal.signal(signum, counting)
        return previous

    # -- in the watchdog thread ------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(_CHECK_INTERVAL)
            self._wake.clear()
            if self._stopped.is_set():
                return
            try:
                self._check()
            except Exception:  # a watchdog that crashes must not take the process with it
                with contextlib.suppress(Exception):
                    self._log.exception("loop.watchdog_failed")
                return

    def _check(self) -> None:
        now = time.monotonic()
        with self._lock:
            last_pet = self._last_pet
            signals = list(self._signals)
        stalled = now - last_pet
        # The first stop signal went unhandled: the loop has not run since it arrived.
        unhandled = bool(signals) and now - signals[0][1] >= SIGNAL_GRACE
        if unhandled and len(signals) >= 2:
            self._force_exit(signals[-1][0], stalled)
            return
        if self._reported_pet is not None and self._reported_pet != last_pet:
            self._log.info(
                "loop.unblocked",
                blocked_for=round(last_pet - self._reported_pet, 1),
                summary="the event loop runs again after being blocked for about "
                f"{last_pet - self._reported_pet:.1f} s",
            )
            self._reported_pet = None
        threshold = self.threshold
        if threshold is not None and stalled > threshold and self._reported_pet != last_pet:
            self._reported_pet = last_pet
            self._report("loop.blocked", stalled, "the event loop has been blocked")
        if unhandled and self._hinted_pet != last_pet:
            self._hinted_pet = last_pet
            name = signal.Signals(signals[0][0]).name
            self._log.warning(
                "loop.signal_pending",
                signal=name,
                summary=f"{name} will be handled when the event loop is free; "
                "send it again to exit now",
            )

    def _report(self, event: str, stalled: float, what: str, **fields: Any) -> None:
        where = blocked_frame(self._loop_thread)
        if where is None:
            self._log.warning(event, blocked_for=round(stalled, 1), summary=what, **fields)
            return
        self._log.warning(
            event,
            blocked_for=round(stalled, 1),
            module=where.module,
            function=where.function,
            file=where.file,
            line=where.line,
            summary=f"{what} for {stalled:.1f} s by {where.function}() at {where.location}",
            traceback=where.stack,
            **fields,
        )

    def _force_exit(self, signum: int, stalled: float) -> None:
        """Log what the loop thread runs and exit; the log is given at most a second, in case
        the loop thread holds the stream the log writes to."""
        name = signal.Signals(signum).name
        code = 128 + signum

        def report() -> None:
            self._report(
                "loop.forced_exit",
                stalled,
                f"{name} again while the event loop is blocked: exiting with {code} without "
                "disposing; it was blocked",
                signal=name,
                exit_code=code,
            )

        reporter = threading.Thread(target=report, name="hotseam: forced exit", daemon=True)
        reporter.start()
        reporter.join(1.0)
        self._exit(code)


def _hidden(filename: str) -> bool:
    """hotseam, anyio, asyncio, trio and frozen modules: never what blocks the loop."""
    return is_library_file(filename) or filename.startswith("<")


def _stdlib(filename: str) -> bool:
    """Code the user called (blamed only when nothing of theirs is on the stack)."""
    return filename.startswith(_STDLIB)

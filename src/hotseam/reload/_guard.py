"""Running provider code so that it cannot kill, freeze or outlive the reloader.

Provider code runs in three guarded ways:

* module bodies execute in a daemon thread (:class:`Worker`): a body that
  blocks the thread (``while True: pass``) leaves the event loop serving; past its time
  bound it is *abandoned* — the thread keeps running (Python cannot kill a thread), but its
  module object is never installed;
* ``setup`` and generation closes run in a *detached* task (:func:`start_detached`), which no
  task group waits for: past its time bound the reloader stops waiting and reports it, even
  when the code is blocked in a worker thread or under a shielded cancel scope;
* every ``BaseException`` raised by provider code is a failure of that code
  (:func:`is_fatal` tells the two that are not: the backend's cancellation, and a
  ``KeyboardInterrupt`` that may be the user's Ctrl-C).

Where code is stuck is found from the live stack: ``sys._current_frames()`` for a thread,
the ``cr_await`` chain of the coroutine for a task.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import queue
import signal
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import anyio.from_thread
import sniffio

__all__ = [
    "HANDOFF_WAIT",
    "Detached",
    "ThreadRun",
    "Worker",
    "current_run",
    "interrupted",
    "is_fatal",
    "start_detached",
    "stuck_location",
]

_LIBRARY_DIRS = (
    *(
        str(Path(module.__file__).resolve().parent)
        for module in (anyio, sniffio)
        if module.__file__
    ),
    str(Path(__file__).resolve().parent.parent),
)


def _library(filename: str) -> bool:
    return filename.startswith(_LIBRARY_DIRS) or "/trio/" in filename or "/asyncio/" in filename


def _sigint_may_raise() -> bool:
    """True when a SIGINT would raise ``KeyboardInterrupt`` in this thread (not routed to a
    signal receiver such as ``anyio.open_signal_receiver``, which ``hotseam dev`` uses)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    handler: Any = signal.getsignal(signal.SIGINT)
    if handler is signal.default_int_handler:
        return True
    func = getattr(handler, "func", handler)  # asyncio.Runner wraps its handler in a partial
    module = str(getattr(func, "__module__", "") or "")
    return module in ("trio._core._ki", "asyncio.runners")


def is_fatal(error: BaseException) -> bool:
    """True for what must propagate instead of being reported as provider code's failure.

    That is the backend's cancellation, and a ``KeyboardInterrupt`` on the event-loop thread
    while SIGINT raises it (it may be the user's Ctrl-C). With SIGINT routed to a signal
    receiver, a ``KeyboardInterrupt`` can only come from code, and is reported.
    """
    if isinstance(error, BaseExceptionGroup):
        return any(is_fatal(inner) for inner in error.exceptions)
    if isinstance(error, anyio.get_cancelled_exc_class()):
        return True
    return isinstance(error, KeyboardInterrupt) and _sigint_may_raise()


def interrupted(error: BaseException) -> bool:
    """A KeyboardInterrupt that may be the user's Ctrl-C (see :func:`is_fatal`)."""
    return isinstance(error, KeyboardInterrupt) and is_fatal(error)


# -- locating stuck code --------------------------------------------------------------------------


def _frames_of_coroutine(coro: object) -> Iterator[FrameType]:
    """The frames of a suspended coroutine and of everything it awaits, outermost first."""
    seen = 0
    while coro is not None and seen < 200:
        seen += 1
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            yield frame
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)


def _frames_of_thread(ident: int | None) -> list[FrameType]:
    """The frames of a running thread, outermost first."""
    frame = sys._current_frames().get(ident) if ident is not None else None
    frames: list[FrameType] = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    frames.reverse()
    return frames


def stuck_location(frames: Collection[FrameType], watched: Collection[str]) -> str | None:
    """``file:line`` where code is stuck: the innermost frame of a watched file, else the
    innermost frame outside hotseam and the async libraries."""
    ordered = list(frames)
    for frame in reversed(ordered):
        if frame.f_code.co_filename in watched:
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
    for frame in reversed(ordered):
        if not _library(frame.f_code.co_filename):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
    return None


# -- detached tasks -------------------------------------------------------------------------------


class Detached:
    """A task that no task group waits for; ``done`` is set when it ended."""

    __slots__ = ("_coro", "cancel_scope", "done", "error", "label")

    def __init__(self, label: str) -> None:
        self.label = label
        self.done = anyio.Event()
        self.error: BaseException | None = None
        self.cancel_scope = anyio.CancelScope()
        self._coro: object = None

    def location(self, watched: Collection[str]) -> str | None:
        """Where the task is stuck right now (``None`` once it ended)."""
        if self.done.is_set():
            return None
        return stuck_location(list(_frames_of_coroutine(self._coro)), watched)


_KEEP: set[object] = set()  # asyncio keeps only weak references to tasks


def start_detached(label: str, func: Callable[[], Awaitable[object]]) -> Detached:
    """Start ``await func()`` in a task of its own, in a copy of the current context.

    It never raises: an exception (a cancellation included) is stored in ``error``. Nothing
    waits for it: a caller that stops waiting *abandons* it (it runs on until it returns).
    """
    handle = Detached(label)

    async def body() -> None:
        try:
            with handle.cancel_scope:
                await func()
        except BaseException as error:  # stored for the waiter, which decides
            handle.error = error
        finally:
            handle.done.set()

    coro = body()
    handle._coro = coro
    if sniffio.current_async_library() == "trio":
        import trio

        async def run() -> None:
            await coro

        trio.lowlevel.spawn_system_task(run, name=label, context=contextvars.copy_context())
    else:
        import asyncio

        task = asyncio.get_running_loop().create_task(coro, name=label)
        _KEEP.add(task)
        task.add_done_callback(_KEEP.discard)
    return handle


# -- the module-body thread ------------------------------------------------------------------------


class ThreadRun:
    """Steps of work running in a :class:`Worker`'s daemon thread; ``abandoned`` once the
    event loop stopped waiting for one of them (its thread runs on, and runs no more steps)."""

    __slots__ = ("abandoned", "current", "done", "error", "ident", "label")

    def __init__(self, label: str) -> None:
        self.label = label
        self.done = anyio.Event()
        self.error: BaseException | None = None
        self.ident: int | None = None
        self.abandoned = False
        self.current: tuple[int, float] | None = None
        """The step running and when it started (``time.monotonic()``); set by the thread."""

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def location(self, watched: Collection[str]) -> str | None:
        """Where the thread is stuck right now (``None`` once it ended)."""
        if self.done.is_set():
            return None
        return stuck_location(_frames_of_thread(self.ident), watched)


_CURRENT = threading.local()
_STOP = object()

HANDOFF_WAIT = 0.001
"""Seconds :meth:`Worker.run` waits for its steps blocking (the GIL released) before it
waits on the event loop: a typical module body executes well within it. The loop serves
nothing meanwhile: at most this long once per run, below the interpreter's switch interval
(5 ms) that a body running Python imposes on the loop anyway."""


def _call_soon_threadsafe() -> Callable[[Callable[[], object]], object]:
    """The running loop's own "call this soon, from any thread", looked up on the loop.

    Not ``anyio.lowlevel.current_token()``: before anyio 4.11 it is the bare loop or
    ``TrioToken``, with no ``backend_class`` to call through. Looked up here, on the loop,
    so a mismatch fails the run loudly instead of inside the thread, where the loop would
    never learn that the body ended.
    """
    if sniffio.current_async_library() == "trio":
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    import asyncio

    return asyncio.get_running_loop().call_soon_threadsafe


def current_run() -> ThreadRun | None:
    """The :class:`ThreadRun` whose thread this is, if any."""
    run: ThreadRun | None = getattr(_CURRENT, "run", None)
    return run


def _serve(jobs: queue.SimpleQueue[Any]) -> None:
    """A worker thread's life: run jobs until told to stop, or until one is abandoned."""
    while True:
        job = jobs.get()
        if job is _STOP:
            return
        keep_serving = job()
        del job  # what it ran (a batch and its sources) must not wait here for the next job
        if not keep_serving:
            return  # abandoned: a fresh thread takes the next job


class Worker:
    """One reusable daemon thread for module bodies, so a body that blocks leaves the event
    loop serving.

    Starting a thread costs about twice a hand-off to a waiting one, and a start loads
    every module, so the thread is kept between reloads. A step that overruns its time
    bound is *abandoned*: Python cannot stop a thread, so that thread runs on, runs no
    further step, and the next steps go to a new thread.
    """

    __slots__ = ("__weakref__", "_jobs", "_stopper")

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Any] | None = None
        self._stopper: weakref.finalize[Any, Worker] | None = None

    def close(self) -> None:
        """Let the idle thread end (a busy one ends after its job)."""
        if self._jobs is not None:
            self._jobs.put(_STOP)
        self._retire()

    def _submit(self, job: Callable[[], bool]) -> None:
        jobs = self._jobs
        if jobs is None:
            jobs = self._jobs = queue.SimpleQueue()
            thread = threading.Thread(
                target=_serve, args=(jobs,), name="hotseam: module bodies", daemon=True
            )
            thread.start()
            # A worker nobody closed ends with it (the thread holds only the queue).
            self._stopper = weakref.finalize(self, jobs.put, _STOP)
        jobs.put(job)

    def _retire(self) -> None:
        """The thread is stuck in an abandoned step: the next job starts a new one."""
        self._jobs = None
        if self._stopper is not None:
            self._stopper.detach()
            self._stopper = None

    async def run(
        self,
        label: str,
        steps: Sequence[Callable[[], object]],
        timeout: float,
        *,
        on_slow: tuple[float, Callable[[int], object]] | None = None,
    ) -> tuple[ThreadRun, int | None]:
        """Run ``steps`` in order in the thread (in a copy of the current context), each
        bounded by ``timeout`` seconds from its own start; return the run and the index of
        the step abandoned at its bound (``None``: all ran). A step's exception ends the
        run (``error``): steps are expected to catch their own.

        ``on_slow=(seconds, notify)`` calls ``notify(index)`` once for a step still running
        after ``seconds``. The loop is woken once for the whole run, not once per step: it
        sleeps until the running step's deadline (or slow notice), which it reads from
        ``run.current``; once a step was slow, it also looks every ``seconds / 4`` for the
        next one.

        Cancellation stops the waiting (the run is abandoned) and propagates.
        """
        run = ThreadRun(label)
        call_soon = _call_soon_threadsafe()
        context = contextvars.copy_context()
        handoff = threading.Lock()
        finished = threading.Event()
        blocking = True  # the loop thread is in its short blocking wait (see HANDOFF_WAIT)

        def job() -> bool:
            run.ident = threading.get_ident()
            _CURRENT.run = run
            try:
                for index, step in enumerate(steps):
                    if run.abandoned:
                        break
                    run.current = (index, time.monotonic())
                    context.run(step)
            except BaseException as error:  # reported by the waiter
                run.error = error
            finally:
                run.current = None
                _CURRENT.run = None
                with handoff:
                    told = blocking
                    if told:
                        finished.set()
                if not told:
                    # Scheduled, not waited for: the thread is free at once (a blocking call
                    # would have it wait for the loop, then compete with it for the GIL).
                    # The loop is gone (asyncio: closed; trio: RunFinishedError): nobody waits.
                    with contextlib.suppress(RuntimeError):
                        call_soon(run.done.set)
            return not run.abandoned

        slow, notify = on_slow if on_slow is not None else (math.inf, None)
        notified = -1
        abandoned: int | None = None
        self._submit(job)
        try:
            # A short blocking wait first, the GIL released: the thread starts at once and
            # says it is done through a lock, not the loop's wake-up pipe (two hand-overs
            # that were a fifth of a save's own work). A body that runs Python holds the
            # GIL anyway, so the loop could hardly have run meanwhile; one that waits (I/O,
            # a sleep, the loop itself) holds the loop up for HANDOFF_WAIT at most, once
            # per run (a reload's bodies are one run), then is waited for on the loop.
            if finished.wait(min(HANDOFF_WAIT, timeout)):
                run.done.set()
            else:
                # From here the thread tells the loop; if it finished in between (it saw
                # ``blocking`` still true, so it told nobody), it is done now.
                with handoff:
                    blocking = False
                if finished.is_set():
                    run.done.set()
            while not run.done.is_set():
                current = run.current
                now = time.monotonic()
                if current is None:  # not started yet, or just ended
                    with anyio.move_on_after(min(slow, timeout)):
                        await run.done.wait()
                    continue
                index, started = current
                if now - started >= timeout:
                    abandoned = index
                    break
                if notify is not None and index != notified and now - started >= slow:
                    notified = index
                    notify(index)
                wake = started + timeout
                if index != notified and slow < timeout:
                    wake = started + slow
                elif index == notified:  # a slow run: look for the next step now and then
                    wake = min(wake, now + slow / 4)
                with anyio.move_on_after(max(wake - now, 0.0)):
                    await run.done.wait()
        finally:
            if not run.done.is_set():
                run.abandoned = True
                self._retire()
        return run, abandoned

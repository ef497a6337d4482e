"""Guarding provider code so that it cannot kill, freeze or outlive the reloader.

* ``setup`` and generation closes run in a *detached* task (:func:`start_detached`), which no
  task group waits for: past its time bound the reloader stops waiting and reports it, even
  when the code is blocked in a worker thread or under a shielded cancel scope;
* module bodies run in the loader's daemon thread (:class:`~._loader.Worker`), or inline
  when their bytecode shows they cannot block (:func:`~._loader.inert`);
* every ``BaseException`` raised by provider code is a failure of that code
  (:func:`is_fatal` tells the two that are not: the backend's cancellation, and a
  ``KeyboardInterrupt`` that may be the user's Ctrl-C).

Where code is stuck is found from the live stack (:func:`stuck_location`):
``sys._current_frames()`` for a thread, the ``cr_await`` chain of the coroutine for a task.
"""

from __future__ import annotations

import contextvars
import signal
import sys
import threading
from collections.abc import Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import anyio.from_thread
import sniffio

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
    signal receiver, as ``hotseam dev`` does)."""
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


def frames_of_thread(ident: int | None) -> list[FrameType]:
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


@dataclass(eq=False, slots=True)
class Detached:
    """A task that no task group waits for; ``done`` is set when it ended."""

    label: str
    done: anyio.Event = field(default_factory=anyio.Event)
    error: BaseException | None = None
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    coro: object = None

    def location(self, watched: Collection[str]) -> str | None:
        """Where the task is stuck right now (``None`` once it ended)."""
        if self.done.is_set():
            return None
        return stuck_location(list(_frames_of_coroutine(self.coro)), watched)


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
    handle.coro = coro
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

"""The escape check: tasks, timers, threads and file descriptors that outlived a test (what
each is and how it is reported: ``docs/testing.md``, "Escape check").

The creation points (``BaseEventLoop.create_task`` and ``call_at``, ``Thread.start``,
``socket.socket.__init__``) are wrapped once per process, each noting its caller's line in
one walk up the stack (a task factory would need installing on every loop, coroutine origin
tracking costs on every coroutine); ``/proc/self/fd`` is listed before and after. Cheap when
nothing leaks, exact when something does; only the user's code is noted (:mod:`._sites`)."""

from __future__ import annotations

import asyncio
import asyncio.base_events
import asyncio.runners
import functools
import gc
import io
import os
import socket
import threading
import tracemalloc
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from ._sites import Site, StackFrame, capture, is_library

KINDS = ("tasks", "timers", "threads", "fds")
"""What the escape check looks at; each can be allowed per test."""
ALLOWABLE = (*KINDS, "generations")
"""The kinds a test can allow: the escape check's, and zombie generations (the leak
check's: a generation a deliberately kept thread or task holds stays alive with it)."""

THREAD_GRACE = 0.2
"""Seconds a thread that is still alive at the end may take to finish (it may be stopping);
the plugin's ``--hotseam-thread-grace`` changes it (a busy machine stops threads late)."""

_STRUCTURED = frozenset({"anyio", "trio"})
"""Tasks and timers made through these belong to a task group or a cancel scope."""
_LOOPS = frozenset({"asyncio", "anyio", "trio"})
"""Threads started through these are the loop's worker pools."""

K = TypeVar("K")
_Sites = weakref.WeakKeyDictionary[K, Site]
"""Where each object of a kind was made, forgotten with the object."""

_watch: EscapeWatch | None = None
_installed = False


@dataclass(frozen=True, slots=True)
class Escape:
    """One resource that outlived the test: what it is, where it was made, what it does."""

    kind: str
    what: str
    created_at: str
    stack: tuple[StackFrame, ...]
    detail: str


class EscapeWatch:
    """Notes what the user's code creates while it is active; lists what outlived it."""

    def __init__(self, *, thread_grace: float = THREAD_GRACE) -> None:
        self.thread_grace = thread_grace
        self.tasks: _Sites[asyncio.Task[Any]] = weakref.WeakKeyDictionary()
        self.timers: _Sites[asyncio.TimerHandle] = weakref.WeakKeyDictionary()
        self.threads: _Sites[threading.Thread] = weakref.WeakKeyDictionary()
        self.sockets: _Sites[socket.socket] = weakref.WeakKeyDictionary()
        self.orphaned: dict[asyncio.Task[Any], tuple[Site, str]] = {}
        """Tasks still pending when their loop shut down (kept: the loop's end drops them),
        with where their coroutine was then (the cancellation ends it)."""
        self.dropped_timers: dict[asyncio.TimerHandle, Site] = {}
        """Timers still scheduled when their loop closed (kept: the closing loop drops them)."""
        self.allowed: set[str] = set()
        self.allowed_objects: list[weakref.ref[object]] = []
        self._fds_before: frozenset[int] = frozenset()
        self._outer: EscapeWatch | None = None

    def start(self, *, keep_fds: bool = False) -> None:
        """Become the active watch (installing the hooks on first use). With ``keep_fds``
        (resuming after a wider fixture's setup), descriptors open now are not the test's."""
        global _watch
        install()
        self._fds_before = (self._fds_before | open_fds()) if keep_fds else open_fds()
        if _watch is not self:
            self._outer = _watch
        _watch = self

    def stop(self) -> None:
        """Stop noting new creations; a watch this one interrupted notes them again."""
        global _watch
        if _watch is self:
            _watch, self._outer = self._outer, None

    def allow(self, *what: object) -> None:
        """Expect these to outlive the test: kinds (``"threads"``...) or the objects."""
        for item in what:
            if isinstance(item, str):
                if item not in ALLOWABLE:
                    raise ValueError(
                        f"unknown kind of leak {item!r}; the kinds are {', '.join(ALLOWABLE)}"
                    )
                self.allowed.add(item)
            else:
                self.allowed_objects.append(weakref.ref(item))

    def escapes(self) -> list[Escape]:
        """What the user's code created during the watch and is still alive (the
        allowed kinds and objects left out)."""
        allowed_ids = {id(obj) for ref in self.allowed_objects if (obj := ref()) is not None}
        found: list[Escape] = []
        for kind in KINDS:  # each kind is looked at by the method of its name
            if kind not in self.allowed:
                found.extend(getattr(self, f"_{kind}")(allowed_ids))
        return found

    # -- each kind ---------------------------------------------------------------------------

    def _tasks(self, allowed: set[int]) -> Iterable[Escape]:
        pending = dict(self.orphaned)
        pending.update(
            (task, (site, _coroutine_place(task)))
            for task, site in list(self.tasks.items())
            if not task.done()
        )
        for task, (site, place) in pending.items():
            if id(task) in allowed:
                continue
            when = (
                "still pending when its event loop shut down (the loop cancelled it)"
                if task in self.orphaned
                else "still pending after the test"
            )
            yield Escape(
                "tasks",
                f"asyncio task {task.get_name()!r} running {_coroutine_name(task)}",
                site.created_at,
                site.stack,
                f"{when}; {place}",
            )

    def _timers(self, allowed: set[int]) -> Iterable[Escape]:
        pending = dict(self.dropped_timers)
        pending.update(self.timers.items())
        for handle, site in pending.items():
            # a handle run or cancelled left its loop's heap (or was marked cancelled)
            if handle.cancelled() or not getattr(handle, "_scheduled", False):
                continue
            if id(handle) in allowed:
                continue
            yield Escape(
                "timers",
                f"timer handle calling {_qualname(getattr(handle, '_callback', None))}",
                site.created_at,
                site.stack,
                "neither run nor cancelled (a closing event loop drops it silently)",
            )

    def _threads(self, allowed: set[int]) -> Iterable[Escape]:
        for thread, site in list(self.threads.items()):
            if id(thread) in allowed or not thread.is_alive():
                continue
            if thread is not threading.current_thread():
                thread.join(self.thread_grace)
            if not thread.is_alive():
                continue
            target = getattr(thread, "_target", None)
            running = f" running {_qualname(target)}" if target is not None else ""
            yield Escape(
                "threads",
                f"thread {thread.name!r}{running}",
                site.created_at,
                site.stack,
                "still alive after the test (never stopped and joined)"
                + (" (daemon)" if thread.daemon else ""),
            )

    def _fds(self, allowed: set[int]) -> Iterable[Escape]:
        new = open_fds() - self._fds_before
        if not new:
            return
        by_fd = {sock.fileno(): (sock, site) for sock, site in list(self.sockets.items())}
        for fd in sorted(new):
            target = _fd_target(fd)
            if target is None:  # closed meanwhile
                continue
            if fd in by_fd:
                sock, site = by_fd[fd]
                if id(sock) in allowed:
                    continue
                yield Escape(
                    "fds",
                    f"socket (fd {fd}, {_socket_kind(sock)})",
                    site.created_at,
                    site.stack,
                    "still open after the test (never closed)",
                )
            elif not target.startswith("socket:"):
                yield from _other_fd(fd, target, allowed)


def format_escapes(escapes: list[Escape]) -> str:
    """Render escapes numbered, each with its creating line and stack."""
    lines = [
        f"{len(escapes)} resource(s) created during this test outlived it (allow expected "
        'ones with @pytest.mark.hotseam_allow_leaks("threads", ...) or the '
        "hotseam_allow_leaks fixture):"
    ]
    for index, escape in enumerate(escapes, 1):
        lines.append("")
        lines.append(f"==== escape {index}/{len(escapes)}: {escape.what} ====")
        lines.append(f"    created at: {escape.created_at}")
        lines.append(f"    {escape.detail}")
        if escape.stack:
            lines.append("  creation stack (most recent call last):")
            lines.extend(
                f'    File "{file}", line {line}, in {func}' for file, line, func in escape.stack
            )
    return "\n".join(lines)


# -- the hooks ------------------------------------------------------------------------------


def active_watch() -> EscapeWatch | None:
    """The watch noting creations now, if any."""
    return _watch


def install() -> None:
    """Wrap the creation points once per process; each wrapper costs one global read while
    no watch is active."""
    global _installed
    if _installed:
        return
    _installed = True
    loop_class = asyncio.base_events.BaseEventLoop
    loop_class.create_task = _noting(  # type: ignore[method-assign]
        loop_class.create_task, "tasks", unless_via=_STRUCTURED
    )
    loop_class.call_at = _noting(  # type: ignore[method-assign,assignment]
        loop_class.call_at, "timers", unless_via=_STRUCTURED
    )
    threading.Thread.start = _noting(  # type: ignore[method-assign]
        threading.Thread.start, "threads", self_is_result=True, unless_via=_LOOPS
    )
    socket.socket.__init__ = _noting(socket.socket.__init__, "sockets", self_is_result=True)  # type: ignore[method-assign]
    runner_close = asyncio.runners.Runner.close

    def close(runner: asyncio.runners.Runner) -> None:
        watch = _watch
        loop = getattr(runner, "_loop", None)
        if watch is not None and loop is not None and not loop.is_closed():
            for task in asyncio.all_tasks(loop):
                site = watch.tasks.get(task)
                if site is not None and not task.done():
                    watch.orphaned[task] = (site, _coroutine_place(task))
        runner_close(runner)

    asyncio.runners.Runner.close = close  # type: ignore[method-assign,assignment]
    loop_close = loop_class.close

    def close_loop(loop: asyncio.base_events.BaseEventLoop) -> None:
        watch = _watch
        scheduled = getattr(loop, "_scheduled", ())
        if watch is not None and not loop.is_closed():
            for handle in scheduled:
                site = watch.timers.get(handle)
                if site is not None and not handle.cancelled():
                    watch.dropped_timers[handle] = site
        loop_close(loop)

    loop_class.close = close_loop  # type: ignore[method-assign,assignment]


def _noting(
    original: Callable[..., Any],
    kind: str,
    *,
    self_is_result: bool = False,
    unless_via: frozenset[str] = frozenset(),
) -> Callable[..., Any]:
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        watch = _watch
        if watch is not None:
            site = capture(1, unless_via=unless_via)
            if site is not None:
                table: weakref.WeakKeyDictionary[Any, Site] = getattr(watch, kind)
                table[self if self_is_result else result] = site
        return result

    return functools.update_wrapper(wrapper, original)


# -- descriptions -----------------------------------------------------------------------------


def open_fds() -> frozenset[int]:
    """The open descriptors, less the one the listing itself holds open while it runs."""
    try:
        listing = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:  # no /proc (not Linux): the fd check sees nothing
        return frozenset()
    try:
        return frozenset(int(name) for name in os.listdir(listing)) - {listing}
    finally:
        os.close(listing)


def _fd_target(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def _other_fd(fd: int, target: str, allowed: set[int]) -> Iterable[Escape]:
    """A file or pipe descriptor held by a Python file object: name it by its target, and by
    its holder's allocation line when tracemalloc traces. A raw descriptor (``os.open``,
    ``os.pipe``) is not reported: nothing says who owns it (a process-wide cache opened on
    first use looks the same as a leak); the growth mode counts every descriptor."""
    holder = _holder_of(fd)
    if holder is None or id(holder) in allowed:
        return
    traceback = tracemalloc.get_object_traceback(holder)
    if traceback is not None:
        frames = tuple((frame.filename, frame.lineno, "?") for frame in traceback)
        own = [frame for frame in frames if not is_library(frame[0])] or list(frames)
        created_at = f"{own[-1][0]}:{own[-1][1]}"
    else:
        frames = ()
        created_at = "unknown (run with python -X tracemalloc to see the line)"
    yield Escape(
        "fds",
        f"file descriptor {fd} ({target}) held by {type(holder).__name__}",
        created_at,
        frames,
        "still open after the test (never closed)",
    )


def _holder_of(fd: int) -> object | None:
    for obj in gc.get_objects():
        if isinstance(obj, io.IOBase):
            try:
                if not obj.closed and obj.fileno() == fd:
                    return obj
            except (OSError, ValueError):
                continue
    return None


def _coroutine_name(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    return f"{getattr(coro, '__qualname__', type(coro).__name__)}()"


def _coroutine_place(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    code = getattr(coro, "cr_code", None)
    frame = getattr(coro, "cr_frame", None)
    if code is None:
        return "its coroutine is not a Python coroutine"
    where = f"defined at {code.co_filename}:{code.co_firstlineno}"
    if frame is not None:
        where += f", suspended at line {frame.f_lineno}"
    return where


def _qualname(function: object) -> str:
    name = getattr(function, "__qualname__", None) or repr(function)
    return f"{name}()"


def _socket_kind(sock: socket.socket) -> str:
    try:
        kind = f"{sock.family.name}/{sock.type.name}"
    except (OSError, ValueError):
        return "closed"
    try:
        return f"{kind} bound to {sock.getsockname()!r}"
    except OSError:
        return kind

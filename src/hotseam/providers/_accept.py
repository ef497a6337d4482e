"""The accept loop every hotseam listener uses: it survives running out of file descriptors.

A listener is reachable by whoever can connect, and a plain ``accept()`` loop dies the first
time ``accept`` fails with ``EMFILE``: a thousand idle connections end the daemon. This one
backs off on "not now" errors (one warning per episode, one line at recovery), ignores a
single connection's errors, closes at once connections past ``limit`` (so the backlog never
fills with connections nobody serves), and closes every accepted socket when its handler
ends. The control socket and the web inbox both use it.
"""

from __future__ import annotations

import contextlib
import errno
import resource
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.lowlevel

from .._core import get_logger

RESOURCE_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
"""``accept`` cannot go on now; it may later (a descriptor or some memory is freed)."""

CONNECTION_ERRORS = frozenset(
    {errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.EAGAIN, errno.EWOULDBLOCK, errno.EINTR}
)
"""The one connection failed (or there was none after all): accept the next."""

CLOSED_ERRORS = frozenset({errno.EBADF, errno.ENOTSOCK, errno.EINVAL})
"""The listening socket was closed (or shut down) under the loop: it ends."""

FIRST_BACKOFF = 0.01
MAX_BACKOFF = 1.0
_BATCH = 64  # connections accepted per wake-up before letting other tasks run
_CLOSE_CHECK = 1.0  # a socket closed without anyio.notify_closing is noticed within this


class AcceptLogger(Protocol):
    """What the loop logs with: hotseam's event logger or a structlog bound logger."""

    def info(self, event: str, **fields: Any) -> Any: ...

    def warning(self, event: str, **fields: Any) -> Any: ...

    def error(self, event: str, **fields: Any) -> Any: ...


_log = get_logger("hotseam.providers.accept")


def descriptor_limit() -> int | None:
    """The soft ``RLIMIT_NOFILE``, ``None`` if unlimited (``resource`` is imported with
    this module: at ``EMFILE`` an import would fail itself)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


async def accept_connections(
    sock: socket.socket,
    handle: Callable[[socket.socket], Awaitable[None]],
    *,
    limit: int,
    what: str,
    logger: AcceptLogger | None = None,
) -> None:
    """Accept connections on ``sock`` (bound, listening, non-blocking) and run
    ``handle(connection)`` for each in its own task.

    The connection is closed here once ``handle`` returns or raises (a handler that wraps
    it closes its wrapper); its exception is logged and never ends the loop. ``what`` names
    the listener in log lines. Returns once ``sock`` is closed (after
    ``anyio.notify_closing(sock)``, or noticed within a second) and every handler has
    finished. Never raises ``OSError``.
    """
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit!r}")
    loop = _AcceptLoop(sock, handle, limit, what, logger if logger is not None else _log)
    async with anyio.create_task_group() as handlers:
        await loop.run(handlers)


class _AcceptLoop:
    __slots__ = (
        "_active",
        "_handle",
        "_limit",
        "_log",
        "_refused",
        "_saturated_at",
        "_sock",
        "_starved",
        "_what",
    )

    def __init__(
        self,
        sock: socket.socket,
        handle: Callable[[socket.socket], Awaitable[None]],
        limit: int,
        what: str,
        log: AcceptLogger,
    ) -> None:
        self._sock = sock
        self._handle = handle
        self._limit = limit
        self._what = what
        self._log = log
        self._active = 0
        self._refused = 0  # connections closed at once in the current saturation episode
        self._saturated_at: float | None = None
        self._starved: _Starvation | None = None

    async def run(self, handlers: anyio.abc.TaskGroup) -> None:
        backoff = FIRST_BACKOFF
        while True:
            if self._sock.fileno() < 0:
                return
            if not await self._readable():
                return
            for _ in range(_BATCH):
                try:
                    connection, _address = self._sock.accept()
                except BlockingIOError:
                    break
                except OSError as error:
                    if error.errno in CLOSED_ERRORS or self._sock.fileno() < 0:
                        return
                    if error.errno in CONNECTION_ERRORS:
                        continue
                    self._starving(error)
                    await anyio.sleep(backoff)
                    backoff = min(backoff * 2, MAX_BACKOFF)
                    break
                backoff = FIRST_BACKOFF
                if self._starved is not None:
                    self._recovered()
                self._dispatch(handlers, connection)
            await anyio.lowlevel.checkpoint()

    async def _readable(self) -> bool:
        while True:
            try:
                with anyio.move_on_after(_CLOSE_CHECK):
                    await anyio.wait_readable(self._sock)
                    return True
            except (anyio.ClosedResourceError, OSError, ValueError):
                return False
            if self._sock.fileno() < 0:
                return False

    def _dispatch(self, handlers: anyio.abc.TaskGroup, connection: socket.socket) -> None:
        if self._active >= self._limit:
            _close(connection)
            self._refused += 1
            if self._saturated_at is None:
                self._saturated_at = time.monotonic()
                self._log.warning(
                    "accept.saturated",
                    summary=f"{self._what}: {self._limit} connections are open, the most it "
                    "serves at once; new ones are closed at once until some end",
                    listener=self._what,
                    limit=self._limit,
                )
            return
        self._active += 1
        try:
            connection.setblocking(False)
        except OSError:
            self._finished(connection)
            return
        handlers.start_soon(self._serve, connection, name=f"{self._what} connection")

    async def _serve(self, connection: socket.socket) -> None:
        try:
            await self._handle(connection)
        except Exception:
            self._log.error(
                "accept.handler_failed",
                summary=f"{self._what}: a connection's handler failed",
                listener=self._what,
                exc_info=True,
            )
        finally:
            self._finished(connection)

    def _finished(self, connection: socket.socket) -> None:
        _close(connection)
        self._active -= 1
        if self._saturated_at is not None and self._active <= self._limit * 3 // 4:
            seconds = time.monotonic() - self._saturated_at
            self._log.info(
                "accept.unsaturated",
                summary=f"{self._what}: below its connection limit again after "
                f"{seconds:.1f} s; {self._refused} connection(s) were closed unserved",
                listener=self._what,
                refused=self._refused,
                seconds=round(seconds, 3),
            )
            self._saturated_at = None
            self._refused = 0

    def _starving(self, error: OSError) -> None:
        if self._starved is not None:
            self._starved.attempts += 1
            return
        self._starved = _Starvation()
        soft = descriptor_limit()
        limit = "unlimited" if soft is None else str(soft)
        reason = (
            f"out of file descriptors (soft limit RLIMIT_NOFILE {limit})"
            if error.errno in (errno.EMFILE, errno.ENFILE)
            else f"accept failed: {error.strerror or error}"
        )
        self._log.warning(
            "accept.starved",
            summary=f"{self._what}: {reason}; new connections wait in the backlog while "
            "accepting is retried (raise the limit with 'ulimit -n', or close connections)",
            listener=self._what,
            errno=errno.errorcode.get(error.errno or 0, str(error.errno)),
            descriptor_limit=soft,
        )

    def _recovered(self) -> None:
        starved, self._starved = self._starved, None
        assert starved is not None
        seconds = time.monotonic() - starved.since
        self._log.info(
            "accept.recovered",
            summary=f"{self._what}: accepting again after {seconds:.1f} s "
            f"({starved.attempts} failed attempt(s))",
            listener=self._what,
            attempts=starved.attempts,
            seconds=round(seconds, 3),
        )


class _Starvation:
    __slots__ = ("attempts", "since")

    def __init__(self) -> None:
        self.attempts = 1
        self.since = time.monotonic()


def _close(connection: socket.socket) -> None:
    """Close an accepted socket, waking whatever waits on it first (trio needs to know)."""
    if connection.fileno() < 0:
        return
    with contextlib.suppress(Exception):
        anyio.notify_closing(connection)
    with contextlib.suppress(OSError):
        connection.close()

"""The web inbox's server: the listening socket, its connections, and the app serving now.

:class:`WebServer` is what a hot reload carries (``scope.carry``): the listening socket,
the accept loop and every open connection, from the first generation that serves the
inbox to the last. Each generation *mounts* its app on it, so a reload swaps the app under
open connections: a request runs to its end on the app that started it (the old
generation waits for it, bounded), one arriving between two apps waits for the next (up
to :data:`SWAP_WAIT`), and keep-alive connections, open pages and the backlog are never
cut. The accept loop is shielded from what cancels its task host's other tasks: only
:meth:`WebServer.aclose` stops it, gracefully.

Each accepted socket goes to Hypercorn's per-connection ``TCPServer``, as in its own
``worker_serve``, without what that adds around it (its accept loop, lifespan events, a
shutdown that cannot be cancelled cleanly): this server does those its own way.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import json
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import anyio.abc
from hypercorn.config import Config
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..._core import get_logger
from .._accept import accept_connections, descriptor_limit
from ._security import SECURITY_HEADERS, is_loopback

_BACKLOG = 128
IDLE_TIMEOUT = 5.0
"""Seconds a connection may stay without a request in flight (before its first one too)."""
SWAP_WAIT = 10.0
"""Seconds a request waits for an app while none is mounted (a reload between two)."""
DRAIN_GRACE = 2.0
"""Seconds a request of an unmounted generation may wait on its peer before it is cut."""
DRAIN_LIMIT = 4.0
"""Seconds any request of an unmounted generation may take (below a disposer's 5 s)."""
STOP_GRACE = 2.0
"""Seconds the server's connections may take to finish at its close."""
ABORT_WAIT = 1.0
"""Seconds to wait for requests to end once their connections were closed by force."""
MAX_CONNECTIONS = 256
"""The most connections served at once (less when the descriptor limit is low)."""
_REFUSALS = frozenset({401, 403, 421})  # refused before the token was checked, or by it

_log = get_logger("hotseam.providers.web")


Dispatch = Callable[..., Awaitable[None]]
"""Hypercorn's app wrapper: ``(scope, receive, send, sync_spawn, call_soon)``."""


def hypercorn_config(idle_timeout: float) -> Config:
    """Hypercorn's settings for the inbox: no access log (URLs carry the token), small
    request heads, and idle connections closed after ``idle_timeout`` seconds (before the
    first request too, however slowly a head trickles)."""
    config = Config()
    config.accesslog = None
    config.errorlog = _server_logger()
    config.include_server_header = False
    config.keep_alive_timeout = idle_timeout
    config.h11_max_incomplete_size = 16 * 1024
    return config


Peer = tuple[Any, ...]
"""A connection's peer address as the ASGI scope's ``client`` gives it: ``(host, port)``."""


class Connections:
    """Serves accepted sockets with Hypercorn on the backend running now (asyncio or trio).

    :meth:`terminate` is Hypercorn's graceful stop; :meth:`abort` the forced one, for a
    peer that stopped reading (Hypercorn's trio server writes shielded from cancellation).
    """

    __slots__ = ("_asyncio", "_config", "_context", "_dispatch", "_live", "_state")

    def __init__(self, dispatch: Dispatch, config: Config) -> None:
        self._dispatch: Any = dispatch  # Hypercorn's AppWrapper protocol, untyped here
        self._config = config
        self._state: dict[str, Any] = {}  # the lifespan state: no lifespan events are sent
        self._live: dict[Peer, Callable[[], object]] = {}  # what closes each connection now
        self._asyncio = _on_asyncio()
        if self._asyncio:
            from hypercorn.asyncio.worker_context import WorkerContext as AsyncioContext

            self._context: Any = AsyncioContext(None)
        else:
            from hypercorn.trio.worker_context import WorkerContext as TrioContext

            self._context = TrioContext(None)

    @property
    def terminated(self) -> bool:
        return bool(self._context.terminated.is_set())

    async def terminate(self) -> None:
        """Close idle connections now; close the others once their response is sent."""
        await self._context.terminated.set()

    def abort(self, peer: Peer | None) -> None:
        """Close the connection of ``peer`` (the ``client`` of a request's scope) now."""
        close = self._live.get(tuple(peer)) if peer is not None else None
        if close is not None:
            close()

    def abort_all(self) -> None:
        for close in list(self._live.values()):
            close()

    async def serve(self, connection: socket.socket) -> None:
        """Serve HTTP on ``connection`` until either side closes it."""
        try:
            peer: Peer = tuple(connection.getpeername()[:2])
        except OSError:
            return  # gone already
        try:
            if self._asyncio:
                await self._serve_asyncio(connection, peer)
            else:
                await self._serve_trio(connection, peer)
        finally:
            self._live.pop(peer, None)

    async def _serve_asyncio(self, connection: socket.socket, peer: Peer) -> None:
        reader, writer = await asyncio.open_connection(sock=connection)
        self._live[peer] = writer.transport.abort
        try:
            await _asyncio_server()(
                self._dispatch,
                asyncio.get_running_loop(),
                self._config,
                self._context,
                self._state,
                reader,
                writer,
            )
        finally:
            # unregistered now: a closed descriptor left in the selector would break the
            # registration of the next socket that reuses its number
            writer.transport.abort()

    async def _serve_trio(self, connection: socket.socket, peer: Peer) -> None:
        import trio

        stream: Any = trio.SocketStream(trio.socket.from_stdlib_socket(connection))  # not TLS
        self._live[peer] = stream.socket.close  # wakes a write waiting on it, then closes
        try:
            await _trio_server()(self._dispatch, self._config, self._context, self._state, stream)
        finally:
            with anyio.CancelScope(shield=True):
                await stream.aclose()


@functools.cache
def _asyncio_server() -> type[Any]:
    """Hypercorn's asyncio ``TCPServer``, ending as soon as the peer has gone.

    Hypercorn's connection reads until the peer closes, then waits for its idle timer
    (which nothing stops when no request is in flight): a client gone would hold its place
    under the connection limit for the whole idle timeout.
    """
    from hypercorn.asyncio.tcp_server import TCPServer

    class Server(TCPServer):
        async def _read_data(self) -> None:
            await super()._read_data()
            await self.idle_task.stop()

    return Server


@functools.cache
def _trio_server() -> type[Any]:
    """Hypercorn's trio ``TCPServer``, ending as soon as the peer has gone."""
    from hypercorn.trio.tcp_server import TCPServer

    class Server(TCPServer):
        async def _read_data(self) -> None:
            await super()._read_data()
            await self.idle_task.stop()

    return Server


def _server_logger() -> logging.Logger:
    """Hypercorn's errors (a failing app), without its "Running on http://..." chatter, on
    a private logger (no logging configuration changes)."""
    logger = logging.Logger("hotseam.providers.web.server", logging.WARNING)
    logger.parent = logging.getLogger("hotseam.providers.web")
    return logger


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def connection_limit() -> int:
    """At most a quarter of the process's descriptors: a flood never starves the daemon."""
    soft = descriptor_limit()
    if soft is None:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // 4))


class Listener:
    """A bound, listening TCP socket; ``choose`` names the options that pick another port
    (in the error of a port in use)."""

    __slots__ = ("host", "port", "socket")

    def __init__(self, host: str, port: int, *, choose: str = "--web-port or port=") -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            sock = socket.create_server(
                (host.strip("[]"), port), family=family, backlog=_BACKLOG, reuse_port=False
            )
        except OSError as error:
            why = str(error.strerror or error).split(" (while attempting")[0]
            if error.errno == errno.EADDRINUSE:
                why = (
                    "the port is in use (by another program, or another hotseam?); choose "
                    f"another with {choose}"
                )
            raise OSError(f"cannot listen on {_url_host(host)}:{port}: {why}") from None
        sock.setblocking(False)
        # inherited by accepted connections: else a response written as headers then body
        # waits for the client's delayed ACK (about 40 ms) on asyncio
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socket = sock
        self.host = host
        self.port = int(sock.getsockname()[1])

    def __repr__(self) -> str:
        state = "closed" if self.closed else "listening"
        return f"<Listener {self.address} {state}>"

    @property
    def address(self) -> str:
        """``host:port``, as in a URL."""
        return f"{_url_host(self.host)}:{self.port}"

    @property
    def loopback(self) -> bool:
        """True when only this machine can connect."""
        return is_loopback(self.host)

    @property
    def closed(self) -> bool:
        return self.socket.fileno() < 0

    def url(self, token: str) -> str:
        """The inbox page's address on this listener, with ``token``."""
        wildcard = self.host in ("0.0.0.0", "::")
        address = f"127.0.0.1:{self.port}" if wildcard else self.address
        return f"http://{address}/?token={token}"

    def matches(self, host: str, port: int) -> bool:
        """True when this listener is what ``host``/``port`` asks for (port 0: any)."""
        return not self.closed and self.host == host and port in (0, self.port)

    def close(self) -> None:
        """Stop listening (idempotent); a task waiting to accept wakes up and ends."""
        if self.closed:
            return
        with contextlib.suppress(Exception):  # no event loop here: nothing can be waiting
            anyio.notify_closing(self.socket)
        self.socket.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class _Request:
    """What a drain knows of a request: what closes its connection, how many
    ``receive``/``send`` calls wait on its peer and since when, whether it was cut."""

    __slots__ = ("abort", "cut", "since", "waiting")

    def __init__(self, abort: Callable[[], object]) -> None:
        self.abort = abort
        self.since = anyio.current_time()
        self.waiting = 0  # an event stream has two at once
        self.cut = False

    @contextlib.contextmanager
    def on_peer(self) -> Iterator[None]:
        self.waiting += 1
        self.since = anyio.current_time()
        try:
            yield
        finally:
            self.waiting -= 1
            self.since = anyio.current_time()

    def stuck(self, now: float, grace: float) -> bool:
        """True when it has waited on its peer for ``grace`` seconds without a step."""
        return self.waiting > 0 and now - self.since >= grace


class Mount:
    """One generation's app on the server, and the requests it is serving."""

    __slots__ = ("_changed", "_requests", "app", "mounted")

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.mounted = True
        self._requests: dict[anyio.CancelScope, _Request] = {}
        self._changed: anyio.Event | None = None  # set when a request ends, during a drain

    @property
    def requests(self) -> int:
        return len(self._requests)

    async def serve(
        self, scope: Scope, receive: Receive, send: Send, abort: Callable[[], object]
    ) -> None:
        """Run the app for one request; ``abort`` closes the request's connection."""
        state = _Request(abort)

        async def receiving() -> Message:
            with state.on_peer():
                return await receive()

        async def sending(message: Message) -> None:
            with state.on_peer():
                await send(message)

        with anyio.CancelScope() as request:
            self._requests[request] = state
            try:
                await self.app(scope, receiving, sending)
            finally:
                del self._requests[request]
                if self._changed is not None:
                    self._changed.set()

    async def drain(self, grace: float, limit: float | None = None) -> int:
        """Wait for the requests in flight (after unmounting) to end; return how many
        were cut (cancelled, their connection closed).

        A request is cut once it has waited ``grace`` seconds on its peer (one that does not
        read, a body that does not come), any once ``limit`` (:data:`DRAIN_LIMIT`) passed; a
        merely slow one (a busy machine) runs on, within ``limit``.
        """
        if not self._requests:
            return 0
        limit = max(DRAIN_LIMIT if limit is None else limit, grace)
        cut = 0
        with anyio.CancelScope(shield=True):
            end = anyio.current_time() + limit
            while True:
                now = anyio.current_time()
                live = [state for state in self._requests.values() if not state.cut]
                for request, state in list(self._requests.items()):
                    if not state.cut and (now >= end or state.stuck(now, grace)):
                        state.cut = True
                        cut += 1
                        request.cancel()
                        state.abort()  # a write to a peer that does not read ends only so
                live = [state for state in live if not state.cut]
                if not live:
                    break
                waiting = [state.since + grace for state in live if state.waiting]
                await self._wait_change(min([end, *waiting]) - now)
            abort_end = anyio.current_time() + ABORT_WAIT
            while self._requests and anyio.current_time() < abort_end:
                await self._wait_change(abort_end - anyio.current_time())
        return cut

    async def _wait_change(self, timeout: float) -> None:
        self._changed = changed = anyio.Event()
        with anyio.move_on_after(max(timeout, 0)):
            await changed.wait()


class WebServer:
    """The carried server: a listener, its accept loop and connections, the mounted app.
    :meth:`start` it on a scope's task host, :meth:`mount` each generation's app, and
    :meth:`aclose` it when no generation carries it; ``name`` is its name in logs."""

    __slots__ = (
        "_connections",
        "_idle_timeout",
        "_limit",
        "_mount",
        "_mounted",
        "_name",
        "_running",
        "_stop",
        "_stopped",
        "listener",
        "mounts",
    )

    def __init__(
        self,
        listener: Listener,
        *,
        idle_timeout: float = IDLE_TIMEOUT,
        limit: int | None = None,
        name: str = "web inbox",
    ) -> None:
        self.listener = listener
        self._name = name
        self._idle_timeout = idle_timeout
        self._limit = connection_limit() if limit is None else limit
        self._mount: Mount | None = None
        self._mounted = anyio.Event()  # set (and replaced) whenever the mounted app changes
        self._stop = anyio.CancelScope()
        self._stopped = anyio.Event()
        self._running = False
        self._connections: Connections | None = None
        self.mounts = 0  # 1 after the first generation's app (its URL is news)

    def __repr__(self) -> str:
        return f"<WebServer {self.listener.address} mounted={self._mount is not None}>"

    @property
    def closing(self) -> bool:
        return self.listener.closed

    def matches(self, host: str, port: int) -> bool:
        """True when this server listens where ``host``/``port`` asks (port 0: anywhere)."""
        return self.listener.matches(host, port)

    def start(self, host: anyio.abc.TaskGroup) -> None:
        """Start accepting in a task of ``host``, which must outlive this server."""
        if self._running or self.closing:
            return
        self._running = True
        host.start_soon(self._run, name=f"{self._name} server {self.listener.address}")

    async def _run(self) -> None:
        # shielded: a stop signal cancels the CLI's task group, while open pages must still
        # hear the inbox's closing note from aclose()
        try:
            with anyio.CancelScope(shield=True), self._stop:
                config = hypercorn_config(self._idle_timeout)
                self._connections = Connections(self._dispatch, config)
                await accept_connections(
                    self.listener.socket,
                    self._connections.serve,
                    limit=self._limit,
                    what=f"{self._name} {self.listener.address}",
                    logger=_log,
                )
        finally:
            self._stopped.set()

    # -- generations ----------------------------------------------------------------------------

    def mount(self, app: ASGIApp) -> Mount:
        """Serve new requests with ``app`` (the previous app keeps those it started)."""
        mount = Mount(app)
        self.mounts += 1
        if self._mount is not None:
            self._mount.mounted = False
        self._mount = mount
        self._changed()
        return mount

    async def unmount(
        self, mount: Mount, grace: float = DRAIN_GRACE, limit: float | None = None
    ) -> int:
        """Stop giving ``mount`` new requests and :meth:`~Mount.drain` it (new requests wait
        for the next mount); return how many were cut."""
        mount.mounted = False
        if self._mount is mount:
            self._mount = None
            self._changed()
        return await mount.drain(grace, limit)

    def _changed(self) -> None:
        self._mounted.set()
        self._mounted = anyio.Event()

    async def _current(self) -> Mount | None:
        """The mounted app, waiting for one (bounded) during a swap; None when closing."""
        with anyio.move_on_after(SWAP_WAIT):
            while self._mount is None and not self.closing:
                await self._mounted.wait()
        return None if self.closing else self._mount

    async def _dispatch(
        self, scope: Scope, receive: Receive, send: Send, sync_spawn: Any, call_soon: Any
    ) -> None:
        """Hypercorn's app: each request goes to the app mounted when it arrives."""
        mount = self._mount
        if mount is None or self.closing:
            mount = await self._current()
        connections = self._connections
        assert connections is not None

        def abort() -> None:
            connections.abort(scope.get("client"))

        if scope["type"] != "http":
            if mount is not None:
                await mount.serve(scope, receive, send, abort)
            return
        if mount is None:
            await _unavailable(send)
            return
        await mount.serve(scope, receive, _guarded_send(send), abort)

    # -- stopping -------------------------------------------------------------------------------

    async def aclose(self, grace: float = STOP_GRACE) -> None:
        """Stop gracefully: stop accepting, close idle connections, let requests in flight
        finish for up to ``grace`` seconds, then close everything. Idempotent."""
        with anyio.CancelScope(shield=True):
            self.listener.close()
            self._changed()  # requests waiting for an app are answered 503
            if not self._running:
                return
            connections = self._connections
            if connections is not None and not connections.terminated:
                await connections.terminate()
            with anyio.move_on_after(grace):
                await self._stopped.wait()
            if self._stopped.is_set():
                return
            self._stop.cancel()
            if connections is not None:
                connections.abort_all()  # a write to a peer that does not read ends only so
            with anyio.move_on_after(ABORT_WAIT):
                await self._stopped.wait()
            if not self._stopped.is_set():
                _log.warning(
                    "web.stop_overran",
                    summary=f"the {self._name} server on {self.listener.address} has not "
                    f"stopped {grace + ABORT_WAIT:g} s after it was asked to",
                    address=self.listener.address,
                )


def _guarded_send(send: Send) -> Send:
    """Hypercorn's ``send``: a refused request ends its connection (no kept-alive one to
    try again on), and the message ending a response is sent shielded. Sending it starts
    Hypercorn's idle timer inside this call (on trio in the caller's cancel scope): an app
    cancelling its scope right after (the event stream does) would cancel the timer too.
    """

    async def guarded(message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start" and message["status"] in _REFUSALS:
            headers = [*message.get("headers", []), (b"connection", b"close")]
            message = {**message, "headers": headers}
        if kind == "http.response.body" and not message.get("more_body", False):
            with anyio.CancelScope(shield=True):
                await send(message)
        else:
            await send(message)

    return guarded


async def _unavailable(send: Send) -> None:
    """503 for a request no app took: the inbox is stopping (or a reload overran)."""
    body = json.dumps(
        {
            "error": {
                "code": "CLOSED",
                "message": "the web inbox is not serving (it is stopping, or a reload is "
                "taking long); retry",
            }
        }
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", b"1"),
        (b"connection", b"close"),
        *((name.encode(), value.encode()) for name, value in SECURITY_HEADERS.items()),
    ]
    with contextlib.suppress(OSError):
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

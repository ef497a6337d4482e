"""One accepted connection, served by Hypercorn's per-connection server.

hotseam owns the accept loop (``providers/_accept.py``: it survives running out of file
descriptors and bounds the connections) and hands each accepted socket to Hypercorn's
``TCPServer`` for the running backend, the same object Hypercorn's own ``worker_serve``
creates per connection. What ``worker_serve`` adds around it (its accept loop, lifespan
events, a graceful shutdown that cannot itself be cancelled cleanly) is left out: the
server in ``_server.py`` does those its own way.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from hypercorn.config import Config

__all__ = ["Connections", "hypercorn_config"]

Dispatch = Callable[..., Awaitable[None]]
"""Hypercorn's app wrapper: ``(scope, receive, send, sync_spawn, call_soon)``."""


def hypercorn_config(idle_timeout: float) -> Config:
    """Hypercorn's settings for the inbox: no access log (URLs carry the token), small
    request heads, and idle connections closed after ``idle_timeout`` seconds."""
    config = Config()
    config.accesslog = None
    config.errorlog = _server_logger()
    config.include_server_header = False
    # Applies before the first request as well as between requests: a connection that
    # never completes a request head is closed after it, however slowly it trickles.
    config.keep_alive_timeout = idle_timeout
    config.h11_max_incomplete_size = 16 * 1024
    return config


Peer = tuple[Any, ...]
"""A connection's peer address as the ASGI scope's ``client`` gives it: ``(host, port)``."""


class Connections:
    """Serves accepted sockets with Hypercorn on the backend running now (asyncio or trio).

    ``terminate()`` is Hypercorn's graceful stop: idle keep-alive connections close at once
    and busy ones close after their response. :meth:`abort` is the forced one, for a peer
    that stopped reading: Hypercorn's trio server writes shielded from cancellation, so only
    closing the socket ends a write that waits for such a peer.
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
        """True once :meth:`terminate` ran."""
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
        """Close every connection now."""
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
            # Unregister the socket from the loop now (synchronously): the accept loop
            # closes it next, and a closed descriptor left in the selector would break the
            # registration of the next socket that reuses its number.
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
    """Hypercorn's asyncio ``TCPServer``, ending as soon as the peer has gone."""
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


# Hypercorn's connection reads until the peer closes, then waits for its idle timer (which
# nothing stops when no request is in flight) before it ends: a connection whose client
# went away would hold its place under the connection limit for the whole idle timeout.
# Both servers above stop that timer once reading ended; requests in flight still finish.


def _server_logger() -> logging.Logger:
    """Hypercorn's errors (a failing app), without its "Running on http://..." chatter: the
    CLI prints the one line with the inbox's URL. A private logger, so no logging
    configuration changes."""
    logger = logging.Logger("hotseam.providers.web.server", logging.WARNING)
    logger.parent = logging.getLogger("hotseam.providers.web")
    return logger


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True

"""The listening socket (what a reload hands over) and Hypercorn serving it.

The socket is bound once and outlives generations when carried; each generation runs its
own Hypercorn server on a duplicate of it. Between the old server's shutdown and the new
one's start, connections wait in the socket's backlog instead of being refused, so open
pages reconnect by themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from typing import Any

import anyio
from hypercorn.config import Config, Sockets
from hypercorn.utils import wrap_app
from starlette.types import ASGIApp

from ._security import is_loopback

__all__ = ["Listener", "run_server"]

_BACKLOG = 128
_GRACE = 0.25


class Listener:
    """A bound, listening TCP socket; closing it stops every server that uses it."""

    __slots__ = ("host", "port", "socket")

    def __init__(self, host: str, port: int) -> None:
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
                    "another with --web-port or port="
                )
            raise OSError(f"cannot listen on {_url_host(host)}:{port}: {why}") from None
        sock.setblocking(False)
        # Accepted connections inherit it (Linux, BSDs): without it, a response written as
        # headers then body waits for the client's delayed ACK (about 40 ms) on asyncio.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.socket = sock
        self.host = host
        self.port = int(sock.getsockname()[1])

    def __repr__(self) -> str:
        state = "closed" if self.closed else "listening"
        return f"<Listener {self.address} {state}>"

    @property
    def address(self) -> str:
        """``host:port`` as it goes in a URL."""
        return f"{_url_host(self.host)}:{self.port}"

    @property
    def loopback(self) -> bool:
        """True when only this machine can connect."""
        return is_loopback(self.host)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self.socket.fileno() < 0

    def matches(self, host: str, port: int) -> bool:
        """True when this listener is what ``host``/``port`` asks for (port 0: any)."""
        return not self.closed and self.host == host and port in (0, self.port)

    def close(self) -> None:
        """Stop listening (idempotent)."""
        self.socket.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


async def run_server(app: ASGIApp, listener: Listener, shutdown: anyio.Event) -> None:
    """Serve ``app`` with Hypercorn on ``listener`` until ``shutdown`` is set.

    Runs on asyncio and on trio (Hypercorn has a worker for each). The listener itself is
    left open: the server works on a duplicate of its socket.
    """
    config = Config()
    config.accesslog = None  # an access log would hold each URL's ?token=
    config.errorlog = _server_logger()
    config.graceful_timeout = _GRACE
    config.include_server_header = False
    config.keep_alive_timeout = 30
    config.h11_max_incomplete_size = 16 * 1024
    duplicate = listener.socket.dup()
    duplicate.setblocking(False)
    sockets = Sockets(secure_sockets=[], insecure_sockets=[duplicate], quic_sockets=[])
    wrapped: Any = wrap_app(app, config.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]
    try:
        if _on_asyncio():
            from hypercorn.asyncio.run import worker_serve as asyncio_serve

            await asyncio_serve(wrapped, config, sockets=sockets, shutdown_trigger=shutdown.wait)
        else:
            from hypercorn.trio.run import worker_serve as trio_serve

            await trio_serve(wrapped, config, sockets=sockets, shutdown_trigger=shutdown.wait)
    finally:
        with contextlib.suppress(OSError):
            duplicate.close()


def _server_logger() -> logging.Logger:
    """Hypercorn's errors, without its "Running on http://..." chatter: the CLI prints the
    one line with the inbox's URL. A private logger, so no logging configuration changes."""
    logger = logging.Logger("hotseam.providers.web.server", logging.WARNING)
    logger.parent = logging.getLogger("hotseam.providers.web")
    return logger


def _on_asyncio() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True

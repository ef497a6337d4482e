"""Serving the inbox of many daemons: a :class:`JournalInbox` on the web inbox's server.

The same pieces as a daemon's own inbox (``WebProvider``): the :class:`WebServer` (hotseam's
accept loop, bounded connections, a graceful stop), the app and its guard (token, Host,
Origin), the kept token. Only the inbox behind the app differs.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass

import anyio

from ..._core import get_logger
from ...interaction import Journal
from ._app import build_app
from ._journal_inbox import JournalInbox
from ._provider import DEFAULT_HOST
from ._security import HostPolicy, is_loopback, load_token
from ._server import DRAIN_GRACE, Listener, WebServer

__all__ = ["CLOSING_NOTE", "DEFAULT_FLEET_PORT", "FleetInbox", "serve_journal_inbox"]

DEFAULT_FLEET_PORT = 8766
"""The fleet inbox's port: one above a daemon's own inbox (8765), so both run side by side."""

CLOSING_NOTE = "the fleet inbox is shutting down"
"""What open pages are told when the fleet inbox stops."""

_log = get_logger("hotseam.providers.web")


@dataclass(frozen=True, slots=True)
class FleetInbox:
    """A served :class:`JournalInbox`: where it listens and its page's address."""

    inbox: JournalInbox
    listener: Listener
    token: str

    @property
    def port(self) -> int:
        """The TCP port listened on."""
        return self.listener.port

    @property
    def url(self) -> str:
        """The page's address, with the token."""
        wildcard = self.listener.host in ("0.0.0.0", "::")
        address = f"127.0.0.1:{self.listener.port}" if wildcard else self.listener.address
        return f"http://{address}/?token={self.token}"


@contextlib.asynccontextmanager
async def serve_journal_inbox(
    journal: Journal,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_FLEET_PORT,
    token: str | None = None,
    token_file: str | os.PathLike[str] | None = None,
    allow_remote: bool = False,
    allowed_hosts: tuple[str, ...] = (),
    refresh: float | None = None,
    by: str | None = None,
) -> AsyncIterator[FleetInbox]:
    """Serve every pending ask of ``journal`` on the web inbox's page, for the block.

    The same server, guard and token rules as :meth:`WebProvider.serve` (loopback unless
    ``allow_remote``; the kept token unless one is given). At the end of the block (its
    cancellation included) every open page is told :data:`CLOSING_NOTE`, requests in
    flight get :data:`~._server.DRAIN_GRACE` seconds, and the server stops; the questions
    stay in the journal.

    Raises:
        ValueError: a bad host or port, a token that cannot be read, or a non-loopback
            host without ``allow_remote``.
        OSError: the port cannot be listened on.
        JournalError: the journal cannot be listed.
    """
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an integer from 0 to 65535, got {port!r}")
    host = host.strip().strip("[]") or DEFAULT_HOST
    secret = load_token(token, token_file)
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"refusing to listen on {host!r}: it is not a loopback address, so other machines "
            "could reach the inbox; pass allow_remote=True (--web-allow-remote) to mean it"
        )
    inbox = JournalInbox(journal, refresh=refresh)
    if by is not None:
        inbox.by = by
    server = WebServer(Listener(host, port))
    listener = server.listener
    if not listener.loopback:
        _log.warning(
            "web.remote",
            summary=f"the fleet inbox listens on {listener.address}, reachable from other "
            "machines: anyone with the token can answer (and read) every daemon's questions",
            address=listener.address,
        )
    hosts = HostPolicy(host, listener.port, tuple(allowed_hosts))
    serving = True
    app = build_app(lambda: inbox if serving else None, secret, hosts)
    served = FleetInbox(inbox, listener, secret)
    async with anyio.create_task_group() as tasks:
        server.start(tasks)
        mount = None
        try:
            await tasks.start(inbox.follow)
            mount = server.mount(app)
            _log.info(
                "web.serving",
                summary=f"web inbox: {served.url} (every daemon of the journal {journal.url})",
                address=listener.address,
                url=served.url,
                journal=journal.url,
                first=True,
            )
            yield served
        finally:
            with anyio.CancelScope(shield=True):
                inbox.close(CLOSING_NOTE)
                if mount is not None:
                    await server.unmount(mount, DRAIN_GRACE)
                serving = False
                await server.aclose()
            tasks.cancel_scope.cancel()
        _log.info("web.stopped", address=listener.address, reason="shutdown")

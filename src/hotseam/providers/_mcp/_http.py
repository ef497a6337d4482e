"""MCP over Streamable HTTP, for clients that connect instead of spawning the server.

The SDK's ``StreamableHTTPSessionManager`` serves the endpoint, on the web inbox's
server (:class:`~hotseam.providers._web.WebServer`: its accept loop, bound and Hypercorn
per connection), each session's streams tapped as stdio's are (:mod:`._tap`).

Sessions are hotseam's to bound (:class:`_SessionManager`): a host that reconnects or
crashes without ``DELETE`` leaves its session behind, so at ``max_sessions`` the least
recently used *idle* session (nothing in flight, no question waiting) is closed (its id
then answers 404, as the spec says of an unknown session); only a house full of busy
sessions refuses a new one (503). One idle for ``session_idle_timeout`` is closed too.

Who may talk follows the inbox's rules: loopback unless asked otherwise, a ``Host`` naming
this server (DNS rebinding), an ``Origin``, when sent, its own, and a token on every
request (``Authorization: Bearer TOKEN``, as hosts configure ``headers``, or
``?token=TOKEN``): the inbox's (``$HOTSEAM_WEB_TOKEN``, its file, or the state folder's),
so a host's configuration stays valid from one start to the next. A refusal is 401, 403
or 421 with a JSON-RPC error body, and the connection is closed.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qs
from uuid import uuid4

import anyio
import anyio.abc
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from starlette.types import ASGIApp, Receive, Scope, Send

from ..._core import get_logger
from .._kit import LastUse
from .._web import HostPolicy, Listener, WebServer, is_loopback, token_matches
from ._server import McpServer
from ._tap import ResponseTap

ENDPOINT = "/mcp"
DEFAULT_MAX_SESSIONS = 64
"""Sessions open at once; past it the least recently used idle one is closed."""
DEFAULT_SESSION_IDLE_TIMEOUT = 3600.0
"""Seconds a session may stay idle (nothing in flight, no question waiting)."""
_log = get_logger("hotseam.providers.mcp")


@dataclass(frozen=True, slots=True)
class HttpEndpoint:
    """Where the server listens: its URL (without the token) and the token."""

    listener: Listener
    token: str

    @property
    def url(self) -> str:
        """``http://HOST:PORT/mcp``."""
        return f"http://{self.listener.address}{ENDPOINT}"

    @property
    def url_with_token(self) -> str:
        """The URL a client may use as it is (the token in the query)."""
        return f"{self.url}?token={self.token}"


class _TappedTransport(StreamableHTTPServerTransport):
    """A session's transport, its streams tapped, counting its requests in flight."""

    def __init__(
        self, server: McpServer, session_id: str, book: LastUse[_TappedTransport], **options: Any
    ) -> None:
        super().__init__(session_id, **options)
        self.server = server
        self.session_id = session_id
        self.book = book
        self.in_flight = 0
        self.last_used = book.clock()
        self.tap: ResponseTap | None = None

    @property
    def busy(self) -> bool:
        """A request in flight (an open GET stream too) or a question waiting."""
        return self.in_flight > 0 or (self.tap is not None and self.tap.pending)

    async def handle_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.in_flight += 1
        self.book.use(self.session_id, self)
        try:
            await super().handle_request(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.book.use(self.session_id, self)

    @contextlib.asynccontextmanager
    async def connect(
        self,
    ) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
        async with super().connect() as (read_stream, write_stream):
            tapped = self.server.tap(read_stream, write_stream)
            self.tap = getattr(tapped[0], "tap", None)
            yield tapped


class _SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager on :class:`_TappedTransport`, with hotseam's bound and
    idle timeout. The SDK has no hook for either, so its ``_admit_session`` is repeated
    here and ``_discard_session`` and ``_handle_stateful_request`` are wrapped;
    ``test_server_http.py`` and ``test_http_sessions.py`` fail if a release stops calling
    them.
    """

    def __init__(
        self,
        server: McpServer,
        *,
        max_sessions: int,
        session_idle_timeout: float | None,
        clock: Callable[[], float],
    ) -> None:
        # the SDK's idle timeout runs on the loop's clock, and its bound (kept for its 503
        # log line) refuses: both are hotseam's here
        super().__init__(app=server.lowlevel, session_idle_timeout=None, max_sessions=max_sessions)
        self.server = server
        self.session_bound = max_sessions
        self.book = LastUse[_TappedTransport](
            clock, session_idle_timeout, busy=lambda transport: transport.busy
        )

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        for transport in self.book.release_idle():
            _log.info(
                "mcp.session_expired",
                session=_short(transport.mcp_session_id),
                summary=f"closed an MCP session idle for more than "
                f"{self.book.idle_timeout:g} s (its id now answers 404)",
            )
            self._close(transport)
        await super()._handle_stateful_request(scope, receive, send)

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        if len(self._server_instances) >= self.session_bound:
            evicted = self.book.least_recent_idle()
            if evicted is None:
                _log.warning(
                    "mcp.sessions_busy",
                    sessions=len(self._server_instances),
                    summary=f"refused a new MCP session (503): all {self.session_bound} "
                    "sessions are busy (a request in flight or a question waiting); raise "
                    "--http-max-sessions to serve more hosts at once",
                )
                return None
            _log.info(
                "mcp.session_evicted",
                session=_short(evicted.mcp_session_id),
                idle_s=round(self.book.clock() - evicted.last_used, 3),
                summary=f"closed the least recently used idle MCP session to admit a new one "
                f"({self.session_bound} were open; its id now answers 404)",
            )
            self._close(evicted)
        session_id = uuid4().hex
        transport = _TappedTransport(
            self.server,
            session_id,
            self.book,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
        )
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        self.book.add(session_id, transport)
        return transport

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        self.book.release(session_id)
        await super()._discard_session(session_id, transport)

    def _close(self, transport: _TappedTransport) -> None:
        """Forget the session now (its id answers 404) and end it in the manager's group."""
        session_id = transport.mcp_session_id
        group = cast("anyio.abc.TaskGroup | None", self._task_group)  # the SDK types it None
        assert session_id is not None
        assert group is not None
        self._server_instances.pop(session_id, None)
        self._session_owners.pop(session_id, None)
        self.book.release(session_id)
        group.start_soon(self._discard_session, session_id, transport)


def _short(session_id: str | None) -> str:
    """Enough of a session id to tell sessions apart in logs, not to reuse one."""
    return (session_id or "")[:8]


class _Guard:
    """The web inbox's rules in front of the SDK's app (see the module's docstring)."""

    def __init__(self, app: ASGIApp, hosts: HostPolicy, token: str) -> None:
        self.app = app
        self.hosts = hosts
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope.get("headers", [])
        }
        if scope.get("path") != ENDPOINT:
            await _refuse(send, 404, f"not found: the MCP endpoint is {ENDPOINT}")
            return
        if not self.hosts.host_ok(headers.get("host")):
            await _refuse(send, 421, "the Host header does not name this server")
            return
        if not self.hosts.origin_ok(headers.get("origin")):
            await _refuse(send, 403, "cross-origin requests are refused")
            return
        if not token_matches(self.token, _token_of(scope, headers)):
            await _refuse(
                send,
                401,
                "a token is required: send 'Authorization: Bearer TOKEN' (or ?token=TOKEN "
                "in the URL); hotseam mcp logs the URL with its token at start",
            )
            return
        await self.app(scope, receive, send)


def _token_of(scope: Scope, headers: dict[str, str]) -> str | None:
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    values = query.get("token")
    return values[0] if values else None


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def serve_http(
    server: McpServer,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str,
    allow_remote: bool = False,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    session_idle_timeout: float | None = DEFAULT_SESSION_IDLE_TIMEOUT,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncIterator[HttpEndpoint]:
    """Serve ``server`` over Streamable HTTP on ``host:port`` for the block.

    Args:
        max_sessions: Sessions open at once; a new one past it closes the least recently
            used idle session, and is refused (503) only while every session is busy.
        session_idle_timeout: Seconds after which an idle session is closed (``None``:
            never), measured on ``clock`` when a request arrives.
        clock: Seconds, monotonic (tests pass one they advance by hand).

    Raises:
        OSError: the address cannot be listened on (one line naming it and why).
        ValueError: ``host`` is not a loopback address and ``allow_remote`` is false, or a
            limit is not positive.
    """
    if max_sessions < 1:
        raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
    if session_idle_timeout is not None and not (
        math.isfinite(session_idle_timeout) and session_idle_timeout > 0
    ):
        raise ValueError(
            f"session_idle_timeout must be a positive number of seconds, got {session_idle_timeout}"
        )
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"{host} is not a loopback address, so other machines could reach the MCP "
            "endpoint; only loopback is served"
        )
    listener = Listener(host, port, choose="--http PORT")
    manager = _SessionManager(
        server,
        max_sessions=max_sessions,
        session_idle_timeout=session_idle_timeout,
        clock=clock,
    )
    web = WebServer(listener, name="MCP endpoint")
    endpoint = HttpEndpoint(listener, token)
    try:
        async with manager.run(), anyio.create_task_group() as group:
            web.start(group)
            web.mount(
                _Guard(StreamableHTTPASGIApp(manager), HostPolicy(host, listener.port), token)
            )
            _log.info("mcp.http_serving", url=endpoint.url)
            try:
                yield endpoint
            finally:
                await web.aclose()
                group.cancel_scope.cancel()
    finally:
        listener.close()

"""MCP over Streamable HTTP, for clients that connect instead of spawning the server.

The SDK's session manager (``StreamableHTTPSessionManager``: sessions, SSE streams, the
2026-07-28 per-request path) serves the endpoint; hotseam puts it behind what the web
inbox is served by (:mod:`hotseam.providers._web`):

* the listener and its accept loop (:func:`~hotseam.providers._accept.accept_connections`):
  a daemon that runs out of file descriptors backs off instead of dying, and connections
  past the bound are closed at once;
* Hypercorn per connection, with the inbox's idle timeout;
* each session's streams tapped as stdio's are (:mod:`._tap`), so that an answer read in
  the event-loop turn its question is withdrawn is still the answer;
* the inbox's rules for who may talk: loopback unless asked otherwise, the ``Host`` header
  must name this server (DNS rebinding), an ``Origin``, when sent, must be its own, and
  every request carries the token — ``Authorization: Bearer TOKEN`` (what hosts put in
  their configuration's ``headers``) or ``?token=TOKEN`` in the URL. A refusal is 401,
  403 or 421 with a JSON-RPC error body, and the connection is closed.

The token is the web inbox's (``$HOTSEAM_WEB_TOKEN``, its file, or the one kept in the
state folder), so a host's configuration stays valid from one start to the next.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs
from uuid import uuid4

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from starlette.types import ASGIApp, Receive, Scope, Send

from ..._core import get_logger
from .._web._security import HostPolicy, is_loopback, token_matches
from .._web._server import Listener, WebServer
from ._server import McpServer

__all__ = ["ENDPOINT", "HttpEndpoint", "serve_http"]

ENDPOINT = "/mcp"
_MAX_SESSIONS = 64
_SESSION_IDLE = 3600.0
_log = get_logger("hotseam.providers.mcp")


class HttpEndpoint:
    """Where the server listens: its URL (without the token) and the token."""

    def __init__(self, listener: Listener, token: str) -> None:
        self.listener = listener
        self.token = token

    @property
    def url(self) -> str:
        """``http://HOST:PORT/mcp``."""
        return f"http://{self.listener.address}{ENDPOINT}"

    @property
    def url_with_token(self) -> str:
        """The URL a client may use as it is (the token in the query)."""
        return f"{self.url}?token={self.token}"


class _TappedTransport(StreamableHTTPServerTransport):
    """A session's transport whose streams ``server`` taps before the SDK reads them."""

    def __init__(self, server: McpServer, mcp_session_id: str, **options: Any) -> None:
        super().__init__(mcp_session_id, **options)
        self.server = server

    @contextlib.asynccontextmanager
    async def connect(
        self,
    ) -> AsyncIterator[tuple[ReadStream[SessionMessage | Exception], WriteStream[SessionMessage]]]:
        async with super().connect() as (read_stream, write_stream):
            yield self.server.tap(read_stream, write_stream)


class _SessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, each session on a :class:`_TappedTransport`.

    The SDK gives no hook for a session's streams, so the method that makes a session's
    transport (``_admit_session``, the SDK's own) is repeated here with the tapped one;
    ``test_server_http.py``'s same-turn test fails if a release of the SDK stops calling it.
    """

    def __init__(self, server: McpServer, **options: Any) -> None:
        super().__init__(app=server.lowlevel, **options)
        self.server = server

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        if self.max_sessions is not None and len(self._server_instances) >= self.max_sessions:
            return None
        session_id = uuid4().hex
        transport = _TappedTransport(
            self.server,
            session_id,
            is_json_response_enabled=self.json_response,
            event_store=self.event_store,
            security_settings=self.security_settings,
            retry_interval=self.retry_interval,
            idle_timeout=self.session_idle_timeout,
        )
        if requestor is not None:
            self._session_owners[session_id] = requestor
        self._server_instances[session_id] = transport
        return transport


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
) -> AsyncIterator[HttpEndpoint]:
    """Serve ``server`` over Streamable HTTP on ``host:port`` for the block.

    Raises:
        OSError: the address cannot be listened on (one line naming it and why).
        ValueError: ``host`` is not a loopback address and ``allow_remote`` is false.
    """
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"{host} is not a loopback address, so other machines could reach the MCP "
            "endpoint; only loopback is served"
        )
    listener = Listener(host, port, choose="--http PORT")
    manager = _SessionManager(
        server,
        session_idle_timeout=_SESSION_IDLE,
        max_sessions=_MAX_SESSIONS,
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

"""The Starlette application: the inbox page, the JSON API and the event stream.

Every request passes :class:`Guard` first (token, Host, Origin, and for state changes a
token header and a JSON body), so the routes only deal with the inbox. A browser refused
the page (an old bookmark, a cut link) gets a page saying what to do; the API gets JSON.
"""

from __future__ import annotations

import html
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from functools import lru_cache
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

import anyio
import pydantic_core
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..._core import get_logger
from ._answers import InboxError
from ._inbox import Inbox
from ._rules import RuleSource, listed, revoked
from ._security import SECURITY_HEADERS, HostPolicy, token_matches

_log = get_logger("hotseam.providers.web")

MAX_BODY = 64 * 1024
MAX_STREAMS = 64
HEARTBEAT = 15.0
_RETRY_MS = 300
CLIENT_HEADER = "x-hotseam-client"
_CLIENT = re.compile(r"[A-Za-z0-9_-]{1,64}")

Lookup = Callable[[], Inbox | None]


def build_app(
    inbox: Lookup, token: str, hosts: HostPolicy, rules: RuleSource = lambda: None
) -> ASGIApp:
    """The ASGI app serving whichever inbox ``inbox()`` returns at the time of a request
    (a process's own, or the fleet inbox: the same page, API and guard for both), and the
    approval rules ``rules()`` returns then (none by default)."""

    async def page(request: Request) -> Response:
        nonce = secrets.token_urlsafe(16)
        html = _page_html().replace("{{nonce}}", nonce)
        csp = SECURITY_HEADERS["content-security-policy"]
        csp = csp.replace("script-src 'self'", f"script-src 'nonce-{nonce}'")
        csp = csp.replace("style-src 'self'", f"style-src 'nonce-{nonce}'")
        csp = csp.replace("img-src 'self'", "img-src data:")
        return HTMLResponse(html, headers={"content-security-policy": csp})

    async def questions(request: Request) -> Response:
        return JSONResponse({"questions": _current(inbox).snapshot()})

    def decide(outcome: str) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            client = _client(request)
            body = await _json_body(request, optional=outcome != "answered")
            question_id = request.path_params["question_id"]
            current = _current(inbox)
            if outcome == "answered":
                extra = await current.submit_answer(question_id, body, client=client)
            elif outcome == "dismissed":
                extra = await current.submit_dismissal(question_id, client=client)
            else:
                extra = await current.submit_clear(question_id, client=client)
            return JSONResponse({"ok": True, "outcome": outcome, **extra})

        return endpoint

    async def rule_list(request: Request) -> Response:
        _current(inbox)  # a closed inbox serves no rules either (503 CLOSED)
        everything = request.query_params.get("all", "") not in ("", "0", "false")
        return JSONResponse(await listed(rules(), revoked=everything))

    async def rule_revoke(request: Request) -> Response:
        _client(request)
        await _json_body(request, optional=True)  # read and checked as an answer's is
        _current(inbox)
        return JSONResponse(await revoked(rules(), request.path_params["rule_id"]))

    async def inbox_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, InboxError)
        return JSONResponse(error.to_dict(), status_code=error.status)

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        return _error(error.status_code, "HTTP_ERROR", str(error.detail))

    app = Starlette(
        routes=[
            Route("/", page, methods=["GET"]),
            Route("/api/questions", questions, methods=["GET"]),
            *(
                Route(f"/api/questions/{{question_id}}/{verb}", decide(outcome), methods=["POST"])
                for verb, outcome in _DECISIONS
            ),
            Route("/api/events", _Events(inbox), methods=["GET"]),
            Route("/api/rules", rule_list, methods=["GET"]),
            Route("/api/rules/{rule_id}/revoke", rule_revoke, methods=["POST"]),
        ],
        exception_handlers={InboxError: inbox_error, HTTPException: http_error},
    )
    return Guard(app, token, hosts)


class _Events:
    """The event stream: a raw ASGI endpoint (Starlette's Route calls an object, not a
    function, with scope, receive and send)."""

    def __init__(self, inbox: Lookup) -> None:
        self._inbox = inbox

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await _stream_events(_current(self._inbox), receive, send)
        except InboxError as error:
            await _error(error.status, error.code, error.message)(scope, receive, send)


_DECISIONS = (("answer", "answered"), ("dismiss", "dismissed"), ("clear", "cleared"))


def _current(lookup: Lookup) -> Inbox:
    inbox = lookup()
    if inbox is None:
        raise InboxError(503, "CLOSED", "the web inbox is not serving (it is being reloaded?)")
    return inbox


def _client(request: Request) -> str | None:
    """The id a page sends with its answers, so it tells its own from another tab's."""
    client = request.headers.get(CLIENT_HEADER)
    if client is None:
        return None
    if not _CLIENT.fullmatch(client):
        raise InboxError(
            400,
            "BAD_REQUEST",
            "the X-Hotseam-Client header must be 1 to 64 characters of A-Z a-z 0-9 - _",
        )
    return client


async def _json_body(request: Request, *, optional: bool = False) -> object:
    chunks: list[bytes] = []
    size = 0
    async with aclosing(request.stream()) as body:
        async for chunk in body:
            size += len(chunk)
            if size > MAX_BODY:
                raise InboxError(413, "TOO_LARGE", f"the request body is over {MAX_BODY} bytes")
            chunks.append(chunk)
    raw = b"".join(chunks)
    if optional and not raw.strip():
        return None
    try:
        # pydantic-core's parser stops at a fixed nesting depth with a ValueError, where
        # json.loads would recurse into a RecursionError on a body of '[[[[...'.
        return pydantic_core.from_json(raw)
    except (ValueError, UnicodeDecodeError):
        raise InboxError(400, "BAD_REQUEST", "the request body is not valid JSON") from None


async def _stream_events(inbox: Inbox, receive: Receive, send: Send) -> None:
    """Server-Sent Events: a snapshot, then changes; ends when the page or the inbox goes."""
    if inbox.subscribers >= MAX_STREAMS:
        raise InboxError(503, "TOO_MANY_STREAMS", f"at most {MAX_STREAMS} event streams")
    subscription = inbox.subscribe()
    headers = [
        (b"content-type", b"text/event-stream; charset=utf-8"),
        (b"x-accel-buffering", b"no"),
    ]

    async def body(chunk: bytes, more: bool = True) -> None:
        await send({"type": "http.response.body", "body": chunk, "more_body": more})

    try:
        async with anyio.create_task_group() as tg:

            async def until_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(until_disconnect)
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await body(f"retry: {_RETRY_MS}\n\n".encode())
            while True:
                event: dict[str, Any] | None = None
                with anyio.move_on_after(HEARTBEAT):
                    event = await subscription.receive()
                    if event is None:
                        break
                await body(b": keepalive\n\n" if event is None else _sse(event))
            if subscription.dropped:
                await body(_sse({"type": "overflow"}))
            await body(b"", more=False)
            tg.cancel_scope.cancel()
    except OSError:
        pass  # the page went away mid-write
    finally:
        subscription.release()


def _sse(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


def _error(status: int, code: str, message: str) -> Response:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


class Guard:
    """ASGI middleware: refuse what is not from this server's own page or a token holder."""

    def __init__(self, app: ASGIApp, token: str, hosts: HostPolicy) -> None:
        self._app = app
        self._token = token
        self._hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self._app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            status, code, message = refusal
            _log.info("web.refused", status=status, code=code, path=scope.get("path"))
            if _wants_page(scope):
                response = _refusal_page(status, code, bool(_query_token(scope)))
            else:
                response = _error(status, code, message)
            await response(scope, receive, _secured(send))
            return
        try:
            await self._app(scope, receive, _secured(send))
        except ClientDisconnect:
            # The client went away before its body was read (a page closed, a call
            # cancelled): nobody is left to answer, and nothing failed in the app.
            _log.debug("web.client_gone", path=scope.get("path"), method=scope.get("method"))

    def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = _headers(scope)
        if not self._hosts.host_ok(headers.get("host")):
            return 421, "BAD_HOST", "the Host header does not name this server"
        cross_site = headers.get("sec-fetch-site") == "cross-site"
        if cross_site or not self._hosts.origin_ok(headers.get("origin")):
            return 403, "BAD_ORIGIN", "requests from another site are refused"
        method = scope["method"]
        given = _bearer(headers)
        if method in ("GET", "HEAD") and given is None:
            given = _query_token(scope)
        if not token_matches(self._token, given):
            where = "the query (?token=...)" if method in ("GET", "HEAD") else "a header"
            return 401, "BAD_TOKEN", f"a valid token is required in {where}"
        if method not in ("GET", "HEAD"):
            kind = headers.get("content-type", "").split(";")[0].strip().lower()
            if kind != "application/json":
                return 415, "BAD_CONTENT_TYPE", "send the body as application/json"
        return None


def _wants_page(scope: Scope) -> bool:
    """A browser opening the page (a bookmark, a pasted link), not a script."""
    if scope["method"] not in ("GET", "HEAD") or scope.get("path") != "/":
        return False
    return "text/html" in _headers(scope).get("accept", "")


def _query_token(scope: Scope) -> str | None:
    query: dict[str, list[str]] = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return query.get("token", [None])[0]


_REFUSALS = {
    "BAD_TOKEN": (
        "This link's token is not accepted",
        "The inbox answers only links that carry its token. This one {has} — most often "
        "because hotseam was started again with another token (its token file was deleted, "
        "or another one was given), or because the link was cut short.",
    ),
    "BAD_HOST": (
        "This address does not name the inbox",
        "The inbox answers only under the names it listens on (127.0.0.1 or localhost "
        "here, with its port), which protects it from other sites (DNS rebinding).",
    ),
    "BAD_ORIGIN": (
        "The inbox cannot be opened from another site",
        "A link or a form on another site led here; the inbox refuses those, so that no "
        "other site can answer for you.",
    ),
}


def _refusal_page(status: int, code: str, had_token: bool) -> Response:
    """A refused page in words: what happened and what to do (no script, nothing echoed)."""
    title, why = _REFUSALS.get(
        code, ("The inbox refused this request", "The request was not accepted ({code}).")
    )
    has = "has a token that is not the current one" if had_token else "has no ?token=…"
    nonce = secrets.token_urlsafe(16)
    page = _REFUSAL_HTML.format(
        nonce=nonce,
        title=html.escape(title),
        why=html.escape(why.format(has=has, code=code)),
        code=html.escape(code),
    )
    csp = f"default-src 'none'; style-src 'nonce-{nonce}'; frame-ancestors 'none'; base-uri 'none'"
    headers = {"content-security-policy": csp, "x-hotseam-error": code}
    return HTMLResponse(page, status_code=status, headers=headers)


_REFUSAL_HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>hotseam inbox: {title}</title>
<style nonce="{nonce}">
:root {{ color-scheme: light dark; }}
body {{ font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 3rem auto;
        padding: 0 1rem; }}
code {{ font-size: .95em; }}
</style>
</head>
<body>
<main>
<h1>{title}</h1>
<p>{why}</p>
<h2>What to do</h2>
<ol>
<li>On the machine where hotseam runs, run <code>hotseam status</code>: it shows the
inbox's current address, token included (<code>web inbox: http://…</code>).</li>
<li>Open that address, and bookmark it: the token stays the same when hotseam restarts.</li>
</ol>
<p><small>Error code: {code}</small></p>
</main>
</body>
</html>
"""


def _headers(scope: Scope) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = name.decode("latin-1").lower()
        if key in headers:  # a repeated Host or Origin is refused as ambiguous
            headers[key] = "\x00"
        else:
            headers[key] = value.decode("latin-1")
    return headers


def _bearer(headers: dict[str, str]) -> str | None:
    token = headers.get("x-hotseam-token")
    if token is not None:
        return token
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


def _secured(send: Send) -> Send:
    extra = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def secured_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {name.lower() for name, _ in message.get("headers", [])}
            headers = list(message.get("headers", []))
            headers.extend((k, v) for k, v in extra if k not in present)
            message = {**message, "headers": headers}
        await send(message)

    return secured_send


@lru_cache(maxsize=1)
def _page_html() -> str:
    static = resources.files("hotseam.providers._web").joinpath("static")
    html = static.joinpath("index.html").read_text(encoding="utf-8")
    css = static.joinpath("inbox.css").read_text(encoding="utf-8")
    js = static.joinpath("inbox.js").read_text(encoding="utf-8")
    return html.replace("/*{{css}}*/", css).replace("/*{{js}}*/", js)

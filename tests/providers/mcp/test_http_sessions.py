"""``--http``'s sessions: hosts that reconnect or crash without ``DELETE`` leave sessions
behind; the least recently used idle one makes room for a new client (its id then answers
404), a house full of busy sessions refuses (503), and an idle session expires on the
server's clock (injected here). Raw requests and the ``mcp`` SDK's own client against the
real server."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import mcp
import pytest
from tests._timing import scaled

from hotseam import Context, Scope, Tool, ToolCall, tool
from hotseam.interaction import USER_INTERACTION, ask
from hotseam.providers._mcp._http import DEFAULT_MAX_SESSIONS, HttpEndpoint, serve_http
from hotseam.providers.mcp import McpProvider, McpServer

from .test_cli_http import _logged
from .test_cli_stdio import log_lines, write_tools
from .test_elicit import DATABASE, pick_database
from .test_elicit_withdrawal import Nothing
from .test_server_http import ACCEPTS, INITIALIZE, TOKEN, sse_generators_left_to_gc
from .test_server_tools import greet

pytestmark = pytest.mark.anyio

BEARER = {**ACCEPTS, "authorization": f"Bearer {TOKEN}"}
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
FORMS = {"elicitation": {"form": {}}}


class Clock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def served(
    tools: Sequence[Tool[Any]] = (greet, pick_database), **limits: Any
) -> AsyncIterator[HttpEndpoint]:
    base = Context("mcp")
    child = base.child("mcp.tools")
    async with Scope("test.mcp", context=base) as scope, Scope("t", context=child) as own:
        scope.provide(USER_INTERACTION, McpProvider())
        for item in tools:
            own.register_tool(item)
        server = McpServer(child)
        async with server.running(), serve_http(server, port=0, token=TOKEN, **limits) as end:
            yield end


async def initialize(http: httpx.AsyncClient, endpoint: HttpEndpoint) -> httpx.Response:
    """``initialize`` without a session: a new one (never DELETEd by this test's hosts)."""
    return await http.post(endpoint.url, json=INITIALIZE, headers=BEARER)


async def opened(http: httpx.AsyncClient, endpoint: HttpEndpoint) -> str:
    response = await initialize(http, endpoint)
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


async def ping(http: httpx.AsyncClient, endpoint: HttpEndpoint, session: str) -> int:
    headers = {**BEARER, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    return (await http.post(endpoint.url, json=PING, headers=headers)).status_code


async def admitted_once_room_frees(http: httpx.AsyncClient, endpoint: HttpEndpoint) -> str:
    """A new session, once a busy one is idle: the server learns that a request ended when
    it reads the closed connection, which nothing lets a test await (a bounded retry)."""
    response = await initialize(http, endpoint)
    for _ in range(1000):
        if response.status_code != 503:
            break
        await anyio.sleep(0.01)
        response = await initialize(http, endpoint)
    assert response.status_code == 200, response.text
    return response.headers["mcp-session-id"]


@asynccontextmanager
async def holding_a_stream(
    http: httpx.AsyncClient, endpoint: HttpEndpoint, session: str
) -> AsyncIterator[None]:
    """The session's GET stream open for the block: a request in flight (the session is busy)."""
    headers = {
        "authorization": f"Bearer {TOKEN}",
        "accept": "text/event-stream",
        "mcp-session-id": session,
        "mcp-protocol-version": "2025-11-25",
    }
    async with http.stream("GET", endpoint.url, headers=headers) as response:
        assert response.status_code == 200
        yield


@sse_generators_left_to_gc
async def test_seventy_sessions_never_deleted_leave_room_for_a_new_client() -> None:
    """70 hosts initialize and go away without DELETE (the default bound is 64): every one
    of them is admitted, the SDK's client then connects, lists and calls, and the sessions
    used least recently (the first ones) were closed to make room: 404, as the spec says
    of an unknown session. The most recent ones still answer."""
    async with served() as endpoint, httpx.AsyncClient(timeout=scaled(10)) as http:
        with anyio.fail_after(scaled(60)):
            sessions = [await opened(http, endpoint) for _ in range(70)]
            async with mcp.Client(endpoint.url_with_token, mode="legacy") as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                assert tools == ["greet", "pick_database"]
                greeted = await client.call_tool("greet", {"name": "Ada"})
                assert greeted.content[0].text == "hello Ada"  # type: ignore[union-attr]
            evicted = 70 + 1 - DEFAULT_MAX_SESSIONS
            assert [await ping(http, endpoint, s) for s in sessions[:evicted]] == [404] * evicted
            assert await ping(http, endpoint, sessions[-1]) == 200


async def test_the_least_recently_used_idle_session_goes_and_busy_ones_stay() -> None:
    """Bound 3: A holds its GET stream (busy), B is used after C; a new session closes C
    (the least recently used idle one), not A (used earlier, but busy) nor B. With every
    session busy, a new one is refused with 503; once B and D are idle again, the next
    closes one of them, and A stays."""
    async with served(max_sessions=3) as endpoint, httpx.AsyncClient(timeout=scaled(10)) as http:
        with anyio.fail_after(scaled(30)):
            a, b, c = [await opened(http, endpoint) for _ in range(3)]
            assert await ping(http, endpoint, b) == 200  # B used after C
            async with holding_a_stream(http, endpoint, a):
                d = await opened(http, endpoint)
                assert [await ping(http, endpoint, s) for s in (a, b, c, d)] == [200, 200, 404, 200]
                async with holding_a_stream(http, endpoint, b), holding_a_stream(http, endpoint, d):
                    full = await initialize(http, endpoint)
                    assert full.status_code == 503
                    assert full.json()["error"]["message"] == "Too many open sessions"
                # B and D are idle again once the server has seen their streams end (when
                # it reads the closed connection: nothing to await here): one of them goes
                # for the next session, A stays (busy).
                await admitted_once_room_frees(http, endpoint)
                codes = [await ping(http, endpoint, s) for s in (a, b, d)]
                assert codes in ([200, 404, 200], [200, 200, 404]), codes


async def test_an_idle_session_expires_on_the_servers_clock() -> None:
    """Idle timeout 60 s on an injected clock: a session idle for 61 s is closed when the
    next request arrives (404); one used 30 s ago stays; a busy one (its stream open) is
    never idle, however long ago it began."""
    clock = Clock()
    async with (
        served(session_idle_timeout=60.0, clock=clock) as endpoint,
        httpx.AsyncClient(timeout=scaled(10)) as http,
    ):
        with anyio.fail_after(scaled(30)):
            idle, recent, streaming = [await opened(http, endpoint) for _ in range(3)]
            async with holding_a_stream(http, endpoint, streaming):
                clock.now += 31
                assert await ping(http, endpoint, recent) == 200
                clock.now += 30  # idle: 61 s, recent: 30 s
                assert await ping(http, endpoint, idle) == 404
                assert await ping(http, endpoint, recent) == 200
                clock.now += 1000
                assert await ping(http, endpoint, streaming) == 200


async def test_limits_must_be_positive() -> None:
    server = McpServer(Context("mcp"))
    with pytest.raises(ValueError, match="max_sessions must be at least 1"):
        async with serve_http(server, token=TOKEN, max_sessions=0):
            pass
    with pytest.raises(ValueError, match="session_idle_timeout must be a positive"):
        async with serve_http(server, token=TOKEN, session_idle_timeout=0):
            pass


@sse_generators_left_to_gc
@pytest.mark.filterwarnings(  # httpx's stream left unread on trio: the client's, as above
    "ignore:Async generator 'http:ResourceWarning"
)
async def test_a_session_whose_question_waits_is_busy_without_a_request_in_flight() -> None:
    """Bound 1: a 2025-11-25 host calls a tool that asks, reads the form request from the
    call's stream and drops that connection (the human has not answered yet). Nothing of
    the session is in flight, but its question waits: a new session is refused (503)
    rather than the question lost; the host's answer, POSTed later, still reaches the
    tool, and the session, idle then, makes room for the next one."""
    tool_ended: list[str] = []
    answered = anyio.Event()

    @tool()
    async def pick(input: Nothing, call: ToolCall) -> str:
        """Ask which database."""
        tool_ended.append((await ask(DATABASE)).answer)
        answered.set()
        return tool_ended[-1]

    async with (
        served([pick], max_sessions=1) as endpoint,
        httpx.AsyncClient(timeout=scaled(10)) as http,
    ):
        with anyio.fail_after(scaled(30)):
            eliciting = {**INITIALIZE, "params": {**INITIALIZE["params"], "capabilities": FORMS}}
            response = await http.post(endpoint.url, json=eliciting, headers=BEARER)
            session = response.headers["mcp-session-id"]
            headers = {**BEARER, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(endpoint.url, json=initialized, headers=headers)).is_success
            call = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "pick", "arguments": {}},
            }
            async with http.stream("POST", endpoint.url, json=call, headers=headers) as stream:
                lines = stream.aiter_lines()
                form = await anext(lines)
                while "elicitation/create" not in form:
                    form = await anext(lines)
                await lines.aclose()  # type: ignore[attr-defined]
            full = await initialize(http, endpoint)
            assert full.status_code == 503, full.text
            assert await ping(http, endpoint, session) == 200
            form_id = json.loads(form.removeprefix("data:"))["id"]
            answer = {
                "jsonrpc": "2.0",
                "id": form_id,
                "result": {"action": "accept", "content": {"answer": "SQLite"}},
            }
            assert (await http.post(endpoint.url, json=answer, headers=headers)).is_success
            await answered.wait()  # its result goes to the stream the host dropped
            assert tool_ended == ["SQLite"]
            # Answered: once the dropped call's request has ended too (when the server
            # finds its connection gone: nothing to await from here), the session is idle
            # and makes room.
            await admitted_once_room_frees(http, endpoint)
            assert await ping(http, endpoint, session) == 404


# -- hotseam mcp --http, a subprocess ---------------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the command runs on asyncio
async def test_the_command_takes_the_limits_from_flags_and_tool_hotseam(tmp_path: Path) -> None:
    """``http-max-sessions = 2`` in [tool.hotseam] and ``--http-session-idle-timeout`` as a
    flag: three hosts that never DELETE, and the first one's session answers 404 while the
    third works; SIGTERM exits 0."""
    write_tools(tmp_path / "tools")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.hotseam]\npaths = ["tools"]\nhttp = true\nhttp-max-sessions = 2\n'
    )
    stderr = tmp_path / "stderr.log"
    command = [sys.executable, "-m", "hotseam", "mcp", "--http-session-idle-timeout", "600"]
    with stderr.open("w") as errlog:
        process = await anyio.open_process(command, stdin=None, stderr=errlog, cwd=tmp_path)
        try:
            url = await _logged(stderr, "mcp.http_url")
            port = int(url.split(":")[2].split("/")[0])
            endpoint = HttpEndpoint(_Listening(port), TOKEN)
            token = parse_qs(urlsplit(url).query)["token"][0]
            headers = {**ACCEPTS, "authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(timeout=scaled(10)) as http:
                sessions = []
                for _ in range(3):
                    response = await http.post(endpoint.url, json=INITIALIZE, headers=headers)
                    assert response.status_code == 200, response.text
                    sessions.append(response.headers["mcp-session-id"])
                codes = []
                for session in sessions:
                    pinged = await http.post(
                        endpoint.url,
                        json=PING,
                        headers={**headers, "mcp-session-id": session},
                    )
                    codes.append(pinged.status_code)
                assert codes == [404, 200, 200]
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(scaled(15)):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
    evicted = [line for line in log_lines(stderr) if line["event"] == "mcp.session_evicted"]
    assert len(evicted) == 1 and evicted[0]["level"] == "info", evicted


class _Listening:
    """Where a subprocess listens, as ``HttpEndpoint`` reads it."""

    def __init__(self, port: int) -> None:
        self.address = f"127.0.0.1:{port}"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize(
    ("config", "flags", "line"),
    [
        (
            "http = true\nhttp-max-sessions = 0\n",
            [],
            "pyproject.toml:5: [tool.hotseam] http-max-sessions must be a whole number >= 1, got 0",
        ),
        ("", ["--http-max-sessions", "3"], "hotseam mcp: --http-max-sessions needs --http"),
        (
            "http-session-idle-timeout = 5\n",
            [],
            "hotseam mcp: http-session-idle-timeout in {path} needs --http",
        ),
        (
            "http = true\n",
            ["--http-session-idle-timeout", "0"],
            "must be a positive number of seconds, got 0",
        ),
    ],
)
async def test_a_bad_limit_is_one_line_and_exit_2(
    tmp_path: Path, config: str, flags: list[str], line: str
) -> None:
    write_tools(tmp_path / "tools")
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(f'[tool.hotseam]\npaths = ["tools"]\n\n{config}')
    command = [sys.executable, "-m", "hotseam", "mcp", *flags]
    with anyio.fail_after(scaled(30)):
        completed = await anyio.run_process(command, check=False, stdin=None, cwd=tmp_path)
    assert completed.returncode == 2
    lines = [text for text in completed.stderr.decode().splitlines() if not text.startswith("{")]
    if lines[0].startswith("usage:"):  # argparse's own: the usage, then one line
        lines = lines[-1:]
    assert len(lines) == 1, lines
    assert line.format(path=pyproject) in lines[0]

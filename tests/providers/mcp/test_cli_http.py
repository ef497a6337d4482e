"""``hotseam mcp --http`` as a subprocess: configured from [tool.hotseam], the URL it logs,
the SDK's client through it on both revisions (the web inbox answering a host without
elicitation), a flood of idle connections past its file descriptors, a clean stop; a port
in use."""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import mcp
import mcp_types as types
import pytest
from tests._timing import scaled

from .test_cli_stdio import log_lines, write_tools

WAIT = 15.0
FD_LIMIT = 64

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


LIMITED = (
    "import resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({FD_LIMIT}, {FD_LIMIT})); "
    "from hotseam.cli import main; sys.exit(main(sys.argv[1:]))"
)


async def _logged(stderr: Path, event: str, field: str = "url") -> str:
    """The ``field`` of the first ``event`` the process logged."""
    with anyio.fail_after(scaled(WAIT)):
        while True:
            for line in log_lines(stderr):
                if line.get("event") == event:
                    return str(line[field])
            await anyio.sleep(0.05)  # written by the process: read it again


async def test_configured_http_survives_a_flood_serves_both_eras_and_stops_cleanly(
    tmp_path: Path,
) -> None:
    """``hotseam mcp`` alone, in a project whose [tool.hotseam] names the tools folder and
    sets ``http = true`` (a free port), the web inbox and ``input-ttl``. With 64 file
    descriptors, 100 idle connections cannot end the server: once they are gone the SDK's
    client lists, calls and answers a form (2026-07-28); a question it leaves unanswered
    ends ASK_CANCELLED after the configured time-to-live; a host without elicitation
    (2025-11-25) gets its question answered in the web inbox (its JSON API here), and the
    tool gets that answer; SIGTERM exits 0."""
    folder = tmp_path / "tools"
    write_tools(folder)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.hotseam]\npaths = ["tools"]\nhttp = true\nweb = true\nweb-port = 0\n'
        "input-ttl = 0.3\n"
    )
    stderr = tmp_path / "stderr.log"
    command = [sys.executable, "-c", LIMITED, "mcp"]
    with stderr.open("w") as errlog:
        process = await anyio.open_process(command, stdin=None, stderr=errlog, cwd=tmp_path)
        try:
            url = await _logged(stderr, "mcp.http_url")
            port = int(url.split(":")[2].split("/")[0])
            flood = []
            for _ in range(100):
                try:
                    flood.append(
                        socket.create_connection(("127.0.0.1", port), timeout=scaled(WAIT))
                    )
                except OSError:
                    break  # the backlog is full: enough
            for sock in flood:
                sock.close()
            await _logged(stderr, "accept.unsaturated", "listener")  # the flood is gone

            async def elicit(context: Any, params: Any) -> types.ElicitResult:
                return types.ElicitResult(action="accept", content={"answer": "SQLite"})

            with anyio.fail_after(scaled(WAIT)):
                async with mcp.Client(
                    url, mode="2026-07-28", elicitation_callback=elicit
                ) as client:
                    names = [t.name for t in (await client.list_tools()).tools]
                    assert names == ["checks", "greet", "pick"]
                    picked = await client.call_tool("pick", {})
                    assert picked.content[0].text == "SQLite"  # type: ignore[union-attr]
                    shown = await client.session.call_tool("pick", {}, allow_input_required=True)
                    assert isinstance(shown, types.InputRequiredResult)
                    await anyio.sleep(0.4)  # the configured time-to-live passes, no retry
                    expired = await client.session.call_tool(
                        "pick", {}, request_state=shown.request_state, allow_input_required=True
                    )
                    assert isinstance(expired, types.CallToolResult)
                    assert expired.structured_content["code"] == "ASK_CANCELLED"
                    assert "within 0.3 s" in expired.structured_content["message"]
            inboxed = await _answered_in_the_inbox(url, stderr)
            assert not inboxed.is_error, inboxed
            assert inboxed.content[0].text == "SQLite"  # type: ignore[union-attr]
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(scaled(WAIT)):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
    events = [line["event"] for line in log_lines(stderr)]
    saturated = next(line for line in log_lines(stderr) if line["event"] == "accept.saturated")
    assert saturated["listener"] == f"MCP endpoint 127.0.0.1:{port}"  # the flood met the bound
    assert "mcp.signal" in events  # the command's own name, not acp's
    assert "mcp.stopped" in events
    assert "mcp.failed" not in events
    assert json.dumps(events)  # every stderr line was a JSON log object


async def _answered_in_the_inbox(url: str, stderr: Path) -> types.CallToolResult:
    """A 2025-11-25 host without elicitation calls ``pick``; the question is answered in
    the web inbox through its JSON API."""
    results: list[types.CallToolResult] = []
    async with mcp.Client(url, mode="legacy") as client:

        async def call() -> None:
            results.append(await client.call_tool("pick", {}))

        async with anyio.create_task_group() as group, httpx.AsyncClient() as http:
            group.start_soon(call)
            inbox = await _logged(stderr, "web.serving")
            token = parse_qs(urlsplit(inbox).query)["token"][0]
            base = inbox.split("?")[0].rstrip("/")
            headers = {"X-Hotseam-Token": token}
            with anyio.fail_after(scaled(WAIT)):
                while True:
                    listed = (await http.get(f"{base}/api/questions", headers=headers)).json()
                    if listed["questions"]:
                        break
                    await anyio.sleep(0.05)  # the call reaches the inbox
            (question,) = listed["questions"]
            answered = await http.post(
                f"{base}/api/questions/{question['id']}/answer",
                json={"option": 1},
                headers=headers,
            )
            assert answered.status_code == 200, answered.text
    (result,) = results
    return result


async def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """--http on a port another program holds: one line naming it, exit 2, no hang."""
    folder = tmp_path / "tools"
    write_tools(folder)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "hotseam", "mcp", str(folder), "--http", str(port)]
        with anyio.fail_after(scaled(WAIT)):
            completed = await anyio.run_process(command, check=False, stdin=None, cwd=folder)
    assert completed.returncode == 2
    lines = [line for line in completed.stderr.decode().splitlines() if not line.startswith("{")]
    assert lines == [
        f"hotseam mcp: --http: cannot listen on 127.0.0.1:{port}: the port is in use (by "
        "another program, or another hotseam?); choose another with --http PORT"
    ]

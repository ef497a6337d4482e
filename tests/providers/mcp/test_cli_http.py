"""``hotseam mcp --http`` as a subprocess: the URL it logs, the SDK's client through it,
a flood of idle connections past its file descriptors, a clean stop."""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp
import mcp_types as types
import pytest

from .test_cli_stdio import log_lines, write_tools

WAIT = 15.0
FD_LIMIT = 64

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


LIMITED = (
    "import resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({FD_LIMIT}, {FD_LIMIT})); "
    "from hotseam.cli import main; sys.exit(main(sys.argv[1:]))"
)


async def _logged_url(stderr: Path) -> str:
    with anyio.fail_after(WAIT):
        while True:
            for line in log_lines(stderr):
                if line.get("event") == "mcp.http_url":
                    return str(line["url"])
            await anyio.sleep(0.05)  # written by the process: read it again


async def test_http_survives_a_flood_and_stops_cleanly(tmp_path: Path) -> None:
    """With 64 file descriptors, 100 idle connections cannot end the server: once they are
    gone the SDK's client lists, calls and answers a form (2026-07-28); SIGTERM exits 0."""
    folder = tmp_path / "tools"
    write_tools(folder)
    stderr = tmp_path / "stderr.log"
    command = [sys.executable, "-c", LIMITED, "mcp", str(folder), "--http"]
    with stderr.open("w") as errlog:
        process = await anyio.open_process(command, stdin=None, stderr=errlog, cwd=folder)
        try:
            url = await _logged_url(stderr)
            port = int(url.split(":")[2].split("/")[0])
            flood = []
            for _ in range(100):
                try:
                    flood.append(socket.create_connection(("127.0.0.1", port), timeout=WAIT))
                except OSError:
                    break  # the backlog is full: enough
            for sock in flood:
                sock.close()

            async def elicit(context: Any, params: Any) -> types.ElicitResult:
                return types.ElicitResult(action="accept", content={"answer": "SQLite"})

            with anyio.fail_after(WAIT):
                async with mcp.Client(
                    url, mode="2026-07-28", elicitation_callback=elicit
                ) as client:
                    names = [t.name for t in (await client.list_tools()).tools]
                    assert names == ["checks", "greet", "pick"]
                    picked = await client.call_tool("pick", {})
                    assert picked.content[0].text == "SQLite"  # type: ignore[union-attr]
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(WAIT):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
    events = [line["event"] for line in log_lines(stderr)]
    assert "accept.saturated" in events  # the flood met the connection bound
    assert "mcp.stopped" in events
    assert "mcp.failed" not in events
    assert json.dumps(events)  # every stderr line was a JSON log object


async def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """--http on a port another program holds: one line naming it, exit 2, no hang."""
    folder = tmp_path / "tools"
    write_tools(folder)
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "hotseam", "mcp", str(folder), "--http", str(port)]
        with anyio.fail_after(WAIT):
            completed = await anyio.run_process(command, check=False, stdin=None, cwd=folder)
    assert completed.returncode == 2
    lines = [line for line in completed.stderr.decode().splitlines() if not line.startswith("{")]
    assert lines == [
        f"hotseam mcp: --http: cannot listen on 127.0.0.1:{port}: the port is in use (by "
        "another program, or another hotseam?); choose another with --http PORT"
    ]

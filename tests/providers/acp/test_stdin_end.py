"""``hotseam acp`` started with stdin at ``/dev/null`` (a supervisor, ``nohup``, a test
harness): the event loop cannot poll it (epoll refuses it), and its end must still end
the command, as a closed pipe's does. A real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from tests._timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


async def test_a_stdin_at_dev_null_ends_the_agent_like_a_closed_pipe(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.log"
    with stderr.open("wb") as errlog:
        process = await anyio.open_process(
            [sys.executable, "-m", "hotseam", "acp"],
            stdin=subprocess.DEVNULL,
            stderr=errlog,
            cwd=tmp_path,
        )
        try:
            with anyio.fail_after(scaled(20)):
                code = await process.wait()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            assert process.stdout is not None
            out = b"".join([chunk async for chunk in process.stdout])
            await process.aclose()
    assert code == 0, stderr.read_text()[-3000:]
    assert out == b""  # nothing on the protocol stream
    events = [json.loads(line) for line in stderr.read_text().splitlines() if line.startswith("{")]
    assert "acp.stopped" in [event["event"] for event in events]
    assert not [event for event in events if event.get("level") == "error"], events

"""A host that closes both pipes while a question waits: the session's end, not a crash.

A host (an editor, a test harness) may exit without closing anything in order: it closes
``hotseam acp``'s stdout and stdin while the agent's question is still open. The reply
and the question's withdrawal then have no reader. That is a normal end: one info line,
exit 0, every disposer run, the tool call withdrawn, no error-level line and no
traceback (the SDK's sender task dies on the broken pipe and logged "Send loop failed").
A real ``hotseam acp`` subprocess fed exact ACP bytes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._timing import scaled

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


_GAP = 0.3
"""Between the host's closing stdout and stdin (a host's exit closes them in turn): long
enough for ``hotseam acp`` to see stdout closed first, which is the case under test."""


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


def _request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


async def _read_message(stdout: int, buffer: bytearray) -> dict[str, Any]:
    while b"\n" not in buffer:
        await anyio.wait_readable(stdout)
        chunk = os.read(stdout, 65536)
        assert chunk, "hotseam acp closed its stdout"
        buffer += chunk
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    message: dict[str, Any] = json.loads(line)
    return message


async def _until(stdout: int, buffer: bytearray, method: str | int) -> dict[str, Any]:
    """The next request named ``method``, or the next response with the id ``method``."""
    while True:
        message = await _read_message(stdout, buffer)
        if message.get("method") == method or (
            isinstance(method, int) and message.get("id") == method and "method" not in message
        ):
            return message


@pytest.mark.parametrize("host", ["cancels-then-closes", "closes", "closes-before-the-question"])
@pytest.mark.parametrize(
    ("capabilities", "asked_by"),
    [
        pytest.param({"elicitation": {"form": {}}}, "elicitation/create", id="form"),
        pytest.param({}, "session/request_permission", id="permission"),
    ],
)
async def test_a_host_that_closes_both_pipes_while_a_question_waits_is_a_normal_end(
    tmp_path: Path, capabilities: dict[str, Any], asked_by: str, host: str
) -> None:
    stderr = tmp_path / "stderr.log"
    buffer = bytearray()
    # stdout is a pipe of the test's own: anyio's aclose() of a process's stdout leaves
    # the descriptor open, and the host must really close it.
    stdout, child_stdout = os.pipe()
    os.set_blocking(stdout, False)
    with stderr.open("wb") as errlog:
        try:
            process = await anyio.open_process(
                [sys.executable, "-m", "hotseam", "acp", "--log-level", "debug"],
                stdout=child_stdout,
                stderr=errlog,
                cwd=tmp_path,
            )
        finally:
            os.close(child_stdout)
        try:
            assert process.stdin is not None
            with anyio.fail_after(scaled(30)):
                await process.stdin.send(
                    _request(
                        1,
                        "initialize",
                        {"protocolVersion": 1, "clientCapabilities": capabilities},
                    )
                )
                assert "result" in await _until(stdout, buffer, 1)
                await process.stdin.send(
                    _request(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
                )
                session_id = (await _until(stdout, buffer, 2))["result"]["sessionId"]
                await process.stdin.send(
                    _request(
                        3,
                        "session/prompt",
                        {
                            "sessionId": session_id,
                            "prompt": [{"type": "text", "text": "fix the bug"}],
                        },
                    )
                )
                if host != "closes-before-the-question":
                    question = await _until(stdout, buffer, asked_by)
                    assert question["params"]["sessionId"] == session_id
                # The host goes away: stdout first, then stdin, the question unanswered (or
                # not yet sent); in between, it may cancel the turn (the agent's replies
                # then have no reader).
                os.close(stdout)
                stdout = -1
                if host == "cancels-then-closes":
                    await process.stdin.send(
                        _line(
                            {
                                "jsonrpc": "2.0",
                                "method": "session/cancel",
                                "params": {"sessionId": session_id},
                            }
                        )
                    )
                await anyio.sleep(_GAP)
                await process.stdin.aclose()
            with anyio.fail_after(scaled(20)):
                code = await process.wait()
        finally:
            if stdout != -1:
                os.close(stdout)
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
    text = stderr.read_text()
    assert code == 0, text[-4000:]
    events = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
    names = [event["event"] for event in events]
    assert [line for line in text.splitlines() if not line.startswith("{")] == []
    assert [event for event in events if event["level"] in ("error", "critical")] == []
    assert "Traceback" not in text
    assert "tool.crashed" not in names
    assert "acp.failed" not in names
    assert "provider.removed" in names  # the scope disposed the provider
    assert names[-1] == "acp.stopped"  # every disposer ran: the scopes closed before this line
    gone = [event for event in events if event["event"] == "acp.host_gone"]
    # One info line says why, where something was still to be sent (the withdrawal of the
    # cancelled question is); once stdin ends too, a reply may never be tried.
    expected = [["info"]] if host == "cancels-then-closes" else [[], ["info"]]
    assert [event["level"] for event in gone] in expected, names
    # The tool call whose peer vanished is withdrawn: the client's cancel (when it sent
    # one first) or the host's going away, never a crash or a provider failure.
    ended = [event for event in events if event["event"] in ("tool.failed", "tool.crashed")]
    withdrawn = ("tool.failed", "ASK_CANCELLED" if host == "cancels-then-closes" else "ASK_ABORTED")
    ended_as = [(event["event"], event["code"]) for event in ended]
    if host == "closes-before-the-question":  # the agent's first update may fail first
        assert ended_as in ([], [withdrawn]), names
    else:
        assert ended_as == [withdrawn], names

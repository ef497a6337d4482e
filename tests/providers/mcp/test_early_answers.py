"""``hotseam mcp`` answers a host's first ``initialize`` / ``server/discover`` before the
SDK is imported (cli/_early.py), with what the SDK answers.

Each case runs two real processes at once: stdin a pipe, as a host launches the server
(the early front answers), and stdin a socket (no front: the SDK alone answers, as before
the front existed). The answers must be equal field by field, the process itself must
have compared its front's answer with its SDK's (``early_answer.confirmed``), and nothing
may be answered twice, lost or reordered. One host backend: the server is a subprocess
with its own event loop (``hotseam mcp`` runs on asyncio only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hotseam.cli._early import MCP_HANDSHAKE_VERSIONS, MCP_MODERN_VERSIONS

from ._early import Exchange, both

pytestmark = pytest.mark.anyio

TOOLS = '''\
from pydantic import BaseModel

from hotseam import ToolCall, tool


class Text(BaseModel):
    text: str


@tool()
async def echo(input: Text, call: ToolCall) -> str:
    """Return the text."""
    return input.text


def setup(scope):
    scope.register_tool(echo)
'''
CLIENT = {"name": "claude-code", "title": "Claude Code", "version": "2.1.332"}
CAPABILITIES = {"roots": {"listChanged": True}, "elicitation": {"form": {}, "url": {}}}


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("asyncio", {})


@pytest.fixture
def tools_args(tmp_path: Path) -> list[str]:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "echo.py").write_text(TOOLS)
    return ["mcp", str(tmp_path / "tools")]


def initialize(version: str, request_id: int | str = 0) -> dict[str, Any]:
    return {
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": CAPABILITIES, "clientInfo": CLIENT},
        "jsonrpc": "2.0",
        "id": request_id,
    }


def meta(version: str) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": CLIENT,
        "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
    }


def discover(version: str, request_id: int | str = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "server/discover",
        "params": {"_meta": meta(version)},
    }


def assert_same(early: Exchange, sdk: Exchange) -> None:
    assert early.code == 0 and sdk.code == 0, (early.stderr[-3000:], sdk.stderr[-3000:])
    assert early.messages == sdk.messages  # field by field, in order, nothing twice
    assert not early.log("early_answer.differs"), early.stderr[-3000:]
    assert not sdk.log("early_answer.confirmed")  # a socket: the SDK alone answered


# Each case starts two interpreters that import the SDK (about 2.5 CPU-seconds): `make test`
# runs the newest version of each handshake, an unknown one and the first line of each
# kind; the older handshake versions and the other malformed lines are marked `stress`
# (`make test-stress`, which CI runs, takes them all).
VARIANT = pytest.mark.stress


def _variant_unless_latest(version: str) -> tuple[pytest.MarkDecorator, ...]:
    return () if version == MCP_HANDSHAKE_VERSIONS[-1] else (VARIANT,)


FIRST = [
    *(
        pytest.param(
            initialize(version), id=f"initialize-{version}", marks=_variant_unless_latest(version)
        )
        for version in MCP_HANDSHAKE_VERSIONS
    ),
    pytest.param(initialize("2026-07-28"), id="initialize-2026-07-28"),  # the latest handshake's
    pytest.param(initialize("1999-01-01", "a"), id="initialize-unknown"),
    *(pytest.param(discover(version), id=f"discover-{version}") for version in MCP_MODERN_VERSIONS),
]


@pytest.mark.parametrize("first", FIRST)
async def test_a_hosts_first_request_gets_the_sdks_answer_from_the_front(
    first: dict[str, Any], tools_args: list[str], tmp_path: Path
) -> None:
    early, sdk = await both(tools_args, [first], cwd=tmp_path)
    assert_same(early, sdk)
    assert "result" in early.answer(first["id"])
    [confirmed] = early.log("early_answer.confirmed")  # answered by the front, and the SDK agreed
    assert confirmed["id"] == first["id"] and confirmed["sdk_agrees"] is True


@pytest.mark.parametrize(
    "first",
    [
        pytest.param("not json", id="not-json"),
        pytest.param(
            '{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{}}',
            id="float-id",
            marks=VARIANT,
        ),
        pytest.param(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}},
            id="no-params",
            marks=VARIANT,
        ),
        pytest.param(discover("2099-01-01"), id="discover-unknown-version"),
        pytest.param(
            {"jsonrpc": "2.0", "id": 0, "method": "server/discover"},
            id="discover-no-meta",
            marks=VARIANT,
        ),
        pytest.param({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}, id="tools-list-first"),
    ],
)
async def test_a_first_line_the_front_does_not_know_gets_the_sdks_answer(
    first: dict[str, Any] | str, tools_args: list[str], tmp_path: Path
) -> None:
    """Malformed or unknown: the front leaves it, and what follows it, to the SDK."""
    later = initialize("2025-11-25", 7)
    early, sdk = await both(tools_args, [first, later], cwd=tmp_path)
    assert_same(early, sdk)
    assert not early.log("early_answer.confirmed")
    assert early.messages[-1]["id"] == 7  # after the first line's answer, never before it


async def test_the_handshake_era_in_one_write_is_answered_in_order(
    tools_args: list[str], tmp_path: Path
) -> None:
    """initialize, initialized, tools/list and ping written at once, before the SDK is
    imported: the front answers initialize, the SDK the rest, in order, once each."""
    lines = [
        initialize("2025-06-18", 1),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "ping"},
    ]
    early, sdk = await both(tools_args, lines, cwd=tmp_path)
    assert_same(early, sdk)
    assert [m["id"] for m in early.messages] == [1, 2, 3]
    assert [tool["name"] for tool in early.answer(2)["result"]["tools"]] == ["echo"]
    assert len(early.log("early_answer.confirmed")) == 1


async def test_an_initialize_written_behind_the_probe_is_refused_as_the_sdk_refuses_it(
    tools_args: list[str], tmp_path: Path
) -> None:
    """Claude Code's probe "timed out" on a loaded machine: its ``initialize`` is written
    right behind the unanswered ``server/discover``, both read at once. The probe put the
    server on 2026-07-28, so the handshake is refused with -32022 (the SDK's answer), never
    answered by the front as a first ``initialize`` would be."""
    lines = [discover("2026-07-28", 0), initialize("2025-11-25", 1)]
    early, sdk = await both(tools_args, lines, cwd=tmp_path)
    assert_same(early, sdk)
    assert [m["id"] for m in early.messages] == [0, 1]
    assert early.answer(1)["error"]["code"] == -32022


async def test_requests_sent_after_the_early_answer_are_answered_in_order(
    tools_args: list[str], tmp_path: Path
) -> None:
    """Claude Code's 2026-07-28 start: the probe, then (once answered, while the SDK may
    still import) the listen stream and tools/list; a second probe is the SDK's, after."""
    then = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {"_meta": meta("2026-07-28")},
        },
        discover("2026-07-28", 2),
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/list",
            "params": {"_meta": meta("2026-07-28")},
        },
    ]
    early, sdk = await both(
        tools_args, [discover("2026-07-28")], cwd=tmp_path, then=then, answers_before_then=1
    )
    assert_same(early, sdk)
    assert [m["id"] for m in early.messages] == [0, 1, 2, 3]
    assert early.answer(2) == {**early.answer(0), "id": 2}
    [confirmed] = early.log("early_answer.confirmed")
    assert confirmed["id"] == 0

"""``hotseam acp`` answers a client's first ``initialize`` before the ACP SDK is imported
(cli/_early.py), with what its agent answers.

Each case runs two real processes at once: stdin a pipe, as a client launches the agent
(the early front answers), and stdin a socket (no front: the agent alone answers, as
before the front existed). The answers must be equal field by field, the process must have
compared its front's answer with its agent's (``early_answer.confirmed``), and the agent
must still have seen the ``initialize`` (the client's capabilities recorded). One client
backend: the agent is a subprocess with its own event loop (asyncio only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.providers.mcp._early import Exchange, both

from .test_fallbacks import TOAD_INITIALIZE, ZED_INITIALIZE

pytestmark = pytest.mark.anyio

# Each case starts two interpreters that import the SDK (about 3 CPU-seconds): `make test`
# runs Zed's and Toad's first lines and the first malformed line of each kind; the other
# versions and malformed lines are marked `stress` (`make test-stress`, which CI runs).
VARIANT = pytest.mark.stress


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return ("asyncio", {})


def initialize(params: dict[str, Any], request_id: int | str = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


NEW_SESSION = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "session/new",
    "params": {"cwd": "/", "mcpServers": []},
}


def without_session_ids(exchange: Exchange) -> list[dict[str, Any]]:
    """The messages, a new session's random id masked."""
    masked = []
    for message in exchange.messages:
        result = message.get("result")
        if isinstance(result, dict) and "sessionId" in result:
            message = {**message, "result": {**result, "sessionId": "…"}}
        masked.append(message)
    return masked


def assert_same(early: Exchange, sdk: Exchange) -> None:
    assert early.code == 0 and sdk.code == 0, (early.stderr[-3000:], sdk.stderr[-3000:])
    assert without_session_ids(early) == without_session_ids(sdk)
    assert not early.log("early_answer.differs"), early.stderr[-3000:]
    assert not sdk.log("early_answer.confirmed")


@pytest.mark.parametrize(
    ("params", "form"),
    [
        pytest.param(ZED_INITIALIZE, True, id="zed"),
        pytest.param(TOAD_INITIALIZE, False, id="toad"),
        pytest.param({"protocolVersion": 0}, False, id="version-0-bare", marks=VARIANT),
        pytest.param({**ZED_INITIALIZE, "protocolVersion": 2}, True, id="version-2", marks=VARIANT),
    ],
)
async def test_a_clients_initialize_gets_the_agents_answer_from_the_front(
    params: dict[str, Any], form: bool, tmp_path: Path
) -> None:
    early, sdk = await both(["acp"], [initialize(params), NEW_SESSION], cwd=tmp_path)
    assert_same(early, sdk)
    assert [m["id"] for m in early.messages] == [0, 1]  # session/new after, answered once
    [confirmed] = early.log("early_answer.confirmed")
    assert confirmed["id"] == 0 and confirmed["sdk_agrees"] is True
    [initialized] = early.log("acp.initialized")  # the agent saw the initialize too
    assert initialized["form_elicitation"] is form
    assert initialized == {**sdk.log("acp.initialized")[0], "timestamp": initialized["timestamp"]}


@pytest.mark.parametrize(
    "first",
    [
        pytest.param("not json", id="not-json"),
        pytest.param("[1, 2]", id="an-array", marks=VARIANT),
        pytest.param(initialize({"protocolVersion": "1"}), id="version-a-string", marks=VARIANT),
        pytest.param(initialize({"protocolVersion": 1}, 1.5), id="float-id", marks=VARIANT),
        pytest.param(NEW_SESSION, id="session-new-first"),
    ],
)
async def test_a_first_line_the_front_does_not_know_gets_the_agents_answer(
    first: dict[str, Any] | str, tmp_path: Path
) -> None:
    early, sdk = await both(["acp"], [first, initialize(ZED_INITIALIZE, 7)], cwd=tmp_path)
    assert_same(early, sdk)
    assert not early.log("early_answer.confirmed")
    assert early.messages[-1]["id"] == 7


async def test_a_session_opened_after_the_early_answer_is_answered(tmp_path: Path) -> None:
    """initialize answered early; session/new sent then, while the SDK may still import."""
    early, sdk = await both(
        ["acp"],
        [initialize(ZED_INITIALIZE)],
        cwd=tmp_path,
        then=[NEW_SESSION],
        answers_before_then=1,
    )
    assert_same(early, sdk)
    assert [m["id"] for m in early.messages] == [0, 1]
    assert early.log("early_answer.confirmed")

"""A question withdrawn by a reload and asked again, on a client that ignores the withdrawal.

Toad does not act on ``$/cancel_request``: after a reload its old permission prompt stays
on screen next to the question asked again. The human's answer on either prompt is the
question's answer, exactly once: the first to arrive wins, the other is dropped with a log
line, and the prompt left open is withdrawn. The SDK's own client plays Toad here (it
records ``$/cancel_request`` and leaves the prompt open); the reload is a swap of the
provider module that relays the questions to the ACP client, in process, then a real
``hotseam acp --watch`` with the file rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import Context, Registration, ToolResult
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
)
from hotseam.providers.acp import AcpProvider

from ._harness import (
    ClientRequest,
    Connected,
    Wire,
    answers,
    ask_agent,
    connected,
    spawned,
)

pytestmark = pytest.mark.anyio

DB: dict[str, Any] = {
    "header": "Storage",
    "question": "Which database?",
    "options": [
        {"label": "Postgres", "value": "pg", "recommended": True},
        {"label": "SQLite"},
    ],
}
PERMISSION = "session/request_permission"
CANCEL_REQUEST = "$/cancel_request"


def _selected(option_id: str) -> dict[str, Any]:
    return {"outcome": {"outcome": "selected", "optionId": option_id}}


class Relay:
    """A provider module's provider that hands each question to the ACP provider."""

    def __init__(self, acp: AcpProvider) -> None:
        self._acp = acp

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return await self._acp.ask(request)


class Reloading:
    """The ACP provider in the served context, a relay in the agent's, swapped on demand."""

    def __init__(self, relay: type[Relay] = Relay) -> None:
        self.provider = AcpProvider()
        self.served = Context("acp")
        self.served.provide(USER_INTERACTION, self.provider)
        self.agent_context = self.served.child("acp.agent")
        self._make = relay
        self._relay: Registration[Any] = self.agent_context.provide(
            USER_INTERACTION, relay(self.provider)
        )

    async def reload(self) -> None:
        """What committing a new generation of the relay's module does."""
        async with self.agent_context.swap(USER_INTERACTION):
            await self._relay.dispose()
            self._relay = self.agent_context.provide(USER_INTERACTION, self._make(self.provider))


async def _reasked(acp: Connected, reloading: Reloading) -> tuple[ClientRequest, ClientRequest]:
    """Ask, reload, and return the old prompt (withdrawn, still open) and the new one."""
    old = await acp.next_request(PERMISSION)
    await reloading.reload()
    new = await acp.next_request(PERMISSION)
    old_id, new_id = _ids(acp)
    assert acp.client.cancelled == [old_id]  # withdrawn; the client left it on screen
    assert old_id != new_id
    return old, new


def _ids(acp: Connected) -> list[Any]:
    return [m["id"] for m in acp.client_wire.messages("incoming", PERMISSION)]


def _events(logs: Sequence[Mapping[str, Any]], *names: str) -> list[Mapping[str, Any]]:
    return [entry for entry in logs if entry["event"] in names]


def _agent_side(acp: Connected) -> Wire:
    """What the agent saw (in process)."""
    assert acp.agent_wire is not None
    return acp.agent_wire


async def test_an_answer_on_the_withdrawn_prompt_answers_the_question_asked_again() -> None:
    """The human answers the old prompt: the question asked again resolves with that answer,
    its prompt is withdrawn, and the human's answer there too is dropped, not delivered."""
    reloading = Reloading()
    results: list[ToolResult] = []
    agent = ask_agent(DB, results=results)
    with structlog.testing.capture_logs() as logs:
        async with connected(
            agent,
            context=reloading.agent_context,
            provider=reloading.provider,
            capabilities=None,
        ) as acp:
            pending = acp.start_prompt()
            old, new = await _reasked(acp, reloading)
            old.answer(_selected("SQLite"))
            assert (await pending.result()).stop_reason == "end_turn"
            old_id, new_id = _ids(acp)
            await acp.client_wire.wait_for(
                "incoming",
                lambda m: m.get("method") == CANCEL_REQUEST and m["params"]["requestId"] == new_id,
            )
            new.answer(_selected("pg"))  # the human answers the second prompt as well
            await _agent_side(acp).wait_for("incoming", answers(new_id))
            assert acp.client.said() == "answer: SQLite\n"
    assert [result.output["answer"] for result in results] == ["SQLite"]
    (delivered,) = _events(logs, "acp.late_answer_delivered")
    assert (delivered["request_id"], delivered["method"]) == (old_id, PERMISSION)
    (dropped,) = _events(logs, "acp.answer_dropped", "acp.late_response_ignored")
    assert (dropped["event"], dropped["request_id"]) == ("acp.answer_dropped", new_id)
    assert dropped["log_level"] == "info"


@pytest.mark.parametrize("first", ["old", "new"])
async def test_two_answers_close_together_first_wins(first: str) -> None:
    """Both prompts answered in the same instant, in either order: the first answer to
    arrive is the question's, the other is dropped with one log line, never delivered."""
    reloading = Reloading()
    results: list[ToolResult] = []
    agent = ask_agent(DB, results=results)
    with structlog.testing.capture_logs() as logs:
        async with connected(
            agent,
            context=reloading.agent_context,
            provider=reloading.provider,
            capabilities=None,
        ) as acp:
            pending = acp.start_prompt()
            old, new = await _reasked(acp, reloading)
            old_id, new_id = _ids(acp)
            answered = {"old": (old, "SQLite"), "new": (new, "pg")}
            second = "new" if first == "old" else "old"
            for which in (first, second):  # one after the other, without yielding
                request, option = answered[which]
                request.answer(_selected(option))
            assert (await pending.result()).stop_reason == "end_turn"
            with anyio.fail_after(scaled(5)):  # both responses reach the agent
                while _agent_side(acp).answer_to(old_id, "incoming") is None or (
                    _agent_side(acp).answer_to(new_id, "incoming") is None
                ):
                    await _agent_side(acp).changed()
            arrivals = [
                m["id"]
                for direction, m in _agent_side(acp).events
                if direction == "incoming" and "method" not in m
            ]
            assert arrivals == ([old_id, new_id] if first == "old" else [new_id, old_id])
    assert [result.output["answer"] for result in results] == [answered[first][1]]
    assert len(_events(logs, "acp.late_answer_delivered")) == (1 if first == "old" else 0)
    (dropped,) = _events(logs, "acp.answer_dropped", "acp.late_response_ignored")
    assert dropped["reason"] == (
        "the question was answered first on the prompt a reload had withdrawn; this answer "
        "came second"
        if first == "old"
        else "the question asked again after a reload was answered first"
    )


async def test_a_decline_on_the_withdrawn_form_declines_the_question_asked_again() -> None:
    """With form elicitation: the human declines on the old form; the question asked again
    ends ASK_DECLINED, and its form is withdrawn."""
    reloading = Reloading()
    results: list[ToolResult] = []
    agent = ask_agent(DB, results=results)
    async with connected(
        agent, context=reloading.agent_context, provider=reloading.provider
    ) as acp:
        pending = acp.start_prompt()
        old = await acp.next_request("elicitation/create")
        await reloading.reload()
        await acp.next_request("elicitation/create")
        old.answer({"action": "decline"})
        assert (await pending.result()).stop_reason == "end_turn"
        new_id = acp.elicitations()[1]["id"]
        await acp.client_wire.wait_for(
            "incoming",
            lambda m: m.get("method") == CANCEL_REQUEST and m["params"]["requestId"] == new_id,
        )
    assert [result.error["code"] for result in results] == [ErrorCode.ASK_DECLINED]  # type: ignore[index]


async def test_a_session_cancel_is_not_a_reload() -> None:
    """A question ended by session/cancel is not asked again: an answer on its prompt is
    late, and the same question asked afresh later waits for its own answer."""
    results: list[ToolResult] = []
    reloading = Reloading()
    agent = ask_agent(DB, results=results)
    with structlog.testing.capture_logs() as logs:
        async with connected(
            agent,
            context=reloading.agent_context,
            provider=reloading.provider,
            capabilities=None,
        ) as acp:
            pending = acp.start_prompt()
            old = await acp.next_request(PERMISSION)
            await acp.conn.cancel(session_id=acp.session_id)
            assert (await pending.result()).stop_reason == "cancelled"
            pending = acp.start_prompt()
            new = await acp.next_request(PERMISSION)
            old.answer(_selected("SQLite"))
            old_id, _ = _ids(acp)
            await _agent_side(acp).wait_for("incoming", answers(old_id))
            new.answer(_selected("pg"))
            assert (await pending.result()).stop_reason == "end_turn"
    assert [r.output["answer"] if r.ok else None for r in results] == [None, "pg"]
    (ignored,) = _events(logs, "acp.late_response_ignored")
    assert ignored["request_id"] == old_id


RELAY = """\
from hotseam.interaction import USER_INTERACTION


class Relay:
    generation = {generation}

    def __init__(self, acp):
        self.acp = acp

    async def ask(self, request):
        return await self.acp.ask(request)


def setup(scope):
    acp = scope.context.parent.lookup(USER_INTERACTION)  # the ACP provider, one context up
    scope.provide(USER_INTERACTION, Relay(acp))
"""


async def test_hotseam_acp_with_a_watched_relay_rewritten(tmp_path: Path) -> None:
    """The real thing: ``hotseam acp --watch`` with a provider module that relays questions
    to the client; the file is rewritten while a question is open. The human answers the
    prompt the reload withdrew: the demo agent gets that answer, once."""
    providers = tmp_path / "providers"
    providers.mkdir()
    module = providers / "relay.py"
    module.write_text(RELAY.format(generation=1))
    async with spawned("--watch", str(providers), stderr=None, capabilities=None) as acp:
        pending = acp.start_prompt("fix the bug")
        old = await acp.next_request(PERMISSION)
        module.write_text(RELAY.format(generation=2))
        await acp.wait_for_log(lambda e: e["event"] == "reload.committed" and e["generation"] == 2)
        await acp.next_request(PERMISSION)
        old_id, new_id = _ids(acp)
        assert acp.client.cancelled == [old_id]
        old.answer(_selected("thorough"))
        await acp.client_wire.wait_for(
            "incoming",
            lambda m: m.get("method") == CANCEL_REQUEST and m["params"]["requestId"] == new_id,
        )
        assert (await pending.result()).stop_reason == "end_turn"  # the next question: in chat
        assert acp.client.said().startswith("You asked: fix the bug\nApproach: thorough\n")
        delivered = await acp.wait_for_log(lambda e: e["event"] == "acp.late_answer_delivered")
        assert delivered["request_id"] == old_id
        assert json.dumps(delivered).count("thorough") == 0  # never the answer in the logs

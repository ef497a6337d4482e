"""``await ask(...)`` inside a tool becomes a form elicitation of the calling client, on
both revisions, answered by the ``mcp`` SDK's own client (in process)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel
from tests._timing import scaled

from hotseam import ToolCall, tool
from hotseam.interaction import (
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    ask,
)
from hotseam.providers.scripted import ScriptedProvider

from .conftest import ERAS, WAIT, accept, action, serving


class Nothing(BaseModel):
    pass


DATABASE = AskUserQuestionRequest(
    "Which database?",
    header="Storage",
    options=[
        AskUserQuestionOption("Postgres", value="pg", description="A server", recommended=True),
        AskUserQuestionOption("SQLite", description="One file"),
    ],
)


@tool()
async def pick_database(input: Nothing, call: ToolCall) -> dict[str, Any]:
    """Ask which database."""
    return (await ask(DATABASE)).to_dict()


@tool()
async def plan(input: Nothing, call: ToolCall) -> dict[str, Any]:
    """Ask three questions at once, one of them multi-select."""
    request = AskUserQuestionRequest.of(
        [
            Question("Which database?", header="Storage", id="db", options=DATABASE.options),
            Question(
                "Which checks?",
                id="checks",
                multi_select=True,
                min_selections=1,
                max_selections=2,
                allow_custom=False,
                options=[
                    AskUserQuestionOption("Lint", recommended=True),
                    AskUserQuestionOption("Types"),
                    AskUserQuestionOption("Tests", recommended=True),
                ],
            ),
            Question("Anything else?", id="notes", allow_skip=True),
        ]
    )
    answer = await ask(request)
    return {entry.id: list(entry.values) for entry in answer.answers}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_accept_decline_cancel(mode: str) -> None:
    """question → message, header → title, options → titled oneOf (descriptions in the
    property's description, MCP's options have none), recommended → default, custom text
    as a second field; accept → the answer, decline → ASK_DECLINED, cancel → ASK_CANCELLED."""
    async with serving([pick_database], mode=mode, elicit=accept(answer="SQLite")) as served:
        result = await served.client.call_tool("pick_database", {})
        assert not result.is_error, result
        assert result.structured_content == {
            "answer": "SQLite",
            "option": {"label": "SQLite", "description": "One file"},
        }
        (params,) = served.elicited
        assert params.message == "Which database?"
        schema = params.requested_schema
        assert schema["type"] == "object"
        assert schema["required"] == ["answer"]
        answer = schema["properties"]["answer"]
        assert answer["default"] == "pg"
        assert [(o["const"], o["title"]) for o in answer["oneOf"]] == [
            ("pg", "Postgres (Recommended)"),
            ("SQLite", "SQLite"),
            ("_other", "Other (type it below)"),
        ]
        assert all("description" not in o for o in answer["oneOf"])
        assert "Postgres (Recommended): A server" in answer["description"]
        assert schema["properties"]["custom"]["type"] == "string"
        if mode == "legacy":  # 2026-07-28's schema has no title: the SDK leaves it out
            assert schema["title"] == "Storage"

    async with serving([pick_database], mode=mode, elicit=accept(custom="MySQL")) as served:
        result = await served.client.call_tool("pick_database", {})
        assert result.structured_content["answer"] == "MySQL"  # type: ignore[index]

    for name, code in (("decline", "ASK_DECLINED"), ("cancel", "ASK_CANCELLED")):
        async with serving([pick_database], mode=mode, elicit=action(name)) as served:
            result = await served.client.call_tool("pick_database", {})
            assert result.is_error
            assert result.structured_content["name"] == "UserInteractionError"  # type: ignore[index]
            assert result.structured_content["code"] == code  # type: ignore[index]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_several_questions_and_multi_select_in_one_form(mode: str) -> None:
    """Three questions are one form: a property per question id, the multi-select one an
    array of titled anyOf items within minItems/maxItems (recommended as default), the
    skippable one left out of required."""
    content = {"db": "pg", "checks": ["Lint", "Types"]}
    async with serving([plan], mode=mode, elicit=accept(**content)) as served:
        result = await served.client.call_tool("plan", {})
        assert not result.is_error, result
        assert result.structured_content == {
            "db": ["pg"],
            "checks": ["Lint", "Types"],
            "notes": [],
        }
        (params,) = served.elicited
        assert params.message.splitlines()[1:] == [
            "1. Storage: Which database?",
            "2. Which checks?",
            "3. Anything else?",
        ]
        schema = params.requested_schema
        checks = schema["properties"]["checks"]
        assert checks["type"] == "array"
        assert (checks["minItems"], checks["maxItems"]) == (1, 2)
        assert [o["const"] for o in checks["items"]["anyOf"]] == ["Lint", "Types", "Tests"]
        assert checks["default"] == ["Lint", "Tests"]
        assert set(schema["required"]) == {"db", "checks"}


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_an_incomplete_form_is_asked_again_then_invalid(mode: str) -> None:
    """A multi-select answer outside its bounds (a client that ignores maxItems) is asked
    again with a note, pre-filled; three times over is INVALID_ANSWER naming the question."""
    content = {"db": "pg", "checks": ["Lint", "Types", "Tests"]}
    async with serving([plan], mode=mode, elicit=accept(**content)) as served:
        result = await served.client.call_tool("plan", {})
        assert result.is_error
        assert result.structured_content["code"] == "INVALID_ANSWER"  # type: ignore[index]
        assert "Which checks?" in result.structured_content["message"]  # type: ignore[index]
        assert len(served.elicited) == 3
        assert served.elicited[1].message.startswith("Please answer every question")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_without_elicitation_is_told_to_ask_in_the_conversation(
    mode: str,
) -> None:
    """No elicitation capability, no fallback: a tool error the model can read, naming the
    question and its options and telling it what it can do (ask in the conversation, not
    call the tool again: the tool has no input for an answer) — never a hang."""
    async with serving([pick_database], mode=mode) as served:
        result = await served.client.call_tool("pick_database", {})
        assert result.is_error
        error = result.structured_content
        assert error is not None
        assert (error["name"], error["code"]) == ("UserInteractionError", "NO_PROVIDER")
        assert error["message"] == (
            "mcp cannot show this tool's question to the user (it advertised no form "
            "elicitation capability). Ask the user in the conversation instead and carry on "
            "with their answer; do not call this tool again for it (it would fail the same "
            "way):\n"
            "[Storage] Which database?\n"
            "   options: Postgres, SQLite"
        )
        # Nothing the model cannot do: the tool has no input for an answer to come back in.
        assert "again with" not in error["message"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_without_elicitation_gets_the_fallback(mode: str) -> None:
    """With a fallback (the web inbox of --web), the question goes there instead."""
    fallback = ScriptedProvider(["SQLite"])
    async with serving([pick_database], mode=mode, fallback=fallback) as served:
        result = await served.client.call_tool("pick_database", {})
        assert not result.is_error, result
        assert result.structured_content["answer"] == "SQLite"  # type: ignore[index]


@pytest.mark.anyio
async def test_a_client_that_refuses_the_method_gets_the_fallback() -> None:
    """A client that advertised elicitation but answers -32601: the fallback, from then on
    without asking it again."""
    refusals = []

    async def refuse(params: types.ElicitRequestFormParams) -> Any:
        refusals.append(params)
        return types.ErrorData(code=-32601, message="Method not found")

    fallback = ScriptedProvider(["SQLite", "pg"])
    async with serving([pick_database], mode="legacy", elicit=refuse, fallback=fallback) as served:
        first = await served.client.call_tool("pick_database", {})
        second = await served.client.call_tool("pick_database", {})
    assert first.structured_content["answer"] == "SQLite"  # type: ignore[index]
    assert second.structured_content["answer"] == "pg"  # type: ignore[index]
    assert len(refusals) == 1


@pytest.mark.anyio
async def test_an_unknown_request_state_is_refused() -> None:
    """2026-07-28: a retry whose requestState this server never gave (or forgot) is -32602,
    telling the client to call again without it."""
    async with serving([pick_database], mode="2026-07-28", elicit=accept()) as served:
        with pytest.raises(MCPError) as refused:
            await served.client.session.call_tool(
                "pick_database", {}, request_state="forged", allow_input_required=True
            )
    assert refused.value.code == -32602
    assert "requestState is unknown or expired" in refused.value.message


@pytest.mark.anyio
async def test_a_question_left_waiting_ends_after_the_ttl() -> None:
    """2026-07-28: a client that never comes back with the answer: the question fails with
    ASK_CANCELLED after input_ttl, and the next round reports it."""
    async with serving(
        [pick_database], mode="2026-07-28", elicit=accept(), input_ttl=0.2
    ) as served:
        first = await served.client.session.call_tool(
            "pick_database", {}, allow_input_required=True
        )
        assert isinstance(first, types.InputRequiredResult)
        assert list(first.input_requests or {}) == ["q1"]
        await anyio.sleep(0.3)  # the time-to-live passes with no retry
        with anyio.fail_after(scaled(WAIT)):
            result = await served.client.session.call_tool(
                "pick_database", {}, request_state=first.request_state, allow_input_required=True
            )
    assert isinstance(result, types.CallToolResult)
    assert result.is_error
    assert result.structured_content["code"] == "ASK_CANCELLED"  # type: ignore[index]
    assert "did not come back with an answer within 0.2 s" in result.structured_content["message"]  # type: ignore[index]


TOOL_ENDED: list[anyio.Event] = []


@tool()
async def pick_and_note_the_end(input: Nothing, call: ToolCall) -> str:
    """Ask; note when the call ends, however it ends."""
    try:
        return (await ask(DATABASE)).answer
    finally:
        TOOL_ENDED[-1].set()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ERAS)
async def test_a_client_that_abandons_the_call_stops_the_tool(mode: str) -> None:
    """The client gives up while the form is open. 2025-11-25: its tools/call is cancelled
    (notifications/cancelled) and the tool stops at once. 2026-07-28: no request is in
    flight while the client shows the form, so nothing tells the server: the question's
    time-to-live ends it, and the tool stops then."""
    TOOL_ENDED.append(anyio.Event())
    shown = anyio.Event()

    async def wait_forever(params: types.ElicitRequestFormParams) -> types.ElicitResult:
        shown.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with serving(
        [pick_and_note_the_end], mode=mode, elicit=wait_forever, input_ttl=0.3
    ) as served:
        with anyio.CancelScope() as abandoned:

            async def abandon() -> None:
                await shown.wait()
                abandoned.cancel()

            async with anyio.create_task_group() as group:
                group.start_soon(abandon)
                await served.client.call_tool("pick_and_note_the_end", {})
        assert abandoned.cancelled_caught
        with anyio.fail_after(scaled(WAIT)):
            await TOOL_ENDED[-1].wait()


@pytest.mark.anyio
async def test_a_2025_06_18_host_gets_enum_and_enum_names_beside_one_of() -> None:
    """A raw host on 2025-06-18 (``elicitation: {}``, that revision's shape): initialize is
    answered at its revision, and a one-choice property also carries ``enum`` +
    ``enumNames``, as that revision knows titled choices; its answer is the tool's."""
    from mcp.shared.message import SessionMessage

    from hotseam import Context, Scope
    from hotseam.interaction import USER_INTERACTION
    from hotseam.providers.mcp import McpProvider, McpServer

    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](8)
    server_writes, from_server = anyio.create_memory_object_stream[SessionMessage](8)

    async def request(message: dict[str, Any]) -> dict[str, Any]:
        await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
        if "id" not in message or "method" not in message:
            return {}
        with anyio.fail_after(scaled(WAIT)):
            reply = await from_server.receive()
        return reply.message.model_dump(by_alias=True, exclude_none=True)

    base = Context("mcp")
    tools = base.child("mcp.tools")
    async with (
        to_server,
        server_reads,
        server_writes,
        from_server,
        Scope("test", context=base) as scope,
        Scope("tools", context=tools) as own,
    ):
        scope.provide(USER_INTERACTION, McpProvider())
        own.register_tool(pick_database)
        server = McpServer(tools)
        async with server.running(), anyio.create_task_group() as group:
            group.start_soon(server.serve, server_reads, server_writes)
            answer = await request(
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"elicitation": {}},
                        "clientInfo": {"name": "raw", "version": "1"},
                    },
                }
            )
            assert answer["result"]["protocolVersion"] == "2025-06-18"
            await request({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "pick_database", "arguments": {}}
            form = await request(
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
            )
            assert form["method"] == "elicitation/create"
            assert form["params"]["message"] == "Which database?"
            choice = form["params"]["requestedSchema"]["properties"]["answer"]
            assert choice["enum"] == ["pg", "SQLite", "_other"]
            assert choice["enumNames"] == [
                "Postgres (Recommended)",
                "SQLite",
                "Other (type it below)",
            ]
            assert [o["const"] for o in choice["oneOf"]] == choice["enum"]
            accepted = {"action": "accept", "content": {"answer": "SQLite"}}
            reply = {"jsonrpc": "2.0", "id": form["id"], "result": accepted}
            await request(reply)
            with anyio.fail_after(scaled(WAIT)):
                done = (await from_server.receive()).message.model_dump(by_alias=True)
            assert done["id"] == 1
            assert done["result"]["structuredContent"]["answer"] == "SQLite"
            await to_server.aclose()


RUNNING: list[anyio.Event] = []


@tool()
async def pick_then_work(input: Nothing, call: ToolCall) -> str:
    """Ask, then work long; note when the work starts and when the call ends."""
    try:
        answer = (await ask(DATABASE)).answer
        RUNNING[-2].set()
        await anyio.sleep_forever()
        return answer
    finally:
        RUNNING[-1].set()


@pytest.mark.anyio
async def test_a_retry_cancelled_in_flight_stops_the_tool_at_once() -> None:
    """2026-07-28: the retry that brings the answer is in flight while the tool works on;
    the client cancelling it (notifications/cancelled) stops the tool at once, not at the
    time-to-live (docs/mcp.md, 'A 2026-07-28 client that gives up')."""
    RUNNING.extend([anyio.Event(), anyio.Event()])
    async with serving(
        [pick_then_work], mode="2026-07-28", elicit=accept(), input_ttl=600
    ) as served:
        shown = await served.client.session.call_tool(
            "pick_then_work", {}, allow_input_required=True
        )
        assert isinstance(shown, types.InputRequiredResult)
        answer = types.ElicitResult(action="accept", content={"answer": "SQLite"})
        with anyio.CancelScope() as retry:

            async def give_up() -> None:
                await RUNNING[-2].wait()  # the tool has its answer and works on
                retry.cancel()

            async with anyio.create_task_group() as group:
                group.start_soon(give_up)
                await served.client.session.call_tool(
                    "pick_then_work",
                    {},
                    input_responses={"q1": answer},
                    request_state=shown.request_state,
                    allow_input_required=True,
                )
        assert retry.cancelled_caught
        with anyio.fail_after(scaled(WAIT)):
            await RUNNING[-1].wait()

"""End to end in process: the ACP agent against the SDK's own client, raw wire asserted."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest
import structlog
from acp.exceptions import RequestError
from acp.schema import (
    AcceptElicitationResponse,
    AllowedOutcome,
    DeclineElicitationResponse,
    RequestPermissionResponse,
)
from tests._timing import scaled

from hotseam import AbortController, Context, HarnessError, ToolResult
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
)
from hotseam.providers.acp import AcpProvider, ask_scope, current_ask_scope, current_turn
from hotseam.providers.scripted import ScriptedProvider

from ._harness import FORM, WAIT, Connected, answers, ask_agent, connected, rpc_error

pytestmark = pytest.mark.anyio

DB: dict[str, Any] = {
    "header": "Storage",
    "question": "Which database?",
    "options": [
        {"label": "Postgres", "value": "pg", "description": "Server database", "recommended": True},
        {"label": "SQLite", "description": "One file"},
    ],
}
DB_STRICT = {**DB, "allow_custom": False}
NAME = {"question": "What is your name?"}


def _errors(results: list[ToolResult]) -> list[str | None]:
    return [None if r.ok else r.error["code"] for r in results]  # type: ignore[index]


async def _served_next(acp: Connected, results: list[ToolResult], questions: int = 1) -> None:
    """The agent keeps serving: a next prompt's questions are asked and answered normally."""
    before = len(results)
    pending = acp.start_prompt("again")
    for _ in range(questions):
        request = await acp.next_request()
        request.answer({"action": "accept", "content": {"answer": "pg"}})
    assert (await pending.result()).stop_reason == "end_turn"
    assert [result.output["answer"] for result in results[before:]] == ["pg"] * questions


class TestAnswers:
    async def test_accept_and_the_wire_message(self) -> None:
        """The raw elicitation/create: session + tool call scope, the schema with type object."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB, results=results)) as acp:
            pending = acp.start_prompt()
            request = await acp.next_request()
            request.answer(AcceptElicitationResponse(action="accept", content={"answer": "pg"}))
            assert (await pending.result()).stop_reason == "end_turn"
            (tool_call,) = acp.client.tool_calls()
            (raw,) = acp.elicitations()
            assert raw["params"] == {
                "sessionId": acp.session_id,
                "toolCallId": tool_call.tool_call_id,
                "mode": "form",
                "message": "Which database?",
                "requestedSchema": {
                    "type": "object",
                    "title": "Storage",
                    "properties": {
                        "answer": {
                            "type": "string",
                            "title": "Choice",
                            "default": "pg",
                            "oneOf": [
                                {
                                    "const": "pg",
                                    "title": "Postgres (Recommended)",
                                    "description": "Server database",
                                },
                                {"const": "SQLite", "title": "SQLite", "description": "One file"},
                                {"const": "_other", "title": "Other (type it below)"},
                            ],
                        },
                        "custom": {
                            "type": "string",
                            "title": "Other",
                            "description": (
                                "Your own answer instead of a choice; when filled in, it is used."
                            ),
                        },
                    },
                    "required": ["answer"],
                },
            }
            assert '"requestedSchema":{"type":"object"' in "\n".join(acp.client_wire.raw_lines())
            assert acp.client.said() == "answer: pg\n"
        assert results[0].output == {
            "answer": "pg",
            "option": {
                "label": "Postgres",
                "value": "pg",
                "description": "Server database",
                "recommended": True,
            },
        }

    async def test_the_tool_call_is_reported_around_the_question(self) -> None:
        """tool_call (in_progress) before the elicitation, tool_call_update after the answer."""
        async with connected(ask_agent(DB)) as acp:
            pending = acp.start_prompt()
            request = await acp.next_request()
            (start,) = acp.client.tool_calls()
            assert (start.title, start.status, start.kind) == (
                "Which database?",
                "in_progress",
                "other",
            )
            assert start.raw_input["question"] == "Which database?"
            assert acp.client.tool_call_updates() == []
            request.answer({"action": "accept", "content": {"answer": "SQLite"}})
            await pending.result()
            (end,) = acp.client.tool_call_updates()
            assert end.tool_call_id == start.tool_call_id
            assert end.status == "completed"
            assert end.raw_output["answer"] == "SQLite"

    async def test_custom_text_wins(self) -> None:
        """A filled Other field is the answer, even with an option selected."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB, results=results)) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).answer(
                {"action": "accept", "content": {"answer": "pg", "custom": "MariaDB"}}
            )
            await pending.result()
        assert results[0].output == {"answer": "MariaDB", "option": None}

    async def test_free_form(self) -> None:
        """One required string field; its text is the answer."""
        results: list[ToolResult] = []
        async with connected(ask_agent(NAME, results=results)) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).answer({"action": "accept", "content": {"answer": "Ada"}})
            await pending.result()
            schema = acp.elicitations()[0]["params"]["requestedSchema"]
            assert schema == {
                "type": "object",
                "properties": {"answer": {"type": "string", "title": "Answer", "minLength": 1}},
                "required": ["answer"],
            }
        assert results[0].output == {"answer": "Ada", "option": None}

    async def test_decline(self) -> None:
        """decline → ASK_DECLINED for the agent; the tool call fails; the agent serves on."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB, results=results)) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).answer(DeclineElicitationResponse(action="decline"))
            assert (await pending.result()).stop_reason == "end_turn"
            assert acp.client.tool_call_updates()[0].status == "failed"
            assert (
                acp.client.tool_call_updates()[0].raw_output["error"]["code"]
                == ErrorCode.ASK_DECLINED
            )
            await _served_next(acp, results)
        assert _errors(results) == [ErrorCode.ASK_DECLINED, None]

    async def test_cancel(self) -> None:
        """cancel (the human dismissed the form) → ASK_CANCELLED."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB, results=results)) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).answer({"action": "cancel"})
            await pending.result()
            await _served_next(acp, results)
        assert _errors(results) == [ErrorCode.ASK_CANCELLED, None]

    async def test_a_json_rpc_error_is_provider_failed_with_the_remote_code(self) -> None:
        """The client's error code and message travel in the error."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB, results=results)) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).fail(rpc_error(-32602, "Invalid params", {"why": "x"}))
            await pending.result()
            await _served_next(acp, results)
        error = results[0].error
        assert error is not None
        assert error["code"] == ErrorCode.PROVIDER_FAILED
        assert "JSON-RPC error -32602: Invalid params" in error["message"]
        assert error["details"] == {
            "rpc_code": -32602,
            "rpc_message": "Invalid params",
            "rpc_data": {"why": "x"},
        }


class TestMalformedResponses:
    @pytest.mark.parametrize(
        ("result", "problem"),
        [
            ({"action": "accept", "content": {"answer": 5}}, "content.answer must be a string"),
            ({"action": "accept", "content": "pg"}, "content must be an object, got string"),
            ({"action": "maybe"}, "action unknown action 'maybe' is not understood"),
            ({"action": 1}, "action must be a string, got number"),
            (
                {"action": "accept", "content": {"answer": "pg", "colour": "red"}},
                "content.colour was not asked for",
            ),
            (
                {"action": "accept", "content": {"answer": "MySQL"}},
                "content.answer is none of the options",
            ),
        ],
        ids=[
            "wrong-type",
            "content-not-object",
            "unknown-action",
            "action-type",
            "unasked",
            "value",
        ],
    )
    async def test_a_clear_error_then_the_next_prompt(self, result: Any, problem: str) -> None:
        """Each malformed answer is INVALID_ANSWER naming the problem; serving goes on."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB_STRICT, results=results)) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).answer(result)
            assert (await pending.result()).stop_reason == "end_turn"
            assert acp.client.said() == f"error: {ErrorCode.INVALID_ANSWER}\n"
            await _served_next(acp, results)
        assert results[0].error is not None
        assert results[0].error["code"] == ErrorCode.INVALID_ANSWER
        assert problem in results[0].error["message"]


class TestCapabilities:
    async def test_the_sdk_client_without_the_unstable_opt_in(self) -> None:
        """Advertised form but no use_unstable_protocol: the SDK client refuses (-32601).

        The agent degrades to the fallbacks with one warning instead of failing every
        question: the question with options goes as a permission request, and the next
        questions never try elicitation/create again.
        """
        results: list[ToolResult] = []
        with (
            pytest.warns(UserWarning, match="use_unstable_protocol"),
            structlog.testing.capture_logs() as logs,
        ):
            async with connected(ask_agent(DB, DB, results=results), unstable=False) as acp:
                pending = acp.start_prompt()
                for option in ("pg", "SQLite"):
                    request = await acp.next_request("session/request_permission")
                    request.answer({"outcome": {"outcome": "selected", "optionId": option}})
                assert (await pending.result()).stop_reason == "end_turn"
                assert len(acp.elicitations()) == 1
        assert [r.output["answer"] for r in results] == ["pg", "SQLite"]
        refused = [e for e in logs if e["event"] == "acp.form_elicitation_refused"]
        assert [e["log_level"] for e in refused] == ["warning"]

    async def test_permission_fallback_for_a_closed_question(self) -> None:
        """Options and no custom answers: session/request_permission; selected → answer."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB_STRICT, results=results), capabilities=None) as acp:
            pending = acp.start_prompt()
            request = await acp.next_request("session/request_permission")
            request.answer(
                RequestPermissionResponse(
                    outcome=AllowedOutcome(outcome="selected", option_id="SQLite")
                )
            )
            await pending.result()
            (raw,) = acp.client_wire.messages("incoming", "session/request_permission")
            (tool_call,) = acp.client.tool_calls()
            assert raw["params"]["sessionId"] == acp.session_id
            assert raw["params"]["toolCall"]["toolCallId"] == tool_call.tool_call_id
            assert raw["params"]["options"] == [
                {"optionId": "pg", "name": "Postgres (Recommended)", "kind": "allow_once"},
                {"optionId": "SQLite", "name": "SQLite", "kind": "allow_once"},
            ]
        assert results[0].output["answer"] == "SQLite"

    @pytest.mark.parametrize(
        ("outcome", "code"),
        [
            ({"outcome": "cancelled"}, ErrorCode.ASK_CANCELLED),
            ({"outcome": "selected", "optionId": "nope"}, ErrorCode.INVALID_ANSWER),
        ],
    )
    async def test_permission_fallback_outcomes(self, outcome: dict[str, Any], code: str) -> None:
        """cancelled → ASK_CANCELLED; an option that was not offered → INVALID_ANSWER."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB_STRICT, results=results), capabilities=None) as acp:
            pending = acp.start_prompt()
            (await acp.next_request("session/request_permission")).answer({"outcome": outcome})
            await pending.result()
        assert _errors(results) == [code]

    async def test_no_fallback_when_disabled(self) -> None:
        """permission_fallback=False: NO_PROVIDER for every question."""
        results: list[ToolResult] = []
        context = Context("no-fallback")
        provider = AcpProvider(permission_fallback=False)
        context.provide(USER_INTERACTION, provider)
        agent = ask_agent(DB_STRICT, results=results)
        async with connected(agent, capabilities=None, context=context, provider=provider) as acp:
            await acp.prompt()
        assert _errors(results) == [ErrorCode.NO_PROVIDER]


class TestScope:
    async def test_each_session_gets_its_own_questions(self) -> None:
        """Two sessions at once: each elicitation names the session of its prompt turn."""
        async with connected(ask_agent(NAME)) as acp:
            other = (await acp.conn.new_session(cwd="/tmp")).session_id
            first = acp.start_prompt(session_id=acp.session_id)
            one = await acp.next_request()
            second = acp.start_prompt(session_id=other)
            two = await acp.next_request()
            assert [m["params"]["sessionId"] for m in acp.elicitations()] == [acp.session_id, other]
            two.answer({"action": "accept", "content": {"answer": "Bo"}})
            one.answer({"action": "accept", "content": {"answer": "Ada"}})
            await first.result()
            await second.result()
            assert acp.client.said(acp.session_id) == "answer: Ada\n"
            assert acp.client.said(other) == "answer: Bo\n"

    async def test_an_ask_outside_a_tool_call_names_only_the_session(self) -> None:
        """ask() called directly by the agent: no toolCallId."""
        answers: list[str] = []

        async def agent(context: Context) -> None:
            assert current_ask_scope() is not None
            answers.append((await ask(AskUserQuestionRequest("Name?"), context=context)).answer)

        async with connected(agent) as acp:
            pending = acp.start_prompt()
            (await acp.next_request()).answer({"action": "accept", "content": {"answer": "Ada"}})
            await pending.result()
            params = acp.elicitations()[0]["params"]
            assert params["sessionId"] == acp.session_id
            assert "toolCallId" not in params
        assert answers == ["Ada"]

    async def test_an_ask_outside_any_session_has_no_provider(self) -> None:
        """The provider cannot guess a session: NO_PROVIDER with how to fix it."""
        context = Context("outside")
        provider = AcpProvider()
        context.provide(USER_INTERACTION, provider)
        with pytest.raises(UserInteractionError, match="ask_scope") as caught:
            await ask(AskUserQuestionRequest("Name?"), context=context)
        assert caught.value.code == ErrorCode.NO_PROVIDER
        with ask_scope("sess_1"), pytest.raises(UserInteractionError, match="not attached"):
            await ask(AskUserQuestionRequest("Name?"), context=context)


class TestCancellation:
    async def test_an_answer_arriving_as_the_ask_is_aborted_stands(self) -> None:
        """The human's answer reaches the agent even though its signal fired in the very
        turn the response arrived: no ASK_ABORTED, no $/cancel_request, no late-answer log."""
        controller = AbortController()
        results: list[ToolResult] = []
        with structlog.testing.capture_logs() as logs:
            async with connected(ask_agent(DB, results=results, signal=controller.signal)) as acp:
                assert acp.agent_wire is not None

                def abort_on_answer(direction: str, message: dict[str, Any]) -> None:
                    if direction == "incoming" and "method" not in message and "result" in message:
                        controller.abort("the agent moved on")

                acp.agent_wire.on_message = abort_on_answer
                pending = acp.start_prompt()
                request = await acp.next_request()
                request.answer({"action": "accept", "content": {"answer": "SQLite"}})
                await pending.result()
                assert acp.client_wire.messages("incoming", "$/cancel_request") == []
        assert controller.signal.aborted
        assert [r.output for r in results] == [
            {"answer": "SQLite", "option": results[0].output["option"]}
        ]
        assert [e for e in logs if e["event"] == "acp.answer_kept"]
        assert not [e for e in logs if e["event"] == "acp.late_response_ignored"]

    async def test_session_cancel_while_an_elicitation_is_open(self) -> None:
        """ASK_CANCELLED for the question, $/cancel_request for its request, stop reason
        cancelled; the late answer is ignored; the next prompt is served."""
        results: list[ToolResult] = []
        with structlog.testing.capture_logs() as logs:
            async with connected(ask_agent(DB, NAME, results=results)) as acp:
                pending = acp.start_prompt()
                request = await acp.next_request()
                (elicitation,) = acp.elicitations()
                await acp.conn.cancel(session_id=acp.session_id)
                assert (await pending.result()).stop_reason == "cancelled"
                cancel = await acp.client_wire.wait_for(
                    "incoming", lambda m: m.get("method") == "$/cancel_request"
                )
                assert cancel["params"] == {"requestId": elicitation["id"]}
                assert len(acp.elicitations()) == 1  # NAME never reached the client
                request.answer({"action": "accept", "content": {"answer": "pg"}})  # late
                await acp.agent_wire.wait_for("incoming", answers(elicitation["id"]))
                assert acp.client.tool_call_updates()[0].status == "failed"
                assert acp.client.cancelled == [elicitation["id"]]
                await _served_next(acp, results, questions=2)
        # The open question, and any the agent tried after the cancel: ASK_CANCELLED.
        assert set(_errors(results)[:-2]) == {ErrorCode.ASK_CANCELLED}
        assert _errors(results)[-2:] == [None, None]
        failed = [e for e in logs if e["event"] == "ask.failed"]
        assert failed[0]["code"] == ErrorCode.ASK_CANCELLED
        late = [e for e in logs if e["event"] == "acp.late_response_ignored"]
        assert late == [
            {
                "event": "acp.late_response_ignored",
                "log_level": "warning",
                "logger": "hotseam.providers.acp",
                "request_id": elicitation["id"],
                "method": "elicitation/create",
                "response": {"action": "accept"},
                "reason": "the request was cancelled ($/cancel_request sent) before this answer",
            }
        ]

    async def test_session_cancel_of_a_turn_without_questions(self) -> None:
        """The agent function itself is cancelled; the turn ends as cancelled."""
        started = anyio.Event()

        async def agent(context: Context) -> None:
            started.set()
            await anyio.sleep_forever()

        async with connected(agent) as acp:
            pending = acp.start_prompt()
            with anyio.fail_after(scaled(WAIT)):
                await started.wait()
            await acp.conn.cancel(session_id=acp.session_id)
            assert (await pending.result()).stop_reason == "cancelled"

    async def test_the_turn_signal_fires_on_session_cancel(self) -> None:
        """current_turn().signal lets an agent wind down its own work; its reason says why."""
        reasons: list[BaseException] = []
        started = anyio.Event()

        async def agent(context: Context) -> None:
            current_turn().signal.add_callback(reasons.append)
            started.set()
            await anyio.sleep_forever()

        async with connected(agent) as acp:
            pending = acp.start_prompt()
            with anyio.fail_after(scaled(WAIT)):
                await started.wait()
            await acp.conn.cancel(session_id=acp.session_id)
            assert (await pending.result()).stop_reason == "cancelled"
        (reason,) = reasons
        assert isinstance(reason, HarnessError)
        assert reason.code == "CANCELLED"
        assert "the ACP client cancelled the prompt turn" in reason.message

    async def test_a_failing_signal_callback_does_not_stop_the_cancel(self) -> None:
        """An agent's broken callback is logged; the turn still ends as cancelled."""
        started = anyio.Event()

        def broken(reason: BaseException) -> None:
            raise RuntimeError("callback bug")

        async def agent(context: Context) -> None:
            current_turn().signal.add_callback(broken)
            started.set()
            await anyio.sleep_forever()

        with structlog.testing.capture_logs() as logs:
            async with connected(agent) as acp:
                pending = acp.start_prompt()
                with anyio.fail_after(scaled(WAIT)):
                    await started.wait()
                await acp.conn.cancel(session_id=acp.session_id)
                assert (await pending.result()).stop_reason == "cancelled"
        assert "acp.cancel_callback_failed" in [e["event"] for e in logs]

    async def test_an_agent_side_abort_sends_cancel_request(self) -> None:
        """The ask's signal fires: $/cancel_request for the pending elicitation, ASK_ABORTED;
        the client's late answer is ignored and logged; the agent keeps serving."""
        results: list[ToolResult] = []
        controller = AbortController()
        with structlog.testing.capture_logs() as logs:
            async with connected(ask_agent(DB, results=results, signal=controller.signal)) as acp:
                pending = acp.start_prompt()
                request = await acp.next_request()
                (elicitation,) = acp.elicitations()
                controller.abort()
                cancel = await acp.client_wire.wait_for(
                    "incoming", lambda m: m.get("method") == "$/cancel_request"
                )
                assert cancel["params"] == {"requestId": elicitation["id"]}
                assert (await pending.result()).stop_reason == "end_turn"
                request.answer({"action": "accept", "content": {"answer": "pg"}})
                await acp.agent_wire.wait_for("incoming", answers(elicitation["id"]))
                assert acp.client.said() == f"error: {ErrorCode.ASK_ABORTED}\n"
        assert _errors(results) == [ErrorCode.ASK_ABORTED]
        assert [e["request_id"] for e in logs if e["event"] == "acp.late_response_ignored"] == [
            elicitation["id"]
        ]

    @pytest.mark.parametrize(
        ("question", "capabilities", "method", "ack", "summary"),
        [
            (
                NAME,
                FORM,
                "elicitation/create",
                rpc_error(-32800, "Request cancelled"),
                {"error": {"code": -32800, "message": "Request cancelled"}},
            ),
            (NAME, FORM, "elicitation/create", {"action": "cancel"}, {"action": "cancel"}),
            (
                DB,
                None,
                "session/request_permission",
                {"outcome": {"outcome": "cancelled"}},
                {"result_keys": ["outcome"]},
            ),
        ],
        ids=["-32800", "action-cancel", "outcome-cancelled"],
    )
    async def test_a_cancel_acknowledgement_is_not_a_late_answer(
        self,
        question: dict[str, Any],
        capabilities: Any,
        method: str,
        ack: Any,
        summary: dict[str, Any],
    ) -> None:
        """What the spec mandates after $/cancel_request (-32800, or the method's own
        "cancelled") is the client doing its duty: debug level, never a late answer."""
        controller = AbortController()
        with structlog.testing.capture_logs() as logs:
            agent = ask_agent(question, signal=controller.signal)
            async with connected(agent, capabilities=capabilities) as acp:
                pending = acp.start_prompt()
                request = await acp.next_request(method)
                (sent,) = acp.client_wire.messages("incoming", method)
                controller.abort()
                await pending.result()
                await acp.client_wire.wait_for(
                    "incoming", lambda m: m.get("method") == "$/cancel_request"
                )
                if isinstance(ack, Exception):
                    request.fail(ack)
                else:
                    request.answer(ack)
                await acp.agent_wire.wait_for("incoming", answers(sent["id"]))
        assert [e["event"] for e in logs if e["event"].startswith("acp.late")] == []
        (acked,) = [e for e in logs if e["event"] == "acp.cancel_acknowledged"]
        assert acked["log_level"] == "debug"
        assert acked["response"] == summary
        assert acked["method"] == method

    async def test_a_reload_withdraws_the_question_and_the_new_provider_answers(self) -> None:
        """The ACP provider is swapped out mid-question: $/cancel_request, then re-asked."""
        results: list[ToolResult] = []
        context = Context("reloading")
        provider = AcpProvider()
        registration = context.provide(USER_INTERACTION, provider)
        agent = ask_agent(DB, results=results)
        async with connected(agent, context=context, provider=provider) as acp:
            pending = acp.start_prompt()
            await acp.next_request()
            (elicitation,) = acp.elicitations()
            async with context.swap(USER_INTERACTION):
                await registration.dispose()
                context.provide(USER_INTERACTION, ScriptedProvider(["SQLite"]))
            await pending.result()
            cancels = acp.client_wire.messages("incoming", "$/cancel_request")
            assert cancels == [
                {
                    "jsonrpc": "2.0",
                    "method": "$/cancel_request",
                    "params": {"requestId": elicitation["id"]},
                }
            ]
        assert results[0].output["answer"] == "SQLite"

    async def test_an_incoming_cancel_request_for_the_prompt(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """$/cancel_request naming the session/prompt request cancels the turn, handled."""
        results: list[ToolResult] = []
        with caplog.at_level(logging.INFO):
            async with connected(ask_agent(DB, results=results)) as acp:
                pending = acp.start_prompt()
                await acp.next_request()
                (prompt,) = acp.client_wire.messages("outgoing", "session/prompt")
                await acp.cancel_request(prompt["id"])
                assert (await pending.result()).stop_reason == "cancelled"
                await acp.client_wire.wait_for(
                    "incoming", lambda m: m.get("method") == "$/cancel_request"
                )
        assert _errors(results) == [ErrorCode.ASK_CANCELLED]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]

    @pytest.mark.parametrize(
        ("params", "event"),
        [
            ({"requestId": 12345}, "acp.cancel_request_ignored"),
            ({"requestId": None}, "acp.cancel_request_invalid"),
            ([], "acp.cancel_request_invalid"),
        ],
    )
    async def test_other_incoming_cancel_requests_are_handled_not_unknown(
        self, params: Any, event: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """No 'method not found' error for $/cancel_request, whatever it names."""
        with structlog.testing.capture_logs() as logs, caplog.at_level(logging.INFO):
            async with connected(ask_agent(NAME)) as acp:
                await acp.conn._conn.send_notification("$/cancel_request", params)
                await acp.agent_wire.wait_for(
                    "incoming", lambda m: m.get("method") == "$/cancel_request"
                )
                pending = acp.start_prompt()  # answered after the notification was handled
                (await acp.next_request()).answer({"action": "accept", "content": {"answer": "A"}})
                await pending.result()
        assert event in [e["event"] for e in logs]
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert "Method not found" not in caplog.text


class TestTurns:
    async def test_a_returned_string_is_the_last_chunk(self) -> None:
        """The agent function's return value, when a string, is said."""

        async def agent(context: Context) -> str:
            await current_turn().say("thinking... ")
            return f"you said {current_turn().text!r}"

        async with connected(agent) as acp:
            await acp.prompt("hi")
            assert acp.client.said() == "thinking... you said 'hi'"

    async def test_a_failing_agent_fails_its_prompt_only(self) -> None:
        """JSON-RPC internal error for that prompt; the next prompt is served."""
        calls: list[int] = []

        async def agent(context: Context) -> str:
            calls.append(1)
            if len(calls) == 1:
                raise ValueError("boom")
            return "fine"

        async with connected(agent) as acp:
            with pytest.raises(Exception, match="Internal error") as caught:
                await acp.prompt()
            assert caught.value.data == {"details": "the agent failed: ValueError: boom"}  # type: ignore[attr-defined]
            assert (await acp.prompt()).stop_reason == "end_turn"
            assert acp.client.said() == "fine"

    async def test_unknown_session_and_overlapping_prompts(self) -> None:
        """A prompt for no session is -32002 (resource not found, as ACP names an unknown
        session); a second concurrent one, invalid request."""
        async with connected(ask_agent(NAME)) as acp:
            with pytest.raises(RequestError) as unknown:
                await acp.prompt(session_id="sess_nope")
            assert unknown.value.code == -32002
            assert unknown.value.data["sessionId"] == "sess_nope"
            first = acp.start_prompt()
            request = await acp.next_request()
            with pytest.raises(Exception, match="Invalid request") as caught:
                await acp.prompt()
            assert "already running" in caught.value.data["details"]  # type: ignore[attr-defined]
            request.answer({"action": "accept", "content": {"answer": "Ada"}})
            await first.result()

    async def test_current_turn_outside_a_turn(self) -> None:
        """A clear error, with a code."""
        with pytest.raises(HarnessError) as caught:
            current_turn()
        assert caught.value.code == "NO_PROMPT_TURN"

    async def test_a_tool_replaced_during_the_turn_is_the_new_one(self) -> None:
        """The turn's tool wrappers look the tool up at each call (hot reload safe)."""
        from pydantic import BaseModel

        from hotseam import Tool, ToolCall

        class Empty(BaseModel):
            pass

        async def old(input: Empty, call: ToolCall) -> str:
            return "old"

        async def new(input: Empty, call: ToolCall) -> str:
            return "new"

        context = Context("tools")
        registration = context.tools.register(Tool("which", "which one", Empty, old))
        outputs: list[Any] = []

        async def agent(ctx: Context) -> None:
            outputs.append((await ctx.tools.execute("which")).output)
            await registration.dispose()
            context.tools.register(Tool("which", "which one", Empty, new))
            outputs.append((await ctx.tools.execute("which")).output)

        async with connected(agent, context=context) as acp:
            await acp.prompt()
            assert [c.title for c in acp.client.tool_calls()] == ["which", "which"]
        assert outputs == ["old", "new"]

"""Never leave the human unasked: what each kind of client gets, end to end in process.

Clients are the SDK's own client with the capability shapes real clients send, including
Zed's and Toad's exact ``initialize`` params, replayed raw.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
import structlog
from acp.exceptions import RequestError
from acp.schema import ClientCapabilities, ElicitationCapabilities, ElicitationUrlCapabilities
from tests._timing import scaled

from hotseam import AbortController, Context, ToolResult
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
)
from hotseam.providers._acp._conversation import NOT_AN_OPTION_NOTE
from hotseam.providers._acp._permission import CUSTOM_DROPPED
from hotseam.providers._kit import EMPTY_ANSWER_NOTE
from hotseam.providers.acp import AcpProvider, ask_scope, current_turn

from ._harness import ChatOnlyClient, ask_agent, connected

pytestmark = pytest.mark.anyio

DB: dict[str, Any] = {
    "header": "Storage",
    "question": "Which database?",
    "options": [
        {"label": "Postgres", "value": "pg", "description": "Server database", "recommended": True},
        {"label": "SQLite", "description": "One file"},
        {"label": "No", "value": "none", "description": "No database"},
    ],
}
NAME: dict[str, Any] = {"question": "What is your name?", "header": "You"}

# Zed's exact handshake: zed-industries/zed, crates/agent_servers/src/acp.rs (commit
# 548feed2), fn client_capabilities_for_agent, serialized with the schema's camelCase names:
#
#     acp::ClientCapabilities::new()
#         .fs(acp::FileSystemCapabilities::new()
#             .read_text_file(true)
#             .write_text_file(true))
#         .terminal(true)
#         .auth(acp::AuthCapabilities::new().terminal(true))
#         .session(acp::ClientSessionCapabilities::new().config_options(
#             acp::SessionConfigOptionsCapabilities::new()
#                 .boolean(acp::BooleanConfigOptionCapabilities::new())))
#         .elicitation(
#             acp::ElicitationCapabilities::new()
#                 .form(acp::ElicitationFormCapabilities::new())
#                 .url(acp::ElicitationUrlCapabilities::new()),
#         )
#         .meta(meta)   // {"terminal_output": true, "terminal-auth": true}
#
# sent as InitializeRequest::new(ProtocolVersion::V1).client_capabilities(...)
#     .client_info(acp::Implementation::new("zed", version).title(release_channel)).
ZED_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "terminal": True,
        "auth": {"terminal": True},
        "session": {"configOptions": {"boolean": {}}},
        "elicitation": {"form": {}, "url": {}},
        "_meta": {"terminal_output": True, "terminal-auth": True},
    },
    "clientInfo": {"name": "zed", "version": "0.231.0", "title": "Zed"},
}

# Toad's exact handshake: batrachianai/toad, src/toad/acp/agent.py (commit 112c02d7),
# Agent.acp_initialize, through api.initialize(protocolVersion, clientCapabilities,
# clientInfo) of src/toad/acp/api.py:
#
#     api.initialize(
#         PROTOCOL_VERSION,
#         {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
#         {"name": toad.NAME, "title": toad.TITLE, "version": toad.get_version()},
#     )
#
# No elicitation at all: Toad answers session/request_permission and shows agent messages.
TOAD_INITIALIZE: dict[str, Any] = {
    "protocolVersion": 1,
    "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
    "clientInfo": {"name": "toad", "title": "Toad", "version": "0.5.24"},
}

NO_FORM = [
    pytest.param({"capabilities": None}, id="none"),
    pytest.param(
        {"capabilities": ClientCapabilities(elicitation=ElicitationCapabilities())},
        id="empty-elicitation",
    ),
    pytest.param(
        {
            "capabilities": ClientCapabilities(
                elicitation=ElicitationCapabilities(url=ElicitationUrlCapabilities())
            )
        },
        id="url-only",
    ),
    pytest.param({"initialize": TOAD_INITIALIZE}, id="toad"),
]


def _codes(results: list[ToolResult]) -> list[str | None]:
    return [None if r.ok else r.error["code"] for r in results]  # type: ignore[index]


class TestZed:
    async def test_zeds_handshake_gets_form_elicitation(self) -> None:
        """Zed advertises {"form": {}, "url": {}}: questions go as forms."""
        results: list[ToolResult] = []
        async with connected(
            ask_agent(DB, results=results), initialize=ZED_INITIALIZE, capabilities=None
        ) as acp:
            pending = acp.start_prompt()
            request = await acp.next_request("elicitation/create")
            request.answer({"action": "accept", "content": {"answer": "SQLite"}})
            assert (await pending.result()).stop_reason == "end_turn"
            (raw,) = acp.elicitations()
            assert raw["params"]["requestedSchema"]["required"] == ["answer"]
        assert [r.output["answer"] for r in results] == ["SQLite"]


class TestPermissionFallback:
    @pytest.mark.parametrize("client", NO_FORM)
    async def test_a_question_with_options_and_custom_answers(self, client: Any) -> None:
        """No form elicitation: a permission request, the custom choice dropped and said so;
        "No" is a reject_once."""
        results: list[ToolResult] = []
        async with connected(ask_agent(DB, results=results), **client) as acp:
            pending = acp.start_prompt()
            request = await acp.next_request("session/request_permission")
            request.answer({"outcome": {"outcome": "selected", "optionId": "SQLite"}})
            assert (await pending.result()).stop_reason == "end_turn"
            (raw,) = acp.client_wire.messages("incoming", "session/request_permission")
        assert [r.output["answer"] for r in results] == ["SQLite"]
        params = raw["params"]
        assert [(o["optionId"], o["kind"]) for o in params["options"]] == [
            ("pg", "allow_once"),
            ("SQLite", "allow_once"),
            ("none", "reject_once"),
        ]
        (content,) = params["toolCall"]["content"]
        assert content["content"]["text"] == (
            "- **Postgres**: Server database\n- **SQLite**: One file\n- **No**: No database"
            f"\n\n{CUSTOM_DROPPED}"
        )

    async def test_turned_off_is_no_provider(self) -> None:
        """permission_fallback=False: a question with options has no way to the human."""
        results: list[ToolResult] = []
        context = Context("no-fallback")
        provider = AcpProvider(permission_fallback=False)
        context.provide(USER_INTERACTION, provider)
        agent = ask_agent(DB, results=results)
        async with connected(agent, capabilities=None, context=context, provider=provider) as acp:
            await acp.prompt()
        assert _codes(results) == [ErrorCode.NO_PROVIDER]
        assert "fallback is turned off" in results[0].error["message"]  # type: ignore[index]


STRICT: dict[str, Any] = {**DB, "header": "Strict", "allow_custom": False}


class TestPermissionRefused:
    async def test_questions_with_options_go_in_the_conversation(self) -> None:
        """A client that answers session/request_permission with -32601 (the SDK's own, when
        its client object has no request_permission): one warning, then every question with
        options is asked in the chat as a numbered list, the question that met the refusal
        at once. A reply is a number, a name or a value, or an answer of the human's own
        where allowed; otherwise it is asked again with a note, and after three replies
        that fit nothing the question fails as INVALID_ANSWER."""
        results: list[ToolResult] = []
        agent = ask_agent(DB, STRICT, DB, STRICT, results=results)
        with structlog.testing.capture_logs() as logs:
            async with connected(agent, capabilities=None, client=ChatOnlyClient()) as acp:
                assert (await acp.prompt("start")).stop_reason == "end_turn"
                asked = acp.client.said()
                assert (
                    "**Storage**: Which database?\n\n"
                    "1. **Postgres (Recommended)**: Server database\n"
                    "2. **SQLite**: One file\n"
                    "3. **No**: No database\n\n"
                    "_(Reply with the number or the name of your choice, or with an answer of "
                    "your own.)_\n"
                ) in asked
                mark = len(acp.client.updates)
                await acp.prompt("2.")
                assert acp.said_since(mark).startswith("answer: SQLite\n")
                assert "_(Reply with the number or the name of your choice.)_" in (
                    acp.said_since(mark)
                )
                mark = len(acp.client.updates)
                await acp.prompt("Maybe")
                assert NOT_AN_OPTION_NOTE in acp.said_since(mark)
                await acp.prompt("  POSTGRES (Recommended) ")
                await acp.prompt("MySQL, please")
                for reply in ("a", "b", "c"):
                    mark = len(acp.client.updates)
                    assert (await acp.prompt(reply)).stop_reason == "end_turn"
                assert acp.said_since(mark) == f"error: {ErrorCode.INVALID_ANSWER}\n"
                refused = acp.client_wire.messages("incoming", "session/request_permission")
                assert len(refused) == 1  # asked once: never again on this client
                answer = acp.client_wire.answer_to(refused[0]["id"], "outgoing")
                assert answer is not None and answer["error"]["code"] == -32601
        assert [r.output["answer"] if r.ok else None for r in results] == [
            "SQLite",
            "pg",
            "MySQL, please",
            None,
        ]
        assert results[2].output["option"] is None
        assert "none of the options 3 times" in results[3].error["message"]  # type: ignore[index]
        warnings = [e for e in logs if e["event"] == "acp.permission_request_refused"]
        assert [(e["log_level"], e["rpc_code"]) for e in warnings] == [("warning", -32601)]


class TestConversation:
    @pytest.mark.parametrize("client", NO_FORM)
    async def test_the_next_prompt_is_the_answer(self, client: Any) -> None:
        """The question is an agent message, the turn ends end_turn, the next prompt's text
        is the answer, and the agent resumes inside that new turn."""
        results: list[ToolResult] = []
        async with connected(ask_agent(NAME, results=results), **client) as acp:
            assert (await acp.prompt("start")).stop_reason == "end_turn"
            asked = acp.client.said()
            assert "**You**: What is your name?" in asked
            assert results == []  # the agent is still waiting
            assert acp.agent_wire.messages("outgoing", "elicitation/create") == []
            mark = len(acp.client.updates)
            assert (await acp.prompt("  Ada  ")).stop_reason == "end_turn"
            assert acp.said_since(mark) == "answer: Ada\n"  # said inside the second turn
            # The run is over: the next prompt starts the agent afresh.
            assert (await acp.prompt("again")).stop_reason == "end_turn"
            assert acp.client.said().count("What is your name?") == 2
        assert [r.output["answer"] for r in results] == ["Ada"]

    async def test_several_questions_across_several_turns(self) -> None:
        """Each free-form question ends a turn; a question with options in the resumed turn
        goes as a permission request inside that turn."""
        results: list[ToolResult] = []
        async with connected(ask_agent(NAME, DB, NAME, results=results), capabilities=None) as acp:
            assert (await acp.prompt("go")).stop_reason == "end_turn"
            second = acp.start_prompt("Ada")
            request = await acp.next_request("session/request_permission")
            request.answer({"outcome": {"outcome": "selected", "optionId": "pg"}})
            assert (await second.result()).stop_reason == "end_turn"
            assert (await acp.prompt("Bob")).stop_reason == "end_turn"
        assert [r.output["answer"] for r in results] == ["Ada", "pg", "Bob"]

    async def test_session_cancel_while_waiting_ends_it_cleanly(self) -> None:
        """session/cancel between the turns: the waiting ask ends ASK_CANCELLED, and the next
        prompt is a prompt again, not an answer."""
        results: list[ToolResult] = []
        ended = anyio.Event()

        async def agent(context: Context) -> None:
            if "start" in current_turn().text:
                try:
                    results.append(await context.tools.execute("ask_user_question", NAME))
                finally:
                    ended.set()

        async with connected(agent, capabilities=None) as acp:
            await acp.prompt("start")
            await acp.conn.cancel(session_id=acp.session_id)
            with anyio.fail_after(scaled(5)):
                await ended.wait()
            assert _codes(results) == [ErrorCode.ASK_CANCELLED]
            assert (await acp.prompt("Ada")).stop_reason == "end_turn"
            assert acp.client.said().count("What is your name?") == 1
        assert _codes(results) == [ErrorCode.ASK_CANCELLED]

    async def test_a_prompt_right_after_session_cancel_starts_afresh(self) -> None:
        """session/cancel then at once a prompt (what clients do): the prompt waits for the
        cancelled run to unwind, then starts the agent afresh; it is not refused."""
        results: list[ToolResult] = []
        async with connected(ask_agent(NAME, results=results), capabilities=None) as acp:
            await acp.prompt("start")
            await acp.conn.cancel(session_id=acp.session_id)
            mark = len(acp.client.updates)
            assert (await acp.prompt("Ada")).stop_reason == "end_turn"
            assert "What is your name?" in acp.said_since(mark)  # asked again, not answered
        assert _codes(results)[0] == ErrorCode.ASK_CANCELLED

    async def test_a_withdrawn_question_is_said_and_frees_the_next_prompt(self) -> None:
        """The agent aborts its own ask: the chat says the question was withdrawn, and the
        next prompt starts afresh."""
        controller = AbortController()
        results: list[ToolResult] = []

        async def agent(context: Context) -> None:
            turn = current_turn()
            if "abort" in turn.text:
                async with anyio.create_task_group() as group:

                    async def ask_it() -> None:
                        results.append(
                            await context.tools.execute(
                                "ask_user_question", NAME, signal=controller.signal
                            )
                        )

                    group.start_soon(ask_it)
            else:
                await turn.say(f"fresh: {turn.text}\n")

        async with connected(agent, capabilities=None) as acp:
            assert (await acp.prompt("abort")).stop_reason == "end_turn"
            mark = len(acp.client.updates)
            controller.abort()
            await acp.wait_said("withdrawn", mark)
            assert (await acp.prompt("hello")).stop_reason == "end_turn"
            assert "fresh: hello" in acp.client.said()
        assert _codes(results) == [ErrorCode.ASK_ABORTED]

    async def test_an_empty_reply_is_asked_again_then_cancelled(self) -> None:
        """A blank prompt is no answer: asked again with a one-line note, at most twice."""
        results: list[ToolResult] = []
        async with connected(ask_agent(NAME, results=results), capabilities=None) as acp:
            await acp.prompt("start")
            for attempt in range(2):
                mark = len(acp.client.updates)
                assert (await acp.prompt("   ")).stop_reason == "end_turn"
                assert EMPTY_ANSWER_NOTE in acp.said_since(mark), attempt
            mark = len(acp.client.updates)
            assert (await acp.prompt("")).stop_reason == "end_turn"
            assert acp.said_since(mark) == f"error: {ErrorCode.ASK_CANCELLED}\n"
        assert _codes(results) == [ErrorCode.ASK_CANCELLED]

    async def test_two_questions_at_once_in_one_session_go_one_by_one(self) -> None:
        """Concurrent free-form asks in one session: the second waits for the first."""
        answers: list[str] = []

        async def agent(context: Context) -> None:
            async def ask_it(question: str) -> None:
                result = await context.tools.execute("ask_user_question", {"question": question})
                answers.append(f"{question}={result.output['answer']}")

            async with anyio.create_task_group() as group:
                group.start_soon(ask_it, "First?")
                group.start_soon(ask_it, "Second?")

        async with connected(agent, capabilities=None) as acp:
            assert (await acp.prompt("go")).stop_reason == "end_turn"
            first_turn = acp.client.said()
            assert first_turn.count("Reply with your answer") == 1
            assert (await acp.prompt("one")).stop_reason == "end_turn"
            assert (await acp.prompt("two")).stop_reason == "end_turn"
        asked_first = "First?" if "First?" in first_turn else "Second?"
        asked_second = "Second?" if asked_first == "First?" else "First?"
        assert answers == [f"{asked_first}=one", f"{asked_second}=two"]

    async def test_cancel_request_for_the_answering_prompt(self) -> None:
        """The resumed run is cancelled by $/cancel_request of the prompt that answered."""
        results: list[ToolResult] = []
        async with connected(ask_agent(NAME, DB, results=results), capabilities=None) as acp:
            await acp.prompt("start")
            pending = acp.start_prompt("Ada")
            await acp.next_request("session/request_permission")
            (prompt,) = [
                m
                for m in acp.client_wire.messages("outgoing", "session/prompt")
                if m["params"]["prompt"][0]["text"] == "Ada"
            ]
            await acp.cancel_request(prompt["id"])
            assert (await pending.result()).stop_reason == "cancelled"
        assert _codes(results) == [None, ErrorCode.ASK_CANCELLED]

    async def test_an_ask_that_cannot_end_the_turn_cannot_converse(self) -> None:
        """A custom agent whose ask_scope has no end_turn: NO_PROVIDER naming the reason,
        instead of a question nobody could answer."""
        provider = AcpProvider()
        provider._wire = object()  # type: ignore[assignment] # attached; never reached
        with ask_scope("sess_1"), pytest.raises(UserInteractionError) as caught:
            await provider.ask(AskUserQuestionRequest("Why?"))
        assert caught.value.code == ErrorCode.NO_PROVIDER
        assert "end the prompt turn" in caught.value.message


class TestEmptyForm:
    @pytest.mark.parametrize("then", ["answer", "cancelled"])
    async def test_an_empty_form_is_asked_again_with_a_note(self, then: str) -> None:
        """{} accepted (a client that ignores required): asked again with a one-line note,
        at most twice; a third empty one is ASK_CANCELLED."""
        results: list[ToolResult] = []
        with structlog.testing.capture_logs() as logs:
            async with connected(ask_agent(DB, results=results)) as acp:
                pending = acp.start_prompt()
                for _ in range(2):
                    (await acp.next_request()).answer({"action": "accept", "content": {}})
                last = await acp.next_request()
                if then == "answer":
                    last.answer({"action": "accept", "content": {"answer": "pg"}})
                else:
                    last.answer({"action": "accept"})
                assert (await pending.result()).stop_reason == "end_turn"
                messages = [m["params"]["message"] for m in acp.elicitations()]
        assert messages == [
            "Which database?",
            f"{EMPTY_ANSWER_NOTE}\n\nWhich database?",
            f"{EMPTY_ANSWER_NOTE}\n\nWhich database?",
        ]
        assert "\n" not in EMPTY_ANSWER_NOTE
        if then == "answer":
            assert [r.output["answer"] for r in results] == ["pg"]
        else:
            assert _codes(results) == [ErrorCode.ASK_CANCELLED]
            assert "empty answer 3 times" in results[0].error["message"]  # type: ignore[index]
        again = [e for e in logs if e["event"] == "acp.empty_answer_asked_again"]
        assert [e["attempt"] for e in again] == [1, 2]


class TestSessions:
    async def test_initialize_advertises_session_close(self) -> None:
        """agentCapabilities.sessionCapabilities.close = {}."""
        async with connected(ask_agent()) as acp:
            (response,) = [
                m
                for m in acp.client_wire.messages("incoming")
                if "result" in m and "agentCapabilities" in (m["result"] or {})
            ]
        assert response["result"]["agentCapabilities"]["sessionCapabilities"] == {"close": {}}

    async def test_session_close_releases_the_session_and_its_waiting_question(self) -> None:
        """session/close: a question waiting in the chat ends ASK_CANCELLED; the session is
        gone (a prompt to it is an error); closing it again is -32002."""
        results: list[ToolResult] = []
        async with connected(ask_agent(NAME, results=results), capabilities=None) as acp:
            await acp.prompt("start")
            assert await acp.close_session() == {}
            assert _codes(results) == [ErrorCode.ASK_CANCELLED]
            with pytest.raises(RequestError) as unknown:
                await acp.prompt("Ada")
            assert "unknown session" in unknown.value.data["details"]
            with pytest.raises(RequestError) as caught:
                await acp.close_session()
            assert caught.value.code == -32002

    async def test_session_close_during_a_prompt_cancels_it(self) -> None:
        """A prompt in progress ends with stop reason cancelled."""
        async with connected(ask_agent(DB)) as acp:
            pending = acp.start_prompt()
            await acp.next_request()
            await acp.close_session()
            assert (await pending.result()).stop_reason == "cancelled"

    async def test_idle_sessions_are_released(self) -> None:
        """Sessions idle past the bound are released when a session is opened; one whose
        prompt is running is not idle."""
        async with connected(ask_agent(DB), session_idle_timeout=0.0) as acp:
            pending = acp.start_prompt()
            request = await acp.next_request()
            second = (await acp.conn.new_session(cwd="/tmp")).session_id
            third = (await acp.conn.new_session(cwd="/tmp")).session_id
            with pytest.raises(RequestError) as unknown:
                await acp.prompt(session_id=second)
            assert "unknown session" in unknown.value.data["details"]
            request.answer({"action": "accept", "content": {"answer": "pg"}})
            assert (await pending.result()).stop_reason == "end_turn"
            assert third.startswith("sess_")

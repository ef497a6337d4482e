"""An approval in the terminal reads as one: the call first (the tool, its arguments as
indented JSON, the agent's reason), then the decision, then the text the decision needs,
worded for it; nothing more after Approve. Plain lines through a real pipe (asyncio and
trio), the prompt through prompt_toolkit's pipe input, and end to end through
``ctx.tools.execute`` with ``HumanGate`` as the tool gate."""

from __future__ import annotations

import io
from collections.abc import Iterator

import anyio
import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from pydantic import BaseModel, Field
from tests._timing import scaled

from hotseam import TOOL_GATE, Context, Scope, ToolCall, tool
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ask,
)
from hotseam.interaction.approvals import (
    Approval,
    ApprovalDecision,
    Decision,
    HumanGate,
    approval_request,
    read_decision,
)
from hotseam.providers.terminal import Draft, TerminalProvider

from .conftest import FREE, PLANNER, Pipe, Screen, ask_across_a_reload, until

pytestmark = pytest.mark.anyio

DEPLOY = Approval.of("deploy", {"service": "api", "replicas": 9}, reason="scale up for the launch")
REQUEST = AskUserQuestionRequest.of(
    list(approval_request(DEPLOY).questions), approval=DEPLOY, agent=PLANNER
)

CALL_BLOCK = (
    "\n"
    "[Approval] Planner asks:\n"
    "Tool: deploy\n"
    "Arguments:\n"
    "  {\n"
    '    "replicas": 9,\n'
    '    "service": "api"\n'
    "  }\n"
    "Reason: scale up for the launch\n"
    "Allow this call?\n"
    "  1. Approve (recommended)\n"
    "     run the call as shown\n"
    "  2. Edit\n"
    "     run it with the arguments typed below (JSON)\n"
    "  3. Reject\n"
    "     do not run it; the text below tells the model why\n"
    "  4. Respond\n"
    "     do not run it; the text below is its result\n"
    "Type a number or a label; Enter alone picks Approve.\n"
)
"""What plain lines show of ``REQUEST`` before the first reply."""


def _lines(pipe: Pipe, out: io.StringIO, **options: object) -> TerminalProvider:
    return TerminalProvider(mode="lines", input=pipe.fd, output=out, **options)  # type: ignore[arg-type]


async def _decide(provider: TerminalProvider, request: AskUserQuestionRequest) -> ApprovalDecision:
    with anyio.fail_after(scaled(5)):
        answer = await provider.ask(request)
    assert request.approval is not None
    return read_decision(request.approval, answer)


def _entries(answer: AskUserQuestionAnswer) -> list[tuple[str, tuple[str, ...], str | None]]:
    return [(entry.id, entry.values, entry.skipped) for entry in answer.answers]


# -- plain lines ------------------------------------------------------------------------------


async def test_approve_shows_the_call_and_asks_nothing_more(pipe: Pipe) -> None:
    """The call above the decision; after Approve the text question is skipped, not asked:
    the next line is left for the next question."""
    out = io.StringIO()
    provider = _lines(pipe, out)
    pipe.write("1\nnext\n")
    with anyio.fail_after(scaled(5)):
        answer = await provider.ask(REQUEST)
    assert _entries(answer) == [("decision", ("approve",), None), ("text", (), "skipped")]
    decision = read_decision(DEPLOY, answer)
    assert decision.decision is Decision.APPROVE
    assert decision.arguments == {"replicas": 9, "service": "api"}
    assert out.getvalue() == CALL_BLOCK + "> 1\n-> Approve\n(decision sent: approve)\n"
    with anyio.fail_after(scaled(5)):
        assert (await provider.ask(FREE)).answer == "next"


async def test_reject_asks_why_and_needs_a_reason(pipe: Pipe) -> None:
    """The text question says what it is for; it cannot be skipped nor left empty (the
    gate would refuse a rejection without a reason)."""
    out = io.StringIO()
    pipe.write("reject\n/skip\n\nnot during the freeze\n")
    decision = await _decide(_lines(pipe, out), REQUEST)
    assert decision.decision is Decision.REJECT
    assert decision.message == "not during the freeze"
    assert out.getvalue() == (
        CALL_BLOCK + "> reject\n-> Reject\n"
        "\n"
        "[Approval] Planner asks:\n"
        "Why reject? (told to the model)\n"
        "Type your answer.\n"
        "Type /back for the previous question.\n"
        "> /skip\n"
        "  This question cannot be skipped: it needs an answer.\n"
        "> \n"
        "  An empty line is not an answer: type your answer.\n"
        "> not during the freeze\n"
        "-> not during the freeze (your own answer)\n"
        "(decision sent: reject)\n"
    )


async def test_respond_asks_for_the_response(pipe: Pipe) -> None:
    out = io.StringIO()
    pipe.write("4\nalready deployed at 9:00\n")
    decision = await _decide(_lines(pipe, out), REQUEST)
    assert decision.decision is Decision.RESPOND
    assert decision.message == "already deployed at 9:00"
    assert (
        "-> Respond\n\n[Approval] Planner asks:\n"
        "Your response (given to the model instead of running the tool)\nType your answer.\n"
    ) in out.getvalue()


async def test_an_edit_in_lines_shows_the_arguments_to_retype_and_back_goes_to_the_decision(
    pipe: Pipe,
) -> None:
    """A line cannot be prefilled: the hint carries the arguments as one line of JSON.
    /back returns to the decision, shown again with the call."""
    out = io.StringIO()
    pipe.write('2\n/back\nedit\n{"replicas": 2, "service": "api"}\n')
    decision = await _decide(_lines(pipe, out), REQUEST)
    assert decision.decision is Decision.EDIT
    assert decision.arguments == {"replicas": 2, "service": "api"}
    transcript = out.getvalue()
    assert (
        "[Approval] Planner asks:\n"
        "Edit the arguments (JSON):\n"
        'Type the arguments as one line of JSON; now: {"replicas": 9, "service": "api"}\n'
        "Type /back for the previous question.\n"
        "> /back\n"
        "(back to the decision)\n" + CALL_BLOCK + "> edit\n"
    ) in transcript
    assert transcript.endswith("(decision sent: edit)\n")


async def test_always_allow_asks_nothing_more_and_always_reject_may_go_without_a_reason(
    pipe: Pipe,
) -> None:
    """The rule-making decisions: Always allow is Approve's (no text asked); Always
    reject's reason is optional (/skip), the model then told "always rejected"."""
    approval = Approval.of("deploy", {"service": "api"}, decisions=list(Decision))
    request = approval_request(approval)
    out = io.StringIO()
    provider = _lines(pipe, out)
    pipe.write("always allow\nalways reject\n/skip\n")
    allowed = await _decide(provider, request)
    assert (allowed.decision, allowed.message) == (Decision.ALWAYS, None)
    assert out.getvalue().endswith("-> Always allow\n(decision sent: always)\n")
    refused = await _decide(provider, request)
    assert (refused.decision, refused.message) == (Decision.NEVER, "always rejected")
    assert out.getvalue().endswith(
        "-> Always reject\n\n[Approval]\nWhy always reject? (told to the model)\n"
        "Type your answer.\nType /back for the previous question or /skip to skip this one.\n"
        "> /skip\n-> (skipped)\n(decision sent: never)\n"
    )


async def test_an_approval_of_approve_alone_shows_the_call_too(pipe: Pipe) -> None:
    """One question (no text to go with it) is still shown as the call and its decision."""
    approval = Approval.of("ping", {}, decisions=[Decision.APPROVE])
    out = io.StringIO()
    pipe.write("\n")
    decision = await _decide(_lines(pipe, out), approval_request(approval))
    assert decision.decision is Decision.APPROVE
    assert out.getvalue() == (
        "\n[Approval]\nTool: ping\nArguments: {}\nAllow this call?\n"
        "  1. Approve (recommended)\n     run the call as shown\n"
        "Type a number or a label; Enter alone picks Approve.\n"
        "> \n-> Approve\n(decision sent: approve)\n"
    )


async def test_what_a_terminal_would_obey_is_shown_never_run(pipe: Pipe) -> None:
    """An escape in the arguments stays escaped JSON, one in the reason is shown."""
    approval = Approval.of("run", {"cmd": "\x1b]52;c;x\x07\u202e"}, reason="see \x1b[2J")
    out = io.StringIO()
    pipe.write("1\n")
    await _decide(_lines(pipe, out), approval_request(approval))
    transcript = out.getvalue()
    assert "\x1b" not in transcript and "\u202e" not in transcript
    assert '    "cmd": "\\u001b]52;c;x\\u0007\\u202e"\n' in transcript
    assert "Reason: see ^[[2J\n" in transcript


async def test_a_reload_at_the_text_question_resumes_there(pipe: Pipe) -> None:
    """Reject chosen, then the provider is replaced: the new one (same Draft) asks why,
    the decision kept, and does not show the decision again."""
    out = io.StringIO()
    draft = Draft()
    answer = await ask_across_a_reload(
        REQUEST,
        _lines(pipe, out, draft=draft, banner="gen 1"),
        _lines(pipe, out, draft=draft, banner="gen 2"),
        pipe=pipe,
        before="3\n",
        ready=lambda: "Why reject?" in out.getvalue() and out.getvalue().endswith("> "),
        after="not now\n",
    )
    decision = read_decision(DEPLOY, answer)  # type: ignore[arg-type]
    assert (decision.decision, decision.message) == (Decision.REJECT, "not now")
    after = out.getvalue().split("(question withdrawn)\n")[1]
    assert after.startswith(
        "\ngen 2\n(resumed: 1 answer kept from before)\n[Approval] Planner asks:\n"
        "Why reject? (told to the model)\n"
    )
    assert "Allow this call?" not in after


# -- the prompt -------------------------------------------------------------------------------


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe_input:
        yield pipe_input


BACKSPACE, SHIFT_TAB = "\x7f", "\x1b[Z"
PREFILLED = '> {"replicas": 9, "service": "api"}'


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_prompt_shows_the_call_and_approve_ends_it(keys: PipeInput) -> None:
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output)
    async with anyio.create_task_group() as tg:
        decided: list[ApprovalDecision] = []

        async def decide() -> None:
            decided.append(await _decide(provider, REQUEST))

        tg.start_soon(decide)
        await until(lambda: screen.lines[-1:] == ["> Approve"])  # the placeholder
        assert screen.lines[1:11] == [
            "[Approval] Planner asks:",
            "Tool: deploy",
            "Arguments:",
            "  {",
            '    "replicas": 9,',
            '    "service": "api"',
            "  }",
            "Reason: scale up for the launch",
            "Allow this call?",
            "  1. Approve (recommended)",
        ]
        assert screen.lines[-3:-1] == [
            "Type a number or a label; Enter alone picks Approve.",
            "Tab completes a label; Ctrl-C or Ctrl-D dismisses the question.",
        ]
        keys.send_text("\r")
    assert decided[0].decision is Decision.APPROVE
    assert screen.lines[-3:] == [">", "-> Approve", "(decision sent: approve)"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_edit_starts_from_the_arguments_and_the_change_is_sent(keys: PipeInput) -> None:
    """Edit: the line holds the current arguments as JSON; changing them and Enter sends
    the edited call. Going back and choosing Reject instead starts the reason empty."""
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output)
    async with anyio.create_task_group() as tg:
        decided: list[ApprovalDecision] = []

        async def decide() -> None:
            decided.append(await _decide(provider, REQUEST))

        tg.start_soon(decide)
        keys.send_text("2\r")
        await until(lambda: screen.lines[-1:] == [PREFILLED])
        assert screen.lines[-5:-1] == [
            "[Approval] Planner asks:",
            "Edit the arguments (JSON):",
            "Change the JSON and press Enter.",
            "Shift-Tab goes back; Ctrl-C or Ctrl-D dismisses the question.",
        ]
        keys.send_text(SHIFT_TAB)
        await until(lambda: screen.lines[-1:] == ["> Edit"])
        keys.send_text(BACKSPACE * 4 + "3\r")
        await until(lambda: "Why reject? (told to the model)" in screen.lines)
        await until(lambda: screen.lines[-1:] == [">"])  # the JSON is not the reason
        keys.send_text(SHIFT_TAB)
        await until(lambda: screen.lines[-1:] == ["> Reject"])  # the label of what was chosen
        keys.send_text(BACKSPACE * 6 + "2\r")
        await until(lambda: screen.lines[-1:] == [PREFILLED])
        keys.send_text(BACKSPACE * 6 + '"web"}\r')
    assert decided[0].decision is Decision.EDIT
    assert decided[0].arguments == {"replicas": 9, "service": "web"}
    assert screen.lines[-3:] == [
        '> {"replicas": 9, "service": "web"}',
        '-> {"replicas": 9, "service": "web"} (your own answer)',
        "(decision sent: edit)",
    ]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_reload_keeps_the_edit_typed_not_the_prefill(keys: PipeInput) -> None:
    """The JSON changed, then the provider is replaced: the new prompt starts from what
    was typed, not from the call's arguments again."""
    screen = Screen(rows=80)
    context = Context("reload")
    draft = Draft()
    old = TerminalProvider(input=keys, output=screen.output, draft=draft, banner="gen 1")
    new = TerminalProvider(input=keys, output=screen.output, draft=draft, banner="gen 2")
    result: list[AskUserQuestionAnswer] = []

    async def agent() -> None:
        result.append(await ask(REQUEST, context=context))

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            first = Scope("generation 1", context=context)
            first.provide(USER_INTERACTION, old)
            tg.start_soon(agent)
            keys.send_text("edit\r")
            await until(lambda: screen.lines[-1:] == [PREFILLED])
            keys.send_text(BACKSPACE * 6 + '"db"}')
            await until(lambda: screen.lines[-1:] == ['> {"replicas": 9, "service": "db"}'])
            async with context.swap(USER_INTERACTION):
                await first.aclose()
                second = Scope("generation 2", context=context)
                second.provide(USER_INTERACTION, new)
            await until(lambda: "gen 2" in screen.text and "-> " not in screen.lines[-1])
            await until(lambda: screen.lines[-1:] == ['> {"replicas": 9, "service": "db"}'])
            assert "(resumed: 1 answer kept from before)" in screen.lines
            keys.send_text("\r")
        await second.aclose()
    decision = read_decision(DEPLOY, result[0])
    assert (decision.decision, decision.arguments) == (
        Decision.EDIT,
        {"replicas": 9, "service": "db"},
    )


# -- end to end: the tool gate ----------------------------------------------------------------


class DeployInput(BaseModel):
    service: str
    replicas: int = Field(ge=1, le=10)


def _deploy(ran: list[DeployInput]) -> object:
    @tool("deploy", needs_approval=True)
    async def deploy(input: DeployInput, call: ToolCall) -> str:
        """Deploy a service."""
        ran.append(input)
        return f"deployed {input.service} x{input.replicas}"

    return deploy


async def test_the_gate_asks_in_the_terminal_and_an_invalid_edit_is_asked_again(
    pipe: Pipe,
) -> None:
    """``ctx.tools.execute``: an edit out of the input's bounds is not taken, and the
    approval is shown again with the gate's note above the decision; then a valid edit
    runs; a second call is rejected with the reason."""
    out = io.StringIO()
    ran: list[DeployInput] = []
    context = Context("agent")
    pipe.write(
        '2\n{"replicas": 99, "service": "api"}\n'
        '2\n{"replicas": 3, "service": "api"}\n'
        "3\nnot during the freeze\n"
    )
    async with context.scope("ui") as scope:
        scope.provide(USER_INTERACTION, _lines(pipe, out))
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(_deploy(ran))  # type: ignore[arg-type]
        with anyio.fail_after(scaled(5)):
            edited = await context.tools.execute("deploy", {"service": "api", "replicas": 9})
            rejected = await context.tools.execute("deploy", {"service": "db", "replicas": 1})
    assert edited.ok and edited.output == "deployed api x3"
    assert ran == [DeployInput(service="api", replicas=3)]
    assert rejected.error is not None and rejected.error["code"] == "APPROVAL_REJECTED"
    assert "not during the freeze" in rejected.error["message"]
    asks = out.getvalue().split("Tool: deploy\n")
    assert len(asks) == 4  # the edit refused, asked again, then the second call
    assert "Not taken" not in asks[1]
    again = asks[2]
    note = again.split("Allow this call?\n")[0].splitlines()[-1]
    assert note.startswith("Not taken: the edited arguments are not valid input for deploy: ")
    assert "replicas" in note and "less than or equal to 10" in note
    assert asks[3].startswith('Arguments:\n  {\n    "replicas": 1,\n    "service": "db"\n  }\n')

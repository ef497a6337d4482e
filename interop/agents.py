"""Agents for the interop suite: ``hotseam acp --agent interop/agents.py:NAME``."""

from __future__ import annotations

import anyio

from hotseam import AbortController, Context, ToolResult
from hotseam.providers.acp import current_turn


async def abort_agent(context: Context) -> None:
    """Ask two questions at once; when the second is answered, abort the first.

    The agent side withdraws an open question deterministically: the client decides when,
    by answering the second one. The client's answer to the first arrives late.
    """
    turn = current_turn()
    controller = AbortController()
    first: list[ToolResult] = []

    async def ask_first() -> None:
        question = {"question": "First?"}
        first.append(
            await context.tools.execute("ask_user_question", question, signal=controller.signal)
        )

    async with anyio.create_task_group() as group:
        group.start_soon(ask_first)
        second = await context.tools.execute("ask_user_question", {"question": "Second?"})
        controller.abort()
    assert first[0].error is not None
    answer = second.output["answer"] if second.ok else second.error["code"]  # type: ignore[index]
    await turn.say(f"first: {first[0].error['code']}; second: {answer}\n")


STACK = {
    "questions": [
        {
            "question": "Which database?",
            "header": "Storage",
            "options": [
                {"label": "Postgres", "description": "Server database"},
                {"label": "SQLite", "description": "One file"},
            ],
            "multiSelect": False,
        },
        {
            "question": "Which features?",
            "header": "Features",
            "options": [
                {"label": "Auth", "description": "Sign-in"},
                {"label": "Billing"},
                {"label": "Search"},
            ],
            "multiSelect": True,
        },
        {"question": "Anything else?", "header": "Notes"},
    ]
}


async def three_questions(context: Context) -> None:
    """Ask three questions in one call, in Claude Code's AskUserQuestion shape; say each
    answer (``q2: Auth, Search``) or the error code."""
    result = await context.tools.execute("ask_user_question", STACK)
    if result.ok:
        lines = [f"{item['id']}: {item['answer']}" for item in result.output["questions"]]
        await current_turn().say("\n".join(lines) + "\n")
    else:
        await current_turn().say(f"error: {result.error['code']}\n")  # type: ignore[index]

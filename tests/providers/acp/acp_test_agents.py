"""Agents for ``hotseam acp --agent tests/providers/acp/acp_test_agents.py:NAME`` in tests."""

from __future__ import annotations

import anyio

from hotseam import AbortController, Context, ToolResult
from hotseam.providers.acp import current_turn


async def abort_agent(context: Context) -> None:
    """Ask two questions at once; when the second is answered, abort the first.

    So the agent side aborts an ask while its elicitation is open, deterministically: the
    client decides when by answering the second question. Also prints to stdout, which
    ``hotseam acp`` must keep off the protocol stream.
    """
    print("stray print from the agent")
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
    await turn.say(f"first: {first[0].error['code']}; second: {second.output['answer']}")

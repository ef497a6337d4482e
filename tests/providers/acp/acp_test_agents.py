"""Agents for ``hotseam acp --agent tests/providers/acp/acp_test_agents.py:NAME`` in tests."""

from __future__ import annotations

import os
import sys

import anyio
from tests._timing import scaled

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


_turns = 0


async def noisy_agent(context: Context) -> str:
    """Writes at every turn the ways code does besides logging: ``print`` to stdout and to
    stderr, and straight to file descriptors 1 and 2 (as a C extension would); at the first
    turn a child process writes 256 KiB to its inherited stderr, and the agent waits for it.
    Every line names its turn, so a test can tell which were kept."""
    global _turns
    _turns += 1
    turn = _turns
    print(f"print {turn} " + "o" * 2048)
    print(f"print-stderr {turn} " + "e" * 100, file=sys.stderr)
    os.write(1, f"fd1 {turn} ".encode() + b"1" * 2048 + b"\n")
    os.write(2, f"fd2 {turn} 2\n".encode())
    if turn == 1:
        child = "import sys\nfor n in range(1, 257): print('child', n, 'c' * 1023, file=sys.stderr)"
        with anyio.fail_after(scaled(30)):
            await anyio.run_process([sys.executable, "-c", child], stdout=None, stderr=None)
    return f"turn {turn}"

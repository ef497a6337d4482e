"""``hotseam acp`` out of file descriptors: its agent's first call of the ask tool serves.

The ask tool's input models (pydantic) are imported lazily elsewhere (``import hotseam``,
``hotseam status``); a process that imports them at the tool's first call cannot, once a
provider or an agent took every descriptor (``OSError: [Errno 24] Too many open files``
from the import), and the question fails. The real ``hotseam acp`` runs here with few
descriptors, driven by the SDK's client over its stdio.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from acp import spawn_agent_process, text_block
from tests._timing import scaled

from ._harness import FORM, STARTUP, WAIT, Client, _open

DESCRIPTORS = 64
"""The process's limit (soft and hard): it serves with a few dozen open."""

AGENT = """
import json
import os

from hotseam.providers.acp import current_turn


async def main(context):
    turn = current_turn()
    held = []
    try:
        while True:
            held.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    try:
        result = await context.tools.execute("ask_user_question", {"question": "Still there?"})
        described = context.tools.get("ask_user_question").definition()["name"]
        outcome = {"held": len(held), "output": result.output, "error": result.error,
                   "described": described}
    except Exception as error:
        outcome = {"held": len(held), "raised": repr(error)}
    finally:
        for descriptor in held:
            os.close(descriptor)
    await turn.say(json.dumps(outcome))
"""

LIMITED = (
    "import os, resource, sys\n"
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({DESCRIPTORS}, {DESCRIPTORS}))\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'hotseam', 'acp', *sys.argv[1:]])\n"
)
"""``hotseam acp ARGS`` with few descriptors (the SDK's spawn takes no ``preexec_fn``)."""


@pytest.mark.anyio
async def test_the_ask_tool_serves_while_acp_is_out_of_descriptors(tmp_path: Path) -> None:
    """Every descriptor taken, the agent calls the ask tool: the question reaches the
    client as a form, its answer is the tool's output, and the tool describes itself."""
    (tmp_path / "agent.py").write_text(AGENT, encoding="utf-8")
    client = Client()
    with (tmp_path / "stderr.log").open("wb") as stderr:
        async with spawn_agent_process(
            cast(Any, client),  # the harness's client, duck-typed as the SDK's
            sys.executable,
            "-c",
            LIMITED,
            "--agent",
            "agent.py:main",
            cwd=tmp_path,
            use_unstable_protocol=True,
            transport_kwargs={"stderr": stderr.fileno()},
        ) as (conn, _process):
            session_id = await _open(conn, client, FORM, timeout=STARTUP)
            async with anyio.create_task_group() as group:
                group.start_soon(_answer_one_form, client)
                with anyio.fail_after(scaled(WAIT)):
                    response = await conn.prompt(session_id=session_id, prompt=[text_block("go")])
    assert response.stop_reason == "end_turn"
    outcome = json.loads(client.said())
    assert outcome == {
        "held": outcome["held"],
        "output": {"answer": "fine", "option": None},
        "error": None,
        "described": "ask_user_question",
    }, (tmp_path / "stderr.log").read_text()
    assert isinstance(outcome["held"], int) and outcome["held"] > 0


async def _answer_one_form(client: Client) -> None:
    request = await client.requests.get()
    assert request.method == "elicitation/create", request
    request.answer({"action": "accept", "content": {"answer": "fine"}})

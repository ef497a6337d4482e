"""The default agent of ``hotseam acp``: one or two questions per prompt turn.

So that ``hotseam acp`` is usable from a real client (Zed...) at once: for each prompt it
asks how to approach it (options, a recommended one, custom answers allowed) through the
``ask_user_question`` tool and, when that was answered, a free-form follow-up; then it
reports the answers as agent message chunks. A question that ends without an answer
(declined, dismissed, unsupported by the client) is reported with its error code.
"""

from __future__ import annotations

from typing import Any

from .._core import Agent, Context

ACP_DEMO_AGENT = Agent("acp-demo", "hotseam ACP demo")

ACP_DEMO_QUESTIONS: list[dict[str, Any]] = [
    {
        "header": "Approach",
        "question": "How should I approach this?",
        "options": [
            {
                "label": "Quick fix",
                "value": "quick",
                "description": "The smallest change that works",
            },
            {
                "label": "Balanced",
                "value": "balanced",
                "description": "Fix it and tidy what it touches",
                "recommended": True,
            },
            {
                "label": "Thorough",
                "value": "thorough",
                "description": "Rework the whole area properly",
            },
        ],
    },
    {
        "header": "Notes",
        "question": "Anything I should keep in mind?",
    },
]

_PROMPT_SHOWN = 80


async def acp_demo_agent(context: Context) -> None:
    """Ask the demo questions of one prompt turn and report the answers as message chunks."""
    from ..providers.acp import current_turn  # the SDK: not before hotseam acp serves

    turn = current_turn()
    prompt = " ".join(turn.text.split())
    if len(prompt) > _PROMPT_SHOWN:
        prompt = prompt[: _PROMPT_SHOWN - 1] + "…"
    await turn.say(f"You asked: {prompt or '(an empty prompt)'}\n")
    for spec in ACP_DEMO_QUESTIONS:
        result = await context.tools.execute("ask_user_question", spec, agent=ACP_DEMO_AGENT)
        if not result.ok:
            assert result.error is not None
            error = result.error
            await turn.say(f"{spec['header']}: no answer ({error['code']}: {error['message']})\n")
            return
        await turn.say(f"{spec['header']}: {result.output['answer']}\n")

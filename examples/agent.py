"""The walkthrough's agent: asks one question, waits for the answer, and reports it.

Run it with ``hotseam dev examples/providers --agent examples/agent.py:main``.
"""

from __future__ import annotations

from hotseam import Agent, Context

AGENT = Agent("walkthrough", "Walkthrough agent")

QUESTION = {
    "header": "Theme",
    "question": "Which colour should the dashboard use?",
    "options": [
        {"label": "Blue", "description": "Calm and familiar", "recommended": True},
        {"label": "Green", "description": "Easy on the eyes"},
        {"label": "Orange", "description": "Hard to miss"},
    ],
}


async def main(context: Context) -> None:
    """Ask through ``ask_user_question`` and print the answer (or why there is none)."""
    result = await context.tools.execute("ask_user_question", QUESTION, agent=AGENT)
    if result.ok:
        print(f"The dashboard will be {result.output['answer']}.")
    else:
        assert result.error is not None
        print(f"No answer: {result.error['code']}: {result.error['message']}")

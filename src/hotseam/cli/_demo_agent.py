"""The built-in demo agent: a short series of questions through ``ask_user_question``.

It is the default agent of ``hotseam demo`` and ``hotseam dev``. Its four questions cover
the seam's shapes: options with descriptions and a recommended one, another with a
recommended default, a free-form question, and one that accepts no custom answer. So
``printf '2\\n\\nblue\\n1\\n' | hotseam demo`` answers them as typing would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._core import Agent, Context

__all__ = ["DEMO_AGENT", "DEMO_QUESTIONS", "demo_agent"]

DEMO_AGENT = Agent("demo", "Demo agent")

DEMO_QUESTIONS: list[dict[str, Any]] = [
    {
        "header": "Storage",
        "question": "Which database should the new service use?",
        "options": [
            {
                "label": "Postgres",
                "value": "postgres",
                "description": "Server database; the safe default for a team",
                "recommended": True,
            },
            {"label": "SQLite", "value": "sqlite", "description": "One file, zero setup"},
            {"label": "DuckDB", "value": "duckdb", "description": "Columnar, for analytics"},
        ],
    },
    {
        "header": "Errors",
        "question": "How should the service report errors?",
        "options": [
            {
                "label": "Exceptions",
                "description": "Raise and let callers handle them",
                "recommended": True,
            },
            {"label": "Result values", "description": "Return ok/error objects"},
        ],
    },
    {
        "header": "Theme",
        "question": "What colour should the dashboard theme be?",
    },
    {
        "header": "Deploy",
        "question": "Deploy the service now?",
        "options": [
            {"label": "Yes", "description": "Ship it to staging"},
            {"label": "No", "description": "Keep it local for now"},
        ],
        "allow_custom": False,
    },
]


async def demo_agent(context: Context, *, out: Callable[[str], None] = print) -> list[Any]:
    """Ask the demo questions one after another and report each answer through ``out``.

    A question that ends without an answer (dismissed, declined, no provider) is reported
    with its error code, and the agent goes on to the next one.
    """
    results: list[Any] = []
    for spec in DEMO_QUESTIONS:
        result = await context.tools.execute("ask_user_question", spec, agent=DEMO_AGENT)
        results.append(result.output if result.ok else result.error)
        if result.ok:
            out(f"{spec['header']}: {result.output['answer']}")
        else:
            assert result.error is not None
            out(f"{spec['header']}: no answer ({result.error['code']}: {result.error['message']})")
    return results

"""`hotseam demo`: a demo agent asks a short series of questions in this terminal.

On a terminal each question is a prompt (number, label, Enter for the recommended option,
or your own answer; Tab completes; Ctrl-C dismisses). With answers piped in it reads plain
lines, so ``printf '2\\n\\nblue\\n1\\n' | hotseam demo`` prints the same answers as typing
them. Log lines go to stderr (warnings and above unless ``--log-level`` says otherwise);
stdout carries the questions and the answers only. The exit code is 0 when each question
was answered or dismissed with a key, 1 when the input ended early or a question failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from .._core import Agent, Context, Scope
from ..interaction import USER_INTERACTION, ErrorCode, ask_user_question_tool
from ._logging import configure_logging
from ._options import seconds

if TYPE_CHECKING:
    from ..providers.terminal import TerminalProvider

# The default agent of ``hotseam demo`` and ``hotseam dev``: its four questions cover the
# seam's shapes (options, a recommended default, free-form, no custom answer).
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
    """Ask the demo questions one after another and report each answer (or error code)
    through ``out``."""
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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mode",
        choices=("auto", "tty", "lines"),
        default="auto",
        help="a prompt on a terminal, plain lines otherwise (auto); or force one",
    )
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="give up on a question after this long (ASK_TIMEOUT; nothing is picked)",
    )
    parser.add_argument(
        "--backend",
        choices=("asyncio", "trio"),
        default="asyncio",
        help="the event loop; under trio questions are always plain lines",
    )
    parser.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="warning",
        help="console log level on stderr (default: warning)",
    )


def run(args: argparse.Namespace) -> int:
    from ..providers.terminal import TerminalProvider

    configure_logging("console", level=args.log_level)
    provider = TerminalProvider(mode=args.mode, timeout=args.timeout)
    try:
        answered: bool = anyio.run(_ask_all, provider, backend=args.backend)
    except KeyboardInterrupt:
        print("hotseam demo: interrupted", file=sys.stderr)
        return 130
    return 0 if answered else 1


async def _ask_all(provider: TerminalProvider) -> bool:
    context = Context("demo")
    async with Scope("demo", context=context) as scope:
        scope.register_tool(ask_user_question_tool())
        scope.provide(USER_INTERACTION, provider)
        results: list[Any] = await demo_agent(context, out=_print_answer)
    return all(_answered_or_dismissed(result) for result in results)


def _answered_or_dismissed(result: Any) -> bool:
    if not isinstance(result, dict):
        return False
    if "answer" in result:
        return True
    return result.get("code") == ErrorCode.ASK_CANCELLED and "the human dismissed" in str(
        result.get("message", "")
    )


def _print_answer(line: str) -> None:
    print(line, flush=True)

"""The public surface: sorted __all__, public module names, errors with stable codes."""

from __future__ import annotations

import ast
import importlib
import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import structlog

import hotseam
from hotseam import Context, HarnessError, Scope, Seam

PUBLIC_MODULES = [
    "hotseam",
    "hotseam.interaction",
    "hotseam.interaction.journal",
    "hotseam.reload",
    "hotseam.providers.scripted",
    "hotseam.providers.terminal",
    "hotseam.providers.acp",
    "hotseam.providers.web",
    "hotseam.testing",
]


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_all_is_sorted_and_complete(module_name: str) -> None:
    """__all__ is sorted and every name in it exists."""
    module = importlib.import_module(module_name)
    assert list(module.__all__) == sorted(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_names_show_a_public_module(module_name: str) -> None:
    """Tracebacks say hotseam.Scope, not hotseam._scope.Scope, for every public package."""
    module = importlib.import_module(module_name)
    for name in module.__all__:
        owner = getattr(getattr(module, name), "__module__", None)
        if isinstance(owner, str) and owner.startswith("hotseam"):
            assert "._" not in owner, f"{module_name}.{name} shows {owner}"
    assert hotseam.Scope.__module__ == "hotseam"


# What a provider author and an agent author need, and nothing more: the journal's records
# and codes are in hotseam.interaction.journal, a name added here is a decision.
INTERACTION = {
    "ASK_USER_QUESTION_DESCRIPTION",
    "Agent",
    "AnsweredElsewhere",
    "AskEnded",
    "AskUserQuestionAnswer",
    "AskUserQuestionInput",
    "AskUserQuestionOption",
    "AskUserQuestionOptionInput",
    "AskUserQuestionRequest",
    "ErrorCode",
    "MAX_QUESTIONS",
    "PendingAsk",
    "Question",
    "QuestionAnswer",
    "QuestionInput",
    "SkipReason",
    "USER_INTERACTION",
    "UserInteractionError",
    "UserInteractionProvider",
    "ask",
    "ask_user_question_tool",
    "check_answer",
    "check_partial_answer",
    "check_question_answer",
    "current_ask",
    "on_ask_ended",
    "pending_asks",
    "validate_request",
    "waiting_for_provider",
}


def test_interaction_holds_what_a_provider_or_an_agent_author_needs() -> None:
    """At most 30 names, each one pinned; none of them the journal's."""
    import hotseam.interaction
    import hotseam.interaction.journal

    assert set(hotseam.interaction.__all__) == INTERACTION
    assert len(INTERACTION) <= 30
    journal = set(hotseam.interaction.journal.__all__)
    assert journal & set(hotseam.interaction.__all__) == set()
    assert {"Journal", "JournalDaemon", "JOURNALING", "JournalErrorCode"} <= journal


def test_harness_error_name_code_and_dict() -> None:
    """Subclasses take their class name; to_dict keeps name, code and message."""

    class MyError(HarnessError):
        pass

    error = MyError("went wrong", "WENT_WRONG", details={"field": "x"})
    assert error.name == "MyError" and error.code == "WENT_WRONG"
    assert error.to_dict() == {
        "name": "MyError",
        "code": "WENT_WRONG",
        "message": "went wrong",
        "details": {"field": "x"},
    }
    cause = KeyError("k")
    assert HarnessError("x", "X", cause=cause).__cause__ is cause


def test_errors_module_draws_the_tree() -> None:
    """The error tree is documented in one docstring naming every error."""
    from hotseam._core import _errors

    doc = _errors.__doc__ or ""
    source = Path(_errors.__file__).read_text(encoding="utf-8")
    defined = [node.name for node in ast.parse(source).body if isinstance(node, ast.ClassDef)]
    assert len(defined) >= 9, defined
    for name in defined:
        assert name in doc, name


def test_importing_hotseam_writes_nothing_to_stdout() -> None:
    """Lifecycle events never reach stdout when the application configured nothing."""
    code = (
        "import anyio, hotseam\n"
        "async def main():\n"
        "    ctx = hotseam.Context('c')\n"
        "    async with hotseam.Scope('s', context=ctx) as scope:\n"
        "        scope.provide(hotseam.Seam('x'), object())\n"
        "anyio.run(main)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert completed.stdout == ""


@pytest.mark.anyio
async def test_lifecycle_events_are_structlog_events() -> None:
    """With structlog configured (here by capture_logs) scope and provider events appear."""
    with structlog.testing.capture_logs() as events:
        context = Context("logged")
        async with Scope("logged-scope", context=context) as scope:
            scope.provide(Seam("x"), object())
    names = [event["event"] for event in events]
    assert "provider.installed" in names and "provider.removed" in names
    closed = next(event for event in events if event["event"] == "scope.closed")
    assert closed["scope"] == "logged-scope" and closed["effects"] == 1
    assert {"failures", "duration_ms", "reason"} <= closed.keys()


@pytest.mark.anyio
async def test_unconfigured_events_go_to_stdlib_logging() -> None:
    """Without structlog configuration, events reach the hotseam.* stdlib loggers."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger("hotseam.context")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        context = Context("stdlib")
        registration = context.provide(Seam("x"), object())
        await registration.dispose()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    assert "provider.installed" in stream.getvalue()

"""Several questions for a surface that shows one at a time (a permission prompt, a chat
message, a terminal line): asked one after the other, each answer checked, then joined."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    check_answer,
)


async def ask_one_at_a_time(
    request: AskUserQuestionRequest,
    ask: Callable[[AskUserQuestionRequest], Awaitable[AskUserQuestionAnswer]],
) -> AskUserQuestionAnswer:
    """The answer of ``request``, its questions put to ``ask`` one by one (a request of one
    question is put as it is)."""
    if len(request.questions) == 1:
        return await ask(request)
    entries = []
    for item in request.questions:
        part = AskUserQuestionRequest.of([item], agent=request.agent, signal=request.signal)
        entries.append(check_answer(part, await ask(part)).answers[0])
    return AskUserQuestionAnswer.of(entries, request)


def named_choices(question: Question, text: str) -> tuple[list[AskUserQuestionOption], list[str]]:
    """The options a reply of choices separated by commas names, and the parts naming none
    (a reply naming one option whole is that option: a name may hold a comma)."""
    whole = question.option_named(text)
    if whole is not None:
        return [whole], []
    parts = [part.strip() for part in text.split(",") if part.strip()]
    named = [(part, question.option_named(part)) for part in parts]
    return [o for _, o in named if o is not None], [part for part, o in named if o is None]

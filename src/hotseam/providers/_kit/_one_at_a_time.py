"""Several questions for a surface that shows one at a time: asked one after the other.

A permission prompt, a chat message, a terminal line carry one question. An ask of several
is then put as one one-question request after another (same agent, same signal), each
answer checked against its question, and the entries joined into the ask's answer, in
question order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...interaction import AskUserQuestionAnswer, AskUserQuestionRequest, check_answer

__all__ = ["ask_one_at_a_time"]


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

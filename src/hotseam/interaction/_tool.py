"""The model-facing ``ask_user_question`` tool."""

from __future__ import annotations

from typing import Any

from .._core import BaseContext, Tool, ToolCall
from ._ask import ask
from ._model import AskUserQuestionInput

__all__ = ["ASK_USER_QUESTION_DESCRIPTION", "ask_user_question_tool"]

ASK_USER_QUESTION_DESCRIPTION = """\
Ask the human a question and wait for their answer. Use it when you cannot continue \
without a decision, a preference or a fact only the human has; do not use it for things \
you can find out yourself.

- Give `options` when there are a few sensible answers (2-4 is best). Each option has a \
short `label` the human sees, an optional `value` you receive instead of the label, and \
an optional one-line `description`.
- Mark at most one option `recommended: true` when you have a recommendation; it is \
pre-selected, and the human can take it by pressing Enter.
- `allow_custom` (default true) lets the human type their own answer instead of an \
option. Set it to false only when the answer must be one of the options. Leave out \
`options` for a free-form question.

The result is {"answer": <text>, "option": <the chosen option, or null for custom text>}. \
Use `answer`. If the human dismisses or declines the question, or nobody can answer, the \
call fails with a UserInteractionError whose code says why (ASK_CANCELLED, ASK_DECLINED, \
ASK_TIMEOUT, NO_PROVIDER...); do not assume an answer then."""


async def _handle(input: AskUserQuestionInput, call: ToolCall) -> dict[str, Any]:
    request = input.to_request(agent=call.agent, signal=call.signal)
    context = call.context
    # A tool runs in the context that holds it; tools know it only as a ToolContext.
    assert isinstance(context, BaseContext), context
    answer = await ask(request, context=context)
    return answer.to_dict()


def ask_user_question_tool() -> Tool[AskUserQuestionInput]:
    """Return the ``ask_user_question`` tool, ready for ``scope.register_tool``.

    Its input is the request (question, header, options, allow_custom; the agent and the
    signal come from ``ctx.tools.execute``) and its output ``{"answer", "option"}``.
    """
    return Tool("ask_user_question", ASK_USER_QUESTION_DESCRIPTION, AskUserQuestionInput, _handle)

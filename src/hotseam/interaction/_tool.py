"""The model-facing ``ask_user_question`` tool.

It takes hotseam's one-question shape (``question``, ``header``, ``options``,
``allow_custom``) and answers ``{"answer", "option"}``, or Claude Code's AskUserQuestion
shape (``questions: [{question, header, options: [{label, description}], multiSelect}]``,
plus hotseam's own fields) and answers as Claude Code does: ``answers`` keyed by question
text, with the values of a multi-select question joined by ``", "``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._core import BaseContext, Tool, ToolCall, ToolError
from ._ask import ask
from ._limits import MAX_QUESTIONS
from ._model import AskUserQuestionAnswer, AskUserQuestionRequest, Question

if TYPE_CHECKING:
    from ._inputs import AskUserQuestionInput

ASK_USER_QUESTION_DESCRIPTION = f"""\
Ask the human a question, or several at once, and wait for the answer. Use it when you \
cannot continue without a decision, a preference or a fact only the human has; do not use \
it for things you can find out yourself.

One question: give `question`.
- Give `options` when there are a few sensible answers (2-4 is best). Each option has a \
short `label` the human sees, an optional `value` you receive instead of the label, and \
an optional one-line `description`.
- Mark at most one option `recommended: true` when you have a recommendation; it is \
pre-selected, and the human can take it by pressing Enter.
- `allow_custom` (default true) lets the human type their own answer instead of an \
option. Set it to false only when the answer must be one of the options. Leave out \
`options` for a free-form question.
The result is {{"answer": <text>, "option": <the chosen option, or null for custom text>}}. \
Use `answer`.

Several questions, or a question where the human may pick several options: give \
`questions` instead, a list of 1-{MAX_QUESTIONS} items {{question, header, options, \
multiSelect}}; the human answers them together. Ask related questions in one call rather \
than one after the other. An item may also set `id`, `allowCustom` (default true: the human \
can always answer "Other" in their own words), `minSelections`/`maxSelections` (with \
multiSelect) and `allowSkip` (the human may leave it unanswered); options may have `value` \
and `recommended` as above. The result is {{"answers": {{<question text>: <answer>}}, \
"questions": [{{"id", "question", "answer", "values", "custom", "skipped"}}]}}: the answer \
to a multiSelect question is the chosen values joined by ", " (each one is in `values`; \
`custom` is the human's own text); a skipped question has no entry in `answers`, and its \
`skipped` says why.

If the human dismisses or declines the question(s), or nobody can answer, the call fails \
with a UserInteractionError whose code says why (ASK_CANCELLED, ASK_DECLINED, ASK_TIMEOUT, \
NO_PROVIDER...); do not assume an answer then."""


async def _handle(input: AskUserQuestionInput, call: ToolCall) -> dict[str, Any]:
    if input.questions is None and "question" not in input.model_fields_set:
        # The input model lets ``question`` be left out (for ``questions``): neither given
        # is the tool's input that is wrong, as any other missing field is, not a request.
        missing = f"Field required (or give questions: a list of 1 to {MAX_QUESTIONS} questions)"
        raise ToolError(
            f"invalid input for tool {call.tool!r}: question: {missing}",
            "INVALID_INPUT",
            details={"errors": [{"field": "question", "message": missing, "type": "missing"}]},
        )
    request = AskUserQuestionRequest.from_input(input, agent=call.agent, signal=call.signal)
    context = call.context
    # A tool runs in the context that holds it; tools know it only as a ToolContext.
    assert isinstance(context, BaseContext), context
    answer = await ask(request, context=context)
    if input.questions is None:
        return answer.to_dict()
    return _listed_output(request.questions, answer)


def _listed_output(questions: Sequence[Question], answer: AskUserQuestionAnswer) -> dict[str, Any]:
    """The tool's result for input given as ``questions``: Claude Code's ``answers`` (by
    question text; skipped questions left out) and one entry per question."""
    answers: dict[str, str] = {}
    entries: list[dict[str, Any]] = []
    for item, entry in zip(questions, answer.answers, strict=True):
        if entry.answer is not None:
            answers[item.question] = entry.answer
        entries.append(
            {
                "id": entry.id,
                "question": item.question,
                "answer": entry.answer,
                "values": list(entry.values),
                "custom": entry.custom,
                "skipped": entry.skipped,
            }
        )
    return {"answers": answers, "questions": entries}


def ask_user_question_tool() -> Tool[AskUserQuestionInput]:
    """Return the ``ask_user_question`` tool (see the module), ready for
    ``scope.register_tool``; the agent and the signal come from ``ctx.tools.execute``."""
    return Tool("ask_user_question", ASK_USER_QUESTION_DESCRIPTION, _input_model, _handle)


def _input_model() -> type[AskUserQuestionInput]:
    """Imported when the tool is first called or described: pydantic and the models cost
    about a third of ``hotseam run``'s start, which registers the tool."""
    from ._inputs import AskUserQuestionInput

    return AskUserQuestionInput

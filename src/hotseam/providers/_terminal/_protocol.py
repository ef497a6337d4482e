"""The text protocol both terminal paths speak: one reply line becomes an answer or a reason.

A reply is resolved in this order (surrounding blanks are ignored):

1. empty → the recommended option; without one, ask again;
2. an option's label (case-insensitive) or its value → that option;
3. a number from 1 to the number of options → that option; any other number asks again
   (numbers are reserved for options whenever there are options);
4. anything else → the human's own answer when the question accepts one, else ask again.

The reasons are one line each, so both the plain-line path and the prompt's validation line
can show them as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...interaction import AskUserQuestionAnswer, AskUserQuestionOption, AskUserQuestionRequest
from ._visible import visible

__all__ = ["Reprompt", "answer_line", "hint", "resolve_reply"]

_QUOTE_LIMIT = 24
_ANSWER_LIMIT = 60


@dataclass(frozen=True, slots=True)
class Reprompt:
    """The reply is not an answer; ``reason`` says why, in one line."""

    reason: str


def resolve_reply(request: AskUserQuestionRequest, reply: str) -> AskUserQuestionAnswer | Reprompt:
    """Turn one reply line into an answer to ``request``, or the reason to ask again."""
    text = reply.strip()
    choices = request.choices
    if not text:
        recommended = request.recommended
        if recommended is not None:
            return _chosen(recommended)
        return Reprompt(_empty_reason(request))
    folded = text.casefold()
    for option in choices:
        if folded == option.label.strip().casefold() or folded == option.model_value.casefold():
            return _chosen(option)
    if choices and text.isascii() and text.isdigit():
        number = int(text)
        if 1 <= number <= len(choices):
            return _chosen(choices[number - 1])
        return Reprompt(f"There is no option {number}: choose {_range(choices)}.")
    if request.accepts_custom:
        return AskUserQuestionAnswer(text)
    return Reprompt(
        f"{_quote(text)} is not an option: type {_range(choices)} or a label "
        f"({', '.join(visible(option.label) for option in choices)})."
    )


def hint(request: AskUserQuestionRequest) -> str:
    """One line telling the human what they can type."""
    if request.is_free_form:
        return "Type your answer."
    what = "Type a number or a label"
    if request.allow_custom:
        what += ", or your own answer"
    recommended = request.recommended
    if recommended is not None:
        return f"{what}; Enter alone picks {visible(recommended.label)}."
    return what + "."


def answer_line(answer: AskUserQuestionAnswer) -> str:
    """The outcome line of an answered question, as it stays in the scrollback."""
    if answer.option is not None:
        return f"-> {visible(answer.option.label)}"
    text = visible(answer.answer)
    if len(text) > _ANSWER_LIMIT:  # the reply line above shows it whole
        return f"-> {text[: _ANSWER_LIMIT - 3]}... (your own answer, {len(text)} characters)"
    return f"-> {text} (your own answer)"


def _chosen(option: AskUserQuestionOption) -> AskUserQuestionAnswer:
    return AskUserQuestionAnswer(option.model_value, option)


def _empty_reason(request: AskUserQuestionRequest) -> str:
    if request.is_free_form:
        return "An empty line is not an answer: type your answer."
    if request.allow_custom:
        return f"Nothing chosen: type {_range(request.choices)}, a label, or your own answer."
    return f"Nothing chosen: type {_range(request.choices)} or a label."


def _range(choices: tuple[AskUserQuestionOption, ...]) -> str:
    return "1" if len(choices) == 1 else f"a number from 1 to {len(choices)}"


def _quote(text: str) -> str:
    if len(text) > _QUOTE_LIMIT:
        text = text[: _QUOTE_LIMIT - 3] + "..."
    return repr(text)

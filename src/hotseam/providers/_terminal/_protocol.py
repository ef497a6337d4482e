"""The text protocol both terminal paths speak: one reply line becomes an answer or a reason.

A reply is resolved in this order (surrounding blanks are ignored):

1. empty → the recommended option; without one, ask again;
2. the option the reply names, by label, value or number
   (:meth:`~hotseam.interaction.Question.option_named`, the matcher every surface uses)
   → that option;
3. any other number asks again (numbers are reserved for options when there are some);
4. anything else → the human's own answer when the question accepts one, else ask again.

Reasons and the markers of a question ended unanswered are one line each, so both paths
show them as they are. A stepper's question is resolved by :func:`resolve_step`:
``/back`` and ``/skip`` are commands there, and a multi-select question takes choices
separated by commas (``1,3``), the parts naming no option being the human's own answer.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TypeAlias

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
)
from .._kit import named_choices

WITHDRAWN = "(question withdrawn)"
"""The marker left when the asking side withdrew the question (its task was cancelled)."""


class DismissedError(Exception):
    """The human dismissed the question; ``marker`` stays in the scrollback, the model
    reads ``message``."""

    def __init__(self, marker: str, message: str) -> None:
        super().__init__(message)
        self.marker = marker
        self.message = message


def timeout_marker(seconds: float) -> str:
    return f"(no answer within {seconds:g} s; nothing was chosen)"


def time_left(deadline: float) -> int:
    """Whole seconds until ``deadline`` (``time.monotonic()`` seconds), rounded up, >= 0."""
    return max(0, math.ceil(deadline - time.monotonic()))


_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))

_SHOWN: dict[int, str] = {
    **{code: "^" + chr(code + 64) for code in range(0x20)},
    0x7F: "^?",
    **{code: f"<{code:02x}>" for code in range(0x80, 0xA0)},
    **{code: f"<U+{code:04X}>" for code in _BIDI},
    ord("\t"): " ",
}
_ONE_LINE = {**_SHOWN, ord("\n"): " "}
_LINES = {**_SHOWN, ord("\n"): "\n"}


def visible(text: str, *, lines: bool = False) -> str:
    """``text`` with every character a terminal would obey shown instead.

    What a model wrote must be shown, never run: ``ESC [2J`` clears the screen, OSC 52
    writes the clipboard, ``\\r`` and ``\\b`` overwrite, a bidi override reorders text
    ("Trojan Source"). C0 controls and DEL become caret notation (``^[``), C1 controls
    ``<9b>``, bidi controls ``<U+202E>``, a tab a space (wrapping counts cells); a line
    break stays one with ``lines``, else it is a space. A second pass changes nothing.
    """
    if text.isprintable():
        return text
    text = text.replace("\r\n", "\n")
    return text.translate(_LINES if lines else _ONE_LINE)


Asked: TypeAlias = AskUserQuestionRequest | Question
"""A one-question request or one question of a request: both have the fields read here."""

BACK_COMMAND = "/back"
"""Typed into a stepper's question: back to the previous question."""
SKIP_COMMAND = "/skip"
"""Typed into a stepper's question that may be skipped: skip it."""

_QUOTE_LIMIT = 24
_ANSWER_LIMIT = 60


@dataclass(frozen=True, slots=True)
class Reprompt:
    """The reply is not an answer; ``reason`` says why, in one line."""

    reason: str


@dataclass(frozen=True, slots=True)
class Back:
    """The human asked to go back to the previous question of the stepper."""


BACK = Back()


def resolve_reply(request: Asked, reply: str) -> AskUserQuestionAnswer | Reprompt:
    """Turn one reply line into an answer to ``request``, or the reason to ask again."""
    text = reply.strip()
    choices = request.choices
    if not text:
        recommended = request.recommended
        if recommended is not None:
            return _chosen(recommended)
        return Reprompt(_empty_reason(request))
    named = request.option_named(text)
    if named is not None:
        return _chosen(named)
    if choices and text.isascii() and text.isdigit():
        return Reprompt(f"There is no option {int(text)}: choose {_range(choices)}.")
    if request.accepts_custom:
        return AskUserQuestionAnswer(text)
    return _not_an_option(text, f"{_range(choices)} or a label", choices)


def hint(request: Asked) -> str:
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


def _empty_reason(request: Asked) -> str:
    if request.is_free_form:
        return "An empty line is not an answer: type your answer."
    if request.allow_custom:
        return f"Nothing chosen: type {_range(request.choices)}, a label, or your own answer."
    return f"Nothing chosen: type {_range(request.choices)} or a label."


def _range(choices: tuple[AskUserQuestionOption, ...]) -> str:
    return "1" if len(choices) == 1 else f"a number from 1 to {len(choices)}"


def _not_an_option(text: str, how: str, choices: tuple[AskUserQuestionOption, ...]) -> Reprompt:
    labels = ", ".join(visible(option.label) for option in choices)
    return Reprompt(f"{_quote(text)} is not an option: type {how} ({labels}).")


def _quote(text: str) -> str:
    if len(text) > _QUOTE_LIMIT:
        text = text[: _QUOTE_LIMIT - 3] + "..."
    return repr(text)


def resolve_step(
    question: Question,
    reply: str,
    *,
    ticked: frozenset[int],
    first: bool,
    ticking: bool,
) -> QuestionAnswer | Back | Reprompt:
    """Turn one reply to a stepper's question into its answer, a step back, or a reason.

    An empty reply sends the ``ticked`` options (indices); with ``ticking`` (the prompt,
    where Space ticks) what the reply names is added to them.
    """
    text = reply.strip()
    command = text.casefold()
    if command == BACK_COMMAND:
        return Reprompt("This is the first question: there is none before it.") if first else BACK
    if command == SKIP_COMMAND:
        if not question.allow_skip:
            return Reprompt("This question cannot be skipped: it needs an answer.")
        return QuestionAnswer.skip(question)
    if question.is_multi_select:
        return _resolve_selection(question, text, ticked, ticking=ticking)
    result = resolve_reply(question, text)
    if isinstance(result, Reprompt):
        return result
    if result.option is not None:
        return QuestionAnswer.chosen(question, [result.option])
    return QuestionAnswer.chosen(question, (), custom=result.answer)


def _resolve_selection(
    question: Question, text: str, ticked: frozenset[int], *, ticking: bool
) -> QuestionAnswer | Reprompt:
    choices = question.choices
    named, own = named_choices(question, text)
    picked = (set(ticked) if ticking or not text else set()) | {choices.index(o) for o in named}
    number = next((part for part in own if part.isascii() and part.isdigit()), None)
    if number is not None:
        return Reprompt(f"There is no option {int(number)}: choose {_range(choices)}.")
    if own and not question.allow_custom:
        return _not_an_option(own[0], "numbers or labels separated by commas", choices)
    custom = ", ".join(own) or None
    count = len(picked) + (custom is not None)
    least, most = question.selection_range
    counted = f"{count} chosen" + (" (your own answer counts as one)" if custom else "")
    if count < least:
        more = f"at least {least}"
        if ticking:
            return Reprompt(f"{counted}, but this question takes {more}: tick more with Space.")
        return Reprompt(
            f"{counted}, but this question takes {more}: type numbers or labels separated "
            "by commas (1,3)."
        )
    if count > most:
        if ticking:
            return Reprompt(
                f"{counted}, but this question takes at most {most}: untick "
                f"{count - most} with Space."
            )
        return Reprompt(f"{counted}, but this question takes at most {most}.")
    return QuestionAnswer.chosen(question, [choices[i] for i in sorted(picked)], custom)


def pick_hint(question: Question, *, ticking: bool) -> str:
    least = question.selection_range[0]
    how_many = question.how_many.capitalize()
    own = ", or add your own answer" if question.allow_custom else ""
    if ticking:
        return f"{how_many}{own}: Space ticks, Enter sends what is ticked."
    recommended = [visible(option.label) for option in question.recommended_options]
    default = (
        f"; Enter alone picks {_and(recommended)}"
        if recommended
        else ("; Enter alone picks none" if least == 0 else "")
    )
    return f"{how_many}: type numbers or labels separated by commas (1,3){own}{default}."


def entry_line(entry: QuestionAnswer) -> str:
    """The outcome line of one answered question of a stepper."""
    if entry.skipped is not None:
        return f"-> ({entry.skipped})"
    labels = ", ".join(visible(option.label) for option in entry.options)
    if entry.custom is None:
        return f"-> {labels}" if labels else "-> (nothing chosen)"
    own = answer_line(AskUserQuestionAnswer(entry.custom)).removeprefix("-> ")
    return f"-> {labels}; {own}" if labels else f"-> {own}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"

"""Conversation mode: a question asked in the chat, answered by the next prompt.

A client without form elicitation can still show agent messages and send prompts, so a
free-form question goes out as an agent message chunk, the prompt turn ends with
``end_turn`` (the human's turn to speak), and the text of the next ``session/prompt`` in
that session is the answer. The agent function never stops: its ask simply waits across
the two prompts, and resumes inside the new turn.

A question with options comes here too when the client cannot take it as a permission
request either (it answered ``session/request_permission`` with "method not found"): the
options are a numbered list, and the reply is read back by :func:`read_reply` (a number,
an option's name or value, or, when allowed, an answer of the human's own).

This module holds the waiting questions, one per session at a time (a second question in
the same session waits for the first to be answered); the ACP agent (``_agent``) ends the
turn when told to (:attr:`~._scope.AskScope.end_turn`) and hands the next prompt's text to
:meth:`Conversations.answer`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio

from ...interaction import AskUserQuestionAnswer, AskUserQuestionOption, AskUserQuestionRequest
from ._form import RECOMMENDED_SUFFIX, EmptyAnswerError

__all__ = [
    "NOT_AN_OPTION_NOTE",
    "Conversations",
    "NotAnOptionError",
    "conversation_text",
    "escape_markdown",
    "read_reply",
]

_REPLY_HINT = "_(Reply with your answer as your next message.)_"
_CHOICE_HINT = "_(Reply with the number or the name of your choice.)_"
_CHOICE_OR_OWN_HINT = (
    "_(Reply with the number or the name of your choice, or with an answer of your own.)_"
)
NOT_AN_OPTION_NOTE = "That reply is none of the options: please reply with one of them."
"""The one line put before a question with options asked again after a reply that is
none of them (custom answers not allowed)."""

_NUMBER = re.compile(r"(\d{1,6})[.)]?")


class NotAnOptionError(Exception):
    """The reply is none of the options, and the question allows no answer of one's own."""


def conversation_text(
    question: str,
    header: str | None,
    note: str | None = None,
    *,
    options: Sequence[AskUserQuestionOption] = (),
    allow_custom: bool = True,
) -> str:
    """The agent message that asks the question in the chat (Markdown, one idea a line).

    Options are a numbered list, each with its description; the recommended one is
    marked as in the other carriers.
    """
    lines = [] if note is None else [f"_{note}_", ""]
    lines.append(f"**{header}**: {question}" if header else f"**{question}**")
    if options:
        lines.append("")
        for number, option in enumerate(options, start=1):
            name = escape_markdown(option.label) + (
                RECOMMENDED_SUFFIX if option.recommended else ""
            )
            described = f": {option.description}" if option.description else ""
            lines.append(f"{number}. **{name}**{described}")
        lines += ["", _CHOICE_OR_OWN_HINT if allow_custom else _CHOICE_HINT]
    else:
        lines += ["", _REPLY_HINT]
    return "\n" + "\n".join(lines) + "\n"


def read_reply(request: AskUserQuestionRequest, text: str) -> AskUserQuestionAnswer:
    """The answer a reply in the chat gives to ``request``.

    For a question with options: the option's number (``2``, ``2.``, ``2)``), its label or
    its model-facing value (case and surrounding spaces ignored, a ``(Recommended)``
    suffix too), else the reply itself when custom answers are allowed.

    Raises:
        EmptyAnswerError: a blank reply.
        NotAnOptionError: none of the options, and custom answers are not allowed.
    """
    reply = text.strip()
    if not reply:
        raise EmptyAnswerError()
    if request.is_free_form:
        return AskUserQuestionAnswer(reply)
    option = _chosen(request.choices, reply)
    if option is not None:
        return AskUserQuestionAnswer(option.model_value, option)
    if request.allow_custom:
        return AskUserQuestionAnswer(reply)
    raise NotAnOptionError()


def _chosen(options: Sequence[AskUserQuestionOption], reply: str) -> AskUserQuestionOption | None:
    """The option a reply names: its label or value first (an option may be called "2"),
    then its number in the list."""
    wanted = reply.removesuffix(RECOMMENDED_SUFFIX.strip()).strip().casefold()
    for option in options:
        if wanted in (option.label.strip().casefold(), option.model_value.strip().casefold()):
            return option
    number = _NUMBER.fullmatch(reply)
    if number is not None and 1 <= int(number.group(1)) <= len(options):
        return options[int(number.group(1)) - 1]
    return None


def escape_markdown(text: str) -> str:
    """Escape what would end a bold span early."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_")


@dataclass(eq=False, slots=True)
class _Waiting:
    answered: anyio.Event = field(default_factory=anyio.Event)
    text: str | None = None


class Conversations:
    """The questions waiting for the next prompt of their session."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._freed: dict[str, anyio.Event] = {}

    def __len__(self) -> int:
        return len(self._waiting) + len(self._freed)

    def waiting(self, session_id: str) -> bool:
        """True when a question of this session waits for the human's next prompt."""
        waiting = self._waiting.get(session_id)
        return waiting is not None and not waiting.answered.is_set()

    def answer(self, session_id: str, text: str) -> bool:
        """Give the session's waiting question its answer; False when none is waiting."""
        waiting = self._waiting.get(session_id)
        if waiting is None or waiting.answered.is_set():
            return False
        waiting.text = text
        waiting.answered.set()
        return True

    async def ask(
        self,
        session_id: str,
        send: Callable[[], Awaitable[None]],
        end_turn: Callable[[], None],
    ) -> str:
        """Send the question (``send``), end the turn, and wait for the next prompt's text.

        Cancelling the calling task withdraws the question: the next prompt is a prompt
        again, not an answer. An answer given before the cancellation is delivered stands
        (the waiting task is already rescheduled, so the cancellation does not reach it).
        """
        while session_id in self._waiting:  # one question at a time in a session
            freed = self._freed.setdefault(session_id, anyio.Event())
            await freed.wait()
        waiting = _Waiting()
        self._waiting[session_id] = waiting
        try:
            await send()
            end_turn()
            await waiting.answered.wait()
            assert waiting.text is not None
            return waiting.text
        finally:
            del self._waiting[session_id]
            if session_id in self._freed:
                self._freed.pop(session_id).set()

"""Conversation mode: a question asked in the chat, answered by the next prompt.

A client without form elicitation still shows agent messages and sends prompts: the
question goes out as an agent message, the turn ends with ``end_turn``, and the next
``session/prompt`` of the session is the answer, while the agent function's ask waits
across the two prompts. A question with options comes here too when the client refused
``session/request_permission``: its options are a numbered list, read back by
:func:`read_reply`. One question waits per session at a time; the agent ends the turn
(:attr:`~._provider.AskScope.end_turn`) and hands the next prompt to
:meth:`Conversations.answer`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import anyio

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    UserInteractionError,
    check_question_answer,
)
from .._kit import RECOMMENDED_SUFFIX, EmptyAnswerError, named_choices

_REPLY_HINT = "_(Reply with your answer as your next message.)_"
_CHOICE_HINT = "_(Reply with the number or the name of your choice.)_"
_CHOICE_OR_OWN_HINT = (
    "_(Reply with the number or the name of your choice, or with an answer of your own.)_"
)
_CHOICES_HINT = (
    "_(Reply with the numbers or the names of your choices, separated by commas: `1, 3`.)_"
)
_CHOICES_OR_OWN_HINT = (
    "_(Reply with the numbers or the names of your choices, separated by commas: `1, 3`; "
    "an answer of your own counts as one more.)_"
)
SKIP_WORD = "skip"
"""The reply that skips a question the human may skip (when no option is called so)."""
_SKIP_HINT = f"_(Reply `{SKIP_WORD}` to leave it unanswered.)_"
NOT_AN_OPTION_NOTE = "That reply is none of the options: please reply with one of them."


class NotAnOptionError(Exception):
    """The reply names none of the options and no answer of one's own is allowed (or has
    more or fewer choices than it takes): an ``Unfit`` of the kit."""

    def __init__(
        self,
        note: str = NOT_AN_OPTION_NOTE,
        problem: str = "was none of the options",
        consequence: str = ", and the question allows no answer of their own",
    ) -> None:
        super().__init__(note)
        self.note = note
        self.problem = problem
        self.consequence = consequence

    def describe(self, times: int) -> str:
        reply = "the human's reply in the conversation"
        return f"{reply} {self.problem} {times} times{self.consequence}"


def conversation_text(
    question: str,
    header: str | None,
    note: str | None = None,
    *,
    options: Sequence[AskUserQuestionOption] = (),
    allow_custom: bool = True,
    multi_select: bool = False,
    hint: str | None = None,
    allow_skip: bool = False,
) -> str:
    """The agent message that asks the question in the chat (Markdown, one idea a line):
    options numbered, each described, the recommended one marked as elsewhere."""
    lines = [] if note is None else [f"_{note}_", ""]
    suffix = "" if hint is None else f" _({hint})_"
    lines.append((f"**{header}**: {question}" if header else f"**{question}**") + suffix)
    if options and multi_select:
        lines.append("")
        lines += _numbered(options)
        lines += ["", _CHOICES_OR_OWN_HINT if allow_custom else _CHOICES_HINT]
    elif options:
        lines.append("")
        lines += _numbered(options)
        lines += ["", _CHOICE_OR_OWN_HINT if allow_custom else _CHOICE_HINT]
    else:
        lines += ["", _REPLY_HINT]
    if allow_skip:
        lines.append(_SKIP_HINT)
    return "\n" + "\n".join(lines) + "\n"


def question_text(request: AskUserQuestionRequest, note: str | None = None) -> str:
    """:func:`conversation_text` for the (one) question of ``request``."""
    question = request.questions[0]
    plain = not (question.is_multi_select or question.allow_skip)
    return conversation_text(
        request.question,
        request.header,
        note,
        options=request.choices,
        allow_custom=request.allow_custom,
        multi_select=question.is_multi_select,
        hint=None if plain else question.hint,
        allow_skip=question.allow_skip,
    )


def _numbered(options: Sequence[AskUserQuestionOption]) -> list[str]:
    lines = []
    for number, option in enumerate(options, start=1):
        name = escape_markdown(option.label) + (RECOMMENDED_SUFFIX if option.recommended else "")
        described = f": {option.description}" if option.description else ""
        lines.append(f"{number}. **{name}**{described}")
    return lines


def read_reply(request: AskUserQuestionRequest, text: str) -> AskUserQuestionAnswer:
    """The answer a reply in the chat gives to ``request``: the option it names
    (:meth:`~hotseam.interaction.Question.option_named`), else, when allowed, the human's
    own; for a multi-select question several, separated by commas (``1, 3``), the parts
    naming no option one more choice. ``skip`` skips a question that may be skipped.

    Raises:
        EmptyAnswerError: a blank reply.
        NotAnOptionError: none of the options, and custom answers are not allowed; or,
            for a multi-select question, more or fewer choices than it takes.
    """
    reply = text.strip()
    if not reply:
        raise EmptyAnswerError()
    question = request.questions[0]
    skip = question.allow_skip and reply.casefold() == SKIP_WORD
    if question.is_free_form:
        if skip:
            return AskUserQuestionAnswer.of([QuestionAnswer.skip(question)], request)
        return AskUserQuestionAnswer.of([QuestionAnswer.chosen(question, (), reply)], request)
    if question.is_multi_select:
        return AskUserQuestionAnswer.of([_several(question, reply, skip)], request)
    option = question.option_named(reply)
    if option is not None:
        return AskUserQuestionAnswer(option.model_value, option)
    if skip:
        return AskUserQuestionAnswer.of([QuestionAnswer.skip(question)], request)
    if request.allow_custom:
        return AskUserQuestionAnswer(reply)
    raise NotAnOptionError()


def _several(question: Question, reply: str, skip: bool) -> QuestionAnswer:
    """The entry of a multi-select question for a reply of choices separated by commas."""
    picked, rest = named_choices(question, reply)
    if skip and not picked:
        return QuestionAnswer.skip(question)
    custom = None
    if rest:
        if not question.allow_custom:
            raise NotAnOptionError()
        custom = reply if not picked else ", ".join(rest)  # nothing named: all of it is theirs
    entry = QuestionAnswer.chosen(question, picked, custom)
    try:
        return check_question_answer(question, entry)
    except UserInteractionError:
        least, most = question.selection_range
        bounds = f"{least}" if least == most else f"{least} to {most}"
        count = len(entry.values)
        raise NotAnOptionError(
            f"That reply has {count} choice{'s' if count != 1 else ''}: please pick {bounds}.",
            f"had a number of choices the question does not take (pick {bounds})",
            "",
        ) from None


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
        """Send the question, end the turn, and wait for the next prompt's text.

        A cancelled wait withdraws the question (the next prompt is a prompt again); an
        answer delivered before the cancellation stands.
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

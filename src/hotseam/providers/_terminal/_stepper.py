"""The stepper: an ask of several questions, shown one question after the other.

The state both paths share: which question is on screen ("2 of 3"), the answers given so
far, the options ticked, the option highlighted and the text typed per question. Going back
keeps what was given (the previous answer is shown again, ready to send), and the whole
state is a :class:`Steps` that a draft keeps across a reload.

The draft: what the human was doing when a question was withdrawn, kept to re-ask it with.
A hot reload withdraws the question from the old generation's prompt and asks it again on
the new one; without a draft the half-typed reply would vanish, and so would the answers
already given to the first questions of an ask of several. The draft is plain data defined
outside the watched folders, so a provider module carries it across generations
(``scope.carry("draft", Draft)``) and hands it to each generation's ``TerminalProvider``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    UserInteractionError,
    check_question_answer,
)

__all__ = ["Draft", "Stepper", "Steps", "needs_stepper"]

_Key = tuple[str, str | None, tuple[str, ...]]
_AskKey = tuple[str | None, tuple[tuple[object, ...], ...]]

_MOST_ASKS = 16
"""How many withdrawn asks a draft remembers (the oldest is forgotten first): asks are
re-asked within a reload, so a few are plenty; the bound keeps a draft from growing with
asks that were never asked again."""


def _key(request: AskUserQuestionRequest) -> _Key:
    return (request.question, request.header, tuple(o.label for o in request.choices))


def _ask_key(ask: str | None, request: AskUserQuestionRequest) -> _AskKey:
    questions = tuple(
        (
            item.id,
            item.question,
            item.header,
            tuple(o.label for o in item.choices),
            item.multi_select,
            item.allow_skip,
        )
        for item in request.questions
    )
    return (ask, questions)


@dataclass(frozen=True, slots=True)
class Steps:
    """Where the human was in a stepper (an ask shown one question after the other).

    Attributes:
        position: The index of the question on screen.
        answers: The answers given so far (to questions before ``position``, and to later
            ones the human went back from).
        ticked: Per question id, the options ticked (indices), where they differ from the
            preselection.
        typed: Per question id, the text typed into its line and the cursor.
        highlighted: Per question id, the option the highlight (``>``, moved with Up/Down,
            what Space ticks) is on, where it moved from the first.
    """

    position: int = 0
    answers: tuple[QuestionAnswer, ...] = ()
    ticked: tuple[tuple[str, tuple[int, ...]], ...] = ()
    typed: tuple[tuple[str, str, int], ...] = ()
    highlighted: tuple[tuple[str, int], ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when there is nothing worth keeping (the first question, untouched)."""
        return not (self.position or self.answers or self.ticked or self.typed or self.highlighted)


class Draft:
    """What was typed into a question that was withdrawn, to start its re-asked prompt from.

    For one question: the text and cursor, restored only into the same question (same
    text, header and option labels), once. For an ask of several questions: the
    stepper's record, ``Steps`` (position, answers given, ticks, highlighted option, typed
    text), restored only
    into the same ask (the same ``hotseam.interaction.current_ask()`` id and questions), once.
    """

    __slots__ = ("_saved", "_steps")

    def __init__(self) -> None:
        self._saved: tuple[_Key, str, int] | None = None
        self._steps: OrderedDict[_AskKey, Steps] = OrderedDict()

    def __repr__(self) -> str:
        asks = f" +{len(self._steps)} asks" if self._steps else ""
        return f"<Draft {self.text!r}{asks}>"

    @property
    def text(self) -> str:
        """The kept text of a one-question prompt ("" when none)."""
        return self._saved[1] if self._saved is not None else ""

    def keep(self, request: AskUserQuestionRequest, text: str, cursor: int) -> None:
        """Keep what was typed into ``request``'s prompt (nothing typed: forget)."""
        if not text:
            self._saved = None
            return
        self._saved = (_key(request), text, max(0, min(cursor, len(text))))

    def take(self, request: AskUserQuestionRequest) -> tuple[str, int] | None:
        """The text and cursor kept for ``request``, if any; forgotten once taken."""
        saved = self._saved
        if saved is None or saved[0] != _key(request):
            return None
        self._saved = None
        return saved[1], saved[2]

    def keep_steps(self, ask: str | None, request: AskUserQuestionRequest, steps: Steps) -> None:
        """Keep where the human was in the stepper of ``request``, asked as ``ask`` (its
        ``current_ask().question_id``; ``None`` outside ``ask()``). Nothing done yet: forget."""
        key = _ask_key(ask, request)
        self._steps.pop(key, None)
        if steps.is_empty:
            return
        self._steps[key] = steps
        while len(self._steps) > _MOST_ASKS:
            self._steps.popitem(last=False)

    def take_steps(self, ask: str | None, request: AskUserQuestionRequest) -> Steps | None:
        """The steps kept for ``request`` asked as ``ask``, if any; forgotten once taken."""
        return self._steps.pop(_ask_key(ask, request), None)


def needs_stepper(request: AskUserQuestionRequest) -> bool:
    """Whether ``request`` is more than one plain question (several questions, or one that
    is multi-select or may be skipped); a plain one keeps the one-question prompt."""
    questions = request.questions
    return len(questions) > 1 or questions[0].is_multi_select or questions[0].allow_skip


class Stepper:
    """Where the human is in ``request``, and what they gave so far."""

    __slots__ = (
        "_answers",
        "_highlighted",
        "_position",
        "_ticked",
        "_typed",
        "request",
        "resumed",
    )

    def __init__(self, request: AskUserQuestionRequest, kept: Steps | None = None) -> None:
        self.request = request
        self._position = 0
        self._answers: dict[str, QuestionAnswer] = {}
        self._ticked: dict[str, frozenset[int]] = {}
        self._typed: dict[str, tuple[str, int]] = {}
        self._highlighted: dict[str, int] = {}
        self.resumed = 0
        """How many answers were kept from a withdrawn prompt (0: a fresh start)."""
        if kept is not None:
            self._restore(kept)

    @property
    def total(self) -> int:
        return len(self.request.questions)

    @property
    def position(self) -> int:
        """The index of the question on screen (``total`` once every one is answered)."""
        return self._position

    @property
    def finished(self) -> bool:
        return self._position >= self.total

    @property
    def question(self) -> Question:
        """The question on screen."""
        return self.request.questions[self._position]

    def ticked(self, question: Question) -> frozenset[int]:
        """The options of ``question`` ticked: as the human left them, else those of its
        answer, else the recommended ones (preselected)."""
        assert question.id is not None
        if question.id in self._ticked:
            return self._ticked[question.id]
        entry = self._answers.get(question.id)
        if entry is not None and entry.skipped is None:
            return frozenset(question.choices.index(option) for option in entry.options)
        return frozenset(i for i, option in enumerate(question.choices) if option.recommended)

    def toggle(self, question: Question, index: int) -> None:
        """Tick the option ``index`` of ``question``, or untick it."""
        assert question.id is not None
        self._ticked[question.id] = self.ticked(question) ^ {index}

    def highlighted(self, question: Question) -> int:
        """The option of ``question`` the highlight is on (what Space ticks): the first
        until it is moved."""
        assert question.id is not None
        return self._highlighted.get(question.id, 0)

    def highlight(self, question: Question, index: int) -> None:
        """Move the highlight of ``question`` to its option ``index`` (wrapping around)."""
        assert question.id is not None
        count = len(question.choices)
        if count:
            self._highlighted[question.id] = index % count

    def typed(self, question: Question) -> tuple[str, int] | None:
        """The text typed into ``question``'s line and its cursor, if any."""
        assert question.id is not None
        return self._typed.get(question.id)

    def type(self, question: Question, text: str, cursor: int) -> None:
        """Keep what is typed into ``question``'s line (nothing: forget)."""
        assert question.id is not None
        if text:
            self._typed[question.id] = (text, max(0, min(cursor, len(text))))
        else:
            self._typed.pop(question.id, None)

    def answer(self, entry: QuestionAnswer) -> None:
        """Record the answer to the question on screen, and go on to the next one.

        Its line then holds what shows the answer again (a label, the own text), so going
        back to it and pressing Enter sends the same answer.
        """
        question = self.question
        assert question.id == entry.id
        self._answers[entry.id] = entry
        self._ticked.pop(entry.id, None)
        if question.is_multi_select or len(entry.options) != 1:
            self.type(question, entry.custom or "", len(entry.custom or ""))
        else:
            label = entry.options[0].label
            self.type(question, label, len(label))
        self._position += 1

    def back(self) -> None:
        """Go back to the previous question (its answer stays until it is answered again)."""
        assert self._position > 0
        self._position -= 1

    def result(self) -> AskUserQuestionAnswer:
        """The answer of the whole ask, one entry per question, in question order."""
        entries = [self._answers[str(item.id)] for item in self.request.questions]
        return AskUserQuestionAnswer.of(entries, self.request)

    def snapshot(self) -> Steps:
        """The state, as plain data a draft keeps."""
        return Steps(
            position=min(self._position, self.total - 1),
            answers=tuple(self._answers.values()),
            ticked=tuple((key, tuple(sorted(ticks))) for key, ticks in self._ticked.items()),
            typed=tuple((key, text, cursor) for key, (text, cursor) in self._typed.items()),
            highlighted=tuple((key, at) for key, at in self._highlighted.items() if at),
        )

    def _restore(self, kept: Steps) -> None:
        """Take what ``kept`` holds that still fits the questions (the draft was keyed by
        them; anything else is dropped, never trusted)."""
        by_id = {str(item.id): item for item in self.request.questions}
        for entry in kept.answers:
            question = by_id.get(entry.id)
            if question is None:
                continue
            try:
                self._answers[entry.id] = check_question_answer(question, entry)
            except UserInteractionError:
                continue
        for key, ticks in kept.ticked:
            if key in by_id:
                count = len(by_id[key].choices)
                self._ticked[key] = frozenset(i for i in ticks if 0 <= i < count)
        for key, text, cursor in kept.typed:
            if key in by_id:
                self._typed[key] = (text, max(0, min(cursor, len(text))))
        for key, at in kept.highlighted:
            if key in by_id and 0 <= at < len(by_id[key].choices):
                self._highlighted[key] = at
        # Resume at the first question without an answer, or where the human was.
        unanswered = next(
            (i for i, item in enumerate(self.request.questions) if item.id not in self._answers),
            self.total - 1,
        )
        self._position = max(0, min(kept.position, unanswered, self.total - 1))
        self.resumed = len(self._answers)

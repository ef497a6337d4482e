"""The stepper: an ask of several questions, shown one question after the other.

The state both paths share (the question on screen, the answers so far, and per question
the ticks, the highlight and the typed text) is a :class:`Steps`. Going back keeps what was
given, shown again ready to send.

The draft keeps what the human was doing when a question was withdrawn: a hot reload
re-asks it on the new generation's prompt, and without a draft a half-typed reply (and the
answers to the first questions of an ask) would vanish. It is plain data defined outside
the watched folders, so a provider module carries it (``scope.carry("draft", Draft)``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from prompt_toolkit.formatted_text import StyleAndTextTuples

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    UserInteractionError,
    check_question_answer,
)

_Key = tuple[str, str | None, tuple[str, ...]]
_AskKey = tuple[str | None, tuple[tuple[object, ...], ...]]

_MOST_ASKS = 16
"""How many withdrawn asks a draft remembers: asks are re-asked within a reload, and the
bound keeps it from growing with asks never asked again."""


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
    """Where the human was in a stepper: the question on screen, the answers given so far
    (some to later questions the human went back from), and per question id the options
    ticked (where they differ from the preselection), the text typed and its cursor, and
    the option highlighted (where it moved from the first)."""

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

    For one question, the text and cursor, restored once into the same question (same
    text, header and option labels). For a stepper, its ``Steps``, restored once into the
    same ask (the same ``hotseam.interaction.current_ask()`` id and questions).
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
        self._saved = (_key(request), text, _clamp(text, cursor))

    def take(self, request: AskUserQuestionRequest) -> tuple[str, int] | None:
        """The text and cursor kept for ``request``, if any; forgotten once taken."""
        saved = self._saved
        if saved is None or saved[0] != _key(request):
            return None
        self._saved = None
        return saved[1], saved[2]

    def keep_steps(self, ask: str | None, request: AskUserQuestionRequest, steps: Steps) -> None:
        """Keep where the human was in the stepper of ``request``, asked as ``ask`` (its
        ``current_ask().question_id``). Nothing done yet: forget."""
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
    """Whether ``request`` is more than one plain question (several, or multi-select, or
    skippable, or an approval, which shows the call first); a plain one keeps the
    one-question prompt."""
    questions = request.questions
    return (
        request.approval is not None
        or len(questions) > 1
        or questions[0].is_multi_select
        or questions[0].allow_skip
    )


@dataclass(frozen=True, slots=True)
class Shown:
    """How a stepper's question is shown: the question as worded and resolved here (its id
    is the request's), its place ("2 of 3"), lines above it, a hint replacing the usual
    one, and the text its line starts with when nothing was typed (where a surface can)."""

    question: Question
    place: tuple[int, int] | None
    preface: StyleAndTextTuples = field(default_factory=list)
    hint: str | None = None
    prefill: str | None = None


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
        if _id(question) in self._ticked:
            return self._ticked[_id(question)]
        entry = self._answers.get(_id(question))
        if entry is not None and entry.skipped is None:
            return frozenset(question.choices.index(option) for option in entry.options)
        return frozenset(i for i, option in enumerate(question.choices) if option.recommended)

    def toggle(self, question: Question, index: int) -> None:
        self._ticked[_id(question)] = self.ticked(question) ^ {index}

    def highlighted(self, question: Question) -> int:
        """The option the highlight is on (what Space ticks): the first until it is moved."""
        return self._highlighted.get(_id(question), 0)

    def highlight(self, question: Question, index: int) -> None:
        """Move the highlight to the option ``index`` (wrapping around)."""
        if question.choices:
            self._highlighted[_id(question)] = index % len(question.choices)

    def shown(self, *, prefills: bool) -> Shown:
        """The question on screen as it is shown (``prefills``: the surface can start its
        line from a text)."""
        place = (self._position + 1, self.total) if self.total > 1 else None
        return Shown(self.question, place)

    def went_back(self) -> str:
        """The line left in the scrollback when the human goes back."""
        return f"(back to question {self._position + 1} of {self.total})"

    def sent(self) -> str | None:
        """The line left once the whole ask is answered, if any."""
        return f"(all {self.total} answers sent)" if self.total > 1 else None

    def answered(self, question_id: str) -> QuestionAnswer | None:
        """The answer given so far to the question of ``question_id``, if any."""
        return self._answers.get(question_id)

    def forget(self, question: Question) -> None:
        """Drop the answer to ``question`` and what was typed into it."""
        self._answers.pop(_id(question), None)
        self._typed.pop(_id(question), None)

    def typed(self, question: Question) -> tuple[str, int] | None:
        """The text typed into ``question``'s line and its cursor, if any."""
        return self._typed.get(_id(question))

    def type(self, question: Question, text: str, cursor: int) -> None:
        """Keep what is typed into ``question``'s line (nothing: forget)."""
        if text:
            self._typed[_id(question)] = (text, _clamp(text, cursor))
        else:
            self._typed.pop(_id(question), None)

    def answer(self, entry: QuestionAnswer) -> None:
        """Record the answer to the question on screen, and go on to the next one; its
        line then shows the answer again, so going back and pressing Enter resends it."""
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
        """Go back to the previous question (its answer stays until answered again)."""
        assert self._position > 0
        self._position -= 1

    def result(self) -> AskUserQuestionAnswer:
        """The answer of the whole ask, one entry per question, in question order."""
        entries = [self._answers[str(item.id)] for item in self.request.questions]
        return AskUserQuestionAnswer.of(entries, self.request)

    def snapshot(self) -> Steps:
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
                self._typed[key] = (text, _clamp(text, cursor))
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


def _id(question: Question) -> str:
    assert question.id is not None  # a stepper's request is validated: every question has one
    return question.id


def _clamp(text: str, cursor: int) -> int:
    return max(0, min(cursor, len(text)))

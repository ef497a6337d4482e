"""What the human was doing when a question was withdrawn, kept to re-ask it with.

A hot reload withdraws the question from the old generation's prompt and asks it again on
the new one; without a draft the half-typed reply would vanish, and so would the answers
already given to the first questions of an ask of several. The draft is plain data defined
outside the watched folders, so a provider module carries it across generations
(``scope.carry("draft", Draft)``) and hands it to each generation's ``TerminalProvider``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ...interaction import AskUserQuestionRequest, QuestionAnswer

__all__ = ["Draft", "Steps"]

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

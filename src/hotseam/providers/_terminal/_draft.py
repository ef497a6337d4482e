"""The reply the human was typing when a question was withdrawn, kept to re-ask it with.

A hot reload withdraws the question from the old generation's prompt and asks it again on
the new one; without a draft the half-typed reply would vanish. The draft is plain data
defined outside the watched folders, so a provider module carries it across generations
(``scope.carry("draft", Draft)``) and hands it to each generation's ``TerminalProvider``.
"""

from __future__ import annotations

from ...interaction import AskUserQuestionRequest

__all__ = ["Draft"]

_Key = tuple[str, str | None, tuple[str, ...]]


def _key(request: AskUserQuestionRequest) -> _Key:
    return (request.question, request.header, tuple(o.label for o in request.choices))


class Draft:
    """The text (and cursor) of a reply being typed into a question that was withdrawn.

    Restored only into the same question (same text, header and option labels), once.
    """

    __slots__ = ("_saved",)

    def __init__(self) -> None:
        self._saved: tuple[_Key, str, int] | None = None

    def __repr__(self) -> str:
        return f"<Draft {self.text!r}>"

    @property
    def text(self) -> str:
        """The kept text ("" when none)."""
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

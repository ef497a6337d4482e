"""Conversation mode: a free-form question asked in the chat, answered by the next prompt.

A client without form elicitation can still show agent messages and send prompts, so a
free-form question goes out as an agent message chunk, the prompt turn ends with
``end_turn`` (the human's turn to speak), and the text of the next ``session/prompt`` in
that session is the answer. The agent function never stops: its ask simply waits across
the two prompts, and resumes inside the new turn.

This module holds the waiting questions, one per session at a time (a second question in
the same session waits for the first to be answered); the ACP agent (``_agent``) ends the
turn when told to (:attr:`~._scope.AskScope.end_turn`) and hands the next prompt's text to
:meth:`Conversations.answer`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

__all__ = ["Conversations", "conversation_text"]

_REPLY_HINT = "_(Reply with your answer as your next message.)_"


def conversation_text(question: str, header: str | None, note: str | None = None) -> str:
    """The agent message that asks the question in the chat (Markdown, one idea a line)."""
    lines = [] if note is None else [f"_{note}_", ""]
    lines.append(f"**{header}**: {question}" if header else f"**{question}**")
    lines += ["", _REPLY_HINT]
    return "\n" + "\n".join(lines) + "\n"


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

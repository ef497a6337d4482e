"""The plain-line path: the question block as text lines, one reply line per attempt.

Used for pipes, CI and supervisors, and under trio. The transcript reads like the terminal
session: when the input is not a terminal (so nothing echoed the reply) the reply is
written after the ``> `` prompt, once. Everything written goes through ``visible``, the
echoed reply too: a control sequence in a question or a reply is shown, never obeyed.
"""

from __future__ import annotations

from typing import TextIO

from prompt_toolkit.formatted_text import StyleAndTextTuples

from ...interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from ._outcome import DismissedError, time_left
from ._protocol import Reprompt, resolve_reply
from ._queue import AskQueue
from ._reader import LINE_LIMIT, LineReader, TooLong, too_long_reason
from ._render import plain, question_block, waiting_line
from ._visible import visible

__all__ = ["LinesSurface"]

PROMPT = "> "


class LinesSurface:
    """Asks one question as plain text lines on ``out``, reading replies from ``reader``."""

    __slots__ = ("_at_prompt", "_out", "_reader")

    def __init__(self, reader: LineReader, out: TextIO) -> None:
        self._reader = reader
        self._out = out
        self._at_prompt = False

    async def run(
        self,
        request: AskUserQuestionRequest,
        *,
        banner: str | None,
        queue: AskQueue,
        deadline: float | None = None,
    ) -> AskUserQuestionAnswer:
        """Print the question (and, with a ``deadline``, the time there is to answer it),
        then read lines until one resolves to an answer."""
        self._write(plain(question_block(request, banner=banner) + waiting_line(queue.waiting)))
        if deadline is not None:
            self._write(f"(answer within {time_left(deadline)} s)\n")
        echo = not self._reader.is_terminal
        while True:
            self._write(PROMPT)
            self._at_prompt = True
            line = await self._reader.readline()
            if line is None:
                raise DismissedError(
                    "(dismissed: input ended)",
                    "the input ended before an answer was given (end of file), so the "
                    "question was dismissed",
                )
            self._at_prompt = False
            if isinstance(line, TooLong):
                self._write(f"[a reply of more than {LINE_LIMIT} bytes]\n" if echo else "")
                self._write(f"  {too_long_reason()}\n")
                continue
            if echo:
                self._write(line + "\n")
            result = resolve_reply(request, line)
            if isinstance(result, Reprompt):
                self._write(f"  {result.reason}\n")
                continue
            return result

    def mark(self, fragments: StyleAndTextTuples) -> None:
        """Print an outcome line, on a line of its own."""
        text = plain(fragments)
        if self._at_prompt:
            text = "\n" + text
            self._at_prompt = False
        self._write(text)

    def _write(self, text: str) -> None:
        self._out.write(visible(text, lines=True))
        self._out.flush()

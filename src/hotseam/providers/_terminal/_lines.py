"""The plain-line path: the question block as text lines, one reply line per attempt.

Used for pipes, CI and supervisors, and under trio. The transcript reads like the terminal
session: when the input is not a terminal (so nothing echoed the reply) the reply is
written after the ``> `` prompt, once. Everything written goes through ``visible``, the
echoed reply too: a control sequence in a question or a reply is shown, never obeyed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TextIO, TypeVar

from prompt_toolkit.formatted_text import StyleAndTextTuples

from ...interaction import AskUserQuestionAnswer, AskUserQuestionRequest, QuestionAnswer
from ._protocol import (
    BACK_COMMAND,
    SKIP_COMMAND,
    Back,
    DismissedError,
    Reprompt,
    hint,
    pick_hint,
    resolve_reply,
    resolve_step,
    time_left,
    visible,
)
from ._queue import AskQueue
from ._reader import LINE_LIMIT, LineReader, TooLong, too_long_reason
from ._render import plain, question_block, step_block, waiting_line
from ._stepper import Stepper

PROMPT = "> "
_T = TypeVar("_T")


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
        """Print the question, then read lines until one resolves to an answer."""
        block = question_block(request, banner=banner)
        return await self._ask(block, queue, deadline, lambda reply: resolve_reply(request, reply))

    async def step(
        self,
        stepper: Stepper,
        *,
        banner: str | None,
        queue: AskQueue,
        deadline: float | None = None,
    ) -> QuestionAnswer | Back:
        """Print the stepper's question ("(2 of 3)"), then read lines until one resolves to
        its answer, or to ``/back``."""
        view = stepper.shown(prefills=False)
        question = view.question
        first = stepper.position == 0
        commands = []
        if not first:
            commands.append(f"{BACK_COMMAND} for the previous question")
        if question.allow_skip:
            commands.append(f"{SKIP_COMMAND} to skip this one")
        block = step_block(
            question,
            stepper.request.agent,
            place=view.place,
            hints=[
                view.hint
                or (
                    pick_hint(question, ticking=False)
                    if question.is_multi_select
                    else hint(question)
                ),
                f"Type {' or '.join(commands)}." if commands else None,
            ],
            banner=banner,
            resumed=stepper.resumed,
            preface=view.preface,
        )
        ticks = frozenset(i for i, option in enumerate(question.choices) if option.recommended)

        def resolve(reply: str) -> QuestionAnswer | Back | Reprompt:
            return resolve_step(question, reply, ticked=ticks, first=first, ticking=False)

        return await self._ask(block, queue, deadline, resolve)

    async def _ask(
        self,
        block: StyleAndTextTuples,
        queue: AskQueue,
        deadline: float | None,
        resolve: Callable[[str], _T | Reprompt],
    ) -> _T:
        """Print ``block`` and the time there is, then read lines until one resolves."""
        self._write(plain(block + waiting_line(queue.waiting)))
        if deadline is not None:
            self._write(f"(answer within {time_left(deadline)} s)\n")
        while isinstance(result := resolve(await self._reply()), Reprompt):
            self._write(f"  {result.reason}\n")
        return result

    async def _reply(self) -> str:
        """Prompt, and read one reply line (echoed when nothing else echoes it)."""
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
            return line

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

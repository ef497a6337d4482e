"""TerminalProvider: asks the human in this terminal, with a prompt or with plain lines."""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import sys
import time
from collections.abc import Awaitable, Callable
from typing import IO, Any, Literal, TextIO

import anyio
from prompt_toolkit.input import Input, create_input
from prompt_toolkit.output import Output, create_output

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    current_ask,
    validate_request,
)
from ._approval import stepper_for
from ._lines import LinesSurface
from ._protocol import WITHDRAWN, Back, DismissedError, answer_line, entry_line, timeout_marker
from ._queue import AskQueue
from ._reader import LineReader, isatty
from ._render import outcome
from ._stepper import Draft, needs_stepper
from ._tty import TtySurface

Mode = Literal["auto", "tty", "lines"]
_MODES = ("auto", "tty", "lines")


_Surface = LinesSurface | TtySurface


class TerminalProvider:
    """A user-interaction provider that asks the human in the terminal.

    With a terminal on both stdin and stdout (and asyncio), each question is a prompt_toolkit
    prompt; otherwise (pipes, CI, a supervisor, or trio) it is plain text lines. Both speak
    the protocol of ``docs/terminal.md``, and show an ask of several questions (or of one
    multi-select or skippable question) as a stepper (``multiple_questions``).

    One question is on screen at a time; concurrent asks wait in arrival order. Nothing is
    held between questions (no reader, raw mode or patched stdout), so an instance can be
    dropped at any time and a new one started on the same terminal, as a hot reload does.

    Args:
        banner: A line shown above each question (for example which generation of a
            hot-reloaded provider is asking). Can be changed later through ``banner``.
        timeout: Seconds the human has once a question is shown; then the ask fails with
            ``ASK_TIMEOUT``. No option is ever picked on the human's behalf. Default: none.
        mode: ``"auto"`` (a prompt on a terminal and asyncio, else plain lines), ``"tty"``
            (always the prompt; fails on a pipe or under trio) or ``"lines"``.
        input: Where replies come from: a prompt_toolkit ``Input`` (the prompt), a file
            object or descriptor (read as lines, or by the prompt when it is a terminal), or
            an in-memory text stream (lines). Default: ``sys.stdin`` at the time of the ask.
        output: Where the UI is drawn: a prompt_toolkit ``Output``, or a text stream.
            Default: ``sys.stdout`` at the time of the ask; nothing else is ever written
            to stdout.
        patch_stdout: While a prompt is open, route ``sys.stdout`` and ``sys.stderr`` above
            it so that log lines and prints do not corrupt it (default true).
        draft: Where the prompt keeps a half-typed reply (and its cursor) when its question
            is withdrawn, to start the re-asked question from it, and a stepper the answers
            given so far, where it was, and its ticks (by ``current_ask().question_id``).
            A hot-reloaded provider carries one across generations:
            ``TerminalProvider(draft=scope.carry("draft", Draft))``. Default: one of the
            provider's own.
    """

    multiple_questions = True
    """An ask of several questions comes whole: the stepper shows them one after the other."""

    __slots__ = (
        "_draft",
        "_input",
        "_mode",
        "_output",
        "_patch_stdout",
        "_queue",
        "_showing",
        "_timeout",
        "banner",
    )

    def __init__(
        self,
        *,
        banner: str | None = None,
        timeout: float | None = None,
        mode: Mode = "auto",
        input: Input | IO[Any] | int | None = None,
        output: Output | TextIO | None = None,
        patch_stdout: bool = True,
        draft: Draft | None = None,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if mode == "lines" and (isinstance(input, Input) or isinstance(output, Output)):
            raise ValueError(
                "mode='lines' reads and writes plain text: pass a file, a descriptor or a text "
                "stream, not a prompt_toolkit Input or Output"
            )
        self.banner = banner
        self._timeout = timeout
        self._mode: Mode = mode
        self._input = input
        self._output = output
        self._patch_stdout = patch_stdout
        self._draft = draft if draft is not None else Draft()
        self._queue = AskQueue()
        self._showing: AskUserQuestionRequest | None = None

    def __repr__(self) -> str:
        return f"<TerminalProvider mode={self._mode!r} waiting={self.waiting}>"

    @property
    def mode(self) -> Mode:
        """The mode asked for (``"auto"`` decides per question)."""
        return self._mode

    @property
    def timeout(self) -> float | None:
        """The optional time limit of each question, in seconds."""
        return self._timeout

    @property
    def draft(self) -> Draft:
        """Where a withdrawn question's half-typed reply is kept (see ``draft=``)."""
        return self._draft

    @property
    def showing(self) -> AskUserQuestionRequest | None:
        """The question on screen now, if any."""
        return self._showing

    @property
    def waiting(self) -> int:
        """How many questions wait behind the one on screen."""
        return self._queue.waiting

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Show the question when its turn comes, and return the human's answer.

        Raises:
            UserInteractionError: ``ASK_CANCELLED`` when the human dismissed it (Ctrl-C,
                Ctrl-D, or the input ended), ``ASK_TIMEOUT`` when the optional time limit
                passed, ``PROVIDER_FAILED`` when ``mode="tty"`` cannot run here.
                Cancellation (the caller's signal, a reload) leaves a "withdrawn" marker
                and propagates.
        """
        surface = self._surface()
        async with self._queue.turn():
            self._showing = request
            try:
                if needs_stepper(request):
                    return await self._run_steps(surface, request)
                return await self._run(surface, request)
            finally:
                self._showing = None

    async def _run_steps(
        self, surface: _Surface, request: AskUserQuestionRequest
    ) -> AskUserQuestionAnswer:
        """Each question in turn until the last is answered; withdrawn, the draft keeps
        where the human was."""
        request = validate_request(request)  # every question has its id (ask() did this)
        asked_as = asked.question_id if (asked := current_ask()) else None
        stepper = stepper_for(request, self._draft.take_steps(asked_as, request))

        async def steps(deadline: float | None) -> AskUserQuestionAnswer:
            while not stepper.finished:
                result = await surface.step(
                    stepper, banner=self.banner, queue=self._queue, deadline=deadline
                )
                stepper.resumed = 0  # said once, on the first question shown
                if isinstance(result, Back):
                    stepper.back()
                    _mark(surface, "back", stepper.went_back())
                else:
                    stepper.answer(result)
                    _mark(surface, "answer", entry_line(result))
            return stepper.result()

        def withdrawn() -> None:
            self._draft.keep_steps(asked_as, request, stepper.snapshot())

        def dismissed(message: str) -> str:
            if stepper.total == 1:
                return message
            return (
                f"{message} at question {stepper.position + 1} of {stepper.total}; the whole "
                "ask is dismissed"
            )

        answer = await self._run(surface, request, steps, withdrawn, dismissed)
        if (sent := stepper.sent()) is not None:
            _mark(surface, "sent", sent)
        return answer

    async def _run(
        self,
        surface: _Surface,
        request: AskUserQuestionRequest,
        body: Callable[[float | None], Awaitable[AskUserQuestionAnswer]] | None = None,
        withdrawn: Callable[[], None] | None = None,
        dismissed: Callable[[str], str] | None = None,
    ) -> AskUserQuestionAnswer:
        """Run ``body`` (default: the one-question prompt) under the time limit, leaving the
        outcome in the scrollback."""
        with anyio.CancelScope() as limit:
            if self._timeout is not None:
                limit.deadline = anyio.current_time() + self._timeout
            try:
                # The human sees the time left: this provider's limit or the asker's.
                limits = [asked.deadline if (asked := current_ask()) else None]
                if self._timeout is not None:
                    limits.append(time.monotonic() + self._timeout)
                deadline = min((limit for limit in limits if limit is not None), default=None)
                if body is None:
                    answer = await surface.run(
                        request, banner=self.banner, queue=self._queue, deadline=deadline
                    )
                    _mark(surface, "answer", answer_line(answer))
                else:
                    answer = await body(deadline)
            except DismissedError as human:
                _mark(surface, "dismissed", human.marker)
                message = human.message if dismissed is None else dismissed(human.message)
                raise UserInteractionError(message, ErrorCode.ASK_CANCELLED) from None
            except (anyio.get_cancelled_exc_class(), KeyboardInterrupt):
                # Cancelled by the asking side (its signal, a reload), or the program is
                # being interrupted (trio delivers SIGINT as KeyboardInterrupt).
                if not limit.cancel_called:
                    _mark(surface, "withdrawn", WITHDRAWN)
                    if withdrawn is not None:
                        withdrawn()
                raise
            return answer
        assert self._timeout is not None
        _mark(surface, "timeout", timeout_marker(self._timeout))
        raise UserInteractionError(
            f"no answer within the terminal provider's time limit of {self._timeout:g} s "
            "(nothing was chosen for the human)",
            ErrorCode.ASK_TIMEOUT,
        )

    # -- choosing the path ---------------------------------------------------------------------

    def _surface(self) -> _Surface:
        source = self._input if self._input is not None else sys.stdin
        out = self._output if self._output is not None else sys.stdout
        toolkit = isinstance(source, Input) or isinstance(out, Output)
        if self._mode == "tty" or (
            self._mode == "auto" and (toolkit or (_on_asyncio() and isatty(source) and isatty(out)))
        ):
            return self._tty_surface(source, out)
        assert not isinstance(source, Input)
        assert not isinstance(out, Output)
        reader = LineReader(source if source is not None else io.StringIO())
        return LinesSurface(reader, out if out is not None else io.StringIO())

    def _tty_surface(
        self, source: Input | IO[Any] | int | None, out: Output | TextIO | None
    ) -> TtySurface:
        if not _on_asyncio():
            raise UserInteractionError(
                "the terminal provider's prompt (mode='tty') needs asyncio: prompt_toolkit "
                "cannot run under trio; use mode='auto' or mode='lines', which read plain "
                "lines",
                ErrorCode.PROVIDER_FAILED,
            )
        if not isinstance(source, Input):
            if source is None or not isatty(source):
                raise UserInteractionError(
                    "the terminal provider's prompt (mode='tty') needs a terminal to read, "
                    "and its input is not one (a pipe or a file?); a prompt must never read a "
                    "pipe: use mode='auto' or mode='lines'",
                    ErrorCode.PROVIDER_FAILED,
                )
            source = create_input(_text_file(source))
        output = out if isinstance(out, Output) else create_output(out)
        return TtySurface(source, output, patch_stdout=self._patch_stdout, draft=self._draft)


def _mark(surface: _Surface, kind: str, text: str) -> None:
    """Leave the outcome in the scrollback (a closed output must not hide the outcome)."""
    with contextlib.suppress(OSError, ValueError):
        surface.mark(outcome(kind, text))


def _on_asyncio() -> bool:
    """prompt_toolkit needs a running asyncio loop (not trio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _text_file(source: IO[Any] | int) -> TextIO:
    if isinstance(source, int):
        return open(source, closefd=False)  # closefd=False: the descriptor is not ours
    return source  # type: ignore[return-value]

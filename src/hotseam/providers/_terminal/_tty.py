"""The prompt_toolkit path, for a real terminal on asyncio.

The question block is the prompt's message, so it is drawn, redrawn (when log lines print
above it, or the number of waiting questions changes) and left in the scrollback together
with the reply line (wrapped to the terminal's width by ``_wrap``, as prompt_toolkit does
not wrap a prompt message). The reply is resolved by the same protocol as line mode; a reply that
is not an answer is followed by its reason and a new prompt, so every attempt stays readable
(a validator would show the reason at the bottom of the screen, far from the reply).

Cancellation needs nothing special: ``prompt_async`` leaves raw mode, detaches its reader and
shows the cursor in its own ``finally`` (verified, ``terminal-prompts.md`` §3.1). The
provider's hooks into the process are undone in ``finally`` blocks too: ``sys.stdout`` and
``sys.stderr`` are patched only while the prompt is open, and process-wide handlers (SIGINT,
the loop's exception handler) are never touched.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import TextIO, cast

from prompt_toolkit import PromptSession
from prompt_toolkit.application import create_app_session, get_app
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import FormattedText, StyleAndTextTuples
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import StdoutProxy
from prompt_toolkit.shortcuts import print_formatted_text

from ...interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from ._draft import Draft
from ._outcome import DismissedError, time_left
from ._protocol import Reprompt, resolve_reply
from ._queue import AskQueue
from ._reader import LINE_LIMIT, too_long_reason
from ._render import STYLE, question_block, shown, waiting_line
from ._visible import visible
from ._wrap import wrap_fragments

__all__ = ["TtySurface"]

# How long the stdout proxy gathers writes before redrawing the prompt. prompt_toolkit's
# default (0.2 s) would also be how long closing the proxy can block the event loop.
_PROXY_BATCH = 0.02


class TtySurface:
    """Asks one question with a prompt_toolkit prompt on ``input`` and ``output``."""

    __slots__ = ("_draft", "_input", "_output", "_patch_stdout")

    def __init__(
        self,
        input: Input,
        output: Output,
        *,
        patch_stdout: bool = True,
        draft: Draft | None = None,
    ) -> None:
        self._input = input
        self._output = output
        self._patch_stdout = patch_stdout
        self._draft = draft if draft is not None else Draft()

    async def run(
        self,
        request: AskUserQuestionRequest,
        *,
        banner: str | None,
        queue: AskQueue,
        deadline: float | None = None,
    ) -> AskUserQuestionAnswer:
        """Prompt until a reply resolves to an answer, or the human dismisses the question.

        The first prompt carries the question block; a reply that is not an answer gets
        its reason on the next line and a bare prompt, as in line mode. With a
        ``deadline`` (``time.monotonic()`` seconds) a live line shows the time left.
        """
        keys = "Tab completes a label; " if request.choices else ""
        block = question_block(
            request, banner=banner, keys=keys + "Ctrl-C or Ctrl-D dismisses the question."
        )
        first = True

        def message() -> StyleAndTextTuples:
            # The waiting count is live while open, and left out of the scrollback.
            app = get_app()
            waiting = [] if app.is_done else waiting_line(queue.waiting)
            if deadline is not None and not app.is_done:
                waiting = [*waiting, ("class:waiting", f"time left: {time_left(deadline)} s\n")]
            above = wrap_fragments(
                [*(block if first else []), *waiting], app.output.get_size().columns
            )
            return [*shown(above), ("class:prompt", "> ")]

        recommended = request.recommended

        def placeholder() -> StyleAndTextTuples:
            if recommended is None or get_app().is_done:
                return []
            return [("class:placeholder", visible(recommended.label))]

        completer = None
        if request.choices:
            completer = WordCompleter(
                [option.label for option in request.choices],
                ignore_case=True,
                sentence=True,
                display_dict={o.label: visible(o.label) for o in request.choices},
                meta_dict={
                    o.label: visible(o.description) for o in request.choices if o.description
                },
            )
        with create_app_session(input=self._input, output=self._output):
            session: PromptSession[str] = PromptSession(
                message,
                input=self._input,
                output=self._output,
                style=STYLE,
                include_default_pygments_style=False,
                completer=completer,
                complete_while_typing=False,
                placeholder=placeholder,
                erase_when_done=False,
                refresh_interval=1.0 if deadline is not None else 0,  # the time left ticks
            )
            unsubscribe = queue.listen(session.app.invalidate)
            kept = self._draft.take(request)  # typed before a reload withdrew the question
            default = Document(*kept) if kept is not None else Document()
            try:
                while True:
                    reply = await self._prompt(session, request, default)
                    default = Document()
                    first = False
                    if len(reply.encode("utf-8", "surrogatepass")) > LINE_LIMIT:
                        self.mark([("class:reason", f"  {too_long_reason()}"), ("", "\n")])
                        continue
                    result = resolve_reply(request, reply)
                    if not isinstance(result, Reprompt):
                        return result
                    self.mark([("class:reason", f"  {result.reason}"), ("", "\n")])
            finally:
                unsubscribe()

    async def _prompt(
        self, session: PromptSession[str], request: AskUserQuestionRequest, default: Document
    ) -> str:
        # The prompt's result future, kept: prompt_async still awaits its own cleanup after
        # the human pressed Enter, and a cancellation landing there must not lose the line.
        results: list[asyncio.Future[str]] = []

        def remember_result() -> None:
            if session.app.future is not None:
                results.append(session.app.future)

        try:
            with _patched_stdio() if self._patch_stdout else nullcontext():
                return await session.prompt_async(
                    default=default,
                    handle_sigint=False,
                    set_exception_handler=False,
                    pre_run=remember_result,
                )
        except asyncio.CancelledError:
            committed = _committed_line(results)
            if committed is None:
                # Withdrawn (a reload, the caller's signal): keep what was typed, so the
                # question re-asked on the next prompt starts from it.
                buffer = session.default_buffer
                self._draft.keep(request, buffer.text, buffer.cursor_position)
                raise
            # A line the human committed is an answer that exists: it is returned, not lost.
            return committed
        except KeyboardInterrupt:
            raise DismissedError(
                "(dismissed with Ctrl-C)", "the human dismissed the question (Ctrl-C)"
            ) from None
        except EOFError:
            raise DismissedError(
                "(dismissed with Ctrl-D)", "the human dismissed the question (Ctrl-D)"
            ) from None

    def mark(self, fragments: StyleAndTextTuples) -> None:
        """Print an outcome line under the finished prompt."""
        print_formatted_text(
            FormattedText(shown(fragments)), output=self._output, style=STYLE, end=""
        )


def _committed_line(results: list[asyncio.Future[str]]) -> str | None:
    """The line the prompt accepted before it was cancelled, if it accepted one."""
    if not results:
        return None
    future = results[0]
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    return future.result()


class _AboveThePrompt(StdoutProxy):
    """prompt_toolkit's stdout proxy, bound to the app session it was created in.

    The proxy hands each write to the event loop from its flush thread, and prints it with
    ``run_in_terminal``, which finds the running prompt through the *current* app session.
    A callback scheduled from that thread runs in the thread's (empty) context, where the
    current session is the default one, not the one this prompt runs in; the text would
    then be written into the middle of the prompt. Scheduling from a copy of the creating
    context fixes that.
    """

    def __init__(self, *, sleep_between_writes: float, raw: bool) -> None:
        self._context = contextvars.copy_context()
        super().__init__(sleep_between_writes=sleep_between_writes, raw=raw)

    def _write_and_flush(self, loop: asyncio.AbstractEventLoop | None, text: str) -> None:
        self._context.copy().run(super()._write_and_flush, loop, text)


@contextmanager
def _patched_stdio() -> Iterator[None]:
    """Route ``sys.stdout``/``sys.stderr`` above the prompt while it is open.

    Like prompt_toolkit's ``patch_stdout(raw=True)``, with a shorter write batch; it puts
    back only what it replaced.
    """
    proxy = _AboveThePrompt(sleep_between_writes=_PROXY_BATCH, raw=True)
    patched = cast(TextIO, proxy)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = patched
    try:
        yield
    finally:
        if sys.stdout is patched:
            sys.stdout = stdout
        if sys.stderr is patched:
            sys.stderr = stderr
        proxy.close()

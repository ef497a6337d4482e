"""The prompt_toolkit path, for a real terminal on asyncio.

The question block is the prompt's message, so it is redrawn (log lines above it, a new
waiting count) and left in the scrollback with the reply line. prompt_toolkit does not wrap
a message, so the block is wrapped here at each draw, at spaces where possible, keeping a
line's indentation. A reply that is not an answer is followed by its reason and a new
prompt, so every attempt stays readable (a validator would show it far from the reply). A
stepper's question keeps its prompt open instead, the reason above the line, so ticks and
typed text stay; its keys are bindings that take precedence over prompt_toolkit's.

Cancellation needs nothing special: ``prompt_async`` leaves raw mode, detaches its reader and
shows the cursor in its own ``finally`` (``terminal-prompts.md`` §3.1). ``sys.stdout`` and
``sys.stderr`` are patched only while the prompt is open; process-wide handlers (SIGINT, the
loop's exception handler) are never touched.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from itertools import groupby
from operator import itemgetter
from typing import TextIO, cast

from prompt_toolkit import PromptSession
from prompt_toolkit.application import create_app_session, get_app
from prompt_toolkit.completion import WordCompleter
from prompt_toolkit.document import Document
from prompt_toolkit.filters import Condition, has_completions
from prompt_toolkit.formatted_text import FormattedText, StyleAndTextTuples
from prompt_toolkit.formatted_text.utils import split_lines
from prompt_toolkit.input import Input
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.output import Output
from prompt_toolkit.patch_stdout import StdoutProxy
from prompt_toolkit.shortcuts import print_formatted_text
from prompt_toolkit.utils import get_cwidth

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
)
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
from ._reader import LINE_LIMIT, too_long_reason
from ._render import STYLE, question_block, shown, step_block, waiting_line
from ._stepper import Draft, Stepper

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
        """Prompt until a reply resolves to an answer, or the human dismisses the question;
        with a ``deadline`` (``time.monotonic()`` seconds) a live line shows the time left."""
        keys = "Tab completes a label; " if request.choices else ""
        block = question_block(
            request, banner=banner, keys=keys + "Ctrl-C or Ctrl-D dismisses the question."
        )
        first = True

        def message() -> StyleAndTextTuples:
            return _message(block if first else [], queue, deadline)

        def keep(text: str, cursor: int) -> None:
            self._draft.keep(request, text, cursor)

        with self._session(
            message, request.recommended, request.choices, queue, deadline
        ) as session:
            default = _document(self._draft.take(request))  # typed before a reload
            while True:
                reply = await self._prompt(session, default, keep)
                default = Document()
                first = False
                result = _too_long(reply) or resolve_reply(request, reply)
                if not isinstance(result, Reprompt):
                    return result
                self.mark([("class:reason", f"  {result.reason}"), ("", "\n")])

    async def step(
        self,
        stepper: Stepper,
        *,
        banner: str | None,
        queue: AskQueue,
        deadline: float | None = None,
    ) -> QuestionAnswer | Back:
        """One question of a stepper, until its reply resolves to an answer, a skip or a
        step back (or the human dismisses the ask). Space ticks the option at the cursor
        (Up/Down) while the line is empty; Shift-Tab (or PageUp) goes back, Ctrl-S skips."""
        view = stepper.shown(prefills=True)
        question = view.question
        multi = question.is_multi_select
        first = stepper.position == 0
        place = view.place
        hints = [
            view.hint or (pick_hint(question, ticking=True) if multi else hint(question)),
            # "all 3 questions" only where the place says there are 3 (not an approval's).
            _step_keys(question, first=first, total=stepper.total if place else 1),
        ]
        resumed = stepper.resumed
        refusal: list[str] = []  # why the last Enter (or key) sent nothing

        def message() -> StyleAndTextTuples:
            done = get_app().is_done
            block = step_block(
                question,
                stepper.request.agent,
                place=place,
                hints=hints,
                banner=banner,
                ticked=stepper.ticked(question) if multi else None,
                cursor=stepper.highlighted(question) if multi and not done else None,
                resumed=resumed,
                preface=view.preface,
            )
            return _message(block, queue, deadline, refusal[-1] if refusal else None)

        def resolve(text: str) -> QuestionAnswer | Back | Reprompt:
            ticked = stepper.ticked(question)
            return _too_long(text) or resolve_step(
                question, text, ticked=ticked, first=first, ticking=True
            )

        def refuse(reason: str | None) -> None:
            refusal[:] = [] if reason is None else [reason]

        bindings = _step_bindings(question, resolve=resolve, refuse=refuse, stepper=stepper)

        def keep(text: str, cursor_at: int) -> None:
            stepper.type(question, text, cursor_at)

        recommended, choices = (None, ()) if multi else (question.recommended, question.choices)
        with self._session(message, recommended, choices, queue, deadline, bindings) as session:
            buffer = session.default_buffer
            buffer.on_text_changed += lambda _: refusal.clear()
            prefill = None if view.prefill is None else (view.prefill, len(view.prefill))
            default = _document(stepper.typed(question) or prefill)
            while True:
                try:
                    reply = await self._prompt(session, default, keep)
                except _StepKey as key:
                    keep(buffer.text, buffer.cursor_position)
                    return key.result
                result = resolve(reply)
                if not isinstance(result, Reprompt):
                    return result
                default = Document(reply)  # not reached: Enter accepts only answers

    @contextmanager
    def _session(
        self,
        message: Callable[[], StyleAndTextTuples],
        recommended: AskUserQuestionOption | None,
        choices: tuple[AskUserQuestionOption, ...],
        queue: AskQueue,
        deadline: float | None,
        key_bindings: KeyBindings | None = None,
    ) -> Iterator[PromptSession[str]]:
        """A prompt redrawn when the waiting count changes, the recommended label as its
        placeholder."""

        def placeholder() -> StyleAndTextTuples:
            if recommended is None or get_app().is_done:
                return []
            return [("class:placeholder", visible(recommended.label))]

        with create_app_session(input=self._input, output=self._output):
            session: PromptSession[str] = PromptSession(
                message,
                input=self._input,
                output=self._output,
                style=STYLE,
                include_default_pygments_style=False,
                completer=_label_completer(choices),
                complete_while_typing=False,
                placeholder=placeholder,
                erase_when_done=False,
                key_bindings=key_bindings,
                refresh_interval=1.0 if deadline is not None else 0,  # the time left ticks
            )
            unsubscribe = queue.listen(session.app.invalidate)
            try:
                yield session
            finally:
                unsubscribe()

    async def _prompt(
        self,
        session: PromptSession[str],
        default: Document,
        keep: Callable[[str, int], None],
    ) -> str:
        """One prompt: the line accepted; withdrawn, what was typed goes to ``keep``."""
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
            if committed is None:  # withdrawn: the re-asked question starts from the text
                buffer = session.default_buffer
                keep(buffer.text, buffer.cursor_position)
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
        print_formatted_text(
            FormattedText(shown(fragments)), output=self._output, style=STYLE, end=""
        )


class _StepKey(Exception):  # noqa: N818 - how a key ends the prompt, not an error
    """A key that ends a stepper's prompt without a line: back, or skip."""

    def __init__(self, result: QuestionAnswer | Back) -> None:
        super().__init__()
        self.result = result


def _step_bindings(
    question: Question,
    *,
    resolve: Callable[[str], QuestionAnswer | Back | Reprompt],
    refuse: Callable[[str | None], None],
    stepper: Stepper,
) -> KeyBindings:
    """The keys of a stepper's prompt (they take precedence over prompt_toolkit's own)."""
    bindings = KeyBindings()
    menu_closed = ~has_completions

    if question.is_multi_select:
        # The highlight lives in the stepper, so a draft keeps it across a reload.

        @bindings.add("space", filter=Condition(lambda: not get_app().current_buffer.text))
        def _tick(event: KeyPressEvent) -> None:
            stepper.toggle(question, stepper.highlighted(question))
            refuse(None)  # the ticks changed: a refusal of the old ones no longer holds

        @bindings.add("up", filter=menu_closed)
        def _up(event: KeyPressEvent) -> None:
            stepper.highlight(question, stepper.highlighted(question) - 1)

        @bindings.add("down", filter=menu_closed)
        def _down(event: KeyPressEvent) -> None:
            stepper.highlight(question, stepper.highlighted(question) + 1)

    @bindings.add("enter")
    def _send(event: KeyPressEvent, command: str | None = None) -> None:
        # A key does what its command (/back, /skip) does, refused for the same reason.
        result = resolve(event.current_buffer.text if command is None else command)
        if isinstance(result, Reprompt):
            refuse(result.reason)
        elif command is None:
            event.current_buffer.validate_and_handle()
        else:
            event.app.exit(exception=_StepKey(result))

    @bindings.add("s-tab", filter=menu_closed)
    @bindings.add("pageup")
    def _back(event: KeyPressEvent) -> None:
        _send(event, BACK_COMMAND)

    @bindings.add("c-s")
    def _skip(event: KeyPressEvent) -> None:
        _send(event, SKIP_COMMAND)

    return bindings


def _message(
    block: StyleAndTextTuples, queue: AskQueue, deadline: float | None, reason: str | None = None
) -> StyleAndTextTuples:
    """``block``, then what is live while the prompt is open (left out of the scrollback),
    wrapped to the terminal's width."""
    app = get_app()
    live = [] if app.is_done else waiting_line(queue.waiting)
    if deadline is not None and not app.is_done:
        live = [*live, ("class:waiting", f"time left: {time_left(deadline)} s\n")]
    if reason is not None and not app.is_done:
        live = [*live, ("class:reason", f"  {reason}"), ("", "\n")]
    above = wrap_fragments([*block, *live], app.output.get_size().columns)
    return [*shown(above), ("class:prompt", "> ")]


def _too_long(reply: str) -> Reprompt | None:
    """A line over the reader's limit is refused here too: both paths take the same replies."""
    if len(reply.encode("utf-8", "surrogatepass")) > LINE_LIMIT:
        return Reprompt(too_long_reason())
    return None


def _step_keys(question: Question, *, first: bool, total: int) -> str:
    """Only the keys that do something here."""
    keys = []
    if question.is_multi_select:
        keys.append("Up/Down moves")
    elif question.choices:
        keys.append("Tab completes a label")
    if not first:
        keys.append("Shift-Tab goes back")
    if question.allow_skip:
        keys.append("Ctrl-S skips")
    keys.append(
        "Ctrl-C or Ctrl-D dismisses " + ("the question" if total == 1 else f"all {total} questions")
    )
    return "; ".join(keys) + "."


def _label_completer(choices: tuple[AskUserQuestionOption, ...]) -> WordCompleter | None:
    if not choices:
        return None
    return WordCompleter(
        [option.label for option in choices],
        ignore_case=True,
        sentence=True,
        display_dict={o.label: visible(o.label) for o in choices},
        meta_dict={o.label: visible(o.description) for o in choices if o.description},
    )


def _committed_line(results: list[asyncio.Future[str]]) -> str | None:
    if not results:
        return None
    future = results[0]
    if not future.done() or future.cancelled() or future.exception() is not None:
        return None
    return future.result()


class _AboveThePrompt(StdoutProxy):
    """prompt_toolkit's stdout proxy, bound to the app session it was created in.

    Its flush thread schedules ``run_in_terminal``, which finds the prompt through the
    *current* app session; from the thread's empty context that is the default session,
    and the text lands inside the prompt. Scheduling from the creating context fixes it.
    """

    def __init__(self, *, sleep_between_writes: float, raw: bool) -> None:
        self._context = contextvars.copy_context()
        super().__init__(sleep_between_writes=sleep_between_writes, raw=raw)

    def _write_and_flush(self, loop: asyncio.AbstractEventLoop | None, text: str) -> None:
        self._context.copy().run(super()._write_and_flush, loop, text)


@contextmanager
def _patched_stdio() -> Iterator[None]:
    """``patch_stdout(raw=True)`` with a shorter batch, putting back only what it replaced."""
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


# -- the question block, wrapped to the terminal's width --

_Cell = tuple[str, str]  # (style, one character)


def wrap_fragments(fragments: StyleAndTextTuples, width: int) -> StyleAndTextTuples:
    """``fragments`` with every line at most ``width`` columns wide."""
    if width < 2:
        return fragments
    wrapped: StyleAndTextTuples = []
    for number, line in enumerate(split_lines(fragments)):
        if number:
            wrapped.append(("", "\n"))
        wrapped.extend(_wrap_line(line, width))
    return wrapped


def _wrap_line(line: StyleAndTextTuples, width: int) -> StyleAndTextTuples:
    cells: list[_Cell] = [(style, char) for style, text, *_ in line for char in text]
    text = "".join(char for _, char in cells)
    if get_cwidth(text) <= width:
        return line
    indent = len(text) - len(text.lstrip(" "))
    if indent * 2 > width:
        indent = 0
    rows: list[list[_Cell]] = []
    row: list[_Cell] = []
    for cell in cells:
        if cell[1] == " " and rows and len(row) == indent:
            continue  # a continuation line starts with a word
        if _width(row) + get_cwidth(cell[1]) > width and len(row) > indent:
            rest: list[_Cell] = []
            spaces = [i for i in range(indent + 1, len(row)) if row[i][1] == " "]
            if cell[1] != " " and spaces:  # break at the last space; else cut the word
                rest = row[spaces[-1] + 1 :]
                row = row[: spaces[-1]]
            rows.append(row)
            row = [("", " ")] * indent + rest
            if cell[1] == " ":
                continue
        row.append(cell)
    rows.append(row)
    result: StyleAndTextTuples = []
    for number, cells_of_row in enumerate(rows):
        if number:
            result.append(("", "\n"))
        for style, run in groupby(cells_of_row, key=itemgetter(0)):
            result.append((style, "".join(char for _, char in run)))
    return result


def _document(kept: tuple[str, int] | None) -> Document:
    return Document(*kept) if kept is not None else Document()


def _width(row: list[_Cell]) -> int:
    return sum(get_cwidth(char) for _, char in row)

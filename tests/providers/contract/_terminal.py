"""The terminal provider's surfaces: plain lines on a real pipe, and the prompt_toolkit
prompt on prompt_toolkit's pipe input (asyncio only, by nature).

The human types into the pipe (a line per question, the stepper's way for several) and
reads the output: a question is shown while the provider's ``showing`` holds it (on the
line path, once the prompt ``> `` is written), and withdrawn once its "(question
withdrawn)" marker follows it in the scrollback. Every generation is a new
``TerminalProvider`` on the same input and output, as a reloaded module makes.
"""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from prompt_toolkit.data_structures import Size
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output.vt100 import Vt100_Output

from hotseam import Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ask,
    pending_asks,
)
from hotseam.providers.terminal import TerminalProvider

from ._surface import Choose, Reply, Shown, Surface, until

WITHDRAWN = "(question withdrawn)"


@dataclass(eq=False)
class _OnScreen:
    provider: TerminalProvider
    key: tuple[str, int]
    """The ask's question id, and which attempt at it."""
    offset: int
    """Where the output stood when it was seen shown."""


class TerminalSurface:
    """See the module: ``make(banner)`` makes one generation's provider, ``keys(text)``
    types, ``screen()`` is what was written so far, ``ready()`` whether input is read."""

    def __init__(
        self,
        name: str,
        make: Callable[[str], TerminalProvider],
        keys: Callable[[str], None],
        screen: Callable[[], str],
        ready: Callable[[], bool],
        enter: str,
    ) -> None:
        self.context = Context(f"contract.{name}")
        self.generation = 0
        self.providers: list[TerminalProvider] = []
        self._make = make
        self._keys = keys
        self._screen = screen
        self._ready = ready
        self._enter = enter
        self._seen: list[_OnScreen] = []

    def install(self, scope: Scope) -> None:
        self.generation += 1
        provider = self._make(f"generation {self.generation}")
        self.providers.append(provider)
        scope.provide(USER_INTERACTION, provider)

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return await ask(request, context=self.context)

    def _unseen(self) -> _OnScreen | None:
        """The question on screen, if the human has not seen it yet: the terminal knows
        what it shows, ``pending_asks()`` which ask and which attempt at it (a question
        asked again after a reload, or the same question asked anew, is shown anew)."""
        asks = pending_asks()
        showing = [provider for provider in self.providers if provider.showing is not None]
        if len(asks) != 1 or len(showing) != 1 or not self._ready():
            return None
        key = (asks[0].question_id, asks[0].attempts)
        if any(seen.key == key for seen in self._seen):
            return None
        return _OnScreen(showing[0], key, len(self._screen()))

    async def next_shown(self) -> Shown:
        await until(lambda: self._unseen() is not None)
        on_screen = self._unseen()
        assert on_screen is not None
        self._seen.append(on_screen)
        return Shown(on_screen, self.providers.index(on_screen.provider) + 1)

    async def answer(self, shown: Shown, replies: Sequence[Reply]) -> None:
        lines = [
            f"{reply.index + 1}" if isinstance(reply, Choose) else reply.text for reply in replies
        ]
        self._keys("".join(line + self._enter for line in lines))

    async def withdrawn(self, shown: Shown) -> None:
        on_screen: _OnScreen = shown.ref
        await until(lambda: WITHDRAWN in self._screen()[on_screen.offset :])
        assert on_screen.provider.showing is None

    async def answer_late(self, shown: Shown, replies: Sequence[Reply]) -> None:
        raise AssertionError("a terminal cannot address a withdrawn question (see CANNOT)")


@asynccontextmanager
async def terminal_lines() -> AsyncIterator[Surface]:
    """The line path: a real ``os.pipe()`` in, a text stream out."""
    read_fd, write_fd = os.pipe()
    out = io.StringIO()
    try:
        yield TerminalSurface(
            "terminal-lines",
            lambda banner: TerminalProvider(mode="lines", input=read_fd, output=out, banner=banner),
            lambda text: _write(write_fd, text),
            out.getvalue,
            lambda: out.getvalue().endswith("> "),
            "\n",
        )
    finally:
        os.close(write_fd)
        os.close(read_fd)


def _write(fd: int, text: str) -> None:
    data = text.encode()
    while data:
        data = data[os.write(fd, data) :]


@asynccontextmanager
async def terminal_prompt() -> AsyncIterator[Surface]:
    """The prompt: prompt_toolkit's pipe input for the keyboard, a VT100 output drawn
    into a text stream."""
    stream = io.StringIO()
    output: Any = Vt100_Output(stream, lambda: Size(rows=40, columns=100), term="xterm-256color")
    keys: PipeInput
    with create_pipe_input() as keys:
        yield TerminalSurface(
            "terminal-prompt",
            lambda banner: TerminalProvider(input=keys, output=output, banner=banner),
            keys.send_text,
            stream.getvalue,
            lambda: True,  # keys typed early wait in the pipe for the prompt
            "\r",
        )

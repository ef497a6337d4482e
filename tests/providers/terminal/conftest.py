"""Helpers for the terminal provider's tests: questions, pipes, screens, and waiting."""

from __future__ import annotations

import io
import os
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

import anyio
import pexpect
import pyte
import pytest
from prompt_toolkit.data_structures import Size
from prompt_toolkit.output.vt100 import Vt100_Output
from tests._timing import scaled

from hotseam import Agent
from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest, Question

PLANNER = Agent("planner", "Planner")

DB = AskUserQuestionRequest(
    "Which database?",
    header="Storage",
    options=(
        AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True),
        AskUserQuestionOption("SQLite", description="One file, zero setup"),
        AskUserQuestionOption("DuckDB"),
    ),
    agent=PLANNER,
)
STRICT = AskUserQuestionRequest(
    "Deploy now?",
    header="Deploy",
    options=(AskUserQuestionOption("Yes"), AskUserQuestionOption("No")),
    allow_custom=False,
)
FREE = AskUserQuestionRequest("What colour?", header="Theme")
STACK = AskUserQuestionRequest.of(
    [
        Question("Which database?", header="Storage", options=DB.options),
        Question(
            "Which features?",
            header="Features",
            options=(
                AskUserQuestionOption("Auth", recommended=True),
                AskUserQuestionOption("Billing", recommended=True),
                AskUserQuestionOption("Search", description="Full-text search"),
            ),
            multi_select=True,
            max_selections=2,
            id="features",
        ),
        Question("Anything else?", header="Notes", allow_skip=True, id="notes"),
    ],
    agent=PLANNER,
)
"""The three questions of issue 24: one choice, several (at most 2), free text (optional)."""


async def until(predicate: Callable[[], bool], *, timeout: float | None = None) -> None:
    """Wait until ``predicate()`` holds, for states nothing can be awaited on (within
    ``timeout``, by default 5 s scaled by the suite's factor at the call).

    It yields to the event loop between checks; the short sleep only matters when another
    thread (prompt_toolkit's stdout proxy) has to run first.
    """
    with anyio.fail_after(scaled(5.0) if timeout is None else timeout):
        while not predicate():  # noqa: ASYNC110 - there is nothing to wait on
            await anyio.sleep(0.001)


class Pipe:
    """An ``os.pipe()``: the provider reads ``fd``, the test writes lines into it."""

    def __init__(self) -> None:
        self.fd, self._write_fd = os.pipe()

    def write(self, text: str) -> None:
        os.write(self._write_fd, text.encode())

    def write_bytes(self, data: bytes) -> None:
        """Write all of ``data``, blocking while the pipe is full (call it from a thread)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self._write_fd, view) :]

    def close_writer(self) -> None:
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    def close(self) -> None:
        self.close_writer()
        os.close(self.fd)


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    """A pipe for line-mode input, closed after the test."""
    p = Pipe()
    yield p
    p.close()


class Screen:
    """A prompt_toolkit output drawn into a pyte screen: what the human would see."""

    def __init__(self, columns: int = 100, rows: int = 60) -> None:
        self.stream = io.StringIO()
        self.output = Vt100_Output(
            self.stream, lambda: Size(rows=rows, columns=columns), term="xterm-256color"
        )
        self._screen = pyte.Screen(columns, rows)
        # A terminal turns "\n" into "\r\n" (ONLCR, which raw mode leaves on): so does this.
        self._screen.set_mode(pyte.modes.LNM)
        self._pyte = pyte.Stream(self._screen)
        self._fed = 0

    @property
    def lines(self) -> list[str]:
        """The screen's lines, right-stripped, without the trailing empty ones."""
        data = self.stream.getvalue()
        self._pyte.feed(data[self._fed :])
        self._fed = len(data)
        lines = [line.rstrip() for line in self._screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    @property
    def text(self) -> str:
        """The screen as one string."""
        return "\n".join(self.lines)

    @property
    def cursor_hidden(self) -> bool:
        """Whether the terminal was left with its cursor hidden."""
        self.lines  # noqa: B018 - feed what was written
        return bool(self._screen.cursor.hidden)


class PtyChild:
    """A program on a real pseudo-terminal, its output rendered by pyte as the human sees it.

    ``PROMPT_TOOLKIT_NO_CPR=1`` unless ``cpr``: pexpect never answers cursor-position
    requests, and prompt_toolkit would wait for the answers.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        columns: int = 100,
        rows: int = 40,
        cpr: bool = False,
        cwd: str | None = None,
    ) -> None:
        env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(columns), LINES=str(rows))
        env.pop("PROMPT_TOOLKIT_NO_CPR", None)
        if not cpr:
            env["PROMPT_TOOLKIT_NO_CPR"] = "1"
        self.child = pexpect.spawn(
            argv[0], argv[1:], env=env, dimensions=(rows, columns), encoding="utf-8", cwd=cwd
        )
        self.raw = ""
        self._screen = pyte.Screen(columns, rows)
        self._stream = pyte.Stream(self._screen)

    @property
    def lines(self) -> list[str]:
        """The screen's lines, right-stripped, without the trailing empty ones."""
        lines = [line.rstrip() for line in self._screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    @property
    def text(self) -> str:
        """The screen as one string."""
        return "\n".join(self.lines)

    @property
    def cursor_hidden(self) -> bool:
        """Whether the program left the cursor hidden."""
        return bool(self._screen.cursor.hidden)

    def wait_for(self, predicate: Callable[[PtyChild], bool], timeout: float = 10.0) -> None:
        """Read output until ``predicate(self)`` holds; fail with the screen otherwise
        (``timeout``: seconds on an idle machine, scaled here)."""
        deadline = time.monotonic() + scaled(timeout)
        while not predicate(self):
            if not self._read(deadline):
                self._fail("the program ended")

    def wait_prompt(self, shown: str = "", timeout: float = 10.0) -> None:
        """Wait until the screen ends with the prompt line showing ``shown``."""
        expected = f"> {shown}".rstrip()
        self.wait_for(lambda child: child.lines[-1:] == [expected], timeout)

    def wait_text(self, text: str, timeout: float = 10.0) -> None:
        """Wait until ``text`` was written (in the raw output)."""
        self.wait_for(lambda child: text in child.raw, timeout)

    def send(self, keys: str) -> None:
        """Type ``keys``."""
        self.child.send(keys)

    def exit_status(self, timeout: float = 10.0) -> int:
        """Read to the end of the output and return the exit status (``timeout``: seconds
        on an idle machine, scaled here)."""
        deadline = time.monotonic() + scaled(timeout)
        while self._read(deadline):
            pass
        self.child.close()
        assert self.child.exitstatus is not None, f"killed by {self.child.signalstatus}"
        return int(self.child.exitstatus)

    def _read(self, deadline: float) -> bool:
        try:
            chunk = self.child.read_nonblocking(4096, timeout=max(0.0, deadline - time.monotonic()))
        except pexpect.EOF:
            return False
        except pexpect.TIMEOUT:
            self._fail("timed out")
        self.raw += chunk
        self._stream.feed(chunk)
        return True

    def _fail(self, why: str) -> NoReturn:
        raise AssertionError(
            f"{why}; the screen:\n{self.text}\n--- raw output ---\n{self.raw[-2000:]!r}"
        )

    def close(self) -> None:
        """Stop the program if it still runs."""
        if self.child.isalive():
            self.child.close(force=True)


@pytest.fixture
def spawn() -> Iterator[Callable[..., PtyChild]]:
    """Start programs on pseudo-terminals; they are stopped after the test."""
    children: list[PtyChild] = []

    def start(
        *argv: str, columns: int = 100, rows: int = 40, cpr: bool = False, cwd: str | None = None
    ) -> PtyChild:
        child = PtyChild(list(argv), columns=columns, rows=rows, cpr=cpr, cwd=cwd)
        children.append(child)
        return child

    yield start
    for child in children:
        child.close()


async def ask_across_a_reload(
    request: AskUserQuestionRequest,
    old: object,
    new: object,
    *,
    pipe: Pipe,
    before: str,
    ready: Callable[[], bool],
    after: str,
) -> object:
    """Ask ``request`` on ``old``, type ``before``, and once ``ready()`` replace it by ``new``
    (a hot reload: the old generation's scope closed inside the seam's swap); type ``after``
    on the new one. The answer."""
    from hotseam import Context, Scope
    from hotseam.interaction import USER_INTERACTION, ask

    context = Context("reload")
    result: list[object] = []

    async def agent() -> None:
        result.append(await ask(request, context=context))

    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tasks:
            first = Scope("generation 1", context=context)
            first.provide(USER_INTERACTION, old)
            tasks.start_soon(agent)
            pipe.write(before)
            await until(ready)
            async with context.swap(USER_INTERACTION):
                await first.aclose()
                second = Scope("generation 2", context=context)
                second.provide(USER_INTERACTION, new)
            await until(lambda: getattr(new, "showing", None) is not None)
            pipe.write(after)
        await second.aclose()
    (answer,) = result
    return answer

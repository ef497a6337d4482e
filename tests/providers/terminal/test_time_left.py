"""A question with a time limit shows the time left: a live line on the prompt, a note in
line mode."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

import anyio
import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input

from hotseam import Context
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer, ask
from hotseam.providers.terminal import TerminalProvider

from .conftest import FREE, Screen, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """prompt_toolkit runs on asyncio only."""
    return "asyncio"


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe_input:
        yield pipe_input


async def test_the_prompt_counts_the_time_left_down(keys: PipeInput) -> None:
    """'time left: 30 s' under the question, ticking; gone once answered."""
    screen = Screen()
    provider = TerminalProvider(input=keys, output=screen.output, timeout=30)
    answers: list[AskUserQuestionAnswer] = []

    async def ask() -> None:
        answers.append(await provider.ask(FREE))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await until(lambda: _shown_left(screen) is not None)
        first = _shown_left(screen)
        assert first is not None
        assert 25 <= first <= 30
        await until(lambda: (_shown_left(screen) or first) < first)  # it ticks
        keys.send_text("teal\r")
    assert answers == [AskUserQuestionAnswer("teal")]
    assert not any(line.startswith("time left") for line in screen.lines)


def _shown_left(screen: Screen) -> int | None:
    """The seconds the 'time left' line shows, if it is on screen."""
    for line in screen.lines:
        found = re.fullmatch(r"time left: (\d+) s", line)
        if found is not None:
            return int(found.group(1))
    return None


async def test_line_mode_says_how_long_there_is() -> None:
    out = io.StringIO()
    provider = TerminalProvider(
        mode="lines",
        input=io.StringIO("teal\n"),
        output=out,  # type: ignore[arg-type]
        timeout=45,
    )
    assert await provider.ask(FREE) == AskUserQuestionAnswer("teal")
    assert re.search(r"^\(answer within 4[45] s\)$", out.getvalue(), re.MULTILINE)


async def test_the_asker_s_timeout_is_shown_too() -> None:
    """ask(..., timeout=20) on a provider with no limit of its own: the human sees 20 s."""
    out = io.StringIO()
    provider = TerminalProvider(mode="lines", input=io.StringIO("teal\n"), output=out)  # type: ignore[arg-type]
    context = Context("time-left")
    context.provide(USER_INTERACTION, provider)
    assert await ask(FREE, context=context, timeout=20) == AskUserQuestionAnswer("teal")
    assert re.search(r"^\(answer within (19|20) s\)$", out.getvalue(), re.MULTILINE)

"""Issue 13: a withdrawn question's half-typed reply (and cursor) is kept in a ``Draft``.

A reload withdraws the question from the old generation's prompt (its ask is cancelled) and
asks it again on the new generation's provider; carrying one ``Draft`` between the two makes
the re-asked prompt start from what the human had typed.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput
from tests._timing import scaled

from hotseam.interaction import AskUserQuestionAnswer
from hotseam.providers.terminal import Draft, TerminalProvider

from .conftest import DB, FREE, until

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    """prompt_toolkit runs on asyncio only."""
    return "asyncio"


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe_input:
        yield pipe_input


async def test_a_withdrawn_prompt_keeps_text_and_cursor_for_the_next_provider(
    keys: PipeInput,
) -> None:
    draft = Draft()
    old = TerminalProvider(input=keys, output=DummyOutput(), draft=draft)
    with anyio.CancelScope() as withdraw:
        async with anyio.create_task_group() as group:
            group.start_soon(old.ask, FREE)
            keys.send_text("Turise\x1b[D\x1b[D\x1b[D")
            await until(lambda: draft.text == "" and old.showing is not None)
            await anyio.wait_all_tasks_blocked()
            withdraw.cancel()
    await until(lambda: draft.text == "Turise")
    new = TerminalProvider(input=keys, output=DummyOutput(), draft=draft)
    keys.send_text("quo\r")
    with anyio.fail_after(scaled(5)):
        assert await new.ask(FREE) == AskUserQuestionAnswer("Turquoise")
    assert draft.text == ""  # taken once


async def test_a_draft_is_restored_only_into_the_same_question(keys: PipeInput) -> None:
    draft = Draft()
    draft.keep(FREE, "Teal", 4)
    provider = TerminalProvider(input=keys, output=DummyOutput(), draft=draft)
    keys.send_text("2\r")
    with anyio.fail_after(scaled(5)):
        answer = await provider.ask(DB)
    assert answer.answer == "SQLite"
    assert draft.take(FREE) == ("Teal", 4)


def test_keeping_nothing_forgets() -> None:
    draft = Draft()
    draft.keep(FREE, "x", 9)
    assert draft.take(FREE) == ("x", 1)  # the cursor is clamped to the text
    draft.keep(FREE, "y", 0)
    draft.keep(FREE, "", 0)
    assert draft.take(FREE) is None

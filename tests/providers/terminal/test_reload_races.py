"""The terminal provider under swaps at the worst moments: answers stand, order holds.

A reload that lands as the human's line arrives must neither lose the line nor ask the
question again; questions waiting in line come back in their arrival order, so piped
answers land on the questions they were typed for.
"""

from __future__ import annotations

import asyncio
import io
import random
from typing import Any

import anyio
import pytest
from prompt_toolkit.application import Application
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from tests._timing import scaled

from hotseam import Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ask,
)
from hotseam.providers.terminal import TerminalProvider

from .conftest import DB, Pipe, until

pytestmark = pytest.mark.anyio

SQLITE = DB.choices[1]


def _lines(pipe: Pipe, out: io.StringIO, banner: str) -> TerminalProvider:
    return TerminalProvider(mode="lines", input=pipe.fd, output=out, banner=banner)


async def test_a_line_arriving_with_the_reload_is_answered_once(pipe: Pipe) -> None:
    """The old prompt takes the line (and the question is not asked again), or the new one
    does; never both, never neither."""
    rng = random.Random(10)
    for attempt in range(30):
        out = io.StringIO()
        context = Context(f"race-{attempt}")
        first = Scope("generation 1", context=context)
        first.provide(USER_INTERACTION, _lines(pipe, out, "generation 1"))
        results: list[AskUserQuestionAnswer] = []

        async def agent(context: Context = context, results: list[Any] = results) -> None:
            results.append(await ask(DB, context=context))

        second_scopes: list[Scope] = []

        async def reload(
            context: Context = context,
            first: Scope = first,
            out: Any = out,
            second_scopes: list[Scope] = second_scopes,
        ) -> None:
            for _ in range(rng.randrange(3)):
                await anyio.lowlevel.checkpoint()
            async with context.swap(USER_INTERACTION):
                await first.aclose()
                second = Scope("generation 2", context=context)
                second.provide(USER_INTERACTION, _lines(pipe, out, "generation 2"))
            second_scopes.append(second)

        with anyio.fail_after(scaled(5)):
            async with anyio.create_task_group() as tg:
                tg.start_soon(agent)
                await until(lambda out=out: out.getvalue().endswith("> "))
                if attempt % 2:
                    pipe.write("2\n")
                    tg.start_soon(reload)
                else:
                    tg.start_soon(reload)
                    pipe.write("2\n")
        for scope in second_scopes:
            await scope.aclose()
        assert results == [AskUserQuestionAnswer("SQLite", SQLITE)]
        transcript = out.getvalue()
        assert transcript.count("-> SQLite") == 1, transcript
        old_part, _, new_part = transcript.partition("generation 2")
        if "-> SQLite" in old_part:
            assert "Which database?" not in new_part, transcript  # not asked again
        else:
            assert "(question withdrawn)" in old_part


async def test_queued_questions_come_back_in_arrival_order(pipe: Pipe) -> None:
    """Three questions in line on the old prompt; after the reload the piped answers land on
    the questions in the order they were asked."""
    for attempt in range(8):
        out = io.StringIO()
        context = Context(f"order-{attempt}")
        old = _lines(pipe, out, "generation 1")
        first = Scope("generation 1", context=context)
        first.provide(USER_INTERACTION, old)
        answers: dict[str, str] = {}
        questions = [AskUserQuestionRequest(f"Question {n}?") for n in range(4)]

        async def agent(
            request: AskUserQuestionRequest, context: Context = context, answers: Any = answers
        ) -> None:
            answers[request.question] = (await ask(request, context=context)).answer

        with anyio.fail_after(scaled(5)):
            async with anyio.create_task_group() as tg:
                for index, request in enumerate(questions):
                    tg.start_soon(agent, request)
                    # Each question is in line (the first on screen) before the next is asked.
                    await until(
                        lambda old=old, index=index, head=questions[0]: (
                            old.showing is head and old.waiting == index
                        )
                    )
                async with context.swap(USER_INTERACTION):
                    await first.aclose()
                    second = Scope("generation 2", context=context)
                    new = _lines(pipe, out, "generation 2")
                    second.provide(USER_INTERACTION, new)
                await until(lambda new=new: new.waiting == 3)
                pipe.write("a0\na1\na2\na3\n")
        await second.aclose()
        assert answers == {f"Question {n}?": f"a{n}" for n in range(4)}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_committed_prompt_line_survives_a_cancellation_in_cleanup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Enter was pressed, then the asking task is cancelled before prompt_async returned:
    the committed line is the answer, not a cancellation."""
    asking: list[asyncio.Task[Any]] = []
    original_exit = Application.exit

    def exit_then_cancel(self: Application[Any], **kwargs: Any) -> None:
        original_exit(self, **kwargs)
        if "result" in kwargs and asking:
            asking[0].cancel()  # the same turn as the commit

    monkeypatch.setattr(Application, "exit", exit_then_cancel)
    with create_pipe_input() as keys:
        provider = TerminalProvider(input=keys, output=DummyOutput())
        task = asyncio.ensure_future(provider.ask(DB))
        asking.append(task)
        await until(lambda: provider.showing is DB)
        keys.send_text("2\r")
        with anyio.fail_after(scaled(5)):
            answer = await task
    assert answer == AskUserQuestionAnswer("SQLite", SQLITE)

"""Conversations, runs and the session table on their own: anyio only, asyncio and trio."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp.exceptions import RequestError

from hotseam.providers._acp._conversation import Conversations, conversation_text
from hotseam.providers._acp._sessions import Run, Sessions

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    """These modules are backend-neutral (unlike the SDK around them)."""
    return request.param


async def test_a_question_waits_for_its_answer() -> None:
    """send, then end_turn, then the answer given later."""
    conversations = Conversations()
    calls: list[str] = []

    async def send() -> None:
        calls.append("send")

    answer: list[str] = []
    async with anyio.create_task_group() as group:

        async def ask() -> None:
            answer.append(await conversations.ask("s", send, lambda: calls.append("end")))

        group.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        assert calls == ["send", "end"]
        assert conversations.waiting("s")
        assert not conversations.answer("other", "x")
        assert conversations.answer("s", "Ada")
        assert not conversations.answer("s", "twice")  # answered exactly once
    assert answer == ["Ada"]
    assert not conversations.waiting("s")
    assert len(conversations) == 0


async def test_concurrent_questions_in_a_session_go_one_by_one() -> None:
    """The second is not sent until the first is answered; other sessions are not held."""
    conversations = Conversations()
    sent: list[str] = []
    answers: dict[str, str] = {}

    async def ask(session: str, name: str) -> None:
        async def send() -> None:
            sent.append(name)

        answers[name] = await conversations.ask(session, send, lambda: None)

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "s", "a")
        await anyio.wait_all_tasks_blocked()
        group.start_soon(ask, "s", "b")
        group.start_soon(ask, "t", "c")
        await anyio.wait_all_tasks_blocked()
        assert sent == ["a", "c"]
        conversations.answer("s", "1")
        await anyio.wait_all_tasks_blocked()
        assert sent == ["a", "c", "b"]
        conversations.answer("s", "2")
        conversations.answer("t", "3")
    assert answers == {"a": "1", "b": "2", "c": "3"}
    assert len(conversations) == 0


async def test_a_cancelled_question_is_withdrawn_and_frees_the_next() -> None:
    """Cancelling the asking task: nothing waits any more, and a queued question goes out."""
    conversations = Conversations()
    sent: list[str] = []
    async with anyio.create_task_group() as group:
        first = anyio.CancelScope()

        async def ask_first() -> None:
            async def send() -> None:
                sent.append("first")

            with first:
                await conversations.ask("s", send, lambda: None)

        async def ask_second() -> None:
            async def send() -> None:
                sent.append("second")

            await conversations.ask("s", send, lambda: None)

        group.start_soon(ask_first)
        await anyio.wait_all_tasks_blocked()
        group.start_soon(ask_second)
        await anyio.wait_all_tasks_blocked()
        first.cancel()
        await anyio.wait_all_tasks_blocked()
        assert sent == ["first", "second"]
        assert conversations.answer("s", "x")


async def test_an_answer_in_the_same_turn_as_the_cancellation_stands() -> None:
    """Invariant 6: the answer exists, so a revocation in the same turn does not lose it."""
    conversations = Conversations()
    got: list[str] = []
    scope = anyio.CancelScope()

    async def send() -> None:
        pass

    async def ask() -> None:
        with scope:
            got.append(await conversations.ask("s", send, lambda: None))

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        assert conversations.answer("s", "Ada")
        scope.cancel()  # no checkpoint in between
    assert got == ["Ada"]


def test_the_question_text_is_markdown_with_a_hint() -> None:
    """Header in bold, the note first when asked again, the reply hint last."""
    assert conversation_text("Why?", "Notes", "Empty.") == (
        "\n_Empty._\n\n**Notes**: Why?\n\n_(Reply with your answer as your next message.)_\n"
    )


async def test_a_run_ends_turns_then_finishes() -> None:
    """end_turn → "end_turn" once; finish → its stop reason; a stale end_turn is forgotten."""
    run = Run(turn=None)  # type: ignore[arg-type]
    run.end_turn()
    assert await run.next_stop() == "end_turn"
    run.end_turn()
    run.resume()
    async with anyio.create_task_group() as group:
        stops: list[str] = []

        async def host() -> None:
            stops.append(await run.next_stop())

        group.start_soon(host)
        await anyio.wait_all_tasks_blocked()
        assert stops == []
        run.finish("cancelled")
    assert stops == ["cancelled"]
    run.finish("end_turn")  # the first outcome stays
    assert await run.next_stop() == "cancelled"
    await run.wait_finished()


async def test_a_failed_run_raises_for_its_host() -> None:
    """The agent function's error is the hosting prompt's error response."""
    run = Run(turn=None)  # type: ignore[arg-type]
    run.fail(RequestError.internal_error({"details": "boom"}))
    with pytest.raises(RequestError):
        await run.next_stop()


def test_idle_sessions_are_released_oldest_first_never_a_prompting_one() -> None:
    """An ordered table: the scan stops at the first session that is not idle."""
    now = [0.0]
    sessions = Sessions(idle_timeout=10.0, clock=lambda: now[0])
    for name in "abcd":
        sessions.open(name, "/")
        now[0] += 1.0
    busy = sessions.use("a")
    assert busy is not None
    busy.prompting = True
    now[0] = 12.5  # b (1.0), c (2.0) idle; d (3.0) not; a used at 4.0
    assert [s.id for s in sessions.release_idle()] == ["b", "c"]
    assert [s.id for s in sessions] == ["d", "a"]
    now[0] = 100.0
    assert [s.id for s in sessions.release_idle()] == ["d"]
    assert [s.id for s in sessions] == ["a"]  # prompting: not idle
    assert Sessions(idle_timeout=None).release_idle() == []

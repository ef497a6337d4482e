"""ask() with several questions: the whole ask to a provider that shows them together, one
question after the other to one that does not, answered questions kept across a swap (an
in-process swap and a real reload), decline ending the whole ask, and the journal recording
the ask once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import AbortController, Agent, Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    QuestionAnswer,
    UserInteractionError,
    ask,
    validate_request,
)
from hotseam.interaction._journal import AskState, Journal, open_journal
from hotseam.interaction.journal import JOURNALING, JournalDaemon
from hotseam.providers.scripted import Reply, ScriptedProvider
from hotseam.testing import ReloadDriver

from . import _multi_support
from ._multi_support import FEATURES, NEVER, THREE, OneByOne

pytestmark = pytest.mark.anyio

VALID = validate_request(THREE)
DB_Q, FEATURES_Q, NOTES_Q = VALID.questions
EXPECTED = AskUserQuestionAnswer.of(
    [
        QuestionAnswer.chosen(DB_Q, ["pg"]),
        QuestionAnswer.chosen(FEATURES_Q, ["auth", "billing"]),
        QuestionAnswer("notes", "Ship on Friday", (), "Ship on Friday"),
    ],
    VALID,
)


def _context(provider: object) -> Context:
    context = Context("multi")
    context.provide(USER_INTERACTION, provider)
    return context


async def test_a_provider_showing_several_questions_gets_the_whole_ask_once() -> None:
    """multiple_questions = True: one request, all questions, one answer."""
    provider = ScriptedProvider([["Postgres", ["Auth", "Billing"], "Ship on Friday"]])
    answer = await ask(THREE, context=_context(provider))
    assert answer == EXPECTED
    assert provider.requests == [VALID]
    assert answer.answer == (
        "Which database? pg\nWhich features? auth, billing\nAnything else? Ship on Friday"
    )


async def test_a_one_question_provider_is_asked_each_question_in_turn() -> None:
    """No multiple_questions: three one-question requests, each carrying its question
    (id, multi_select, options) and the ask's agent and signal; the same answer."""
    signal = AbortController().signal
    provider = OneByOne(["pg", "billing, auth", "Ship on Friday"])
    request = AskUserQuestionRequest.of(list(THREE.questions), agent=Agent("a"), signal=signal)
    with structlog.testing.capture_logs() as logs:
        answer = await ask(request, context=_context(provider))
    assert answer == EXPECTED
    assert provider.ids == ["db", "features", "notes"]
    assert [r.questions for r in provider.requests] == [(q,) for q in VALID.questions]
    second = provider.requests[1]
    assert (second.question, second.choices, second.questions[0].multi_select) == (
        "Which features?",
        FEATURES_Q.choices,
        True,
    )
    assert all(r.agent == Agent("a") and r.signal is signal for r in provider.requests)
    progress = [e for e in logs if e["event"] == "ask.question_answered"]
    assert [(e["question"], e["answered"], e["of"]) for e in progress] == [
        ("db", 1, 3),
        ("features", 2, 3),
        ("notes", 3, 3),
    ]
    assert "Ship on Friday" not in str(progress)  # never the answers


async def test_a_request_of_one_question_is_its_own_only_part_for_either_provider() -> None:
    """A list of one, one question at a time or together: the provider is handed the
    request itself, and its answer is the ask's (no per-question progress to log)."""
    one = validate_request(AskUserQuestionRequest.of([DB_Q]))
    for provider in (OneByOne(["pg"]), ScriptedProvider(["pg"])):
        with structlog.testing.capture_logs() as logs:
            answer = await ask(one, context=_context(provider))
        assert provider.requests == [one] and provider.requests[0] is one
        assert answer.answers == (QuestionAnswer.chosen(DB_Q, ["pg"]),)
        assert not [e for e in logs if e["event"] == "ask.question_answered"]


async def test_a_flag_that_is_not_true_means_one_question_at_a_time() -> None:
    """Only `multiple_questions = True` says so; a truthy string does not."""
    provider = OneByOne(["sqlite", "search", "no"])
    provider.multiple_questions = "yes"  # type: ignore[attr-defined]
    answer = await ask(THREE, context=_context(provider))
    assert [entry.answer for entry in answer.answers] == ["sqlite", "search", "no"]


async def test_a_declined_question_ends_the_whole_ask() -> None:
    """The second question dismissed: ASK_CANCELLED, the third never asked."""
    provider = ScriptedProvider(
        lambda r: Reply.fail(ErrorCode.ASK_CANCELLED) if r.question == "Which features?" else "pg"
    )
    provider.multiple_questions = False
    with pytest.raises(UserInteractionError) as caught:
        await ask(THREE, context=_context(provider))
    assert caught.value.code == ErrorCode.ASK_CANCELLED
    assert [r.question for r in provider.requests] == ["Which database?", "Which features?"]


async def test_an_answer_that_does_not_fit_names_the_question_in_the_whole_ask() -> None:
    """INVALID_ANSWER names questions[1], its place in the ask (not in the one-question
    request it was asked as), and never the text."""
    provider = OneByOne(["pg", "auth, a secret plan"])
    strict_features = replace(FEATURES, allow_custom=False)
    strict = AskUserQuestionRequest.of([THREE.questions[0], strict_features, THREE.questions[2]])
    with pytest.raises(UserInteractionError) as caught:
        await ask(strict, context=_context(provider))
    assert caught.value.code == ErrorCode.INVALID_ANSWER
    assert str(caught.value).startswith("questions[1] (Which features?): the answer is none")
    assert "secret" not in str(caught.value)


async def test_a_swap_keeps_the_answered_questions() -> None:
    """Two answered on the old provider; the new one is asked only the third, once."""
    old = OneByOne(["pg", "auth,billing", NEVER], name="old")
    new = OneByOne(["Ship on Friday"], name="new")
    context = Context("swap")
    registration = context.provide(USER_INTERACTION, old)
    answers: list[AskUserQuestionAnswer] = []
    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as group:

            async def asker() -> None:
                answers.append(await ask(THREE, context=context))

            group.start_soon(asker)
            while len(old.requests) < 3:
                await old.asked.wait()
            async with context.swap(USER_INTERACTION):
                await registration.dispose()
                context.provide(USER_INTERACTION, new)
    assert answers == [EXPECTED]
    assert old.ids == ["db", "features", "notes"] and new.ids == ["notes"]
    assert [r.questions[0].id for r in old.cancelled] == ["notes"]


async def test_a_swap_to_a_provider_showing_several_asks_it_the_rest_together() -> None:
    """One answered, then a provider with multiple_questions: it gets the other two."""
    old = OneByOne(["pg", NEVER], name="old")
    new = ScriptedProvider([[["auth", "billing"], "Ship on Friday"]])
    context = Context("swap")
    registration = context.provide(USER_INTERACTION, old)
    answers: list[AskUserQuestionAnswer] = []
    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as group:

            async def asker() -> None:
                answers.append(await ask(THREE, context=context))

            group.start_soon(asker)
            while len(old.requests) < 2:
                await old.asked.wait()
            async with context.swap(USER_INTERACTION):
                await registration.dispose()
                context.provide(USER_INTERACTION, new)
    assert answers == [EXPECTED]
    (rest,) = new.requests
    assert [item.id for item in rest.questions] == ["features", "notes"]
    assert rest.question == "Which features?"


PROVIDER_MODULE = """
from hotseam.interaction import USER_INTERACTION
from interaction import _multi_support


def setup(scope):
    provider = _multi_support.OneByOne({replies!r}, name="v{version}")
    _multi_support.LOADED.append(provider)
    scope.provide(USER_INTERACTION, provider)
"""


async def test_a_reload_in_the_middle_re_asks_only_the_rest(tmp_path: Path) -> None:
    """A real reload (ReloadDriver: the Reloader, no watcher) while the third question is
    open: the new generation is asked the third question only; the answer is whole."""
    _multi_support.LOADED.clear()
    context = Context("reload")
    answers: list[AskUserQuestionAnswer] = []
    with anyio.fail_after(scaled(10)):
        async with ReloadDriver(context, tmp_path) as driver:
            source = PROVIDER_MODULE.format(replies=["pg", "auth,billing", NEVER], version=1)
            await driver.load("multi_ui.py", source)
            (first,) = _multi_support.LOADED
            async with anyio.create_task_group() as group:

                async def asker() -> None:
                    answers.append(await ask(THREE, context=context))

                group.start_soon(asker)
                while len(first.requests) < 3:
                    await first.asked.wait()
                driver.write(
                    "multi_ui.py", PROVIDER_MODULE.format(replies=["Ship on Friday"], version=2)
                )
                (await driver.reload("multi_ui.py")).raise_for_errors()
            assert driver.generation("multi_ui.py") == 2
    (_, second) = _multi_support.LOADED
    assert answers == [EXPECTED]
    assert first.ids == ["db", "features", "notes"] and second.ids == ["notes"]
    assert [r.questions[0].id for r in first.cancelled] == ["notes"]


# -- the journal records the whole ask ------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Journal]:
    url = "memory:" if request.param == "memory" else f"sqlite:///{tmp_path / 'journal.db'}"
    async with open_journal(url) as opened:
        yield opened


async def _run(
    journal: Journal,
    provider: object,
    questions: tuple[AskUserQuestionRequest, ...] = (THREE,),
    *,
    stop_after_asked: int | None = None,
) -> list[AskUserQuestionAnswer]:
    """A daemon's run of an agent that asks ``questions``; with ``stop_after_asked`` the
    daemon stops (the run is cancelled) once its provider was asked that many questions."""
    context = Context("daemon")
    answers: list[AskUserQuestionAnswer] = []
    async with (
        JournalDaemon.open(journal, name="multi-daemon") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, provider)
        scope.provide(JOURNALING, journaling)
        async with anyio.create_task_group() as group:

            async def agent() -> None:
                async with journaling.run("planner"):
                    for request in questions:  # each kept as it comes: the run may stop
                        answers.append(await ask(request, context=context))  # noqa: PERF401

            group.start_soon(agent)
            if stop_after_asked is not None:
                assert isinstance(provider, OneByOne)
                while len(provider.requests) < stop_after_asked:
                    await provider.asked.wait()
                group.cancel_scope.cancel()
    return answers


NAME = AskUserQuestionRequest("What should the service be called?")


async def test_the_journal_records_the_ask_once_and_replays_it_whole(journal: Journal) -> None:
    """One record holding the whole request, answered once with the whole answer; the run
    resumed after a stop replays it without asking anyone."""
    provider = OneByOne(["pg", "auth,billing", "Ship on Friday", NEVER])
    with anyio.fail_after(scaled(5)):
        assert await _run(journal, provider, (THREE, NAME), stop_after_asked=4) == [EXPECTED]
    record, name = sorted(await journal.list_asks(), key=lambda ask: ask.seq)
    assert (record.state, name.state) == (AskState.ANSWERED, AskState.PENDING)
    assert record.request == VALID
    assert record.answer == EXPECTED
    resumed = OneByOne(["orders-api"])
    with anyio.fail_after(scaled(5)):
        answers = await _run(journal, resumed, (THREE, NAME))
    assert answers == [EXPECTED, AskUserQuestionAnswer("orders-api")]
    assert [r.question for r in resumed.requests] == [NAME.question]  # THREE replayed


async def test_a_run_stopped_after_two_of_three_asks_only_the_third_again(
    journal: Journal,
) -> None:
    """The answers given one question at a time are kept in the journal as they come: a
    run stopped with two of three answered is resumed with the ask still open, asks only
    the third question, and returns the three answers, recorded once."""
    first = OneByOne(["pg", "auth,billing", NEVER])
    with anyio.fail_after(scaled(5)):
        assert await _run(journal, first, stop_after_asked=3) == []
    (pending,) = await journal.list_asks()
    assert pending.state is AskState.PENDING and pending.answer is None
    assert [entry.id for entry in pending.partial] == ["db", "features"]
    again = OneByOne(["Ship on Friday"])
    with anyio.fail_after(scaled(5)):
        (answer,) = await _run(journal, again)
    assert again.ids == ["notes"]
    assert answer == EXPECTED
    (record,) = await journal.list_asks()  # the same ask, re-attached and answered once
    assert (record.id, record.state, record.answer) == (pending.id, AskState.ANSWERED, answer)


AGENT = """
from hotseam import Agent

QUESTIONS = [
    {"id": "db", "question": "Which database?",
     "options": [{"label": "Postgres"}, {"label": "SQLite"}], "allowCustom": False},
    {"id": "features", "question": "Which features?", "multiSelect": True,
     "options": [{"label": "auth"}, {"label": "billing"}, {"label": "search"}]},
    {"id": "notes", "question": "Anything else?"},
]

async def main(context):
    result = await context.tools.execute(
        "ask_user_question", {"questions": QUESTIONS}, agent=Agent("planner", "Planner")
    )
    if not result.ok:
        print(result.error["code"], flush=True)
        return
    for entry in result.output["questions"]:
        print(f"{entry['id']} -> {entry['answer']}", flush=True)
"""

ONE_BY_ONE_MODULE = """
import json
import pathlib

import anyio

from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer


class OneByOne:
    def __init__(self, replies):
        self.replies = replies

    async def ask(self, request):
        reply = self.replies.pop(0)
        if reply is None:
            await anyio.sleep_forever()
        return AskUserQuestionAnswer(reply)


def setup(scope):
    replies = json.loads(pathlib.Path("replies.json").read_text())
    scope.provide(USER_INTERACTION, OneByOne(replies))
"""


def test_a_daemon_killed_after_two_of_three_asks_only_the_third_again(tmp_path: Path) -> None:
    """Real processes: `hotseam run` with a one-question provider is killed (SIGKILL) just
    after it said the second of three questions of one ask was answered; restarted, it asks
    only the third, and the agent gets the first run's two answers and the third, once."""
    import json
    import signal

    from cli._support import Process, write

    write(tmp_path / "agent.py", AGENT)
    write(tmp_path / "providers" / "one_by_one.py", ONE_BY_ONE_MODULE)
    (tmp_path / "replies.json").write_text(json.dumps(["Postgres", "auth, billing", None]))
    first = Process("run", "providers", "--agent", "agent.py", cwd=tmp_path)
    try:
        answered = [json.loads(first.expect('"ask.question_answered"').string) for _ in "12"]
        assert [event["question"] for event in answered] == ["db", "features"]
    finally:
        first.finish(signal.SIGKILL)
    assert first.lines["stdout"] == []
    (tmp_path / "replies.json").write_text(json.dumps(["Ship on Friday"]))
    second = Process("run", "providers", "--agent", "agent.py", cwd=tmp_path)
    try:
        second.expect("notes -> ", stream="stdout")
    finally:
        assert second.finish(signal.SIGTERM) == 0
    assert second.lines["stdout"] == [
        "db -> Postgres",
        "features -> auth, billing",
        "notes -> Ship on Friday",
    ]
    asked = [json.loads(line) for line in second.lines["stderr"] if "question_answered" in line]
    assert [event["question"] for event in asked] == ["notes"]
    assert not [line for line in second.lines["stderr"] if "ask.replayed" in line]

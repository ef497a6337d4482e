"""Asks of several questions in the web inbox: one card, one answer for all of them.

The JSON API takes every question's answer in one body (``{"answers": {id: answer}}``),
checks each with the seam's own rules (a refusal names the question), decides the whole
ask at once (first answer wins, the loser hears the winner's answer per question), and
keeps the ask's id across a reload of the provider module serving the inbox.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from hotseam import Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    ask,
    validate_request,
)
from hotseam.interaction._journal import AskState
from hotseam.providers.web import WebProvider
from hotseam.reload import Reloader

from .conftest import PLANNER, answer_of, open_events, serving
from .test_journal_inbox import fleet, removed
from .test_reload import MODULE, free_port

pytestmark = pytest.mark.anyio

STACK = AskUserQuestionRequest.of(
    [
        Question(
            "Which database?",
            header="Storage",
            options=[
                AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True),
                AskUserQuestionOption("SQLite", description="One file, zero setup"),
            ],
            allow_custom=False,
        ),
        Question(
            "Which features?",
            header="Features",
            options=[
                AskUserQuestionOption("Auth", recommended=True),
                AskUserQuestionOption("Billing"),
                AskUserQuestionOption("Search", "search-v2"),
                AskUserQuestionOption("Export"),
            ],
            multi_select=True,
            max_selections=2,
        ),
        Question("Anything else?", header="Notes", allow_skip=True),
    ],
    agent=PLANNER,
)
ALL_AT_ONCE = {
    "answers": {
        "q1": {"option": 1},
        "q2": {"options": [2, 0]},
        "q3": {"text": "Ship it by Friday"},
    }
}
FRIDAY = "Ship it by Friday"


def answers(**by_id: object) -> dict[str, Any]:
    """``ALL_AT_ONCE`` with some questions' answers replaced (``None`` leaves one out)."""
    given = {**ALL_AT_ONCE["answers"], **by_id}
    return {"answers": {key: value for key, value in given.items() if value is not None}}


async def test_three_questions_are_one_card_answered_in_one_post() -> None:
    async with serving() as s, s.events() as events:
        s.ask_soon("stack", STACK)
        added = (await events.until(lambda e: e["type"] == "added"))["question"]
        assert [q["question"] for q in added["questions"]] == [
            "Which database?",
            "Which features?",
            "Anything else?",
        ]
        database, features, notes = added["questions"]
        assert database["id"] == "q1" and database["header"] == "Storage"
        assert database["multiSelect"] is False and database["allowCustom"] is False
        assert database["options"][0] == {
            "index": 0,
            "label": "Postgres",
            "description": "Server database",
            "recommended": True,
        }
        assert features["multiSelect"] is True
        assert (features["minSelections"], features["maxSelections"]) == (1, 2)
        assert features["hint"] == "pick 1 to 2, or type your own"
        assert [o["recommended"] for o in features["options"]] == [True, False, False, False]
        assert notes["options"] == [] and notes["allowSkip"] is True
        assert not {"question", "header", "options", "allowCustom"} & set(added)  # all in questions
        assert s.web.pending == 1  # one ask, one card

        response = await s.answer(added["id"], ALL_AT_ONCE)
        assert response.status_code == 200, response.text
        assert response.json() == {"ok": True, "outcome": "answered"}
        gone = await events.until(lambda e: e["type"] == "removed")
        assert gone["reason"] == "answered"
        assert gone["answer"] == {
            "answers": [
                {"id": "q1", "question": "Which database?", "labels": ["SQLite"]},
                {"id": "q2", "question": "Which features?", "labels": ["Auth", "Search"]},
                {
                    "id": "q3",
                    "question": "Anything else?",
                    "labels": [],
                    "text": "Ship it by Friday",
                },
            ]
        }
    answer = answer_of(s.results["stack"])
    database_answer, features_answer, notes_answer = answer.answers
    assert (database_answer.id, database_answer.answer) == ("q1", "SQLite")
    assert features_answer.answer == "Auth, search-v2"  # model values, in option order
    assert [o.label for o in features_answer.options] == ["Auth", "Search"]
    assert notes_answer.custom == "Ship it by Friday" and notes_answer.options == ()
    assert answer.answer.splitlines() == [
        "Which database? SQLite",
        "Which features? Auth, search-v2",
        "Anything else? Ship it by Friday",
    ]


async def test_a_skip_and_a_typed_choice_among_several() -> None:
    async with serving() as s:
        s.ask_soon("stack", STACK)
        (question,) = await s.pending(1)
        body = answers(q2={"options": [3], "text": "GraphQL"}, q3={"skip": True})
        response = await s.answer(question["id"], body)
        assert response.status_code == 200, response.text
        features, notes = answer_of(await s.result("stack")).answers[1:]
        assert [o.label for o in features.options] == ["Export"]
        assert features.custom == "GraphQL" and features.answer == "Export, GraphQL"
        assert notes.skipped == "skipped" and notes.answer is None


async def test_one_question_taking_several_choices_takes_them_without_answers() -> None:
    features = AskUserQuestionRequest.of([STACK.questions[1]])
    async with serving() as s:
        s.ask_soon("features", features)
        (question,) = await s.pending(1)
        assert question["questions"][0]["multiSelect"] is True
        one = await s.answer(question["id"], {"option": 1})
        assert one.status_code == 400 and '"options"' in one.json()["error"]["message"]
        response = await s.answer(question["id"], {"options": [1, 0]})
        assert response.status_code == 200, response.text
        answer = answer_of(await s.result("features"))
        assert [o.label for o in answer.answers[0].options] == ["Auth", "Billing"]


REFUSALS: list[tuple[object, int, str]] = [
    # the shape of the whole body
    ({"text": "pg"}, 422, "one answer to an ask of 3 questions"),
    ({"option": 0}, 422, "one answer to an ask of 3 questions"),
    ({}, 400, '"answers"'),
    ({"answers": [{"option": 0}]}, 400, '"answers" must be an object'),
    ({**ALL_AT_ONCE, "option": 0}, 400, '"answers" goes alone'),
    (answers(q9={"option": 0}), 400, "names no question 'q9'"),
    (answers(q3=None), 422, "questions[2] (Anything else?) has no answer"),
    # each question's answer, named by its place and text
    (answers(q1={"options": [0]}), 400, "questions[0] (Which database?): the question takes one"),
    (answers(q1={"text": "MariaDB"}), 422, "questions[0] (Which database?): this question"),
    (answers(q1={"option": 5}), 422, "questions[0] (Which database?): option 5 does not"),
    (answers(q1={"skip": True}), 422, "questions[0] (Which database?): was skipped, but"),
    (answers(q1="Postgres"), 400, "questions[0] (Which database?): expected a JSON object"),
    (answers(q2={"option": 0}), 400, "questions[1] (Which features?): the question takes sev"),
    (answers(q2={"options": [0, 1, 2]}), 422, "questions[1] (Which features?): 3 selections"),
    (answers(q2={"options": [0], "text": "x", "skip": True}), 400, "questions[1] (Which fe"),
    (answers(q2={"options": []}), 422, "questions[1] (Which features?): 0 selections"),
    (answers(q2={"options": [0, 0]}), 422, "questions[1] (Which features?): options[1] choo"),
    (answers(q2={"options": ["0"]}), 400, 'questions[1] (Which features?): "options" must'),
    (answers(q2={"options": [1], "text": " "}), 422, "questions[1] (Which features?): the ans"),
    (answers(q3={"text": 5}), 400, 'questions[2] (Anything else?): "text" must be a string'),
    (answers(q3={"text": "x" * 20_001}), 422, "questions[2] (Anything else?): the answer is l"),
    (answers(q3={"colour": "teal"}), 400, "questions[2] (Anything else?): unknown field(s)"),
]


async def test_every_refusal_names_the_question_and_changes_nothing() -> None:
    async with serving() as s:
        s.ask_soon("stack", STACK)
        (question,) = await s.pending(1)
        for body, status, fragment in REFUSALS:
            response = await s.client.post(
                f"/api/questions/{question['id']}/answer",
                content=json.dumps(body),
                headers={"content-type": "application/json"},
            )
            assert response.status_code == status, (body, response.text)
            error = response.json()["error"]
            code = "INVALID_ANSWER" if status == 422 else "BAD_REQUEST"
            assert error["code"] == code, (body, error)
            assert fragment in error["message"], (body, error["message"])
            assert s.web.pending == 1 and "stack" not in s.results
        assert (await s.answer(question["id"], ALL_AT_ONCE)).status_code == 200
        assert answer_of(await s.result("stack")).answers[0].answer == "SQLite"


async def test_two_tabs_answering_one_ask_at_once_the_loser_hears_every_answer() -> None:
    async with serving() as s:
        s.ask_soon("stack", STACK)
        (question,) = await s.pending(1)
        url = f"/api/questions/{question['id']}/answer"
        bodies = {
            "tab-a": ALL_AT_ONCE,
            "tab-b": answers(q1={"option": 0}, q2={"options": [1]}, q3={"skip": True}),
        }
        replies: dict[str, httpx.Response] = {}

        async def post(client: str) -> None:
            replies[client] = await s.client.post(
                url, json=bodies[client], headers={"x-hotseam-client": client}
            )

        async with s.events() as events:
            await events.next()  # the snapshot
            async with anyio.create_task_group() as tg:
                tg.start_soon(post, "tab-a")
                tg.start_soon(post, "tab-b")
            gone = await events.until(lambda e: e["type"] == "removed")
        assert sorted(reply.status_code for reply in replies.values()) == [200, 409]
        winner = next(client for client, reply in replies.items() if reply.status_code == 200)
        loser = "tab-b" if winner == "tab-a" else "tab-a"
        shown = {
            "tab-a": [
                {"id": "q1", "question": "Which database?", "labels": ["SQLite"]},
                {"id": "q2", "question": "Which features?", "labels": ["Auth", "Search"]},
                {
                    "id": "q3",
                    "question": "Anything else?",
                    "labels": [],
                    "text": "Ship it by Friday",
                },
            ],
            "tab-b": [
                {"id": "q1", "question": "Which database?", "labels": ["Postgres"]},
                {"id": "q2", "question": "Which features?", "labels": ["Billing"]},
                {"id": "q3", "question": "Anything else?", "skipped": "skipped"},
            ],
        }[winner]
        assert gone["client"] == winner and gone["answer"] == {"answers": shown}
        refused = replies[loser].json()["error"]
        assert refused["code"] == "ALREADY_ANSWERED"
        assert refused["client"] == winner and refused["answer"] == {"answers": shown}
        said = {
            "tab-a": "Which database? SQLite; Which features? Auth, Search; "
            "Anything else? a typed answer",
            "tab-b": "Which database? Postgres; Which features? Billing; Anything else? (skipped)",
        }[winner]
        assert refused["message"] == f"the question was already answered: {said}"
        database = answer_of(await s.result("stack")).answers[0]
        assert database.answer == {"tab-a": "SQLite", "tab-b": "pg"}[winner]


async def test_a_reload_of_the_serving_module_keeps_the_card_and_its_id(tmp_path: Path) -> None:
    port = free_port()
    module = tmp_path / "web_ui.py"
    module.write_text(MODULE.format(generation=1, port=port))
    context = Context("reload-multi")
    got: list[AskUserQuestionAnswer] = []
    async with Reloader(context, tmp_path, watch=False) as reloader:
        first = context.get(USER_INTERACTION)
        assert isinstance(first, WebProvider) and first.multiple_questions
        async with anyio.create_task_group() as tg:

            async def agent() -> None:
                got.append(await ask(STACK, context=context))

            tg.start_soon(agent)
            async with open_events(port, first.token) as page:
                shown = await page.until(lambda e: bool(e.get("questions") or e.get("question")))
                (before,) = shown.get("questions") or [shown["question"]]
                module.write_text(MODULE.format(generation=2, port=port))
                assert (await reloader.reload()).committed
                await page.rest()
            second = context.get(USER_INTERACTION)
            assert isinstance(second, WebProvider) and second is not first
            async with open_events(port, first.token) as page:
                shown = await page.until(lambda e: bool(e.get("questions") or e.get("question")))
                (after,) = shown.get("questions") or [shown["question"]]
            # One card, the same id and questions: a page holds it in place with its choices.
            assert after == {**before, "seq": after["seq"], "askedAt": after["askedAt"]}
            async with httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers={"x-hotseam-token": first.token}
            ) as client:
                url = f"/api/questions/{before['id']}/answer"
                response = await client.post(url, json=ALL_AT_ONCE)
                assert response.status_code == 200, response.text
    (answer,) = got
    assert [entry.answer for entry in answer.answers] == [
        "SQLite",
        "Auth, search-v2",
        "Ship it by Friday",
    ]


async def test_the_fleet_inbox_shows_and_answers_an_ask_of_several_questions() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        await f.ask(run, "stack", validate_request(STACK))
        await f.shown("stack")
        (listed,) = await f.listed()
        assert [q["question"] for q in listed["questions"]] == [
            "Which database?",
            "Which features?",
            "Anything else?",
        ]
        assert listed["questions"][1]["multiSelect"] is True
        assert listed["questions"][1]["maxSelections"] == 2
        typed = await f.post("stack", "answer", {"text": "Postgres and auth"})
        assert typed.status_code == 422 and typed.json()["error"]["code"] == "INVALID_ANSWER"
        assert "one answer to an ask of 3 questions" in typed.json()["error"]["message"]
        too_many = await f.post("stack", "answer", answers(q2={"options": [0, 1, 3]}))
        assert too_many.status_code == 422
        assert "questions[1] (Which features?)" in too_many.json()["error"]["message"]
        assert (await f.journal.get_ask("stack")).pending  # nothing recorded
        async with f.events() as events:
            await events.until(lambda e: e["type"] == "snapshot")
            response = await f.post("stack", "answer", ALL_AT_ONCE, client="tab-1")
            assert response.status_code == 200, response.text
            gone = await events.until(removed("stack"))
        assert [item["labels"] for item in gone["answer"]["answers"]] == [
            ["SQLite"],
            ["Auth", "Search"],
            [],
        ]
        record = await f.journal.get_ask("stack")
        assert record.state is AskState.ANSWERED and record.answer is not None
        assert [entry.answer for entry in record.answer.answers] == [
            "SQLite",
            "Auth, search-v2",
            "Ship it by Friday",
        ]
        late = await f.post("stack", "answer", ALL_AT_ONCE)
        assert late.status_code == 409
        assert late.json()["error"]["answer"] == gone["answer"]

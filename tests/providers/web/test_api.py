"""The JSON API and the provider behind it: listing, answering, dismissing, first answer wins."""

from __future__ import annotations

import functools
import json
from typing import Any

import anyio
import httpx
import pytest
import structlog
from tests._timing import scaled

from hotseam import AbortController, Scope
from hotseam.interaction import AskUserQuestionRequest, ErrorCode, UserInteractionError

from .conftest import DB, FREE, STRICT, answer_of, said, serving, texts

pytestmark = pytest.mark.anyio


async def test_pending_questions_are_listed_oldest_first_with_everything_a_page_shows() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        await s.pending(1)
        s.ask_soon("free", FREE)
        await s.pending(2)
        listed = (await s.client.get("/api/questions")).json()["questions"]
        assert [texts(q) for q in listed] == [["Which database?"], ["What colour?"]]
        assert listed[0]["agent"] == {"id": "planner", "name": "Planner"}
        ((db,), (free,)) = (q["questions"] for q in listed)
        assert db["header"] == "Storage"
        assert db["options"] == [
            {
                "index": 0,
                "label": "Postgres",
                "description": "Server database",
                "recommended": True,
            },
            {
                "index": 1,
                "label": "SQLite",
                "description": "One file, zero setup",
                "recommended": False,
            },
        ]
        assert db["allowCustom"] is True
        assert free["options"] == [] and free["allowCustom"] is True
        assert s.web.pending == 2


async def test_choosing_an_option_returns_its_model_value() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        response = await s.answer(question["id"], {"option": 0})
        assert response.status_code == 200, response.text
        answer = answer_of(await s.result("db"))
        assert answer.answer == "pg" and answer.option is not None
        assert answer.option.label == "Postgres"
        assert (await s.client.get("/api/questions")).json() == {"questions": []}


async def test_a_custom_answer_is_returned_as_typed() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        assert (await s.answer(question["id"], {"text": "MariaDB, please"})).status_code == 200
        answer = answer_of(await s.result("db"))
        assert answer.answer == "MariaDB, please" and answer.option is None


async def test_a_free_form_question_takes_text() -> None:
    async with serving() as s:
        s.ask_soon("free", FREE)
        (question,) = await s.pending(1)
        assert (await s.answer(question["id"], {"text": "teal"})).status_code == 200
        assert answer_of(await s.result("free")).answer == "teal"


BAD_ANSWERS: list[tuple[object, int, str]] = [
    ({"text": "Maybe"}, 422, "INVALID_ANSWER"),  # no custom answers allowed
    ({"option": 2}, 422, "INVALID_ANSWER"),
    ({"option": -1}, 422, "INVALID_ANSWER"),
    ({"option": True}, 400, "BAD_REQUEST"),
    ({"option": "0"}, 400, "BAD_REQUEST"),
    ({"option": 1.0}, 400, "BAD_REQUEST"),
    ({"option": 0, "text": "Yes"}, 400, "BAD_REQUEST"),
    ({}, 400, "BAD_REQUEST"),
    ({"answer": "Yes"}, 400, "BAD_REQUEST"),
    ([0], 400, "BAD_REQUEST"),
    ("Yes", 400, "BAD_REQUEST"),
    (None, 400, "BAD_REQUEST"),
    ({"text": 5}, 400, "BAD_REQUEST"),
]


async def test_a_bad_answer_is_refused_clearly_and_changes_nothing() -> None:
    async with serving() as s:
        s.ask_soon("strict", STRICT)
        (question,) = await s.pending(1)
        for body, status, code in BAD_ANSWERS:
            response = await s.client.post(
                f"/api/questions/{question['id']}/answer",
                content=json.dumps(body),
                headers={"content-type": "application/json"},
            )
            assert response.status_code == status, (body, response.text)
            assert response.json()["error"]["code"] == code
            assert response.json()["error"]["message"]
            assert s.web.pending == 1 and "strict" not in s.results
        assert (await s.answer(question["id"], {"option": 1})).status_code == 200
        assert answer_of(await s.result("strict")).answer == "No"


async def test_empty_and_oversized_custom_answers_are_refused() -> None:
    async with serving() as s:
        s.ask_soon("free", FREE)
        (question,) = await s.pending(1)
        assert (await s.answer(question["id"], {"text": "   "})).status_code == 422
        assert (await s.answer(question["id"], {"text": "x" * 20_001})).status_code == 422
        assert s.web.pending == 1


async def test_malformed_json_and_huge_bodies_are_refused() -> None:
    async with serving() as s:
        s.ask_soon("free", FREE)
        (question,) = await s.pending(1)
        url = f"/api/questions/{question['id']}/answer"
        headers = {"content-type": "application/json"}
        bad = await s.client.post(url, content=b"{not json", headers=headers)
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "BAD_REQUEST"
        huge = await s.client.post(url, content=b'"' + b"x" * 70_000 + b'"', headers=headers)
        assert huge.status_code == 413
        # Nesting under the size bound: a decoder that recurses per level would raise
        # RecursionError here (a 500 and a traceback) instead of refusing the body.
        for deep in (b"[" * 60_000, b'{"option": ' + b"[" * 30_000 + b"0" + b"]" * 30_000 + b"}"):
            refused = await s.client.post(url, content=deep, headers=headers)
            assert refused.status_code == 400, refused.text
            assert refused.json()["error"]["code"] == "BAD_REQUEST"
        assert s.web.pending == 1


async def test_dismiss_is_ask_cancelled() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        response = await s.client.post(f"/api/questions/{question['id']}/dismiss", json={})
        assert response.status_code == 200
        error = await s.result("db")
        assert isinstance(error, UserInteractionError) and error.code == ErrorCode.ASK_CANCELLED
        again = await s.client.post(f"/api/questions/{question['id']}/dismiss", json={})
        assert again.status_code == 409 and again.json()["error"]["code"] == "NOT_PENDING"


async def test_two_concurrent_answers_give_one_answer_and_one_already_answered() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        responses: dict[int, int] = {}

        async def answer(index: int) -> None:
            responses[index] = (await s.answer(question["id"], {"option": index})).status_code

        async with anyio.create_task_group() as tg:
            tg.start_soon(answer, 0)
            tg.start_soon(answer, 1)
        assert sorted(responses.values()) == [200, 409]
        winner = next(index for index, status in responses.items() if status == 200)
        assert answer_of(await s.result("db")).answer == ["pg", "SQLite"][winner]
        late = await s.answer(question["id"], {"option": 0})
        assert late.status_code == 409
        assert late.json()["error"]["code"] == "ALREADY_ANSWERED"
        assert "already" in late.json()["error"]["message"] or "answered" in late.text


async def test_an_unknown_question_is_a_clear_404() -> None:
    async with serving() as s:
        response = await s.answer("nope", {"option": 0})
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "UNKNOWN_QUESTION"
        dismiss = await s.client.post("/api/questions/nope/dismiss", json={})
        assert dismiss.status_code == 404


async def test_answering_a_withdrawn_question_is_refused_and_changes_nothing() -> None:
    async with serving() as s:
        controller = AbortController()
        s.ask_soon("db", DB.with_signal(controller.signal))
        (question,) = await s.pending(1)
        async with s.events() as events:
            controller.abort("the user closed the chat")
            removed = await events.until(lambda e: e["type"] == "removed")
        assert removed["reason"] == "withdrawn"
        assert "the user closed the chat" in removed["note"]
        error = await s.result("db")
        assert isinstance(error, UserInteractionError) and error.code == ErrorCode.ASK_ABORTED
        response = await s.answer(question["id"], {"option": 0})
        assert response.status_code == 409 and response.json()["error"]["code"] == "NOT_PENDING"
        assert "withdrawn" in response.json()["error"]["message"]


async def test_an_answer_in_the_same_turn_as_the_withdrawal_wins() -> None:
    """Invariant 6: the answer exists, so it is the result, not the withdrawal."""
    async with serving() as s:
        controller = AbortController()
        s.ask_soon("db", DB.with_signal(controller.signal))
        (question,) = await s.pending(1)
        controller.abort("too late")
        s.web.inbox.answer(question["id"], {"option": 1})  # same turn: no checkpoint between
        answer = answer_of(await s.result("db"))
        assert answer.answer == "SQLite"


async def test_a_withdrawal_before_the_answer_turn_refuses_the_answer() -> None:
    async with serving() as s:
        controller = AbortController()
        s.ask_soon("db", DB.with_signal(controller.signal))
        (question,) = await s.pending(1)
        controller.abort("gone")
        error = await s.result("db")
        assert isinstance(error, UserInteractionError) and error.code == ErrorCode.ASK_ABORTED
        with pytest.raises(Exception, match="no longer pending") as raised:
            s.web.inbox.answer(question["id"], {"option": 1})
        assert getattr(raised.value, "status", None) == 409


async def test_a_question_times_out_with_ask_timeout() -> None:
    async with serving(timeout=0.2) as s, s.events() as events:
        s.ask_soon("db", DB)
        removed = await events.until(lambda e: e["type"] == "removed")
        assert removed["reason"] == "timed_out"
        error = await s.result("db")
        assert isinstance(error, UserInteractionError) and error.code == ErrorCode.ASK_TIMEOUT


async def test_many_concurrent_askers_each_get_their_own_answer() -> None:
    async with serving() as s:
        count = 60
        for index in range(count):
            s.ask_soon(str(index), AskUserQuestionRequest(f"Question {index}?"))
        questions = await s.pending(count)
        by_text = {text: q["id"] for q in questions for text in texts(q)}

        async def answer(index: int) -> None:
            qid = by_text[f"Question {index}?"]
            response = await s.answer(qid, {"text": f"answer {index}"})
            assert response.status_code == 200

        async with anyio.create_task_group() as tg:
            for index in range(count):
                tg.start_soon(answer, index)
        for index in range(count):
            assert answer_of(await s.result(str(index))).answer == f"answer {index}"
        assert s.web.pending == 0


async def test_closing_the_scope_withdraws_every_question_from_every_page() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        s.ask_soon("free", FREE)
        await s.pending(2)
        async with s.events() as first, s.events() as second:
            await s.scope.aclose()
            for events in (first, second):
                seen = await events.rest()
                removed = [e for e in seen if e["type"] == "removed"]
                assert {e["reason"] for e in removed} <= {"withdrawn"}
                assert seen[-1]["type"] == "closing"
        for name in ("db", "free"):
            error = await s.result(name)
            assert isinstance(error, UserInteractionError) and error.code == ErrorCode.ASK_ABORTED


async def test_closing_the_server_under_a_provider_registered_elsewhere_aborts_the_ask() -> None:
    """The serving scope and the providing scope may differ: the questions still end."""
    from hotseam import Context, Scope
    from hotseam.interaction import USER_INTERACTION, ask
    from hotseam.providers.web import WebProvider

    context = Context("split")
    async with Scope("provides", context=context) as provides:
        serves = Scope("serves", context=context)
        async with serves:
            web = WebProvider.serve(serves, port=0)
            provides.provide(USER_INTERACTION, web)
            outcome: list[BaseException] = []
            done = anyio.Event()

            async def agent() -> None:
                try:
                    await ask(DB, context=context)
                except UserInteractionError as error:
                    outcome.append(error)
                done.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(agent)
                with anyio.fail_after(scaled(10)):
                    while web.pending == 0:  # noqa: ASYNC110 - "asked" has no event
                        await anyio.sleep(0.01)
                    await serves.aclose()
                    await done.wait()
        (error,) = outcome
        assert isinstance(error, UserInteractionError) and error.code == ErrorCode.ASK_ABORTED
        assert "withdrew" in error.message
        with pytest.raises(UserInteractionError) as late:
            await ask(DB, context=context)  # still registered, but closed: a clear failure
        assert late.value.code == ErrorCode.PROVIDER_FAILED and "closed" in late.value.message


async def test_the_loser_of_two_answers_hears_who_won_and_with_what() -> None:
    """Two tabs answer at once: every page hears which client won and what it answered,
    and the loser's 409 says so too (so its page never claims the answer as its own)."""
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        url = f"/api/questions/{question['id']}/answer"
        statuses: dict[str, httpx.Response] = {}

        async def answer(client: str, option: int) -> None:
            statuses[client] = await s.client.post(
                url, json={"option": option}, headers={"x-hotseam-client": client}
            )

        async with s.events() as events:
            await events.next()  # the snapshot
            async with anyio.create_task_group() as tg:
                tg.start_soon(answer, "tab-a", 0)
                tg.start_soon(answer, "tab-b", 1)
            removed = await events.until(lambda e: e["type"] == "removed")
        winner = next(client for client, reply in statuses.items() if reply.status_code == 200)
        loser = "tab-b" if winner == "tab-a" else "tab-a"
        label = {"tab-a": "Postgres", "tab-b": "SQLite"}[winner]
        assert removed["client"] == winner and removed["answer"] == said("Which database?", label)
        refused = statuses[loser]
        assert refused.status_code == 409
        assert refused.json()["error"] == {
            "code": "ALREADY_ANSWERED",
            "message": f"the question was already answered: {label}",
            "note": "answered",
            "client": winner,
            "answer": said("Which database?", label),
        }
        assert answer_of(await s.result("db")).answer == {"tab-a": "pg", "tab-b": "SQLite"}[winner]


async def test_a_typed_answer_is_shown_to_other_pages_cut_to_a_readable_length() -> None:
    async with serving() as s, s.events() as events:
        s.ask_soon("free", FREE)
        added = await events.until(lambda e: e["type"] == "added")
        text = "teal " * 100
        assert (await s.answer(added["question"]["id"], {"text": text})).status_code == 200
        removed = await events.until(lambda e: e["type"] == "removed")
        (item,) = removed["answer"]["answers"]
        shown = item["text"]
        assert item["labels"] == []
        assert len(shown) == 300 and shown.endswith("…") and text.startswith(shown[:-1])
        assert answer_of(await s.result("free")).answer == text


async def test_a_malformed_client_id_is_refused_and_changes_nothing() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        for client in ("", "x" * 65, "<script>", "tab a"):
            response = await s.client.post(
                f"/api/questions/{question['id']}/answer",
                json={"option": 0},
                headers={"x-hotseam-client": client},
            )
            assert response.status_code == 400, client
            assert "X-Hotseam-Client" in response.json()["error"]["message"]
        assert s.web.pending == 1


async def test_a_question_keeps_the_id_of_its_ask() -> None:
    """The id in the inbox is the ask's own (the ``ask.*`` log events carry it), so the
    next generation's inbox shows a re-asked question under the same id."""
    async with serving() as s:
        with structlog.testing.capture_logs() as logs:
            s.ask_soon("db", DB)
            (question,) = await s.pending(1)
        (started,) = [entry for entry in logs if entry["event"] == "ask.started"]
        assert question["id"] == started["question_id"]
        assert (await s.answer(question["id"], {"option": 1})).status_code == 200
        assert answer_of(await s.result("db")).answer == "SQLite"


async def test_an_open_question_that_another_provider_shows_is_503_not_404() -> None:
    """Between a reload's withdrawal and the re-ask (or while another provider shows it),
    a script holding the id is told to retry, not that the question never existed."""
    from hotseam import Context
    from hotseam.interaction import USER_INTERACTION, ask, current_ask

    asked: list[str] = []
    shown = anyio.Event()

    class Elsewhere:
        async def ask(self, request: AskUserQuestionRequest) -> Any:
            asked.append(str(pending.question_id if (pending := current_ask()) else None))
            shown.set()
            await anyio.sleep_forever()

    other = Context("elsewhere")
    async with serving() as s, Scope("other", context=other) as scope:
        scope.provide(USER_INTERACTION, Elsewhere())
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(ask, DB, context=other))
            with anyio.fail_after(scaled(10)):
                await shown.wait()
            response = await s.answer(asked[0], {"option": 0})
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "ASKED_ELSEWHERE"
            tg.cancel_scope.cancel()
        gone = await s.answer(asked[0], {"option": 0})
        assert gone.status_code == 404  # no such question open any more

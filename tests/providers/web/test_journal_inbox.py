"""The inbox of many daemons (JournalInbox) served over real HTTP, in one process.

Daemons are simulated with the journal's own API (register, start a run, record asks);
the cross-process races are in ``test_journal_inbox_fleet.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import pytest
from tests._timing import scaled

from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest, ErrorCode
from hotseam.interaction._journal import (
    AskRecord,
    AskState,
    DaemonRecord,
    Journal,
    RunRecord,
    open_journal,
)
from hotseam.providers._web._answers import InboxError
from hotseam.providers._web._inbox import Inbox
from hotseam.providers._web._journal_inbox import (
    CLOSING_NOTE,
    FleetInbox,
    JournalInbox,
    serve_journal_inbox,
)

from .conftest import DB, FREE, STRICT, EventReader, open_events, said, serving, texts
from .test_api import BAD_ANSWERS

pytestmark = pytest.mark.anyio


@dataclass
class Fleet:
    """A journal, the inbox serving it, and an API client holding the token."""

    journal: Journal
    served: FleetInbox
    client: httpx.AsyncClient

    async def daemon(
        self, name: str, *, agent: str | None = None, host: str = "build-1", pid: int = 4242
    ) -> tuple[DaemonRecord, RunRecord]:
        daemon = await self.journal.register_daemon(name, agent=agent, host=host, pid=pid)
        run = await self.journal.start_run(agent or name, daemon.id)
        return daemon, run

    async def ask(
        self, run: RunRecord, ask_id: str, request: AskUserQuestionRequest, seq: int = 0
    ) -> AskRecord:
        return await self.journal.record_ask(ask_id, run.id, seq, request)

    @asynccontextmanager
    async def events(self) -> AsyncIterator[EventReader]:
        async with open_events(self.served.port, self.served.token) as reader:
            yield reader

    async def shown(self, *ask_ids: str) -> None:
        """Until every one of ``ask_ids`` is on the pages (through the inbox's events)."""
        waiting = set(ask_ids)
        async with self.events() as events:
            while waiting:
                event = await events.until(lambda e: e["type"] in ("snapshot", "added"))
                is_snapshot = event["type"] == "snapshot"  # may be empty: the feed is behind
                questions = event["questions"] if is_snapshot else [event["question"]]
                waiting -= {question["id"] for question in questions}

    async def listed(self) -> list[dict[str, Any]]:
        response = await self.client.get("/api/questions")
        assert response.status_code == 200, response.text
        questions: list[dict[str, Any]] = response.json()["questions"]
        return questions

    async def post(
        self, ask_id: str, action: str, body: object = None, client: str | None = None
    ) -> httpx.Response:
        headers = {} if client is None else {"x-hotseam-client": client}
        return await self.client.post(
            f"/api/questions/{ask_id}/{action}", json={} if body is None else body, headers=headers
        )


@asynccontextmanager
async def fleet(url: str = "memory:", *, liveness: float = 30.0) -> AsyncIterator[Fleet]:
    async with (
        open_journal(url, liveness_timeout=liveness, poll_interval=0.05) as journal,
        serve_journal_inbox(journal, port=0) as served,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{served.port}",
            headers={"x-hotseam-token": served.token},
            timeout=scaled(10),
        ) as client,
    ):
        yield Fleet(journal, served, client)


def card_of(request: AskUserQuestionRequest) -> dict[str, Any]:
    """What a daemon's own inbox shows of ``request`` (its id, order and time aside)."""
    shown = Inbox().add(request).to_dict()
    return {key: value for key, value in shown.items() if key not in ("id", "seq", "askedAt")}


def added(question_id: str) -> Any:
    return lambda event: event["type"] == "added" and event["question"]["id"] == question_id


def changed(question_id: str, **fields: Any) -> Any:
    def match(event: dict[str, Any]) -> bool:
        if event["type"] != "changed" or event["question"]["id"] != question_id:
            return False
        question = event["question"]
        return all(
            question["daemon"].get(key, question.get(key)) == value for key, value in fields.items()
        )

    return match


def removed(question_id: str) -> Any:
    return lambda event: event["type"] == "removed" and event["id"] == question_id


async def test_every_pending_ask_of_every_daemon_is_listed_with_who_asks() -> None:
    async with fleet() as f:
        alpha, alpha_run = await f.daemon("alpha", agent="deployer", host="build-1", pid=101)
        _, beta_run = await f.daemon("beta", host="build-2", pid=202)
        await f.ask(alpha_run, "alpha-db", DB)
        await f.ask(beta_run, "beta-deploy", STRICT)
        await f.ask(alpha_run, "alpha-free", FREE, seq=1)
        await f.shown("alpha-db", "beta-deploy", "alpha-free")
        listed = await f.listed()
        assert [q["id"] for q in listed] == ["alpha-db", "beta-deploy", "alpha-free"]
        for question, request in zip(listed, (DB, STRICT, FREE), strict=True):
            # The same card a daemon's own inbox shows: question, header, options with
            # descriptions and the recommended one, custom answers allowed or not, agent.
            assert {k: question[k] for k in card_of(request)} == card_of(request)
            assert question["state"] == "pending"
        assert listed[0]["daemon"] == {
            "id": alpha.id,
            "name": "alpha",
            "host": "build-1",
            "pid": 101,
            "agent": "deployer",
            "up": True,
            "stopped": False,
        }
        assert listed[1]["daemon"]["name"] == "beta" and listed[1]["daemon"]["pid"] == 202
        assert listed[1]["daemon"]["host"] == "build-2" and listed[1]["daemon"]["agent"] is None
        assert listed[0]["run"] == {"id": alpha_run.id, "agent": "deployer"}
        assert listed[1]["run"]["id"] == beta_run.id


async def test_an_answer_is_recorded_in_the_journal_and_wakes_the_asker() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        await f.ask(run, "q1", DB)
        settled: list[AskRecord] = []
        async with anyio.create_task_group() as tasks, f.events() as events:
            await events.until(lambda e: e["type"] == "snapshot")

            async def wait() -> None:
                settled.append(await f.journal.wait_settled("q1"))

            tasks.start_soon(wait)
            response = await f.post("q1", "answer", {"option": 0}, client="tab-1")
            assert response.status_code == 200, response.text
            assert response.json() == {"ok": True, "outcome": "answered"}
            gone = await events.until(removed("q1"))
        assert gone["reason"] == "answered" and gone["client"] == "tab-1"
        assert gone["answer"] == said("Which database?", "Postgres") and "by" not in gone
        (ask,) = settled
        assert ask.state is AskState.ANSWERED and ask.settled_by == f.served.inbox.by
        assert ask.answer is not None and ask.answer.answer == "pg"
        assert ask.answer.option is not None and ask.answer.option.label == "Postgres"
        assert await f.listed() == []
        late = await f.post("q1", "answer", {"option": 1})
        assert late.status_code == 409 and late.json()["error"]["code"] == "ALREADY_ANSWERED"
        assert late.json()["error"]["client"] == "tab-1"


async def test_a_bad_answer_is_refused_as_a_daemons_own_inbox_refuses_it() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        await f.ask(run, "strict", STRICT)
        for body, status, code in BAD_ANSWERS:
            response = await f.client.post(
                "/api/questions/strict/answer",
                content=json.dumps(body),
                headers={"content-type": "application/json"},
            )
            assert response.status_code == status, (body, response.text)
            assert response.json()["error"]["code"] == code
            assert (await f.journal.get_ask("strict")).pending  # nothing changed
        assert (await f.post("strict", "answer", {"option": 1})).status_code == 200
        answer = (await f.journal.get_ask("strict")).answer
        assert answer is not None and answer.answer == "No"


async def test_dismissing_fails_the_ask_with_ask_cancelled() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        await f.ask(run, "q1", DB)
        response = await f.post("q1", "dismiss", client="tab-1")
        assert response.status_code == 200 and response.json()["outcome"] == "dismissed"
        ask = await f.journal.get_ask("q1")
        assert (ask.state, ask.code) == (AskState.FAILED, ErrorCode.ASK_CANCELLED)
        assert ask.settled_by == f.served.inbox.by
        again = await f.post("q1", "answer", {"option": 0})
        assert again.status_code == 409 and again.json()["error"]["code"] == "NOT_PENDING"


async def test_two_tabs_answering_at_once_one_wins_and_the_other_hears_which_tab() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        await f.ask(run, "q1", DB)
        replies: dict[str, httpx.Response] = {}
        go = anyio.Event()

        async def answer(client: str, option: int) -> None:
            await go.wait()
            replies[client] = await f.post("q1", "answer", {"option": option}, client=client)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(answer, "tab-a", 0)
            tasks.start_soon(answer, "tab-b", 1)
            await anyio.sleep(0)
            go.set()
        statuses = sorted(reply.status_code for reply in replies.values())
        assert statuses == [200, 409]
        winner = next(c for c, reply in replies.items() if reply.status_code == 200)
        loser = next(reply for reply in replies.values() if reply.status_code == 409)
        error = loser.json()["error"]
        assert error["code"] == "ALREADY_ANSWERED" and error["client"] == winner
        recorded = (await f.journal.get_ask("q1")).answer
        assert recorded is not None and recorded.option is not None
        assert error["answer"] == said("Which database?", recorded.option.label)


async def test_a_daemon_that_stops_beating_or_is_stopped_shows_down_and_still_takes_answers() -> (
    None
):
    async with fleet(liveness=0.6) as f:
        alpha, alpha_run = await f.daemon("alpha")  # never beats again
        beta, beta_run = await f.daemon("beta")
        await f.ask(alpha_run, "a1", STRICT)
        await f.ask(beta_run, "b1", FREE)
        async with anyio.create_task_group() as tasks, f.events() as events:
            tasks.start_soon(lambda: f.journal.keep_alive(beta.id, interval=0.1))
            snapshot = await events.until(lambda e: e["type"] == "snapshot")
            assert all(q["daemon"]["up"] for q in snapshot["questions"])
            down = await events.until(changed("a1", up=False))
            assert down["question"]["daemon"]["stopped"] is False
            listed = {q["id"]: q["daemon"] for q in await f.listed()}
            assert listed["a1"]["up"] is False
            assert listed["b1"]["up"] is True  # past the liveness timeout: its beats count

            response = await f.post("a1", "answer", {"option": 0}, client="tab-1")
            assert response.status_code == 200, response.text
            assert response.json()["heldFor"] == "alpha"
            gone = await events.until(removed("a1"))
            assert gone["heldFor"] == "alpha" and "held for alpha's resume" in gone["note"]

            tasks.cancel_scope.cancel()
            await f.journal.stop_daemon(beta.id)
            stopped = await events.until(changed("b1", up=False))
            assert stopped["question"]["daemon"]["stopped"] is True
            typed = await f.post("b1", "answer", {"text": "teal"})
            assert typed.json() == {"ok": True, "outcome": "answered", "heldFor": "beta"}
        ask = await f.journal.get_ask("a1")
        assert ask.state is AskState.ANSWERED and ask.answer is not None
        assert ask.answer.answer == "Yes"
        assert alpha.id != beta.id


async def test_a_run_resumed_by_a_restarted_daemon_shows_its_new_asker() -> None:
    async with fleet(liveness=1.2) as f:  # listed again every 0.3 s
        old, run = await f.daemon("alpha", pid=101)
        await f.ask(run, "q1", DB)
        async with f.events() as events:
            await events.until(lambda e: e["type"] == "snapshot")
            await f.journal.stop_daemon(old.id)  # killed for a deploy...
            await events.until(changed("q1", up=False))
            new = await f.journal.register_daemon("alpha", host="build-1", pid=202)
            await f.journal.claim_run(run.id, new.id)  # ...and resumed by its next start
            moved = await events.until(changed("q1", up=True))
        assert moved["question"]["daemon"]["pid"] == 202
        assert moved["question"]["daemon"]["id"] == new.id
        assert [q["daemon"]["pid"] for q in await f.listed()] == [202]


async def test_an_abandoned_runs_question_stays_marked_until_it_is_cleared() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        _, other = await f.daemon("beta")
        await f.ask(run, "gone", DB)
        await f.ask(other, "live", FREE)
        async with f.events() as events:
            await events.until(lambda e: e["type"] == "snapshot")
            await f.journal.abandon_run(run.id)  # the daemon started afresh: nobody owns it
            marked = await events.until(changed("gone", state="abandoned"))
            assert texts(marked["question"]) == ["Which database?"]
            assert {q["id"]: q["state"] for q in await f.listed()} == {
                "gone": "abandoned",
                "live": "pending",
            }
            refused = await f.post("gone", "answer", {"option": 0})
            assert refused.status_code == 409
            assert refused.json()["error"]["code"] == "NOT_PENDING"
            assert "abandoned" in refused.json()["error"]["message"]
            pending = await f.post("live", "clear")
            assert pending.status_code == 409
            assert pending.json()["error"]["code"] == "NOT_ABANDONED"

            cleared = await f.post("gone", "clear", client="tab-1")
            assert cleared.json() == {"ok": True, "outcome": "cleared"}
            gone = await events.until(removed("gone"))
            assert (gone["reason"], gone["note"]) == ("cleared", "cleared")
        assert [q["id"] for q in await f.listed()] == ["live"]
        assert (await f.post("gone", "clear")).status_code == 200  # cleared already
        assert (await f.post("nope", "clear")).status_code == 404
        assert await f.journal.list_asks(states={AskState.ABANDONED}) == []  # removed


async def test_a_question_settled_by_another_process_leaves_every_page_saying_how() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        for seq, ask_id in enumerate(("answered", "timed-out", "dismissed", "withdrawn")):
            await f.ask(run, ask_id, DB, seq=seq)
        async with f.events() as events:
            await events.until(lambda e: e["type"] == "snapshot")
            other = "inbox elsewhere:7"
            await f.journal.answer_ask("answered", AskUserQuestionAnswer("sqlite"), by=other)
            gone = await events.until(removed("answered"))
            assert (gone["reason"], gone["by"], gone["client"]) == ("answered", other, None)
            assert gone["answer"] == said("Which database?", text="sqlite")
            await f.journal.settle_ask("timed-out", AskState.FAILED, code=ErrorCode.ASK_TIMEOUT)
            assert (await events.until(removed("timed-out")))["reason"] == "timed_out"
            await f.journal.settle_ask(
                "dismissed", AskState.FAILED, code=ErrorCode.ASK_CANCELLED, by=other
            )
            assert (await events.until(removed("dismissed")))["reason"] == "dismissed"
            await f.journal.finish_run(run.id)  # the agent returned: its asks are withdrawn
            assert (await events.until(removed("withdrawn")))["reason"] == "withdrawn"
        late = await f.post("answered", "answer", {"option": 0})
        error = late.json()["error"]
        assert (late.status_code, error["code"], error["by"]) == (409, "ALREADY_ANSWERED", other)
        assert other in error["message"]
        assert await f.listed() == []


async def test_a_burst_of_asks_is_listed_whole() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        async with f.events() as events:
            await events.until(lambda e: e["type"] == "snapshot")
            for seq in range(60):  # more than one batch: listed again, not one by one
                await f.ask(run, f"q{seq}", FREE, seq=seq)
            await events.until(added("q59"))
        assert [q["id"] for q in await f.listed()] == [f"q{seq}" for seq in range(60)]


async def test_an_ask_the_inbox_has_not_heard_of_yet_is_answered_from_the_journal() -> None:
    async with open_journal("memory:") as journal:
        daemon = await journal.register_daemon("alpha")
        run = await journal.start_run("alpha", daemon.id)
        await journal.record_ask("fresh", run.id, 0, STRICT)
        inbox = JournalInbox(journal, by="inbox test:1")  # not following: an empty mirror
        assert await inbox.submit_answer("fresh", {"option": 1}, client=None) == {}
        ask = await journal.get_ask("fresh")
        assert ask.answer is not None and ask.answer.answer == "No"
        assert ask.settled_by == "inbox test:1"
        with pytest.raises(InboxError) as unknown:
            await inbox.submit_answer("nope", {"option": 1}, client=None)
        assert (unknown.value.status, unknown.value.code) == (404, "UNKNOWN_QUESTION")


async def test_stopping_the_inbox_tells_every_open_page() -> None:
    async with open_journal("memory:") as journal:
        async with serve_journal_inbox(journal, port=0) as served:
            reader_cm = open_events(served.port, served.token)
            reader = await reader_cm.__aenter__()
            try:
                await reader.until(lambda e: e["type"] == "snapshot")
            except BaseException:
                await reader_cm.__aexit__(None, None, None)
                raise
        try:
            rest = await reader.rest()
        finally:
            await reader_cm.__aexit__(None, None, None)
        assert rest == [{"type": "closing", "note": CLOSING_NOTE}]


async def test_a_process_own_inbox_has_nothing_to_clear() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        refused = await s.client.post(f"/api/questions/{question['id']}/clear", json={})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "NOT_ABANDONED"
        assert s.web.pending == 1
        assert (await s.client.post("/api/questions/nope/clear", json={})).status_code == 404
        assert (await s.answer(question["id"], {"option": 1})).status_code == 200


async def test_the_fleet_inbox_has_the_guard_of_a_daemons_own_inbox() -> None:
    async with fleet() as f:
        _, run = await f.daemon("alpha")
        await f.ask(run, "q1", DB)
        token = f.served.token
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{f.served.port}") as bare:
            assert (await bare.get("/api/questions")).status_code == 401
            rebound = await bare.get(
                "/api/questions", headers={"x-hotseam-token": token, "host": "evil.example"}
            )
            assert rebound.status_code == 421
            foreign = await bare.post(
                "/api/questions/q1/answer",
                json={"option": 0},
                headers={"x-hotseam-token": token, "origin": "http://evil.example"},
            )
            assert foreign.status_code == 403
            form = await bare.post(
                "/api/questions/q1/answer",
                content="option=0",
                headers={
                    "x-hotseam-token": token,
                    "content-type": "application/x-www-form-urlencoded",
                },
            )
            assert form.status_code == 415
            page = await bare.get(f"/?token={token}")
            assert page.status_code == 200 and "hotseam inbox" in page.text
            assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
        assert (await f.journal.get_ask("q1")).pending  # nothing got through
    async with open_journal("memory:") as journal:
        with pytest.raises(ValueError, match="not a loopback address"):
            async with serve_journal_inbox(journal, host="0.0.0.0", port=0):
                pass


async def test_a_daemons_own_inbox_tells_its_pages_an_answer_came_from_another_process() -> None:
    """What the daemon does when the journal says another process answered (``by``)."""
    async with serving() as s:
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        (entry,) = list(s.web.inbox)
        async with s.events() as events:
            await events.until(lambda e: e["type"] == "snapshot")
            entry.answer = AskUserQuestionAnswer("sqlite")
            assert s.web.inbox.settle(entry, "answered", "answered", by="inbox b:7")
            gone = await events.until(removed(question["id"]))
        assert (gone["by"], gone["answer"], gone["client"]) == (
            "inbox b:7",
            said("Which database?", text="sqlite"),
            None,
        )
        assert (await s.result("db")).answer == "sqlite"
        late = await s.answer(question["id"], {"option": 0})
        assert late.status_code == 409 and late.json()["error"]["by"] == "inbox b:7"

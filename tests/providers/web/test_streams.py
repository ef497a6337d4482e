"""The live event stream: what pages hear, and pages that misbehave cannot hurt the process."""

from __future__ import annotations

import socket
from collections.abc import Callable

import anyio
import anyio.abc
import pytest
from tests._timing import scaled

from hotseam.interaction import AskUserQuestionRequest
from hotseam.providers._web._app import MAX_STREAMS

from .conftest import DB, FREE, Served, answer_of, open_events, said, serving, texts

pytestmark = pytest.mark.anyio


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a condition of the server that has no event of its own (polled, bounded)."""
    with anyio.fail_after(scaled(10)):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(0.01)


async def test_the_stream_starts_with_a_snapshot_then_tells_every_change() -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        await s.pending(1)
        async with s.events() as events:
            snapshot = await events.next()
            assert snapshot["type"] == "snapshot"
            assert [texts(q) for q in snapshot["questions"]] == [["Which database?"]]
            s.ask_soon("free", FREE)
            added = await events.next()
            assert added["type"] == "added" and texts(added["question"]) == ["What colour?"]
            assert (
                await s.answer(snapshot["questions"][0]["id"], {"option": 1})
            ).status_code == 200
            removed = await events.next()
            assert removed == {
                "type": "removed",
                "id": snapshot["questions"][0]["id"],
                "reason": "answered",
                "note": "answered",
                "client": None,  # a script that sent no X-Hotseam-Client
                "answer": said("Which database?", "SQLite"),
            }
            dismiss = await s.client.post(f"/api/questions/{added['question']['id']}/dismiss")
            assert dismiss.status_code == 415  # no JSON body: refused
            dismiss = await s.client.post(
                f"/api/questions/{added['question']['id']}/dismiss",
                json={},
                headers={"x-hotseam-client": "tab-2"},
            )
            assert dismiss.status_code == 200
            dismissed = await events.next()
            assert dismissed["reason"] == "dismissed" and dismissed["client"] == "tab-2"
            assert "answer" not in dismissed
        assert answer_of(await s.result("db")).answer == "SQLite"


async def test_a_page_that_disconnects_leaves_nothing_behind() -> None:
    async with serving() as s:
        for _ in range(5):
            async with s.events() as events:
                await events.next()
        await _until(lambda: s.web.inbox.subscribers == 0, "streams released")
        s.ask_soon("db", DB)
        (question,) = await s.pending(1)
        assert (await s.answer(question["id"], {"option": 0})).status_code == 200


async def test_there_is_a_bound_on_open_streams() -> None:
    async with serving() as s, anyio.create_task_group() as tg:
        opened = anyio.Event()
        release = anyio.Event()
        count = 0

        async def hold() -> None:
            nonlocal count
            async with s.events() as events:
                await events.next()
                count += 1
                if count == MAX_STREAMS:
                    opened.set()
                await release.wait()

        for _ in range(MAX_STREAMS):
            tg.start_soon(hold)
        with anyio.fail_after(scaled(10)):
            await opened.wait()
        refused = await s.client.get("/api/events", params={"token": s.web.token})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "TOO_MANY_STREAMS"
        release.set()


async def _never_reading(s: Served) -> anyio.abc.SocketStream:
    stream = await anyio.connect_tcp("127.0.0.1", s.web.port)
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    request = (
        f"GET /api/events?token={s.web.token} HTTP/1.1\r\nHost: 127.0.0.1:{s.web.port}\r\n\r\n"
    )
    await stream.send(request.encode())
    return stream


async def test_a_page_that_never_reads_is_dropped_and_blocks_nobody() -> None:
    async with serving() as s:
        stuck = [await _never_reading(s) for _ in range(3)]
        try:
            await _until(lambda: s.web.inbox.subscribers == 3, "stuck streams subscribed")
            big = "x" * 4000
            for index in range(400):  # far more than a stream's buffer and a socket's
                s.ask_soon(str(index), AskUserQuestionRequest(f"{big} {index}?"))
            await _until(lambda: s.web.pending == 400, "questions asked")
            # Every stuck page was dropped (it reconnects and gets a snapshot when it reads).
            await _until(lambda: s.web.inbox.subscribers == 0, "stuck streams dropped")
            with anyio.fail_after(scaled(5)):  # the loop and the API still serve promptly
                listed = (await s.client.get("/api/questions")).json()["questions"]
                (first,) = [q for q in listed if texts(q)[-1].endswith(" 0?")]
                response = await s.answer(first["id"], {"text": "still here"})
            assert response.status_code == 200
            assert answer_of(await s.result("0")).answer == "still here"
        finally:
            for stream in stuck:
                await stream.aclose()


async def test_a_dropped_page_hears_overflow_before_the_stream_ends() -> None:
    async with serving() as s, open_events(s.web.port, s.web.token) as events:
        assert (await events.next())["type"] == "snapshot"
        for index in range(300):  # nobody reads meanwhile: the buffer (256) overflows
            s.web.inbox.add(AskUserQuestionRequest(f"Q{index}?"))
        seen = await events.rest()
        assert seen[-1] == {"type": "overflow"}
        assert s.web.inbox.subscribers == 0
        for entry in list(s.web.inbox):
            s.web.inbox.settle(entry, "withdrawn", "test over")


async def test_a_half_sent_request_does_not_wedge_the_server() -> None:
    async with serving() as s:
        stream = await anyio.connect_tcp("127.0.0.1", s.web.port)
        try:
            await stream.send(b"POST /api/questions/x/answer HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            garbage = await anyio.connect_tcp("127.0.0.1", s.web.port)
            async with garbage:
                await garbage.send(b"\x00\xff not http at all\r\n\r\n")
                with anyio.fail_after(scaled(5)):
                    reply = await garbage.receive()
                assert reply.startswith(b"HTTP/1.1 400")
            with anyio.fail_after(scaled(5)):
                assert (await s.client.get("/api/questions")).status_code == 200
        finally:
            await stream.aclose()

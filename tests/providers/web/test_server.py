"""The inbox's server: idle and refused connections closed, apps swapped under open
connections, a graceful stop however the serving scope ends. Real sockets, both backends."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import h11
import pytest
from structlog.testing import capture_logs
from tests._timing import scaled

from hotseam import Context, Scope
from hotseam.interaction import USER_INTERACTION
from hotseam.providers._web._server import Listener, WebServer
from hotseam.providers.web import WebProvider

from .conftest import DB, open_events, serving

pytestmark = pytest.mark.anyio


class Client:
    """One HTTP/1.1 connection (h11 on a plain socket): what it sends, what comes back."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.connection = h11.Connection(h11.CLIENT)

    async def request(
        self, target: str, *, port: int, method: str = "GET", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        if self.connection.our_state is h11.DONE:
            self.connection.start_next_cycle()
        head = h11.Request(
            method=method,
            target=target,
            headers=[("host", f"127.0.0.1:{port}"), *(headers or {}).items()],
        )
        end = h11.EndOfMessage()
        await self.stream.send(self.connection.send(head) + self.connection.send(end))
        status, fields, body = 0, {}, b""
        with anyio.fail_after(scaled(10)):
            while True:
                event = self.connection.next_event()
                if event is h11.NEED_DATA:
                    self.connection.receive_data(await self.stream.receive())
                elif isinstance(event, h11.Response):
                    status = event.status_code
                    fields = {k.decode(): v.decode() for k, v in event.headers}
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    return status, fields, body

    async def closed_by_server(self) -> bool:
        """True once the server closes the connection (EOF) with nothing more sent."""
        with anyio.fail_after(scaled(10)):
            try:
                data = await self.stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return True
        return data == b""


@asynccontextmanager
async def connected(port: int) -> AsyncIterator[Client]:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        yield Client(stream)


def text_app(text: str) -> Any:
    """A tiny ASGI app answering ``text``."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = text.encode()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app


@asynccontextmanager
async def server(**options: Any) -> AsyncIterator[WebServer]:
    web = WebServer(Listener("127.0.0.1", 0), **options)
    async with anyio.create_task_group() as tg:
        web.start(tg)
        try:
            yield web
        finally:
            await web.aclose()


async def test_a_connection_that_never_sends_a_whole_request_is_closed_when_idle() -> None:
    async with server(idle_timeout=0.3) as web:
        web.mount(text_app("hello"))
        port = web.listener.port
        async with connected(port) as silent, connected(port) as trickling:
            await trickling.stream.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no end
            started = anyio.current_time()
            assert await silent.closed_by_server()
            assert await trickling.closed_by_server()
            assert anyio.current_time() - started < scaled(3)
        async with connected(port) as kept:  # served between idle periods, then closed too
            assert (await kept.request("/", port=port))[2] == b"hello"
            assert await kept.closed_by_server()


async def test_the_idle_timer_survives_an_app_that_cancels_itself_after_its_response() -> None:
    """The event stream ends its response inside a task group that it cancels once the
    page's disconnect arrives (which the end of the response itself brings): the kept-alive
    connection still gets its idle timeout (Hypercorn starts that timer inside ``send``)."""

    async def streaming_app(scope: Any, receive: Any, send: Any) -> None:
        async with anyio.create_task_group() as tg:

            async def until_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            tg.start_soon(until_disconnect)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"data", "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            await anyio.sleep_forever()  # until the disconnect cancels it

    async with server(idle_timeout=0.3) as web:
        web.mount(streaming_app)
        port = web.listener.port
        async with connected(port) as client:
            assert (await client.request("/", port=port))[2] == b"data"
            assert await client.closed_by_server()


async def test_a_request_refused_for_its_token_ends_its_connection() -> None:
    context = Context("web-test")
    async with Scope("web-ui", context=context) as scope:
        web = WebProvider.serve(scope, port=0)
        async with connected(web.port) as client:
            status, headers, _ = await client.request("/api/questions?token=wrong", port=web.port)
            assert status == 401 and headers["connection"] == "close"
            assert await client.closed_by_server()
        async with connected(web.port) as client:  # a good request keeps its connection
            target = f"/api/questions?token={web.token}"
            for _ in range(2):
                status, headers, _ = await client.request(target, port=web.port)
                assert status == 200 and "connection" not in headers


async def test_a_swap_keeps_connections_finishes_old_requests_and_holds_new_ones() -> None:
    async with server() as web:
        port = web.listener.port
        hold: list[anyio.Event] = []  # the old app's requests wait for this while it is set

        async def old_app(scope: Any, receive: Any, send: Any) -> None:
            if hold:
                await hold[0].wait()
            await text_app("old")(scope, receive, send)

        first = web.mount(old_app)
        results: dict[str, bytes] = {}
        async with (
            connected(port) as kept,
            connected(port) as slow,
            connected(port) as during,
            anyio.create_task_group() as tg,
        ):
            assert (await kept.request("/", port=port))[2] == b"old"  # before: kept-alive

            async def request(name: str, client: Client) -> None:
                results[name] = (await client.request("/", port=port))[2]

            hold.append(anyio.Event())
            tg.start_soon(request, "slow", slow)
            await anyio.wait_all_tasks_blocked()
            assert first.requests == 1
            unmounted = anyio.Event()

            async def unmount() -> None:
                await web.unmount(first)
                unmounted.set()

            tg.start_soon(unmount)
            tg.start_soon(request, "during", during)  # no app mounted: it waits
            await anyio.wait_all_tasks_blocked()
            assert "during" not in results and not unmounted.is_set()
            arrived = anyio.Event()

            async def new_app(scope: Any, receive: Any, send: Any) -> None:
                await text_app("new")(scope, receive, send)
                arrived.set()

            web.mount(new_app)
            with anyio.fail_after(scaled(10)):
                await arrived.wait()
            await anyio.wait_all_tasks_blocked()
            assert results["during"] == b"new"
            assert not unmounted.is_set()  # the old app's request is still running
            hold[0].set()
            with anyio.fail_after(scaled(10)):
                await unmounted.wait()
            await anyio.wait_all_tasks_blocked()
            assert results["slow"] == b"old"  # finished on the app that started it
            assert (await kept.request("/", port=port))[2] == b"new"  # same connection


async def test_a_slow_request_of_the_old_app_is_not_cut_by_a_swap() -> None:
    """A busy machine makes a request of the unmounted app outlast the grace while it waits
    on nothing of its peer (its body read, its response not begun): it still gets its
    response on its kept-alive connection; only a request waiting on its peer is cut."""
    gate = anyio.Event()
    began = anyio.Event()

    async def old_app(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/slow":
            began.set()
            await gate.wait()  # the machine is busy: the app takes its time
        await text_app("old")(scope, receive, send)

    async with server() as web:
        port = web.listener.port
        first = web.mount(old_app)
        async with connected(port) as kept:
            assert (await kept.request("/", port=port))[2] == b"old"
            results: dict[str, Any] = {}

            async def slow() -> None:
                results["slow"] = await kept.request("/slow", port=port)

            async def unmount() -> None:
                results["cut"] = await web.unmount(first, grace=0.05)

            with anyio.fail_after(scaled(10)):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(slow)
                    await began.wait()
                    tg.start_soon(unmount)
                    await anyio.sleep(0.3)  # the slowness: six times the grace (0.05 s)
                    assert "cut" not in results  # still waiting for the slow request
                    gate.set()
            assert results["slow"][2] == b"old"
            assert results["cut"] == 0
            web.mount(text_app("new"))
            assert (await kept.request("/", port=port))[2] == b"new"  # the same connection


async def test_a_client_gone_before_its_body_was_read_is_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A POST whose client goes away before the body arrives (a cancelled call, a closed
    page; likelier on a busy machine) ends quietly: no "Error in ASGI Framework"."""
    async with serving() as served:
        port = served.web.port
        async with connected(port) as gone:
            head = h11.Request(
                method="POST",
                target="/api/questions/q1/answer",
                headers=[
                    ("host", f"127.0.0.1:{port}"),
                    ("x-hotseam-token", served.web.token),
                    ("content-type", "application/json"),
                    ("content-length", "100"),
                ],
            )
            await gone.stream.send(gone.connection.send(head) + b'{"opt')
            await anyio.wait_all_tasks_blocked()  # the app waits for the rest of the body
        await anyio.wait_all_tasks_blocked()
        response = await served.client.get("/api/questions")  # the server serves on
        assert response.status_code == 200
    errors = [  # hotseam's own (asyncio's debug mode may call a step slow)
        record
        for record in caplog.records
        if record.levelno >= logging.WARNING and record.name.startswith("hotseam")
    ]
    assert not errors, [record.getMessage() for record in errors]


async def test_requests_waiting_for_an_app_get_503_when_the_server_stops() -> None:
    async with server() as web:
        port = web.listener.port
        async with connected(port) as client, anyio.create_task_group() as tg:
            answer: list[tuple[int, dict[str, str], bytes]] = []

            async def ask() -> None:
                answer.append(await client.request("/", port=port))

            tg.start_soon(ask)
            await anyio.wait_all_tasks_blocked()
            await web.aclose()
        ((status, headers, body),) = answer
        assert status == 503 and headers["connection"] == "close" and b"CLOSED" in body
        assert web.listener.closed


async def test_a_cancelled_serving_scope_stops_gracefully_and_pages_hear_why() -> None:
    """What SIGTERM does to ``hotseam run --web``: the task running the scope is cancelled,
    with an event stream and a kept-alive connection open."""
    context = Context("web-test")
    ready = anyio.Event()
    served: list[WebProvider] = []
    with capture_logs() as logs:
        async with anyio.create_task_group() as tg:
            stop = anyio.CancelScope()

            async def run() -> None:
                with stop:
                    async with Scope("web-ui", context=context) as scope:
                        web = WebProvider.serve(scope, port=0)
                        scope.provide(USER_INTERACTION, web)
                        served.append(web)
                        ready.set()
                        await anyio.sleep_forever()

            tg.start_soon(run)
            await ready.wait()
            (web,) = served
            web.inbox.add(DB)
            async with (
                open_events(web.port, web.token) as page,
                connected(web.port) as kept,
            ):
                assert (await page.next())["type"] == "snapshot"
                target = f"/api/questions?token={web.token}"
                assert (await kept.request(target, port=web.port))[0] == 200
                stop.cancel()
                rest = await page.rest()  # ends cleanly (EndOfMessage), not cut
                assert await kept.closed_by_server()
    assert rest[-1] == {"type": "closing", "note": rest[-1]["note"]}
    assert "stopped" in rest[-1]["note"]
    assert [event["type"] for event in rest] == ["removed", "closing"]
    assert web.listener.closed
    assert not [log for log in logs if log["log_level"] == "error"], logs


async def test_a_peer_that_stops_reading_holds_up_neither_a_swap_nor_a_stop() -> None:
    """A response that waits for a peer that never reads is cut after the grace: a reload
    and a stop still end in bounded time (Hypercorn's trio server writes shielded)."""
    writing = anyio.Event()

    async def endless(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        writing.set()
        while True:
            await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})

    async with server() as web:
        port = web.listener.port
        mount = web.mount(endless)
        async with connected(port) as deaf:
            request = h11.Request(method="GET", target="/", headers=[("host", "127.0.0.1")])
            await deaf.stream.send(deaf.connection.send(request))
            await writing.wait()
            await anyio.wait_all_tasks_blocked()  # the socket's buffers are full: it waits
            assert mount.requests == 1
            with anyio.fail_after(scaled(5)):
                assert await web.unmount(mount, grace=0.2) == 1
            assert mount.requests == 0
            second = web.mount(endless)
            writing = anyio.Event()
            async with connected(port) as deaf_too:
                await deaf_too.stream.send(deaf_too.connection.send(request))
                await writing.wait()
                await anyio.wait_all_tasks_blocked()
                assert second.requests == 1
                with anyio.fail_after(scaled(5)):
                    await web.aclose(grace=0.2)
                assert second.requests == 0

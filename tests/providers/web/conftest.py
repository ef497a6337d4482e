"""Helpers for the web inbox tests: a served provider, an API client, an event reader."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import h11
import httpx
from tests._timing import scaled

from hotseam import Agent, Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ask,
)
from hotseam.providers.web import WebProvider

PLANNER = Agent("planner", "Planner")

DB = AskUserQuestionRequest(
    "Which database?",
    header="Storage",
    options=(
        AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True),
        AskUserQuestionOption("SQLite", description="One file, zero setup"),
    ),
    agent=PLANNER,
)
STRICT = AskUserQuestionRequest(
    "Deploy now?",
    header="Deploy",
    options=(AskUserQuestionOption("Yes"), AskUserQuestionOption("No")),
    allow_custom=False,
)
FREE = AskUserQuestionRequest("What colour?", header="Theme")


def texts(card: dict[str, Any]) -> list[str]:
    """The text of each question of a card (an ask of one question is a list of one)."""
    return [item["question"] for item in card["questions"]]


def said(question: str, *labels: str, text: str | None = None, id: str = "q1") -> dict[str, Any]:
    """What pages are told an ask of one question was answered with: the labels chosen,
    the text typed (one item per question, as for an ask of several)."""
    item: dict[str, Any] = {"id": id, "question": question, "labels": list(labels)}
    if text is not None:
        item["text"] = text
    return {"answers": [item]}


@dataclass
class Served:
    """A running web provider, its context, and an API client holding the token."""

    web: WebProvider
    context: Context
    scope: Scope
    client: httpx.AsyncClient
    tasks: Any
    results: dict[str, Any] = field(default_factory=dict)
    finished: dict[str, anyio.Event] = field(default_factory=dict)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.web.port}"

    def ask_soon(self, name: str, request: AskUserQuestionRequest, **kwargs: Any) -> None:
        """Start ``ask(request)``; its answer or error lands in ``results[name]``."""

        done = self.finished[name] = anyio.Event()

        async def run() -> None:
            try:
                self.results[name] = await ask(request, context=self.context, **kwargs)
            except Exception as error:
                self.results[name] = error
            finally:
                done.set()

        self.tasks.start_soon(run)

    async def pending(self, count: int) -> list[dict[str, Any]]:
        """Wait until ``count`` questions are pending (through the inbox's own events)."""
        with anyio.fail_after(scaled(10)):
            async with self.events() as events:
                while True:
                    event = await events.next()
                    if event["type"] == "snapshot":
                        questions = list(event["questions"])
                    elif event["type"] == "added":
                        questions.append(event["question"])
                    if len(questions) >= count:
                        return questions

    async def result(self, name: str) -> Any:
        """The outcome of an ``ask_soon`` once it has one."""
        with anyio.fail_after(scaled(10)):
            await self.finished[name].wait()
        return self.results[name]

    @asynccontextmanager
    async def events(self, **headers: str) -> AsyncIterator[EventReader]:
        """Open the event stream (h11 on a plain socket: httpx's line iterators leave
        unfinished async generators behind, which trio reports)."""
        async with open_events(self.web.port, self.web.token, headers) as reader:
            yield reader

    async def answer(self, question_id: str, body: object) -> httpx.Response:
        return await self.client.post(f"/api/questions/{question_id}/answer", json=body)


class EventReader:
    """Reads Server-Sent Events as dicts from an h11 client connection."""

    def __init__(self, stream: anyio.abc.SocketStream, connection: h11.Connection) -> None:
        self.stream = stream
        self.connection = connection
        self.status = 0
        self._buffer = b""
        self._ended = False

    async def _event(self) -> object:
        while True:
            event = self.connection.next_event()
            if event is not h11.NEED_DATA:
                return event
            data = await self.stream.receive() if not self._ended else b""
            self.connection.receive_data(data)

    async def start(self) -> None:
        event = await self._event()
        assert isinstance(event, h11.Response), event
        self.status = event.status_code

    async def next(self) -> dict[str, Any]:
        """The next ``data:`` event; raises ``StopAsyncIteration`` when the stream ends."""
        while True:
            block, sep, rest = self._buffer.partition(b"\n\n")
            if sep:
                self._buffer = rest
                for line in block.split(b"\n"):
                    if line.startswith(b"data: "):
                        event: dict[str, Any] = json.loads(line[6:])
                        return event
                continue
            try:
                item = await self._event()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                raise StopAsyncIteration from None
            if isinstance(item, h11.Data):
                self._buffer += bytes(item.data)
            elif isinstance(item, h11.EndOfMessage | h11.ConnectionClosed):
                raise StopAsyncIteration

    async def until(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        with anyio.fail_after(scaled(10)):
            while True:
                event = await self.next()
                if predicate(event):
                    return event

    async def rest(self) -> list[dict[str, Any]]:
        """Every event until the stream ends."""
        seen = []
        with anyio.fail_after(scaled(10)):
            while True:
                try:
                    seen.append(await self.next())
                except StopAsyncIteration:
                    return seen


@asynccontextmanager
async def open_events(
    port: int, token: str, headers: dict[str, str] | None = None
) -> AsyncIterator[EventReader]:
    """GET /api/events?token=... on a fresh connection."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        connection = h11.Connection(h11.CLIENT)
        request = h11.Request(
            method="GET",
            target=f"/api/events?token={token}",
            headers=[("host", f"127.0.0.1:{port}"), *(headers or {}).items()],
        )
        await stream.send(connection.send(request) + connection.send(h11.EndOfMessage()))
        reader = EventReader(stream, connection)
        await reader.start()
        assert reader.status == 200, reader.status
        yield reader


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[Served]:
    """A WebProvider on a free loopback port, providing the seam in a fresh context."""
    context = Context("web-test")
    options.setdefault("port", 0)
    async with Scope("web-ui", context=context) as scope:
        web = WebProvider.serve(scope, **options)
        scope.provide(USER_INTERACTION, web)
        async with (
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{web.port}",
                headers={"x-hotseam-token": web.token},
                timeout=scaled(10),
            ) as client,
            anyio.create_task_group() as tasks,
        ):
            served = Served(web, context, scope, client, tasks)
            yield served
            tasks.cancel_scope.cancel()


def answer_of(value: object) -> AskUserQuestionAnswer:
    assert isinstance(value, AskUserQuestionAnswer), value
    return value

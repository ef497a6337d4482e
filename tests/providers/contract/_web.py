"""The web inbox's surface: a page on the real server over loopback HTTP.

Each generation of the provider module serves the inbox with ``WebProvider.serve`` (the
listening socket is carried from one generation to the next, as a reload does). The human
is a page: the event stream (``/api/events``, reconnected when a generation's stream ends,
as a browser's ``EventSource`` does) shows the questions and their removal, and the JSON
API answers them (``POST /api/questions/{id}/answer``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc
import httpx
from tests._feed import Feed
from tests._timing import scaled

from hotseam import Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ask,
)
from hotseam.providers.web import WebProvider

from ..web.conftest import open_events
from ._surface import WAIT, Choose, Reply, Shown, Surface, settled


@dataclass(eq=False)
class _Card:
    question: dict[str, Any]
    """The question as the page got it."""


def _body(reply: Reply) -> dict[str, Any]:
    return {"option": reply.index} if isinstance(reply, Choose) else {"text": reply.text}


class WebSurface:
    """See the module."""

    def __init__(self, tasks: anyio.abc.TaskGroup) -> None:
        self.context = Context("contract.web")
        self.generation = 0
        self.providers: list[WebProvider] = []
        self.late: list[httpx.Response] = []
        """The API's responses to late answers."""
        self._tasks = tasks
        self._cards = Feed()
        self._on_page: dict[str, Shown] = {}
        self._client: httpx.AsyncClient | None = None

    def install(self, scope: Scope) -> None:
        self.generation += 1
        web = WebProvider.serve(scope, port=self.providers[0].port if self.providers else 0)
        scope.provide(USER_INTERACTION, web)
        self.providers.append(web)
        if len(self.providers) == 1:
            self._client = httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{web.port}",
                headers={"x-hotseam-token": web.token},
                timeout=scaled(WAIT),
            )
            self._tasks.start_soon(self._page, web.port, web.token)

    async def _page(self, port: int, token: str) -> None:
        """The page's event stream, opened again whenever it ends."""
        while True:
            try:
                async with open_events(port, token) as events:
                    while True:
                        try:
                            event = await events.next()
                        except StopAsyncIteration:
                            break
                        self._seen(event)
            except (OSError, anyio.EndOfStream, anyio.BrokenResourceError):
                if self.providers[-1].listener.closed:
                    return  # the server is gone: the surface is closing
                raise

    def _seen(self, event: dict[str, Any]) -> None:
        if event["type"] == "snapshot":
            for question in event["questions"]:
                self._show(question)
        elif event["type"] == "added":
            self._show(event["question"])
        elif event["type"] == "removed" and event["reason"] == "withdrawn":
            shown = self._on_page.get(event["id"])
            if shown is not None:
                shown.withdrawn.set()

    def _show(self, question: dict[str, Any]) -> None:
        """A question on the page, unless it is one shown before and not withdrawn since
        (a page that reconnects is sent the open questions again)."""
        before = self._on_page.get(question["id"])
        if before is not None and not before.withdrawn.is_set():
            return
        count = len(question["questions"])
        shown = Shown(_Card(question), self.generation, count)
        self._on_page[question["id"]] = shown
        self._cards.put(shown)

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return await ask(request, context=self.context)

    async def next_shown(self) -> Shown:
        shown: Shown = await self._cards.get()
        return shown

    async def _post(self, shown: Shown, replies: Sequence[Reply]) -> httpx.Response:
        card: _Card = shown.ref
        if len(card.question["questions"]) == 1:
            (reply,) = replies
            body: dict[str, Any] = _body(reply)
        else:
            ids = [item["id"] for item in card.question["questions"]]
            body = {"answers": {id: _body(reply) for id, reply in zip(ids, replies, strict=True)}}
        assert self._client is not None
        return await self._client.post(f"/api/questions/{card.question['id']}/answer", json=body)

    async def answer(self, shown: Shown, replies: Sequence[Reply]) -> None:
        response = await self._post(shown, replies)
        assert response.status_code == 200, response.text

    async def withdrawn(self, shown: Shown) -> None:
        await settled(shown.withdrawn)  # "removed", "withdrawn": every page takes it down

    async def answer_late(self, shown: Shown, replies: Sequence[Reply]) -> None:
        response = await self._post(shown, replies)
        assert response.status_code in (404, 409), response.text  # refused: nobody takes it
        self.late.append(response)


@asynccontextmanager
async def web() -> AsyncIterator[Surface]:
    """A web inbox on a free loopback port, and a page open on it."""
    async with anyio.create_task_group() as tasks:
        surface = WebSurface(tasks)
        try:
            yield surface
        finally:
            if surface._client is not None:
                await surface._client.aclose()
            tasks.cancel_scope.cancel()

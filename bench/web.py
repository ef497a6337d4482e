"""The web inbox on loopback: latency both ways, rendering 100 questions, memory over 10,000;
and (``--reload``) requests lost while a provider module serving the inbox is saved.

    .venv/bin/python bench/web.py [--samples 300] [--questions 10000] [--no-browser]
    .venv/bin/python bench/web.py --reload [--saves 100] [--clients 4] [--backend trio]

* ask → visible: from calling ``ask()`` to an open page's event stream delivering the
  question (a raw HTTP/1.1 client reading Server-Sent Events, in the same process);
* submit → returned: from sending ``POST /api/questions/{id}/answer`` to ``ask()``
  returning the answer (httpx over a kept-alive connection);
* 100 pending questions render: headless Chromium (Debian's, via Playwright) opens the
  inbox with 100 questions pending; from navigation to the 100th card in the DOM, and the
  page's own time to build the cards from the snapshot;
* memory: 10,000 questions asked and answered through the API with one page listening;
  traced Python memory and RSS at checkpoints (flat means no growth per question).

* reload under load (``--reload``): a provider module serving the inbox is saved
  ``--saves`` times (the real watcher sees each save) while ``--clients`` clients ask all
  the time: readers on kept-alive connections, one answering every question (POSTs), one
  page whose event stream ends at each reload and reconnects. A lost request is one that
  got no response (reset, or closed unanswered); the exit status is 1 if any was lost.

Goals (issue 16): each latency median and p95 <= 20 ms; render <= 200 ms; memory flat.
Issue 21: no request lost across reloads. Every request stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import socket
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import h11
import httpx

from hotseam import Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ask,
)
from hotseam.providers.web import WebProvider
from hotseam.reload import ReloadCommitted, Reloader, WatchOptions

REQUEST = AskUserQuestionRequest(
    "Which database should the service use?",
    header="Storage",
    options=(
        AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True),
        AskUserQuestionOption("SQLite", description="One file, zero setup"),
    ),
)
CHROMIUM = os.environ.get("HOTSEAM_CHROMIUM", "/usr/bin/chromium")


class Page:
    """A page's event stream, read with h11 on a plain socket."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.connection = h11.Connection(h11.CLIENT)
        self.buffer = b""

    async def next(self) -> dict[str, Any]:
        while True:
            block, sep, rest = self.buffer.partition(b"\n\n")
            if sep:
                self.buffer = rest
                if block.startswith(b"data: "):
                    return json.loads(block[6:])  # type: ignore[no-any-return]
                continue
            event = self.connection.next_event()
            if event is h11.NEED_DATA:
                self.connection.receive_data(await self.stream.receive())
            elif isinstance(event, h11.Data):
                self.buffer += bytes(event.data)
            elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                raise EOFError


@asynccontextmanager
async def page(web: WebProvider) -> AsyncIterator[Page]:
    async with await anyio.connect_tcp("127.0.0.1", web.port) as stream:
        reader = Page(stream)
        request = h11.Request(
            method="GET",
            target=f"/api/events?token={web.token}",
            headers=[("host", f"127.0.0.1:{web.port}")],
        )
        await stream.send(
            reader.connection.send(request) + reader.connection.send(h11.EndOfMessage())
        )
        assert (await reader.next())["type"] == "snapshot"
        yield reader


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def latencies(web: WebProvider, context: Context, samples: int) -> dict[str, list[float]]:
    visible: list[float] = []
    returned: list[float] = []
    async with (
        page(web) as reader,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{web.port}", headers={"x-hotseam-token": web.token}
        ) as client,
        anyio.create_task_group() as tg,
    ):
        for index in range(samples + 20):  # the first 20 warm up
            done = anyio.Event()

            async def asker(done: anyio.Event = done) -> None:
                await ask(REQUEST, context=context)
                done.set()

            started = time.perf_counter()
            tg.start_soon(asker)
            event = await reader.next()
            seen = time.perf_counter()
            assert event["type"] == "added"
            submit = time.perf_counter()
            response = await client.post(
                f"/api/questions/{event['question']['id']}/answer", json={"option": 1}
            )
            await done.wait()
            back = time.perf_counter()
            assert response.status_code == 200
            assert (await reader.next())["type"] == "removed"
            if index >= 20:
                visible.append((seen - started) * 1000)
                returned.append((back - submit) * 1000)
    return {"ask → visible in the page": visible, "submit → ask() returns": returned}


async def memory(web: WebProvider, context: Context, total: int) -> list[tuple[int, float, float]]:
    rows: list[tuple[int, float, float]] = []
    tracemalloc.start()
    batch = 50
    async with (
        page(web) as reader,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{web.port}", headers={"x-hotseam-token": web.token}
        ) as client,
    ):

        async def drain() -> None:
            while True:
                await reader.next()

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            for done in range(0, total, batch):
                async with anyio.create_task_group() as askers:
                    for _ in range(batch):
                        askers.start_soon(lambda: ask(REQUEST, context=context))
                    while web.pending < batch:
                        await anyio.lowlevel.checkpoint()
                    for entry in list(web.inbox):
                        response = await client.post(
                            f"/api/questions/{entry.id}/answer", json={"text": "answer"}
                        )
                        assert response.status_code == 200
                count = done + batch
                if count in (1000, 2500, 5000, 7500, 10_000) or count == total:
                    gc.collect()
                    traced = tracemalloc.get_traced_memory()[0] / 1e6
                    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                    rows.append((count, traced, rss))
            tg.cancel_scope.cancel()
    tracemalloc.stop()
    return rows


async def render(web: WebProvider, context: Context) -> tuple[float, float, float] | str:
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        return "skipped: playwright is not installed (pip install -e '.[browser]')"
    if not os.path.exists(CHROMIUM):  # noqa: ASYNC240 - once, before anything runs
        return f"skipped: {CHROMIUM} is missing (apt-get install -y chromium)"
    async with anyio.create_task_group() as tg:
        for index in range(100):
            request = AskUserQuestionRequest(
                f"Question {index}: which database?",
                header=f"Topic {index}",
                options=REQUEST.options,
            )
            tg.start_soon(lambda request=request: ask(request, context=context))
        while web.pending < 100:
            await anyio.lowlevel.checkpoint()
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=[
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                ],
            )
            try:
                tab = await browser.new_page()
                await tab.goto(f"http://127.0.0.1:{web.port}/?token={web.token}")  # warm-up
                await tab.wait_for_function("document.querySelectorAll('li.card').length === 100")
                paints: list[float] = []
                loads: list[float] = []
                for _ in range(7):
                    await tab.reload()
                    await tab.wait_for_function("window.__hotseamPainted !== undefined")
                    painted = await tab.evaluate("window.__hotseamPainted")
                    paints.append(painted["painted"] - painted["received"])
                    loads.append(painted["painted"])
            finally:
                await browser.close()
        tg.cancel_scope.cancel()  # the 100 askers stop waiting
    return statistics.median(paints), percentile(paints, 0.95), statistics.median(loads)


RELOAD_TOKEN = "bench-reload-token-0123456789"
RELOAD_MODULE = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.web import WebProvider

GENERATION = {generation}


def setup(scope):
    web = WebProvider.serve(scope, port={port}, token={token!r})
    scope.provide(USER_INTERACTION, web)
"""
ANSWERED = {"200", "409 ALREADY_ANSWERED", "409 NOT_PENDING", "503 ASKED_ELSEWHERE"}
"""What a request racing a reload may get: an answer, or "decided already", or "being asked
again, retry" (docs/web.md). Anything else, or no response at all, is a failure."""


class ReloadLoad:
    """Clients asking all the time; each request is counted as answered or lost."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.answered = 0
        self.lost: list[str] = []
        self.statuses: dict[str, int] = {}
        self.streams = 0
        self.progress = anyio.Event()

    def count(self, response: httpx.Response) -> None:
        self.answered += 1
        status = str(response.status_code)
        if response.status_code >= 400:
            status += " " + response.json()["error"]["code"]
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.progress.set()
        self.progress = anyio.Event()

    async def until_more(self, count: int) -> None:
        target = self.answered + count
        with anyio.fail_after(30):
            while self.answered < target:
                await self.progress.wait()

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base, headers={"x-hotseam-token": RELOAD_TOKEN}, timeout=30
        )

    async def reader(self) -> None:
        async with self.client() as client:
            while True:
                try:
                    self.count(await client.get("/api/questions"))
                except httpx.TransportError as error:
                    self.lost.append(f"GET /api/questions: {error!r}")

    async def answerer(self) -> None:
        async with self.client() as client:
            while True:
                try:
                    response = await client.get("/api/questions")
                    self.count(response)
                    for question in response.json().get("questions", []):
                        self.count(
                            await client.post(
                                f"/api/questions/{question['id']}/answer", json={"option": 1}
                            )
                        )
                except httpx.TransportError as error:
                    self.lost.append(f"POST answer: {error!r}")

    async def page(self) -> None:
        while True:
            try:
                async with await anyio.connect_tcp("127.0.0.1", self.port) as stream:
                    reader = Page(stream)
                    request = h11.Request(
                        method="GET",
                        target=f"/api/events?token={RELOAD_TOKEN}",
                        headers=[("host", f"127.0.0.1:{self.port}")],
                    )
                    await stream.send(
                        reader.connection.send(request) + reader.connection.send(h11.EndOfMessage())
                    )
                    self.streams += 1
                    while (await reader.next())["type"] != "closing":
                        pass
            except (OSError, anyio.BrokenResourceError, anyio.EndOfStream) as error:
                self.lost.append(f"event stream: {error!r}")
            except EOFError:
                self.lost.append("event stream: ended without its closing event")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def reload_under_load(saves: int, clients: int) -> int:
    """Save a provider module serving the inbox ``saves`` times under load; 1 if any request
    was lost."""
    port = free_port()
    context = Context("bench-web-reload")
    answers = 0
    swaps: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        module = os.path.join(folder, "web_ui.py")
        with open(module, "w") as file:  # noqa: ASYNC230 - before anything runs
            file.write(RELOAD_MODULE.format(generation=1, port=port, token=RELOAD_TOKEN))
        load = ReloadLoad(port)
        started = time.perf_counter()
        async with (
            Reloader(context, folder, watch=WatchOptions(debounce_ms=10)) as reloader,
            reloader.events() as events,
            anyio.create_task_group() as tg,
        ):

            async def agent() -> None:
                nonlocal answers
                while True:
                    await ask(REQUEST, context=context)
                    answers += 1

            tg.start_soon(agent)
            for _ in range(max(1, clients - 2)):
                tg.start_soon(load.reader)
            tg.start_soon(load.answerer)
            tg.start_soon(load.page)
            await load.until_more(20)
            for generation in range(2, saves + 2):
                with open(module, "w") as file:  # noqa: ASYNC230 - a real save, small
                    file.write(
                        RELOAD_MODULE.format(generation=generation, port=port, token=RELOAD_TOKEN)
                    )
                with anyio.fail_after(30):
                    committed = await events.next(ReloadCommitted, generation=generation)
                swaps.append(committed.swap_ms)
                await load.until_more(20)  # the new generation serves, the connections kept
            tg.cancel_scope.cancel()
        seconds = time.perf_counter() - started
    unexpected = {status: n for status, n in load.statuses.items() if status not in ANSWERED}
    print(f"| reload under load ({saves} saves, {clients} clients) | |")
    print("| --- | ---: |")
    print(f"| requests answered | {load.answered:,} ({load.answered / seconds:,.0f}/s) |")
    print(f"| requests lost (no response) | {len(load.lost)} |")
    print(f"| responses | {', '.join(f'{k}: {v:,}' for k, v in sorted(load.statuses.items()))} |")
    print(f"| event streams opened (one per generation) | {load.streams} |")
    print(f"| questions answered through the API | {answers} |")
    print(
        f"| provider swap (dispose old, activate new) | median {statistics.median(swaps):.1f} "
        f"ms, p95 {percentile(swaps, 0.95):.1f} ms |"
    )
    for failure in load.lost[:10]:
        print(f"lost: {failure}")
    if unexpected:
        print(f"unexpected responses: {unexpected}")
    return 1 if load.lost or unexpected else 0


async def main(args: argparse.Namespace) -> None:
    context = Context("bench-web")
    async with Scope("bench", context=context) as scope:
        web = WebProvider.serve(scope, port=0)
        scope.provide(USER_INTERACTION, web)
        print(
            f"hotseam web inbox on loopback — {platform.machine()}, {os.cpu_count()} cores, "
            f"Linux {platform.release()}, CPython {platform.python_version()}, "
            f"backend {args.backend}\n"
        )
        lat = await latencies(web, context, args.samples)
        print(f"| latency ({args.samples} samples) | median | p95 | goal |")
        print("| --- | ---: | ---: | ---: |")
        for name, values in lat.items():
            print(
                f"| {name} | {statistics.median(values):.2f} ms | "
                f"{percentile(values, 0.95):.2f} ms | ≤ 20 ms |"
            )
        print()
        if not args.no_browser and args.backend == "asyncio":
            rendered = await render(web, context)
            if isinstance(rendered, str):
                print(f"100 pending questions render: {rendered}\n")
            else:
                paint, paint95, load = rendered
                print("| 100 pending questions, Chromium (7 loads) | median | p95 | goal |")
                print("| --- | ---: | ---: | ---: |")
                print(
                    f"| snapshot received → 100 cards painted | {paint:.0f} ms "
                    f"| {paint95:.0f} ms | ≤ 200 ms |"
                )
                print(f"| navigation start → 100 cards painted | {load:.0f} ms | | |")
                print()
        rows = await memory(web, context, args.questions)
        print("| questions asked and answered | traced Python memory | max RSS |")
        print("| ---: | ---: | ---: |")
        for count, traced, rss in rows:
            print(f"| {count:,} | {traced:.2f} MB | {rss:.1f} MB |")
        growth = rows[-1][1] - rows[0][1]
        print(f"\ntraced memory from {rows[0][0]:,} to {rows[-1][0]:,}: {growth:+.2f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument(
        "--reload", action="store_true", help="only measure requests lost across reloads"
    )
    parser.add_argument("--saves", type=int, default=100)
    parser.add_argument("--clients", type=int, default=4)
    arguments = parser.parse_args()
    if arguments.reload:
        sys.exit(
            anyio.run(
                reload_under_load, arguments.saves, arguments.clients, backend=arguments.backend
            )
        )
    anyio.run(main, arguments, backend=arguments.backend)

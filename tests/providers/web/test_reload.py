"""A hot reload of the module that provides the inbox: same socket, pages reconnect."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import httpx
import pytest
from tests._timing import scaled

from hotseam import Context, Scope
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer, ask
from hotseam.providers.web import WebProvider
from hotseam.reload import Reloader

from .conftest import DB, open_events, said

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(
        not hasattr(Scope, "carry"), reason="the handover (scope.carry) has not landed yet"
    ),
]

MODULE = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.web import WebProvider

GENERATION = {generation}


def setup(scope):
    web = WebProvider.serve(scope, port={port})
    scope.provide(USER_INTERACTION, web)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_reload_keeps_the_socket_and_open_pages_see_the_question_again(
    tmp_path: Path,
) -> None:
    port = free_port()
    module = tmp_path / "web_ui.py"
    module.write_text(MODULE.format(generation=1, port=port))
    context = Context("reload-web")
    answers: list[AskUserQuestionAnswer] = []
    async with Reloader(context, tmp_path, watch=False) as reloader:
        first = context.get(USER_INTERACTION)
        assert isinstance(first, WebProvider)
        token = first.token
        async with anyio.create_task_group() as tg:

            async def agent() -> None:
                answers.append(await ask(DB, context=context))

            tg.start_soon(agent)
            async with open_events(port, token) as page:
                snapshot = await page.next()
                if not snapshot["questions"]:
                    snapshot = {"questions": [(await page.next())["question"]]}
                (old,) = snapshot["questions"]
                module.write_text(MODULE.format(generation=2, port=port))
                result = await reloader.reload()
                assert result.committed, result
                seen = await page.rest()  # the old generation's stream ends
            assert {"type": "removed", "id": old["id"], "reason": "withdrawn"}.items() <= seen[
                0
            ].items()
            assert "reloaded" in seen[0]["note"]
            assert seen[-1]["type"] == "closing"
            second = context.get(USER_INTERACTION)
            assert isinstance(second, WebProvider) and second is not first
            assert second.listener is first.listener  # the very socket, handed over
            assert second.token == token
            async with open_events(port, token) as page:  # what a page's EventSource does
                snapshot = await page.next()
                while not snapshot.get("questions"):
                    snapshot = {"questions": [(await page.next())["question"]]}
                (again,) = snapshot["questions"]
                # The same ask, so the same id: what a page or a script holds still works.
                assert again == {**old, "seq": again["seq"], "askedAt": again["askedAt"]}
                async with httpx.AsyncClient(
                    base_url=f"http://127.0.0.1:{port}", headers={"x-hotseam-token": token}
                ) as client:
                    held = await client.post(
                        f"/api/questions/{old['id']}/answer", json={"option": 1}
                    )
                    assert held.status_code == 200, held.text
                    late = await client.post(
                        f"/api/questions/{old['id']}/answer", json={"option": 0}
                    )
                    assert late.status_code == 409
                    assert late.json()["error"]["code"] == "ALREADY_ANSWERED"
    assert [answer.answer for answer in answers] == ["SQLite"]
    assert first.listener.closed  # disposed once nobody carries it


async def test_hotseam_status_shows_the_address_of_an_inbox_a_provider_module_serves(
    tmp_path: Path,
) -> None:
    from hotseam.cli._snapshot import SessionFacts, status
    from hotseam.cli._status import format_status

    port = free_port()
    (tmp_path / "web_ui.py").write_text(MODULE.format(generation=1, port=port))
    context = Context("status-web")
    async with Reloader(context, tmp_path, watch=False) as reloader:
        web = context.get(USER_INTERACTION)
        assert isinstance(web, WebProvider)
        reply = status(SessionFacts("hotseam run", reloader))
        assert reply["web"] == [{"url": web.url, "pending": 0, "context": "status-web"}]
        assert f"web inbox: {web.url} (0 waiting there)" in format_status(reply).splitlines()


async def test_a_question_answered_before_a_reload_is_already_answered_after_it(
    tmp_path: Path,
) -> None:
    """The next generation's inbox is a new one: it still tells a late script the truth
    (409 ALREADY_ANSWERED, with what), not that the question never existed (404)."""
    port = free_port()
    module = tmp_path / "web_ui.py"
    module.write_text(MODULE.format(generation=1, port=port))
    context = Context("reload-answered")
    async with Reloader(context, tmp_path, watch=False) as reloader:
        web = context.get(USER_INTERACTION)
        assert isinstance(web, WebProvider)
        async with (
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers={"x-hotseam-token": web.token}
            ) as client,
            anyio.create_task_group() as tg,
        ):
            answers: list[AskUserQuestionAnswer] = []
            done = anyio.Event()

            async def agent() -> None:
                answers.append(await ask(DB, context=context))
                done.set()

            tg.start_soon(agent)
            async with open_events(port, web.token) as page:
                event = await page.next()
                questions = event["questions"] or [(await page.next())["question"]]
            url = f"/api/questions/{questions[0]['id']}/answer"
            assert (await client.post(url, json={"option": 1})).status_code == 200
            with anyio.fail_after(scaled(10)):
                await done.wait()
            module.write_text(MODULE.format(generation=2, port=port))
            assert (await reloader.reload()).committed
            late = await client.post(url, json={"option": 0})
            assert late.status_code == 409, late.text
            error = late.json()["error"]
            assert error["code"] == "ALREADY_ANSWERED" and error["answer"] == said(
                "Which database?", "SQLite"
            )
    assert [answer.answer for answer in answers] == ["SQLite"]

"""An open page while hotseam stops, restarts, changes token or reloads the inbox's module.

What must never happen: a card that can still be answered for a question that no longer
exists; a bookmark or an open tab that silently stops working after a restart; a question
that jumps or stacks a note each time a reload asks it again.
"""

from __future__ import annotations

import signal
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest

from cli._support import Process, write
from hotseam import Context
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer, ask
from hotseam.providers.web import WebProvider
from hotseam.reload import Reloader
from providers.web.conftest import DB, FREE, serving

from .test_inbox import MODULE, card, open_page, visible

pytestmark = pytest.mark.anyio

ASKING_AGENT = """
import anyio

async def main(context):
    result = await context.tools.execute(
        "ask_user_question",
        {"question": "Which colour?", "options": [{"label": "Blue"}, {"label": "Green"}]},
    )
    print("answer:", result.output["answer"] if result.ok else result.error["code"], flush=True)
    await anyio.sleep_forever()
"""

ANSWERABLE = "li.card button:enabled, li.card input:enabled, li.card textarea:enabled"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _expect(process: Process, pattern: str, stream: str = "stderr") -> str:
    found = await anyio.to_thread.run_sync(lambda: process.expect(pattern, stream=stream))
    return found.group(found.lastindex or 0)


async def test_a_stopped_daemon_leaves_no_answerable_card_and_its_restart_brings_it_back(
    browser: Any, tmp_path: Path
) -> None:
    """SIGTERM to `hotseam run --web` with the page open: the page says hotseam stopped
    and nothing on it can be answered; started again, the same link (the kept token)
    works, and the open tab shows the question again by itself, in place, choice kept."""
    write(tmp_path / "agent.py", ASKING_AGENT)
    (tmp_path / "providers").mkdir()
    args = ("run", "providers", "--agent", "agent.py", "--web", "--web-port", str(_free_port()))
    runtime = tmp_path / "rt"
    first = Process(*args, cwd=tmp_path, runtime=runtime)
    second: Process | None = None
    try:
        url = await _expect(first, r"web inbox: (http://\S+?)\"")
        page = await open_page(browser, url)
        question = card(page, "Which colour?")
        await question.wait_for(timeout=visible())
        await question.get_by_label("Green").check()
        assert await page.title() == "(1) hotseam inbox"

        await anyio.to_thread.run_sync(first.finish, signal.SIGTERM)
        await page.get_by_text("hotseam is not running").wait_for(timeout=visible())
        assert await page.locator(ANSWERABLE).count() == 0
        assert await page.get_by_text("Not answered: hotseam stopped").is_visible()
        assert await page.title() == "hotseam inbox (not connected)"
        assert await page.locator("#empty").is_hidden()  # never "no questions are waiting"

        second = Process(*args, cwd=tmp_path, runtime=runtime)
        assert await _expect(second, r"web inbox: (http://\S+?)\"") == url  # the same link
        again = page.locator("li.card:not(.gone):not(.held)").filter(has_text="Which colour?")
        await again.wait_for(timeout=visible())  # the open tab reconnected by itself
        assert await page.locator("li.card").count() == 1  # in the old card's place
        assert await again.get_by_label("Green").is_checked()
        bookmark = await open_page(browser, url)
        await card(bookmark, "Which colour?").wait_for(timeout=visible())
        await again.get_by_role("button", name="Answer").click()
        assert await _expect(second, r"(answer: \w+)", "stdout") == "answer: Green"
        assert not page.errors and not bookmark.errors
    finally:
        for process in (first, second):
            if process is not None and process.popen.poll() is None:
                await anyio.to_thread.run_sync(process.finish, signal.SIGTERM)


async def test_a_page_whose_token_is_no_longer_valid_says_what_to_do(browser: Any) -> None:
    """Another token after a restart (the kept file deleted, another one given): the open
    tab says its link is no longer accepted and how to get the current one; the old link
    opened in a browser gets a page in words, not raw JSON."""
    port = _free_port()
    async with serving(port=port, token="the-first-token-0123456789") as s:
        old = s.web.url
        page = await open_page(browser, old)
        s.ask_soon("db", DB)
        await card(page, "Which database?").wait_for(timeout=visible())
    async with serving(port=port, token="the-second-token-0123456789") as s:
        s.ask_soon("db", DB)
        await page.get_by_text("This page's link is no longer accepted").wait_for(timeout=visible())
        assert await page.get_by_text("'hotseam status' shows it").is_visible()
        assert await page.locator(ANSWERABLE).count() == 0
        stale = await browser.new_page()
        response = await stale.goto(old)
        assert response is not None and response.status == 401
        await stale.get_by_role("heading", name="This link's token is not accepted").wait_for(
            timeout=visible()
        )
        assert await stale.get_by_text("hotseam status", exact=True).count() == 1


RECORD_CHANGES = """() => {
  const list = document.getElementById("questions");
  window.__seen = { notes: [], held: false };
  [...list.children].forEach((card, index) => { card.__mark = index; });
  new MutationObserver(() => {
    if (list.querySelector("li.card.held")) window.__seen.held = true;
    for (const gone of list.querySelectorAll("li.card.gone"))
      window.__seen.notes.push(gone.textContent);
    if (/whichever|provider/i.test(list.textContent)) window.__seen.notes.push(list.textContent);
  }).observe(list, { subtree: true, childList: true, characterData: true, attributes: true });
}"""


async def test_cards_stay_in_place_across_a_reload_of_the_inbox_module(
    browser: Any, tmp_path: Path
) -> None:
    """A reload withdraws and re-asks every question: each card stays where it was (the
    same element, the same order, what was typed kept), with no note, and the title
    keeps counting; a script holding a question's id still answers it."""
    port = _free_port()
    module = tmp_path / "web_ui.py"
    module.write_text(MODULE.format(generation=1, port=port))
    context = Context("browser-in-place")
    answers: dict[str, AskUserQuestionAnswer] = {}
    async with Reloader(context, tmp_path, watch=False) as reloader:
        web = context.get(USER_INTERACTION)
        assert isinstance(web, WebProvider)
        page = await open_page(browser, web.url)
        async with anyio.create_task_group() as tg:

            async def agent(name: str, request: Any) -> None:
                answers[name] = await ask(request, context=context)

            tg.start_soon(agent, "db", DB)
            await card(page, "Which database?").wait_for(timeout=visible())
            tg.start_soon(agent, "free", FREE)
            await card(page, "What colour?").wait_for(timeout=visible())
            ids = await page.locator("li.card").evaluate_all("cards => cards.map(c => c.id)")
            await card(page, "What colour?").get_by_label("Your answer").fill("typed before")
            assert await page.title() == "(2) hotseam inbox"
            await page.evaluate(RECORD_CHANGES)

            module.write_text(MODULE.format(generation=2, port=port))
            assert (await reloader.reload()).committed
            await page.wait_for_function(
                "() => window.__seen.held && !document.querySelector('li.card.held')"
                " && document.getElementById('status').textContent.startsWith('Live')",
                timeout=visible(),
            )
            cards = page.locator("li.card")
            assert await cards.evaluate_all("cards => cards.map(c => c.__mark)") == [0, 1]
            assert await cards.evaluate_all("cards => cards.map(c => c.id)") == ids
            assert await page.evaluate("window.__seen.notes") == []
            typed = card(page, "What colour?").get_by_label("Your answer")
            assert await typed.input_value() == "typed before"
            assert await page.title() == "(2) hotseam inbox"

            second = context.get(USER_INTERACTION)
            assert isinstance(second, WebProvider) and second is not web
            second.inbox.answer(ids[0].removeprefix("q-"), {"option": 1})  # a script's id
            await page.get_by_text(
                "Answered elsewhere (by a script or another client): SQLite."
            ).wait_for(timeout=visible())
            await page.wait_for_function("() => document.title === '(1) hotseam inbox'")
            await card(page, "What colour?").get_by_role("button", name="Answer").click()
    assert answers["db"].answer == "SQLite" and answers["free"].answer == "typed before"
    assert not page.errors

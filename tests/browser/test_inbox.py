"""The whole flow in a real browser: questions appear live, answers return, pages reconnect.

Each test drives headless Chromium against a WebProvider served in the test's own event
loop, and checks both sides: what the page shows, and what ``ask()`` returned.
"""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._timing import scaled

from hotseam import AbortController, Agent, Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    ask,
)
from hotseam.providers.web import WebProvider
from hotseam.reload import Reloader
from providers.web.conftest import DB, FREE, STRICT, answer_of, serving

pytestmark = pytest.mark.anyio

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "web-inbox.png"


def visible() -> int:
    """How long a page may take to show a change, in ms (the test's time factor)."""
    return round(scaled(10) * 1000)


async def open_page(browser: Any, url: str) -> Any:
    page = await browser.new_page(viewport={"width": 860, "height": 760})
    page.on("dialog", lambda dialog: pytest.fail(f"a dialog opened: {dialog.message}"))
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.errors = errors
    await page.goto(url)
    await page.get_by_text("Live: new questions appear by themselves.").wait_for(timeout=visible())
    return page


def card(page: Any, question: str) -> Any:
    return page.locator("li.card").filter(has=page.get_by_text(question, exact=True))


async def test_a_question_appears_live_and_choosing_an_option_answers_it(browser: Any) -> None:
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        await page.get_by_text("No questions are waiting.").wait_for(timeout=visible())
        s.ask_soon("db", DB)
        question = card(page, "Which database?")
        await question.wait_for(timeout=visible())  # no reload of the page
        assert await question.get_by_text("Storage").is_visible()
        assert await question.get_by_text("Asked by Planner").is_visible()
        assert await question.get_by_text("Server database").is_visible()
        recommended = question.get_by_label("Postgres")
        assert await recommended.is_checked()  # preselected and marked
        assert await question.get_by_text("Recommended").is_visible()
        await question.get_by_label("SQLite").check()
        await question.get_by_role("button", name="Answer").click()
        assert answer_of(await s.result("db")).answer == "SQLite"
        await page.get_by_text("Answered: SQLite.").wait_for(timeout=visible())
        assert not page.errors


async def test_a_custom_answer_is_typed_and_sent(browser: Any) -> None:
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        s.ask_soon("db", DB)
        question = card(page, "Which database?")
        await question.wait_for(timeout=visible())
        await question.get_by_label("Type your own answer").fill("MariaDB")
        assert await question.locator("input[type=radio][value=own]").is_checked()
        await question.get_by_role("button", name="Answer").click()
        answer = answer_of(await s.result("db"))
        assert answer.answer == "MariaDB" and answer.option is None


async def test_the_keyboard_alone_answers(browser: Any) -> None:
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        s.ask_soon("strict", STRICT)
        s.ask_soon("free", FREE)
        await card(page, "What colour?").wait_for(timeout=visible())
        assert await card(page, "Deploy now?").locator("input[type=text]").count() == 0
        await page.keyboard.press("Tab")  # the first question's radio group
        await page.keyboard.press("ArrowDown")  # "No"
        await page.keyboard.press("Enter")  # submits the form
        assert answer_of(await s.result("strict")).answer == "No"
        await card(page, "What colour?").get_by_label("Your answer").focus()
        await page.keyboard.type("teal")
        await page.keyboard.press("Control+Enter")
        assert answer_of(await s.result("free")).answer == "teal"


async def test_dismiss_is_ask_cancelled(browser: Any) -> None:
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        s.ask_soon("db", DB)
        question = card(page, "Which database?")
        await question.get_by_role("button", name="Dismiss").click()
        error = await s.result("db")
        assert isinstance(error, UserInteractionError) and error.code == ErrorCode.ASK_CANCELLED


async def test_answering_in_one_tab_clears_the_other(browser: Any) -> None:
    async with serving() as s:
        first = await open_page(browser, s.web.url)
        second = await open_page(browser, s.web.url)
        s.ask_soon("db", DB)
        await card(second, "Which database?").wait_for(timeout=visible())
        await card(first, "Which database?").get_by_role("button", name="Answer").click()
        assert answer_of(await s.result("db")).answer == "pg"
        await second.get_by_text("Answered in another tab: Postgres.").wait_for(timeout=visible())
        await card(second, "Which database?").wait_for(state="detached", timeout=visible())


async def test_a_late_answer_in_a_stale_tab_says_already_answered(browser: Any) -> None:
    async with serving() as s:
        s.ask_soon("db", DB)
        (pending,) = await s.pending(1)
        stale_stream = "retry: 60000\n\ndata: " + json.dumps(
            {"type": "snapshot", "questions": [pending]}
        )

        async def stale(route: Any) -> None:  # a tab that has not heard the news yet
            await route.fulfill(
                status=200,
                headers={"content-type": "text/event-stream"},
                body=stale_stream + "\n\n",
            )

        page = await browser.new_page()
        await page.route("**/api/events*", stale)
        await page.goto(s.web.url)
        question = card(page, "Which database?")
        await question.wait_for(timeout=visible())
        s.web.inbox.answer(pending["id"], {"option": 1})  # a script was faster
        await question.get_by_role("button", name="Answer").click()
        await page.get_by_text(
            "Answered elsewhere (by a script or another client): SQLite."
        ).wait_for(timeout=visible())
        assert answer_of(await s.result("db")).answer == "SQLite"


async def test_a_withdrawn_question_vanishes_with_the_reason(browser: Any) -> None:
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        controller = AbortController()
        s.ask_soon("db", DB.with_signal(controller.signal))
        await card(page, "Which database?").wait_for(timeout=visible())
        controller.abort("the user closed the chat")
        note = page.get_by_text("Withdrawn by the agent: the user closed the chat.")
        await note.wait_for(timeout=visible())
        await card(page, "Which database?").wait_for(state="detached", timeout=visible())


async def test_model_written_markup_shows_as_text(browser: Any) -> None:
    hostile = AskUserQuestionRequest(
        "<script>alert(1)</script>?",
        header="<img src=x onerror=alert(2)>",
        options=(AskUserQuestionOption("<b>bold</b>", description="<svg onload=alert(3)>"),),
        agent=Agent("<i>agent</i>"),
    )
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        s.ask_soon("x", hostile)
        legend = page.locator("legend")
        await legend.wait_for(timeout=visible())
        assert await legend.text_content() == "<script>alert(1)</script>?"
        assert await page.get_by_text("<img src=x onerror=alert(2)>").is_visible()
        assert await page.get_by_text("<b>bold</b>").is_visible()
        assert await page.locator("main script, main img, main svg, main b").count() == 0
        assert not page.errors


async def test_the_inbox_lists_questions_oldest_first_and_is_photographed(
    browser: Any, tmp_path: Path
) -> None:
    """The page docs/web.md shows; HOTSEAM_UPDATE_SCREENSHOTS=1 re-takes that picture (a
    test run otherwise leaves the checkout as it was)."""
    screenshot = (
        SCREENSHOT if os.environ.get("HOTSEAM_UPDATE_SCREENSHOTS") else tmp_path / "inbox.png"
    )
    deploy = AskUserQuestionRequest(
        "Deploy the new release to production now?",
        header="Deploy",
        options=(
            AskUserQuestionOption("Deploy now", description="All checks passed 4 min ago"),
            AskUserQuestionOption(
                "Wait", description="Deploy after the 15:00 freeze", recommended=True
            ),
        ),
        allow_custom=False,
        agent=Agent("release", "Release bot"),
    )
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        s.ask_soon("db", DB)
        await card(page, "Which database?").wait_for(timeout=visible())
        s.ask_soon("deploy", deploy)
        await card(page, deploy.question).wait_for(timeout=visible())
        s.ask_soon(
            "free",
            AskUserQuestionRequest(
                "What should the changelog headline be?",
                header="Docs",
                agent=Agent("writer", "Docs writer"),
            ),
        )
        await card(page, "What should the changelog headline be?").wait_for(timeout=visible())
        legends = await page.locator("legend").all_text_contents()
        assert legends == [
            "Which database?",
            deploy.question,
            "What should the changelog headline be?",
        ]
        await page.emulate_media(color_scheme="light")
        await page.locator("body").evaluate("() => document.activeElement.blur()")
        await page.screenshot(path=str(screenshot), full_page=True)
        assert screenshot.stat().st_size > 10_000
        for entry in list(s.web.inbox):
            s.web.inbox.settle(entry, "withdrawn", "test over")


MODULE = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.web import WebProvider

GENERATION = {generation}


def setup(scope):
    scope.provide(USER_INTERACTION, WebProvider.serve(scope, port={port}))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_an_open_page_reconnects_after_a_reload_and_answers_the_question_again(
    browser: Any, tmp_path: Path
) -> None:
    port = _free_port()
    module = tmp_path / "web_ui.py"
    module.write_text(MODULE.format(generation=1, port=port))
    context = Context("browser-reload")
    answers: list[AskUserQuestionAnswer] = []
    async with Reloader(context, tmp_path, watch=False) as reloader:
        web = context.get(USER_INTERACTION)
        assert isinstance(web, WebProvider)
        page = await open_page(browser, web.url)
        async with anyio.create_task_group() as tg:

            async def agent() -> None:
                answers.append(await ask(DB, context=context))

            tg.start_soon(agent)
            question = card(page, "Which database?")
            await question.wait_for(timeout=visible())
            await question.get_by_label("Type your own answer").fill("typed before")
            module.write_text(MODULE.format(generation=2, port=port))
            assert (await reloader.reload()).committed
            # The page reconnects by itself and shows the question asked again, draft kept.
            again = page.locator("li.card:not(.gone)").filter(has_text="Which database?")
            await again.wait_for(timeout=visible())
            await page.get_by_text("Live: new questions appear by themselves.").wait_for(
                timeout=visible()
            )
            typed = again.get_by_label("Type your own answer")
            assert await typed.input_value() == "typed before"
            await again.get_by_label("SQLite").check()
            await again.get_by_role("button", name="Answer").click()
    assert [answer.answer for answer in answers] == ["SQLite"]
    assert not page.errors


async def test_of_two_tabs_answering_at_once_the_loser_says_who_won_and_what(
    browser: Any,
) -> None:
    """The losing tab's POST is held until the winner's answer is in, so the 'removed'
    event reaches it before its 409: it must not take that event for its own answer."""
    async with serving() as s:
        winner = await open_page(browser, s.web.url)
        loser = await open_page(browser, s.web.url)
        s.ask_soon("db", DB)
        released = anyio.Event()

        async def held(route: Any) -> None:
            await released.wait()
            await route.continue_()

        await loser.route("**/answer", held)
        await card(loser, "Which database?").get_by_role("button", name="Answer").click()
        await card(winner, "Which database?").get_by_label("SQLite").check()
        await card(winner, "Which database?").get_by_role("button", name="Answer").click()
        assert answer_of(await s.result("db")).answer == "SQLite"
        await winner.get_by_text("Answered: SQLite.").wait_for(timeout=visible())
        await loser.get_by_text("Answered in another tab: SQLite.").wait_for(timeout=visible())
        released.set()
        await loser.wait_for_load_state("networkidle")
        assert await loser.get_by_text("Answered: Postgres").count() == 0
        assert await loser.get_by_text("Answered in another tab: SQLite.").is_visible()

        # And truly at once: exactly one tab claims the answer the agent got.
        s.ask_soon("db2", DB)
        pages = (winner, loser)
        await loser.unroute("**/answer")
        ids = []
        for page, label in zip(pages, ("SQLite", "Postgres"), strict=True):
            question = card(page, "Which database?")
            await question.get_by_label(label).check()
            ids.append(await question.get_attribute("data-id"))
            await question.get_by_role("button", name="Answer").evaluate(
                "button => { window.__answer = () => button.click(); }"
            )
        async with anyio.create_task_group() as tg:  # both clicks sent together
            for page in pages:
                tg.start_soon(page.evaluate, "() => window.__answer()")
        got = {"SQLite": "SQLite", "pg": "Postgres"}[answer_of(await s.result("db2")).answer]
        # Each tab's note of this question, not the first one's (it stays a moment).
        notes = [
            await page.locator(f'li.card[data-id="{id_}"] .note').text_content(timeout=visible())
            for page, id_ in zip(pages, ids, strict=True)
        ]
        assert sorted(notes) == sorted([f"Answered: {got}.", f"Answered in another tab: {got}."])


CONTRAST = """() => {
  const opaque = (c) => c && c !== "transparent" && !/rgba\\(.*, 0\\)$/.test(c);
  const backgroundOf = (node) => {
    for (; node; node = node.parentElement) {
      const colour = getComputedStyle(node).backgroundColor;
      if (opaque(colour)) return colour;
    }
    return "rgb(255, 255, 255)";
  };
  const selectors = ["body", "h1", "#status", ".meta", ".card h2", "legend", ".option label span",
    ".desc", ".badge", "button.answer", "button.dismiss", ".hint", ".error", ".note"];
  const found = [];
  for (const selector of selectors) {
    for (const node of document.querySelectorAll(selector)) {
      const hidden = !node.getClientRects().length || node.closest(".held");
      if (!node.textContent.trim() || hidden) continue;
      found.push({ selector, text: node.textContent.trim().slice(0, 30),
                   color: getComputedStyle(node).color, background: backgroundOf(node) });
    }
  }
  return found;
}"""


def _luminance(css: str) -> float:
    numbers = re.findall(r"[\d.]+", css)
    assert css.startswith("rgb") and len(numbers) in (3, 4), css  # "rgb(...)" or "rgba(...)"
    assert len(numbers) == 3 or float(numbers[3]) == 1, f"a translucent colour: {css}"
    red, green, blue = (float(number) / 255 for number in numbers[:3])

    def linear(value: float) -> float:
        return value / 12.92 if value <= 0.04045 else ((value + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(red) + 0.7152 * linear(green) + 0.0722 * linear(blue)


def contrast(color: str, background: str) -> float:
    """The WCAG 2 contrast ratio of two computed ``rgb(...)`` colours."""
    high, low = sorted((_luminance(color), _luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


async def test_every_text_has_aa_contrast_in_both_colour_schemes(browser: Any) -> None:
    """WCAG AA: 4.5:1 for text, measured on the browser's computed colours."""
    assert round(contrast("rgb(127, 166, 255)", "rgb(255, 255, 255)"), 2) == 2.39  # the old bug
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        s.ask_soon("db", DB)
        s.ask_soon("free", FREE)
        s.ask_soon("strict", STRICT)
        await card(page, "Deploy now?").get_by_role("button", name="Answer").click()
        await page.get_by_text("Choose an option.").wait_for(timeout=visible())
        await card(page, "What colour?").get_by_role("button", name="Dismiss").click()
        await page.get_by_text("Dismissed.").wait_for(timeout=visible())
        for scheme in ("light", "dark"):
            await page.emulate_media(color_scheme=scheme)
            measured = await page.evaluate(CONTRAST)
            seen = {item["selector"] for item in measured}
            assert {".badge", "button.answer", ".error", ".note", ".desc", "#status"} <= seen
            ratios = [
                (item["selector"], item["text"], contrast(item["color"], item["background"]))
                for item in measured
            ]
            poor = [(where, text, round(ratio, 2)) for where, text, ratio in ratios if ratio < 4.5]
            assert not poor, (scheme, poor)
        for entry in list(s.web.inbox):
            s.web.inbox.settle(entry, "withdrawn", "test over")

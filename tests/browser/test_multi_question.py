"""An ask of several questions in a real browser: one card, a fieldset per question, one
Answer button; checkboxes within their bounds; selections that outlive a reload of the
provider module, a reconnect of the event stream and a restart; the keyboard alone; the
fleet inbox's card of the same ask.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from hotseam import Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ask,
    validate_request,
)
from hotseam.interaction._journal import open_journal
from hotseam.providers._web._journal_inbox import serve_journal_inbox
from hotseam.providers.web import WebProvider
from hotseam.reload import Reloader
from providers.web.conftest import answer_of, serving
from providers.web.test_multi_question import STACK

from .test_inbox import CONTRAST, MODULE, _free_port, card, contrast, open_page, visible

pytestmark = pytest.mark.anyio

TOKEN = "multi-question-browser-token-0123"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "web-inbox-several.png"


def fieldset(page: Any, question: str) -> Any:
    return page.locator("fieldset").filter(has=page.get_by_text(question, exact=True))


async def checked(page: Any, question: str) -> list[str]:
    """The labels of the options chosen in one question's fieldset."""
    boxes = fieldset(page, question).locator("input:checked:not([id$=-skip])")
    ids = [await box.get_attribute("id") for box in await boxes.all()]
    return [await page.locator(f"label[for='{id_}'] > span").first.inner_text() for id_ in ids]


async def choose(page: Any) -> None:
    """SQLite; Billing and a typed "GraphQL" (Auth unchecked); a note for the last one."""
    stack = card(page, "Which database?")
    await stack.get_by_label("SQLite").check()
    await stack.get_by_role("checkbox", name="Auth").uncheck()
    await stack.get_by_role("checkbox", name="Billing").check()
    await fieldset(page, "Which features?").get_by_label("Type your own answer").fill("GraphQL")
    await stack.get_by_label("Your answer").fill("Ship it by Friday")


async def assert_chosen(page: Any) -> None:
    assert await checked(page, "Which database?") == ["SQLite"]
    assert await checked(page, "Which features?") == ["Billing", "Your own answer"]
    features = fieldset(page, "Which features?")
    assert await features.get_by_label("Type your own answer").input_value() == "GraphQL"
    notes = card(page, "Which database?").get_by_label("Your answer")
    assert await notes.input_value() == "Ship it by Friday"


def assert_answered(answer: AskUserQuestionAnswer) -> None:
    database, features, notes = answer.answers
    assert database.answer == "SQLite"
    assert [o.label for o in features.options] == ["Billing"] and features.custom == "GraphQL"
    assert notes.custom == "Ship it by Friday"


async def test_one_card_a_fieldset_each_checkboxes_within_bounds_one_answer(
    browser: Any, tmp_path: Path
) -> None:
    """Also takes the picture docs/web.md shows (HOTSEAM_UPDATE_SCREENSHOTS=1 re-takes it)."""
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        posts: list[str] = []
        page.on("request", lambda r: posts.append(r.url) if r.url.endswith("/answer") else None)
        s.ask_soon("stack", STACK)
        stack = card(page, "Which database?")
        await stack.wait_for(timeout=visible())
        assert await page.locator("li.card").count() == 1
        assert await stack.get_by_role("heading", name="3 questions").is_visible()
        legends = await stack.locator("legend").all_inner_texts()
        assert [" ".join(text.split()) for text in legends] == [
            "STORAGE Which database?",
            "FEATURES Which features?",
            "NOTES Anything else?",
        ]
        assert await stack.get_by_role("group", name="Storage Which database?").is_visible()
        assert await stack.get_by_role("button", name="Answer").count() == 1
        assert await stack.get_by_role("button", name="Dismiss").count() == 1
        database, features = fieldset(page, "Which database?"), fieldset(page, "Which features?")
        assert await database.get_by_role("radio").count() == 2
        assert await database.get_by_role("checkbox").count() == 0
        assert await features.get_by_role("checkbox").count() == 5  # four and your own
        assert await features.get_by_text("Pick 1 to 2, or type your own.").is_visible()
        assert await database.get_by_text("Server database").is_visible()
        assert await checked(page, "Which features?") == ["Auth"]  # the recommended one
        assert await fieldset(page, "Anything else?").get_by_label("Skip this question").count()
        assert await database.get_by_label("Skip this question").count() == 0
        picture = SCREENSHOT if os.environ.get("HOTSEAM_UPDATE_SCREENSHOTS") else tmp_path / "s.png"
        await page.emulate_media(color_scheme="light")
        await stack.screenshot(path=str(picture))
        assert picture.stat().st_size > 10_000

        # At most two: a third box is unchecked again at once, saying why.
        await features.get_by_role("checkbox", name="Search").check()
        await features.get_by_role("checkbox", name="Billing").click()
        alert = "Which features? — at most 2 choices: uncheck one first."
        await features.get_by_text(alert).wait_for(timeout=visible())
        assert await checked(page, "Which features?") == ["Auth", "Search"]
        # At least one: none chosen is refused in the page, the focus on the question.
        await features.get_by_role("checkbox", name="Auth").uncheck()
        await features.get_by_role("checkbox", name="Search").uncheck()
        await stack.get_by_role("button", name="Answer").click()
        await features.get_by_text("Which features? — pick at least 1 (0 chosen).").wait_for(
            timeout=visible()
        )
        focused = await page.evaluate("document.activeElement.closest('fieldset').dataset.question")
        assert focused == "q2"
        # Nothing written for a question that must be answered: refused too, nothing sent.
        await features.get_by_role("checkbox", name="Export").check()
        await stack.get_by_role("button", name="Answer").click()
        await stack.get_by_text("Anything else? — type an answer first.").wait_for(
            timeout=visible()
        )
        assert posts == [] and s.web.pending == 1 and "stack" not in s.results

        await fieldset(page, "Anything else?").get_by_label("Skip this question").check()
        assert await stack.get_by_label("Your answer").is_disabled()
        await features.get_by_role("checkbox", name="Auth").check()
        await database.get_by_label("SQLite").check()
        await stack.get_by_role("button", name="Answer").click()
        answer = answer_of(await s.result("stack"))
        assert [entry.answer for entry in answer.answers] == ["SQLite", "Auth, Export", None]
        assert answer.answers[2].skipped == "skipped"
        await page.get_by_text(
            "Answered: Which database? SQLite; Which features? Auth, Export; "
            "Anything else? (skipped)."
        ).wait_for(timeout=visible())
        assert len(posts) == 1 and not page.errors


async def test_selections_outlive_a_reload_a_reconnect_and_a_restart(
    browser: Any, tmp_path: Path
) -> None:
    port = _free_port()
    module = tmp_path / "web_ui.py"
    module.write_text(MODULE.format(generation=1, port=port))
    context = Context("browser-multi-reload")
    answers: list[AskUserQuestionAnswer] = []
    async with Reloader(context, tmp_path, watch=False) as reloader:
        web = context.get(USER_INTERACTION)
        assert isinstance(web, WebProvider)
        page = await open_page(browser, web.url)
        async with anyio.create_task_group() as tg:

            async def agent() -> None:
                answers.append(await ask(STACK, context=context))

            tg.start_soon(agent)
            await card(page, "Which database?").wait_for(timeout=visible())
            await choose(page)
            await page.evaluate("delete window.__hotseamSnapshotMs")
            module.write_text(MODULE.format(generation=2, port=port))
            assert (await reloader.reload()).committed
            # The page reconnects by itself (a snapshot of the next generation's inbox) and
            # holds the card in place until it is asked again, every choice kept.
            await page.wait_for_function("() => window.__hotseamSnapshotMs !== undefined")
            again = page.locator("li.card:not(.gone):not(.held)").filter(has_text="Which features?")
            await again.wait_for(timeout=visible())
            await assert_chosen(page)

            # The event stream drops (no reload): the page fell more than 256 events behind
            # (300 questions come and go in one turn) and reconnects for a new snapshot.
            web = context.get(USER_INTERACTION)
            assert isinstance(web, WebProvider) and web.inbox.subscribers == 1
            await page.evaluate("delete window.__hotseamSnapshotMs")
            burst = [web.inbox.add(AskUserQuestionRequest(f"Burst {n}?")) for n in range(300)]
            for entry in burst:
                web.inbox.settle(entry, "withdrawn", "a burst")
            assert web.inbox.subscribers == 0  # dropped
            await page.wait_for_function("() => window.__hotseamSnapshotMs !== undefined")
            assert web.inbox.subscribers == 1
            await again.wait_for(timeout=visible())
            await assert_chosen(page)
            await again.get_by_role("button", name="Answer").click()
    (answer,) = answers
    assert_answered(answer)
    assert not page.errors


async def test_selections_outlive_a_restart_of_hotseam(browser: Any) -> None:
    """hotseam stops and the ask is asked again by the next process (a new id): its card
    takes the old one's place with every question's choices, rebuilt from the draft."""
    port = _free_port()
    async with serving(port=port, token=TOKEN) as first:
        page = await open_page(browser, first.web.url)
        first.ask_soon("stack", STACK)
        await card(page, "Which database?").wait_for(timeout=visible())
        await choose(page)
    await page.get_by_text("hotseam is not running").wait_for(timeout=visible())
    async with serving(port=port, token=TOKEN) as second:
        second.ask_soon("stack", STACK)
        back = page.locator("li.card:not(.gone)").filter(has_text="Which features?")
        await back.wait_for(timeout=visible())
        await assert_chosen(page)
        await back.get_by_role("button", name="Answer").click()
        assert_answered(answer_of(await second.result("stack")))
    assert not page.errors


async def test_the_keyboard_alone_answers_every_question(browser: Any) -> None:
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        s.ask_soon("stack", STACK)
        await card(page, "Which database?").wait_for(timeout=visible())

        async def focused() -> str:
            return str(
                await page.evaluate(
                    "(() => { const e = document.activeElement;"
                    " const l = e.labels && e.labels[0];"
                    " return (l ? l.firstChild.textContent : e.getAttribute('aria-label'))"
                    " || e.tagName; })()"
                )
            )

        await page.keyboard.press("Tab")  # the first question: its radio group
        assert await focused() == "Postgres"
        await page.keyboard.press("ArrowDown")
        assert await focused() == "SQLite"
        await page.keyboard.press("Tab")  # the second: each checkbox in turn
        assert await focused() == "Auth"
        await page.keyboard.press("Space")  # Auth off
        await page.keyboard.press("Tab")
        await page.keyboard.press("Space")  # Billing on
        await page.keyboard.press("Tab")
        await page.keyboard.press("Tab")
        assert await focused() == "Export"
        await page.keyboard.press("Space")  # Export on: two
        await page.keyboard.press("Tab")  # your own answer: a third would be refused
        await page.keyboard.press("Space")
        assert await focused() == "Your own answer"
        alert = "Which features? — at most 2 choices: uncheck one first."
        await page.get_by_text(alert).wait_for(timeout=visible())
        assert await checked(page, "Which features?") == ["Billing", "Export"]
        await page.keyboard.press("Tab")  # its text field
        await page.keyboard.press("Tab")  # the third question's text area
        assert await focused() == "Your answer"
        await page.keyboard.type("Ship it by Friday")
        await page.keyboard.press("Control+Enter")  # one answer for the three
        answer = answer_of(await s.result("stack"))
        assert [entry.answer for entry in answer.answers] == [
            "SQLite",
            "Billing, Export",
            "Ship it by Friday",
        ]


async def test_the_fleet_inbox_shows_and_answers_an_ask_of_several_questions(
    browser: Any, tmp_path: Path
) -> None:
    async with open_journal(tmp_path / "journal.sqlite3") as journal:
        alpha = await journal.register_daemon("alpha", agent="planner", host="build-1", pid=101)
        run = await journal.start_run("planner", alpha.id)
        await journal.record_ask("stack-0", run.id, 0, validate_request(STACK))
        async with serve_journal_inbox(journal, port=0) as served:
            page = await open_page(browser, served.url)
            stack = card(page, "Which database?")
            await stack.wait_for(timeout=visible())
            assert await stack.get_by_text("alpha on build-1, pid 101, agent planner").is_visible()
            assert await stack.locator("fieldset").count() == 3
            assert await stack.get_by_role("button", name="Answer").count() == 1
            features = fieldset(page, "Which features?")
            assert await features.get_by_role("checkbox").count() == 5
            await choose(page)
            await features.get_by_role("checkbox", name="Search").click()  # a third: refused
            assert await checked(page, "Which features?") == ["Billing", "Your own answer"]
            await stack.get_by_role("button", name="Answer").click()
            await page.get_by_text(
                "Answered: Which database? SQLite; Which features? Billing, “GraphQL”; "
                "Anything else? “Ship it by Friday”."
            ).wait_for(timeout=visible())
            record = await journal.get_ask("stack-0")
            assert record.answer is not None
            assert_answered(record.answer)
            assert not page.errors


async def test_the_card_of_several_questions_has_aa_contrast_in_both_schemes(
    browser: Any,
) -> None:
    measure = CONTRAST.replace('".hint",', '".hint", ".chip", ".rule", "fieldset .error",')
    assert measure != CONTRAST
    async with serving() as s:
        page = await open_page(browser, s.web.url)
        s.ask_soon("stack", STACK)
        features = fieldset(page, "Which features?")
        await features.get_by_role("checkbox", name="Auth").uncheck()
        await card(page, "Which database?").get_by_role("button", name="Answer").click()
        await features.get_by_text("pick at least 1").wait_for(timeout=visible())
        for scheme in ("light", "dark"):
            await page.emulate_media(color_scheme=scheme)
            measured = await page.evaluate(measure)
            seen = {item["selector"] for item in measured}
            assert {".chip", ".rule", "fieldset .error", ".badge", ".desc"} <= seen, seen
            poor = [
                (item["selector"], item["text"], round(ratio, 2))
                for item in measured
                if (ratio := contrast(item["color"], item["background"])) < 4.5
            ]
            assert not poor, (scheme, poor)
        for entry in list(s.web.inbox):
            s.web.inbox.settle(entry, "withdrawn", "test over")

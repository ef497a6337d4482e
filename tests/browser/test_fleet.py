"""The fleet inbox (``hotseam inbox --journal``) in a real browser: cards of several daemons.

The inbox is served in the test's own event loop over an SQLite journal file; the daemons
are written into that journal as a daemon process would (register, start a run, record an
ask), one of them stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hotseam.interaction import AskUserQuestionAnswer
from hotseam.interaction._journal import AskState, open_journal
from hotseam.providers._web._journal_inbox import serve_journal_inbox
from providers.web.conftest import DB, STRICT

from .test_inbox import card, open_page, visible

pytestmark = pytest.mark.anyio


async def test_cards_of_two_daemons_say_who_asks_and_which_daemon_is_down(
    browser: Any, tmp_path: Path
) -> None:
    async with open_journal(tmp_path / "journal.sqlite3") as journal:
        alpha = await journal.register_daemon("alpha", agent="deployer", host="build-1", pid=101)
        beta = await journal.register_daemon("beta", agent="reviewer", host="build-2", pid=202)
        alpha_run = await journal.start_run("deployer", alpha.id)
        beta_run = await journal.start_run("reviewer", beta.id)
        await journal.record_ask("alpha-0", alpha_run.id, 0, DB)
        await journal.record_ask("beta-0", beta_run.id, 0, STRICT)
        await journal.stop_daemon(beta.id)
        async with serve_journal_inbox(journal, port=0) as served:
            page = await open_page(browser, served.url)
            up, down = card(page, "Which database?"), card(page, "Deploy now?")
            await down.wait_for(timeout=visible())
            assert await up.get_by_text("alpha on build-1, pid 101, agent deployer").is_visible()
            assert await up.get_by_text("— up").is_visible()
            assert await up.get_by_text("Asked by Planner").is_visible()
            assert await up.get_by_text("Recommended").is_visible()
            assert await down.get_by_text("beta on build-2, pid 202, agent reviewer").is_visible()
            assert await down.get_by_text("— down (stopped)").is_visible()
            assert await down.get_by_text(
                "beta is down: an answer is held for its resume."
            ).is_visible()
            assert await down.locator("input[type=text]").count() == 0  # options only

            await down.get_by_label("No", exact=True).check()
            await down.get_by_role("button", name="Answer").click()
            await page.get_by_text("Answered: No. Held for beta's resume.").wait_for(
                timeout=visible()
            )
            answered = await journal.get_ask("beta-0")
            assert answered.answer is not None and answered.answer.answer == "No"

            await journal.answer_ask("alpha-0", AskUserQuestionAnswer("sqlite"), by="inbox b:7")
            await page.get_by_text("Answered elsewhere (by inbox b:7): “sqlite”.").wait_for(
                timeout=visible()
            )

            await journal.record_ask("alpha-1", alpha_run.id, 1, DB)
            fresh = card(page, "Which database?")
            await fresh.get_by_role("button", name="Answer").wait_for(timeout=visible())
            await journal.abandon_run(alpha_run.id)
            clear = fresh.get_by_role("button", name="Clear")
            await clear.wait_for(timeout=visible())
            assert await fresh.get_by_text("its run was abandoned").is_visible()
            assert await fresh.get_by_role("button", name="Answer").is_hidden()
            assert await fresh.get_by_label("Postgres").is_disabled()
            await clear.click()
            await page.get_by_text("Cleared.").wait_for(timeout=visible())
            assert await journal.list_asks(states={AskState.ABANDONED}) == []  # removed
            assert not page.errors

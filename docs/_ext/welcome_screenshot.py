"""Takes docs/images/welcome.png: the real web inbox, two questions open, in Chromium.

Run by hand when the inbox's look changes (needs the ``browser`` extra and Debian's
chromium, as ``make browser-test`` does)::

    .venv/bin/python docs/_ext/welcome_screenshot.py
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from playwright.async_api import async_playwright

from hotseam import Agent, Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ask,
)
from hotseam.providers.web import WebProvider

OUT = Path(__file__).resolve().parents[1] / "images" / "welcome.png"
CHROMIUM = os.environ.get("HOTSEAM_CHROMIUM", "/usr/bin/chromium")
QUESTIONS = [
    AskUserQuestionRequest(
        "Which database should the service use?",
        header="Storage",
        options=(
            AskUserQuestionOption("Postgres", description="Server database", recommended=True),
            AskUserQuestionOption("SQLite", description="One file, zero setup"),
        ),
        agent=Agent("planner", "Planner"),
    ),
    AskUserQuestionRequest(
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
    ),
]


async def main() -> None:
    context = Context("welcome")
    async with context.scope("ui") as scope, anyio.create_task_group() as tasks:
        web = WebProvider.serve(scope, port=0)
        scope.provide(USER_INTERACTION, web)
        for question in QUESTIONS:
            tasks.start_soon(lambda question=question: ask(question, context=context))
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=CHROMIUM)
            page = await browser.new_page(viewport={"width": 860, "height": 700})
            await page.emulate_media(color_scheme="light")
            await page.goto(web.url)
            for question in QUESTIONS:
                await page.get_by_text(question.question, exact=True).wait_for(timeout=10_000)
            await page.locator("body").evaluate("() => document.activeElement.blur()")
            await page.screenshot(path=str(OUT))
            await browser.close()
        tasks.cancel_scope.cancel()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    anyio.run(main)

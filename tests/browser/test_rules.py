"""The Rules section in a real browser: an Always allow from a card is listed with its uses,
and Revoke (confirmed in the page) removes it, so the next call is asked again."""

from __future__ import annotations

from typing import Any

import pytest

from providers.web.test_approvals import deploying

from .test_approvals import approval_card
from .test_inbox import open_page, visible

pytestmark = pytest.mark.anyio


async def test_an_always_allow_is_listed_and_revoke_removes_it(browser: Any) -> None:
    async with deploying(offer_rules=True) as d:
        page = await open_page(browser, d.s.web.url)
        rules = page.locator("#rules")
        assert not await rules.is_visible()  # no rule yet: no section
        d.call({"service": "api"})
        card = approval_card(page)
        await card.wait_for(timeout=visible())
        await card.get_by_role("button", name="Always allow", exact=True).click()
        assert await d.result() == {"ok": True, "output": "deployed api x1"}
        rule = rules.locator("li.rule-item")
        await rule.get_by_text("always allow deploy (journal)").wait_for(timeout=visible())
        assert await rules.get_by_role("heading", name="Rules").is_visible()
        meta = await rule.locator(".meta").text_content() or ""
        assert meta.startswith("Not used yet · added ")
        assert await rules.get_by_text("Kept by this process").is_visible()

        await rule.get_by_role("button", name="Revoke").click()
        await rule.get_by_text("Revoke this rule?").wait_for(timeout=visible())
        await rule.get_by_role("button", name="Keep it").click()  # changed its mind
        assert await rule.get_by_role("button", name="Revoke").is_visible()
        assert len(await gate_rules(d)) == 1

        await rule.get_by_role("button", name="Revoke").click()
        await rule.get_by_role("button", name="Yes, revoke").click()
        await rules.wait_for(state="hidden", timeout=visible())
        assert await gate_rules(d) == []
        d.call({"service": "db"})
        await page.locator("li.card.approval:not(.gone)").wait_for(timeout=visible())
        assert d.s.web.pending == 1  # asked again
        assert not page.errors


async def gate_rules(d: Any) -> list[Any]:
    from hotseam import TOOL_GATE

    gate = d.s.context.lookup(TOOL_GATE)
    rules: list[Any] = await gate.rules.rules()
    return rules

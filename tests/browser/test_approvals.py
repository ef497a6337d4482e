"""An approval in a real browser: the call shown as a card (tool, arguments, reason), a
button per decision, a rejection typed, an edit checked against the tool's schema in the
page before it is sent; end to end through ``ctx.tools.execute`` with ``HumanGate``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from providers.web.test_approvals import deploying

from .test_inbox import open_page, visible

pytestmark = pytest.mark.anyio


def approval_card(page: Any) -> Any:
    return page.locator("li.card.approval")


async def test_the_call_is_shown_and_approve_runs_it(browser: Any) -> None:
    async with deploying() as d:
        page = await open_page(browser, d.s.web.url)
        d.call({"service": "api", "replicas": 3})
        card = approval_card(page)
        await card.wait_for(timeout=visible())
        assert await card.locator("code.tool").text_content() == "deploy"
        assert await card.get_by_text("the release is tagged").is_visible()
        shown = await card.get_by_label("Arguments").text_content()
        assert json.loads(shown or "") == {"replicas": 3, "service": "api", "window": None}
        names = ["Approve", "Edit", "Reject", "Respond", "Dismiss"]
        for name in names:
            assert await card.get_by_role("button", name=name, exact=True).is_visible()
        await card.get_by_role("button", name="Approve", exact=True).click()
        assert await d.result() == {"ok": True, "output": "deployed api x3"}
        await page.get_by_text("Approved as shown.").wait_for(timeout=visible())
        assert not page.errors


async def test_a_rejection_needs_its_reason_typed(browser: Any) -> None:
    async with deploying() as d:
        page = await open_page(browser, d.s.web.url)
        d.call({"service": "api"})
        card = approval_card(page)
        await card.wait_for(timeout=visible())
        await card.get_by_role("button", name="Reject", exact=True).click()
        reason = card.get_by_label("The reason (the model is told why)")
        assert await reason.is_visible() and await reason.input_value() == ""
        await card.get_by_role("button", name="Send rejection").click()
        await card.get_by_text("Reject needs the reason, for the model.").wait_for(
            timeout=visible()
        )
        assert d.results == []
        await reason.fill("not during the freeze")
        await card.get_by_role("button", name="Send rejection").click()
        result = await d.result()
        assert result["ok"] is False and result["error"]["code"] == "APPROVAL_REJECTED"
        assert "not during the freeze" in result["error"]["message"]
        await page.get_by_text("Rejected: “not during the freeze”.").wait_for(timeout=visible())
        assert not page.errors


async def test_an_invalid_edit_is_refused_in_the_page_and_a_valid_one_runs(browser: Any) -> None:
    async with deploying() as d:
        page = await open_page(browser, d.s.web.url)
        d.call({"service": "api", "replicas": 9})
        card = approval_card(page)
        await card.wait_for(timeout=visible())
        await card.get_by_role("button", name="Edit", exact=True).click()
        box = card.get_by_label("The arguments to run with (JSON)")
        prefilled = await box.input_value()
        assert json.loads(prefilled) == {"replicas": 9, "service": "api", "window": None}
        assert "\n" in prefilled  # formatted for editing
        send = card.get_by_role("button", name="Run with these arguments")
        refusals = {
            '{"service": "api",': "The edited arguments are not JSON: ",
            '{"replicas": 2}': "The edited arguments are not valid input for deploy: missing "
            "required field 'service'.",
            '{"service": "api", "replicas": "two"}': "The edited arguments are not valid input "
            "for deploy: field 'replicas' must be an integer (got a string).",
        }
        error = card.locator("p.error[id$='-details-error']")
        for typed, message in refusals.items():
            await box.fill(typed)
            await send.click()
            await card.get_by_text(message).wait_for(timeout=visible())
            assert (await error.text_content() or "").startswith(message)
            assert await box.evaluate("node => node === document.activeElement")
        assert d.results == []
        assert len((await d.s.client.get("/api/questions")).json()["questions"]) == 1
        await box.fill(prefilled.replace("9", "2"))
        await box.press("Control+Enter")
        assert await d.result() == {"ok": True, "output": "deployed api x2"}
        await page.get_by_text("Approved with edited arguments.").wait_for(timeout=visible())
        assert not page.errors


async def test_an_edit_the_gate_refuses_is_asked_again_saying_why_with_the_edit_kept(
    browser: Any,
) -> None:
    async with deploying() as d:
        page = await open_page(browser, d.s.web.url)
        d.call({"service": "api"})
        first = approval_card(page)
        await first.wait_for(timeout=visible())
        await first.get_by_role("button", name="Edit", exact=True).click()
        # "window" is a nested model: neither the page nor the server checks inside it.
        typed = '{"replicas": 1, "service": "api", "window": {"start": "noon"}}'
        await first.get_by_label("The arguments to run with (JSON)").fill(typed)
        await first.get_by_role("button", name="Run with these arguments").click()
        again = page.locator("li.card.approval:not(.gone)").filter(has=page.locator("p.again"))
        await again.wait_for(timeout=visible())
        assert "window.start" in (await again.locator("p.again").text_content() or "")
        box = again.get_by_label("The arguments to run with (JSON)")
        assert await box.input_value() == typed
        await box.fill(typed.replace('"noon"', "12"))
        await again.get_by_role("button", name="Run with these arguments").click()
        assert await d.result() == {"ok": True, "output": "deployed api x1"}
        assert not page.errors


async def test_always_allow_runs_this_call_and_the_next_unasked(browser: Any) -> None:
    async with deploying(offer_rules=True) as d:
        page = await open_page(browser, d.s.web.url)
        d.call({"service": "api"})
        card = approval_card(page)
        await card.wait_for(timeout=visible())
        await card.get_by_role("button", name="Always allow", exact=True).click()
        assert await d.result() == {"ok": True, "output": "deployed api x1"}
        await page.get_by_text("Always allowed (a rule was added).").wait_for(timeout=visible())
        d.call({"service": "db"})
        assert await d.result() == {"ok": True, "output": "deployed db x1"}
        assert not page.errors

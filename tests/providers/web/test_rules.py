"""The approval rules in the web inbox: listed from where the gate keeps them (the fleet
inbox's journal; a daemon's journal, else its ``HumanGate``'s own), revoked from the page
behind the same token, CSRF and origin checks as an answer, with JSON errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from hotseam import TOOL_GATE
from hotseam.interaction.approvals import HumanGate
from hotseam.interaction.journal import JOURNALING, JournalDaemon

from .conftest import Served, serving
from .test_approvals import Deploying, deploying
from .test_journal_inbox import fleet

pytestmark = pytest.mark.anyio


def gate_of(s: Served) -> HumanGate:
    gate = s.context.lookup(TOOL_GATE)
    assert isinstance(gate, HumanGate)
    return gate


async def rules_of(client: httpx.AsyncClient, **params: str) -> dict[str, Any]:
    response = await client.get("/api/rules", params=params)
    assert response.status_code == 200, response.text
    listing: dict[str, Any] = response.json()
    return listing


async def revoke(client: httpx.AsyncClient, rule_id: str, **kwargs: Any) -> httpx.Response:
    return await client.post(f"/api/rules/{rule_id}/revoke", json={}, **kwargs)


@asynccontextmanager
async def journaled(d: Deploying) -> AsyncIterator[JournalDaemon]:
    """The served daemon writes to a journal (as ``hotseam dev`` provides it)."""
    async with JournalDaemon.open("memory:", name="alpha", agent="planner") as daemon:
        registration = d.s.scope.provide(JOURNALING, daemon)
        try:
            yield daemon
        finally:
            await registration.dispose()


async def test_the_fleet_inbox_lists_its_journals_rules_with_their_uses() -> None:
    async with fleet() as f:
        allow = await f.journal.add_rule(
            "deploy", allow=True, where={"service": "api*"}, by="hotseam approvals"
        )
        reject = await f.journal.add_rule("drop_table", allow=False, reason="never in prod")
        await f.journal.note_rule_use(allow.id, "d1")
        await f.journal.note_rule_use(allow.id, "d2")
        listing = await rules_of(f.client)
        assert listing["source"] == "journal"
        assert [rule["id"] for rule in listing["rules"]] == [allow.id, reject.id]  # oldest first
        first, second = listing["rules"]
        assert first["text"] == "always allow deploy where service=api* (journal)"
        assert first["uses"] == 2 and first["allow"] is True and first["active"] is True
        assert first["where"] == {"service": "api*"} and first["created_by"] == "hotseam approvals"
        assert first["created_at"] == allow.created_at and first["revoked_at"] is None
        assert second["text"] == "always reject drop_table (journal)"
        assert second["reason"] == "never in prod" and second["uses"] == 0


async def test_a_rule_revoked_in_the_fleet_inbox_is_revoked_in_the_journal() -> None:
    async with fleet() as f:
        rule = await f.journal.add_rule("deploy", allow=True)
        response = await revoke(f.client, rule.id)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["ok"] is True and body["rule"]["active"] is False
        assert body["rule"]["revoked_by"] == "web inbox"
        (kept,) = await f.journal.rules(revoked=True)
        assert not kept.active and kept.revoked_by == "web inbox"
        assert (await rules_of(f.client))["rules"] == []
        (shown,) = (await rules_of(f.client, all="1"))["rules"]
        assert shown["id"] == rule.id and shown["revoked_at"] == kept.revoked_at
        again = await revoke(f.client, rule.id)  # changes nothing
        assert again.status_code == 200 and again.json()["rule"]["revoked_at"] == kept.revoked_at


async def test_a_daemon_inbox_lists_its_journals_rules_else_its_gates_own() -> None:
    async with deploying(offer_rules=True) as d:
        own = await gate_of(d.s).rules.add_rule("deploy", allow=True)
        listing = await rules_of(d.s.client)
        assert listing["source"] == "process"
        assert [rule["id"] for rule in listing["rules"]] == [own.id]
        async with journaled(d) as daemon:
            kept = await daemon.journal.add_rule("deploy", allow=False, reason="frozen")
            listing = await rules_of(d.s.client)
            assert listing["source"] == "journal"
            assert [rule["id"] for rule in listing["rules"]] == [kept.id]
            assert listing["rules"][0]["text"] == "always reject deploy (journal)"
            assert (await revoke(d.s.client, kept.id)).status_code == 200
            assert not (await daemon.journal.rules(revoked=True))[0].active
            assert (await gate_of(d.s).rules.rules()) == [own]  # the gate's own untouched
        assert [rule["id"] for rule in (await rules_of(d.s.client))["rules"]] == [own.id]


async def test_an_inbox_without_a_gate_keeping_rules_lists_none() -> None:
    async with serving() as s:  # no journal, no HumanGate
        assert await rules_of(s.client) == {"source": None, "rules": []}
        refused = await revoke(s.client, "abc")
        assert refused.status_code == 404
        assert refused.json()["error"]["code"] == "UNKNOWN_RULE"


async def test_always_allow_from_a_card_is_listed_and_revoking_it_asks_the_next_call() -> None:
    async with deploying(offer_rules=True) as d:
        d.call({"service": "api"})
        response = await d.decide(await d.card(), "always", None)
        assert response.status_code == 200, response.text
        assert await d.result() == {"ok": True, "output": "deployed api x1"}
        (rule,) = (await rules_of(d.s.client))["rules"]
        assert rule["text"] == "always allow deploy (journal)" and rule["uses"] == 0
        d.call({"service": "db"})
        assert await d.result() == {"ok": True, "output": "deployed db x1"}  # not asked
        (rule,) = (await rules_of(d.s.client))["rules"]
        assert rule["uses"] == 1
        revoked = await revoke(d.s.client, rule["id"])
        assert revoked.status_code == 200, revoked.text
        assert (await rules_of(d.s.client))["rules"] == []
        d.call({"service": "web"})
        card = await d.card()  # asked again
        assert card["approval"]["arguments"]["service"] == "web"
        assert d.s.web.pending == 1


async def test_an_unknown_rule_is_404_naming_it() -> None:
    async with fleet() as f:
        refused = await revoke(f.client, "nosuchrule")
        assert refused.status_code == 404
        error = refused.json()["error"]
        assert error["code"] == "UNKNOWN_RULE" and error["rule"] == "nosuchrule"
        assert "nosuchrule" in error["message"]
    async with deploying(offer_rules=True) as d:  # the gate's own rules
        refused = await revoke(d.s.client, "nosuchrule")
        assert refused.status_code == 404
        assert refused.json()["error"]["rule"] == "nosuchrule"


async def test_a_forged_revoke_is_refused_exactly_like_a_forged_answer() -> None:
    """Without the token in a header, with a body a cross-site form can send, from another
    site: the same refusal as an answer's, and the rule stays in force."""
    async with deploying(offer_rules=True) as d:
        rule = await gate_of(d.s).rules.add_rule("drop_table", allow=True)
        d.call({"service": "api"})
        card = await d.card()
        s = d.s
        forgeries: list[tuple[str, dict[str, Any]]] = [
            ("token in the query only", {"params": {"token": s.web.token}, "json": {}}),
            ("a wrong token", {"headers": {"x-hotseam-token": "x" * 32}, "json": {}}),
            ("a form body", {"content": b"{}", "headers": {"content-type": "text/plain"}}),
            ("no body type", {"content": b"{}"}),
            ("another origin", {"json": {}, "headers": {"origin": "http://evil.example"}}),
            ("cross-site", {"json": {}, "headers": {"sec-fetch-site": "cross-site"}}),
            ("a rebinding Host", {"json": {}, "headers": {"host": "evil.example"}}),
        ]
        async with httpx.AsyncClient(base_url=s.base) as bare:
            for what, forged in forgeries:
                client = bare if what in ("token in the query only", "a wrong token") else s.client
                answer = await client.post(f"/api/questions/{card['id']}/answer", **forged)
                revoking = await client.post(f"/api/rules/{rule.id}/revoke", **forged)
                assert answer.status_code in (401, 403, 415, 421), (what, answer.text)
                assert revoking.status_code == answer.status_code, what
                assert revoking.json() == answer.json(), what
        assert (await gate_of(s).rules.rules()) == [rule]  # still in force
        assert s.web.pending == 1


async def test_a_journal_out_of_reach_is_a_503_in_json() -> None:
    """Not the gate's own rules instead: the daemon's rules are the journal's, unreadable."""
    async with deploying(offer_rules=True) as d:
        async with JournalDaemon.open("memory:", name="alpha") as daemon:
            rule = await daemon.journal.add_rule("deploy", allow=True)
            registration = d.s.scope.provide(JOURNALING, daemon)
        # The journal is closed now (out of reach), and still the daemon's journal.
        try:
            for response in (
                await d.s.client.get("/api/rules"),
                await revoke(d.s.client, rule.id),
            ):
                assert response.status_code == 503, response.text
                assert response.headers["content-type"] == "application/json"
                error = response.json()["error"]
                assert error["code"] == "JOURNAL_UNAVAILABLE" and "closed" in error["message"]
        finally:
            await registration.dispose()

"""Approval rules in the journal, on every engine (``journal_url``: SQLite, memory and a real
PostgreSQL): added, listed, matched, their uses recorded, revoked for good."""

from __future__ import annotations

import pytest

from hotseam.interaction._journal import JournalError, JournalErrorCode, open_journal

pytestmark = pytest.mark.anyio


async def test_a_rule_is_kept_listed_used_and_revoked_for_good(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        allow = await journal.add_rule(
            "deploy", allow=True, where={"service": "api-*"}, reason="the usual", by="ops"
        )
        reject = await journal.add_rule("deploy", allow=False, where={"replicas": "[5-9]"})
        assert [rule.id for rule in await journal.rules()] == [allow.id, reject.id]
        assert allow.matches("deploy", {"service": "api-eu", "replicas": 2})
        assert not allow.matches("deploy", {"service": "db"})
        assert not allow.matches("build", {"service": "api-eu"})
        assert reject.matches("deploy", {"replicas": 7}) and not reject.matches(
            "deploy", {"replicas": 12}
        )
        used = await journal.note_rule_use(allow.id, "digest-1", run_id=None, agent="alpha")
        assert used.uses == 1
        revoked = await journal.revoke_rule(allow.id, by="ops")
        assert not revoked.active and revoked.revoked_by == "ops" and revoked.uses == 1
        assert await journal.revoke_rule(allow.id) == revoked  # a second revoke: the same
        with pytest.raises(JournalError) as refused:
            await journal.note_rule_use(allow.id, "digest-2")
        assert refused.value.code == JournalErrorCode.RULE_REVOKED
        assert [rule.id for rule in await journal.rules()] == [reject.id]
        assert {rule.id for rule in await journal.rules(revoked=True)} == {allow.id, reject.id}


@pytest.mark.parametrize(
    ("where", "scope", "scope_id"),
    [
        ({}, "somewhere", None),
        ({}, "run", None),
        ({}, "journal", "x"),
        ({"": "x"}, "journal", None),
    ],
)
async def test_a_rule_that_cannot_mean_what_it_says_is_refused(
    journal_url: str, where: dict[str, str], scope: str, scope_id: str | None
) -> None:
    async with open_journal(journal_url) as journal:
        with pytest.raises(JournalError) as refused:
            await journal.add_rule(
                "deploy",
                allow=True,
                where=where,
                scope=scope,  # type: ignore[arg-type]
                scope_id=scope_id,
            )
        assert refused.value.code == JournalErrorCode.INVALID_RULE
        assert await journal.rules(revoked=True) == []


async def test_an_unknown_rule_is_named(journal_url: str) -> None:
    async with open_journal(journal_url) as journal:
        with pytest.raises(JournalError) as refused:
            await journal.revoke_rule("nope")
        assert refused.value.code == JournalErrorCode.RULE_UNKNOWN and "nope" in str(refused.value)

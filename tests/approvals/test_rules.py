"""Approval rules decide the calls they cover without asking: "always allow" runs them,
"always reject" refuses them, a reject rule winning; a revoked rule decides nothing; each
use is recorded. Rules live in the gate outside a journal, in the journal inside a run —
where ``hotseam approvals`` (a real process) adds, lists and revokes them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel
from tests._timing import scaled

from hotseam import TOOL_GATE, Context, ToolCall, tool
from hotseam.interaction import USER_INTERACTION, AskUserQuestionRequest
from hotseam.interaction._journal import open_journal
from hotseam.interaction.approvals import Decision, HumanGate
from hotseam.interaction.journal import JournalDaemon
from hotseam.providers.scripted import Reply, ScriptedProvider

pytestmark = pytest.mark.anyio


class DeployInput(BaseModel):
    service: str
    replicas: int = 1


class Counting:
    multiple_questions = True

    def __init__(self, *replies: Reply) -> None:
        self.requests: list[AskUserQuestionRequest] = []
        self.scripted = ScriptedProvider(list(replies))

    async def ask(self, request: AskUserQuestionRequest):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return await self.scripted.ask(request)


def _deploy(ran: list[str]):  # type: ignore[no-untyped-def]
    @tool("deploy", needs_approval=True)
    async def deploy(input: DeployInput, call: ToolCall) -> str:
        """Deploy."""
        ran.append(input.service)
        return f"deployed {input.service}"

    return deploy


async def test_rules_of_the_gate_decide_what_they_cover_and_the_rest_is_asked() -> None:
    ran: list[str] = []
    gate = HumanGate()
    allow = await gate.rules.add_rule("deploy", allow=True, where={"service": "api-*"})
    reject = await gate.rules.add_rule(
        "deploy", allow=False, where={"replicas": "[5-9]"}, reason="too many"
    )
    provider = Counting(Reply.reject("not the database"))
    context = Context("agent")
    async with context.scope("ui") as scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, gate)
        scope.register_tool(_deploy(ran))
        ruled = await context.tools.execute("deploy", {"service": "api-eu"})
        both = await context.tools.execute("deploy", {"service": "api-eu", "replicas": 7})
        asked = await context.tools.execute("deploy", {"service": "db"})
        await gate.rules.revoke_rule(allow.id)
        after = await context.tools.execute("deploy", {"service": "api-us"})
    assert ruled.ok and ruled.output == "deployed api-eu"
    assert both.error is not None and both.error["code"] == "APPROVAL_REJECTED"
    assert both.error["details"]["rule"] == reject.id and "too many" in both.error["message"]
    assert asked.error is not None and "not the database" in asked.error["message"]
    assert after.error is not None  # revoked: asked, and the script has nothing left
    assert ran == ["api-eu"]
    assert len(provider.requests) == 2  # db, then api-us once the rule was revoked
    used = {rule.id: rule.uses for rule in await gate.rules.rules(revoked=True)}
    assert used == {allow.id: 1, reject.id: 1}


async def test_always_allow_adds_a_rule_and_the_next_call_is_not_asked() -> None:
    ran: list[str] = []
    gate = HumanGate(offer_rules=True)
    provider = Counting(Reply.always_allow())
    context = Context("agent")
    async with context.scope("ui") as scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, gate)
        scope.register_tool(_deploy(ran))
        first = await context.tools.execute("deploy", {"service": "api"})
        second = await context.tools.execute("deploy", {"service": "db"})
    (request,) = provider.requests
    assert request.approval is not None
    assert Decision.ALWAYS in request.approval.decisions
    assert first.ok and second.ok and ran == ["api", "db"]
    (rule,) = await gate.rules.rules()
    assert rule.allow and rule.tool == "deploy" and rule.where == {} and rule.uses == 1


async def test_always_reject_refuses_this_call_and_every_later_one() -> None:
    ran: list[str] = []
    gate = HumanGate(offer_rules=True)
    provider = Counting(Reply.always_reject("never deploy from an agent"))
    context = Context("agent")
    async with context.scope("ui") as scope:
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, gate)
        scope.register_tool(_deploy(ran))
        first = await context.tools.execute("deploy", {"service": "api"})
        second = await context.tools.execute("deploy", {"service": "db"})
    assert ran == [] and len(provider.requests) == 1
    for result in (first, second):
        assert result.error is not None and result.error["code"] == "APPROVAL_REJECTED"
        assert "never deploy from an agent" in result.error["message"]


def _approvals(journal: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hotseam", "approvals", "--journal", str(journal), *args],
        capture_output=True,
        text=True,
        timeout=scaled(60),
        check=False,
    )


async def test_a_journal_rule_from_the_cli_decides_a_daemon_call_and_its_use_is_listed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "journal.sqlite3"
    async with open_journal(path):
        pass  # the journal exists, as a daemon's would
    added = await anyio.to_thread.run_sync(
        lambda: _approvals(path, "allow", "deploy", "--where", "service=api*", "--json")
    )
    assert added.returncode == 0, added.stderr
    rule_id = json.loads(added.stdout)["rule"]["id"]
    ran: list[str] = []
    provider = Counting(Reply.reject("asked, and refused"))
    context = Context("daemon")
    async with (
        open_journal(path) as journal,
        JournalDaemon.open(journal, name="d") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate())
        scope.register_tool(_deploy(ran))
        async with journaling.run("deployer"):
            ruled = await context.tools.execute("deploy", {"service": "api"})
            revoked = await anyio.to_thread.run_sync(lambda: _approvals(path, "revoke", rule_id))
            assert revoked.returncode == 0, revoked.stderr
            asked = await context.tools.execute("deploy", {"service": "api"})
    assert ruled.ok and ran == ["api"]
    assert asked.error is not None and "asked, and refused" in asked.error["message"]
    listed = await anyio.to_thread.run_sync(lambda: _approvals(path, "list", "--all", "--json"))
    (rule,) = json.loads(listed.stdout)["rules"]
    assert rule["id"] == rule_id and rule["uses"] == 1 and rule["revoked_at"] is not None


async def test_a_run_rule_added_by_a_decision_covers_that_run_only(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    ran: list[str] = []
    provider = Counting(Reply.always_allow(), Reply.reject("another run: asked"))
    context = Context("daemon")
    async with (
        open_journal(path) as journal,
        JournalDaemon.open(journal, name="d") as journaling,
        context.scope("ui") as scope,
    ):
        scope.provide(USER_INTERACTION, provider)
        scope.provide(TOOL_GATE, HumanGate(offer_rules=True))
        scope.register_tool(_deploy(ran))
        async with journaling.run("deployer") as run:
            await context.tools.execute("deploy", {"service": "api"})
            unasked = await context.tools.execute("deploy", {"service": "db"})
        async with journaling.run("deployer"):  # a new run of the agent
            asked = await context.tools.execute("deploy", {"service": "db"})
        (rule,) = await journal.rules()
    assert unasked.ok and ran == ["api", "db"]
    assert asked.error is not None and len(provider.requests) == 2
    assert (rule.scope, rule.scope_id, rule.uses) == ("run", run.record.id, 1)

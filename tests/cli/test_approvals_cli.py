"""``hotseam run`` gates a tool needing approval (the human decides, through whichever
provider is active), a rule added with ``hotseam approvals`` decides without asking,
``hotseam status`` lists the rules in force with their uses. Real processes, the embedded
journal."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import anyio

from cli._support import Process, hotseam, write
from hotseam.interaction.journal import default_journal_path, open_journal

AGENT = """
import anyio
from pydantic import BaseModel
from hotseam import Agent, ToolCall, tool

class DeployInput(BaseModel):
    service: str

@tool("deploy", needs_approval=True)
async def deploy(input: DeployInput, call: ToolCall) -> str:
    \"\"\"Deploy a service.\"\"\"
    return f"deployed {input.service}"

async def main(context):
    async with context.scope("agent-tools") as scope:
        scope.register_tool(deploy)
        for service in ("api", "db"):
            result = await context.tools.execute(
                "deploy", {"service": service}, agent=Agent("deployer", "Deployer")
            )
            shown = result.output if result.ok else result.error["code"]
            print(f"{service} -> {shown}", flush=True)
        await anyio.sleep_forever()  # stays up for status
"""


def test_a_rule_decides_unasked_status_lists_it_and_the_rest_is_asked(tmp_path: Path) -> None:
    write(tmp_path / "agent.py", AGENT)
    (tmp_path / "providers").mkdir()
    runtime = tmp_path / "rt"

    async def make() -> None:
        default_journal_path().parent.mkdir(parents=True, exist_ok=True)
        async with open_journal(default_journal_path()):
            pass  # the embedded journal, as a first hotseam run makes it

    anyio.run(make)
    added = hotseam(
        "approvals", "allow", "deploy", "--where", "service=api", "--reason", "the usual",
        cwd=tmp_path, runtime=runtime,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    rule_id = added.stdout.split()[1].rstrip(":")
    answers = tmp_path / "answers.json"
    # Only db is asked: the scripted human rejects it (the decision, then its reason).
    answers.write_text(json.dumps([["reject", "not the database"]]))
    daemon = Process(
        "run", "providers", "--agent", "agent.py", "--name", "deployer",
        "--answers", str(answers), cwd=tmp_path, runtime=runtime,
    )  # fmt: skip
    try:
        daemon.expect(r"api -> deployed api", stream="stdout")
        daemon.expect(r"db -> APPROVAL_REJECTED", stream="stdout")
        status = json.loads(
            hotseam("status", "deployer", "--json", cwd=tmp_path, runtime=runtime).stdout
        )
        (listed,) = status["approval_rules"]
        assert listed["id"] == rule_id and listed["uses"] == 1
        text = hotseam("status", "deployer", cwd=tmp_path, runtime=runtime).stdout
        assert f"{rule_id}: always allow deploy where service=api (journal), used 1" in text
    finally:
        daemon.finish(signal.SIGTERM)
    listed_rules = hotseam("approvals", "list", "--json", cwd=tmp_path, runtime=runtime)
    assert json.loads(listed_rules.stdout)["rules"][0]["uses"] == 1


KILLED_AGENT = """
import pathlib
import anyio
from pydantic import BaseModel
from hotseam import Agent, ToolCall, tool

class DeployInput(BaseModel):
    service: str

MARK = pathlib.Path(__file__).with_name("ran")

@tool("deploy", needs_approval=True)
async def deploy(input: DeployInput, call: ToolCall) -> str:
    \"\"\"Deploy a service.\"\"\"
    with MARK.open("a") as ran:
        ran.write(input.service + "\\n")
    print(f"running {input.service}", flush=True)
    if len(MARK.read_text().split()) == 1:
        await anyio.sleep_forever()  # the first daemon is killed here, the tool running
    return f"deployed {input.service}"

async def main(context):
    async with context.scope("agent-tools") as scope:
        scope.register_tool(deploy)
        result = await context.tools.execute("deploy", {"service": "api"}, agent=Agent("deployer"))
        print(f"api -> {result.output if result.ok else result.error['code']}", flush=True)
"""


def _approve_pending(path: Path) -> int:
    """Approve what an inbox lists (as the fleet inbox would: the two-question answer)."""
    from hotseam.interaction import AskUserQuestionAnswer, QuestionAnswer

    async def answer() -> int:
        async with open_journal(path) as journal:
            entries = await journal.inbox()
            for entry in entries:
                request = entry.ask.request
                decision, text = request.questions
                given = AskUserQuestionAnswer.of(
                    [QuestionAnswer.chosen(decision, ["approve"]), QuestionAnswer.skip(text)],
                    request,
                )
                assert (await journal.answer_ask(entry.ask.id, given, by="the test")).won
            return len(entries)

    return anyio.run(answer)


def test_a_decision_recorded_before_kill_9_is_replayed_not_asked_again(tmp_path: Path) -> None:
    """The human approves in the fleet inbox, the tool starts, the daemon is killed -9; the
    next daemon resumes the run and the approval replays from the journal — the human is
    not asked again, and the call runs with the approved arguments."""
    write(tmp_path / "agent.py", KILLED_AGENT)
    (tmp_path / "providers").mkdir()  # no provider: the question waits for an inbox
    journal = tmp_path / "journal.sqlite3"
    runtime = tmp_path / "rt"
    first = Process(
        "run", "providers", "--agent", "agent.py", "--name", "deployer",
        "--journal", str(journal), cwd=tmp_path, runtime=runtime,
    )  # fmt: skip
    try:
        first.expect(r'"ask\.started"')
        assert _approve_pending(journal) == 1
        first.expect(r"running api", stream="stdout")
    finally:
        first.finish(signal.SIGKILL)
    second = Process(
        "run", "providers", "--agent", "agent.py", "--name", "deployer",
        "--journal", str(journal), cwd=tmp_path, runtime=runtime,
    )  # fmt: skip
    try:
        second.expect(r"api -> deployed api", stream="stdout")
    finally:
        second.finish(signal.SIGTERM)
    logged = second.lines["stderr"]
    assert [line for line in logged if '"ask.replayed"' in line]
    assert not [line for line in logged if '"ask.started"' in line]
    assert (tmp_path / "ran").read_text().split() == ["api", "api"]  # ran again, unasked

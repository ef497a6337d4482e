"""``hotseam dev`` keeps the loop alive, on a real terminal (pexpect).

The agent failed: the command says so and keeps watching. No provider yet: the question
waits with one line. The agent's end does not end the command: Enter, or a save of the
agent's module, runs it again (a save withdraws the open question first). The provider
file deleted and written again at once is a reload; deleted for longer than the grace, the
question waits and is asked again when the file is restored. Ctrl-C at a question
dismisses it; a second within a second stops the command.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect
from tests._timing import scaled

from ._support import hotseam_env, write

AGENT = """
VERSION = 1


async def main(context):
    if VERSION == 0:
        raise RuntimeError("not written yet")
    while True:
        result = await context.tools.execute(
            "ask_user_question", {"question": f"Colour v{VERSION}?", "header": "Colour"}
        )
        if result.ok:
            print(f"answer v{VERSION}:", result.output["answer"], flush=True)
            return
        print("no answer:", result.error["code"], flush=True)
"""

TERMINAL_UI = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.terminal import TerminalProvider


def setup(scope):
    scope.provide(USER_INTERACTION, TerminalProvider())
"""

WAITING = "waiting for a provider of 'user-interaction' — save one under providers/"


def _spawn(project: Path) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "hotseam", "dev", "providers", "--agent", "agent.py", "--deletion-grace", "1"],
        cwd=str(project),
        # A terminal that answers cursor position requests: prompt_toolkit does not wait
        # for an answer pexpect never gives before it reads keys.
        env={**hotseam_env(project / "rt"), "PROMPT_TOOLKIT_NO_CPR": "1"},
        encoding="utf-8",
        timeout=scaled(20),
        dimensions=(50, 160),
    )


def _expect_all(child: pexpect.spawn, *texts: str) -> None:
    """Wait for each of ``texts``, in any order (a log line printed while a prompt is open
    appears above it, after the prompt was drawn)."""
    waiting = list(texts)
    while waiting:
        waiting.pop(child.expect_exact(waiting))


def test_the_loop_stays_alive_through_a_missing_provider_restarts_and_ctrl_c(
    tmp_path: Path,
) -> None:
    agent = write(tmp_path / "agent.py", AGENT.replace("VERSION = 1", "VERSION = 0"))
    (tmp_path / "providers").mkdir()
    ui = tmp_path / "providers" / "ui.py"
    child = _spawn(tmp_path)
    try:
        child.expect_exact("the agent failed: RuntimeError: not written yet", timeout=scaled(40))
        child.expect_exact("keeps watching; save agent.py or press Enter to run it again")
        write(agent, AGENT)  # a fixed agent runs at once
        child.expect_exact("agent.py changed: running the agent again")
        child.expect_exact(WAITING)
        before_ui = child.before
        write(ui, TERMINAL_UI)
        child.expect_exact("Colour v1?")
        assert WAITING not in before_ui + child.before  # one line, however long it waits
        child.send("teal\r")
        child.expect_exact("answer v1: teal")
        child.expect_exact("the agent finished")
        child.expect_exact("keeps watching; save agent.py or press Enter to run it again")

        child.send("\r")  # Enter while no question is open
        child.expect_exact("Enter: running the agent again")
        child.expect_exact("Colour v1?")

        ui.unlink()  # deleted and written again at once (a branch switch): a reload
        write(ui, TERMINAL_UI + "# changed\n")
        child.expect_exact("reloaded providers/ui.py (generation 2)")
        assert "unloaded" not in child.before
        child.expect_exact("Colour v1?")

        ui.unlink()  # the UI file goes for longer than the grace while the question is open
        child.expect_exact("unloaded providers/ui.py")
        child.expect_exact(WAITING)
        write(ui, TERMINAL_UI)  # ... and comes back: the same question is asked again
        child.expect_exact("Colour v1?")

        write(agent, AGENT.replace("VERSION = 1", "VERSION = 2"))
        _expect_all(child, "agent.py changed: withdrawing the agent's question", "Colour v2?")

        child.send("\x03")  # Ctrl-C at the question dismisses it; the agent asks again
        _expect_all(child, "Ctrl-C again within 1 s stops the command", "Colour v2?")
        child.send("\x03")
        child.expect_exact("Ctrl-C twice: stopping")
        child.expect_exact("every generation was disposed")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0

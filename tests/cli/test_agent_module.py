"""The agent's module is agent code: executed off the event loop, within a time bound.

Saving ``agent.py`` with a slow module body (``time.sleep``, a heavy import, a ``while
True:``) leaves the control socket and the question in flight (shown by a provider that
runs on the event loop) serving; a body still running after ``--import-timeout`` is
abandoned with an error naming the file and the line, and the agent keeps its previous
code. The same bound applies at the start.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from tests._timing import scaled

from ._support import Process, hotseam, write

AGENT = """
import anyio

VERSION = 1


async def main(context):
    print(f"v{VERSION} runs", flush=True)
    result = await context.tools.execute(
        "ask_user_question", {"question": "Colour?", "header": "Colour"}
    )
    print("answer:", result.output["answer"] if result.ok else result.error["code"], flush=True)
    await anyio.sleep_forever()
"""

FILE_UI = """
import anyio
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer


class FileUI:
    \"\"\"Answers with the content of reply.txt once it exists (polled on the event loop).\"\"\"

    async def ask(self, request):
        reply = anyio.Path("reply.txt")
        while not await reply.exists():
            await anyio.sleep(0.02)
        return AskUserQuestionAnswer(await reply.read_text())


def setup(scope):
    scope.provide(USER_INTERACTION, FileUI())
"""

SPINNING_BODY = """
print("v2 body started", flush=True)
while True:
    pass
"""


def _spinning_lines(source: str) -> set[int]:
    """The lines a thread spinning in ``while True: pass`` can be seen at."""
    lines = source.lstrip("\n").splitlines()
    return {lines.index("while True:") + 1, lines.index("    pass") + 1}


def _finish(process: Process) -> int:
    """SIGTERM, and the exit code; a process that does not stop is killed (and fails)."""
    try:
        return process.finish(signal.SIGTERM)
    except BaseException:
        process.popen.kill()
        raise


def test_a_spinning_agent_body_leaves_the_daemon_serving_and_is_abandoned(
    tmp_path: Path,
) -> None:
    """While the saved body spins, ``hotseam status`` answers and the open question is
    answered; at the time bound the body is abandoned with its file:line, the
    running agent is kept, and a fixed save runs the new code."""
    agent = write(tmp_path / "agent.py", AGENT)
    write(tmp_path / "providers" / "file_ui.py", FILE_UI)
    runtime = tmp_path / "rt"
    process = Process(
        "run", "providers", "--agent", "agent.py", "--import-timeout", "2", "--no-journal",
        cwd=tmp_path, runtime=runtime,
    )  # fmt: skip
    try:
        process.expect("v1 runs", stream="stdout")
        process.expect(r'"ask.started"')

        spinning = AGENT.replace("VERSION = 1", "VERSION = 2" + SPINNING_BODY)
        write(agent, spinning)
        process.expect("v2 body started", stream="stdout")

        started = time.monotonic()
        status = hotseam("status", "--json", cwd=tmp_path, runtime=runtime)
        assert status.returncode == 0, status.stderr
        assert time.monotonic() - started < 5  # the client waits 10 s for a frozen loop
        reply = json.loads(status.stdout)
        assert reply["agent"] == {"name": "agent.py", "state": "running", "runs": 1}
        assert [ask["header"] for ask in reply["asks"]] == ["Colour"]

        (tmp_path / "reply.txt").write_text("teal")
        process.expect("answer: teal", stream="stdout")  # the question in flight is answered
        (tmp_path / "reply.txt").unlink()

        process.expect(r"executing agent\.py: still running after 1 s \(time bound 2 s\)")
        abandoned = process.expect(
            r"agent\.py changed but cannot run: --agent 'agent\.py': executing agent\.py did "
            r"not finish within 2 s \(stuck at agent\.py:(\d+)\); abandoned"
        )
        assert int(abandoned.group(1)) in _spinning_lines(spinning)

        write(agent, AGENT.replace("VERSION = 1", "VERSION = 3"))
        process.expect("agent.py changed: withdrawing the agent's question and running it again")
        process.expect("v3 runs", stream="stdout")
        process.expect(r'"ask.started"')
    finally:
        code = _finish(process)
    assert code == 0, process.lines["stderr"]
    assert "v2 runs" not in process.lines["stdout"]  # nothing of the abandoned body ran
    assert not [line for line in process.lines["stderr"] if "loop.blocked" in line]


def test_an_agent_body_that_overruns_at_the_start_is_bad_input(tmp_path: Path) -> None:
    """At the start the same bound holds: one line naming the file:line, exit 2."""
    write(tmp_path / "agent.py", AGENT.replace("VERSION = 1", "VERSION = 2" + SPINNING_BODY))
    (tmp_path / "providers").mkdir()
    started = time.monotonic()
    result = hotseam(
        "run", "providers", "--agent", "agent.py", "--import-timeout", "1",
        cwd=tmp_path, runtime=tmp_path / "rt",
    )  # fmt: skip
    assert time.monotonic() - started < scaled(15)
    assert result.returncode == 2, result.stderr
    spin = _spinning_lines(AGENT.replace("VERSION = 1", "VERSION = 2" + SPINNING_BODY))
    assert result.stderr.startswith(
        "hotseam run: --agent 'agent.py': executing agent.py did not finish within 1 s "
        "(stuck at agent.py:"
    ), result.stderr
    assert int(result.stderr.split("(stuck at agent.py:")[1].split(")")[0]) in spin
    assert len(result.stderr.splitlines()) == 1

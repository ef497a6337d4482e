"""``hotseam dev`` and ``hotseam run``: reload reports, logs, signals, exit codes, bad input."""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import pytest

from cli._support import Process  # the shared subprocess reader (tests/cli)
from hotseam.cli import main

from .conftest import write

AGENT = """
import anyio

async def main(context):
    result = await context.tools.execute("ask_user_question", {"question": "Colour?"})
    print("answer:", result.output["answer"] if result.ok else result.error["code"], flush=True)
    await anyio.sleep_forever()
"""

FAILING_AGENT = """
async def main(context):
    raise RuntimeError("the agent gave up")
"""


def _provider(version: int, marker: Path, reply: str = "Reply.never()") -> str:
    return f"""
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import Reply, ScriptedProvider

VERSION = {version}


def _note(exit):
    with open({str(marker)!r}, "a") as marker:
        marker.write(f"dispose {{VERSION}} {{exit.reason.value}}\\n")


def setup(scope):
    scope.provide(USER_INTERACTION, ScriptedProvider(lambda request: {reply}))
    scope.defer_exit(_note)
"""


@pytest.fixture(name="project")
def _project(tmp_path: Path) -> Path:
    """A folder with providers/ and the agents."""
    write(tmp_path / "agent.py", AGENT)
    write(tmp_path / "failing_agent.py", FAILING_AGENT)
    (tmp_path / "providers").mkdir()
    return tmp_path


class TestDev:
    def test_reloads_are_reported_in_one_line_and_sigterm_disposes_then_exits_0(
        self, project: Path
    ) -> None:
        """Loaded, failed (file:line, keeping generation 1), reloaded; the answer arrives;
        SIGTERM disposes the last generation and exits 0."""
        marker = project / "disposed.txt"
        ui = write(project / "providers" / "my_ui.py", _provider(1, marker))
        process = Process("dev", "providers", "--agent", "agent.py:main", cwd=project)
        try:
            process.expect(r"loaded providers/my_ui\.py \(generation 1\) in [\d.]+ ms$")
            process.expect(r"watching")
            write(ui, "def setup(scope:\n")
            process.expect(
                r"failed to load providers/my_ui\.py: SyntaxError: .* at "
                r"providers/my_ui\.py:1; keeping generation 1$"
            )
            write(ui, _provider(2, marker, reply="'blue'"))
            process.expect(r"reloaded providers/my_ui\.py \(generation 2\) in [\d.]+ ms$")
            process.expect(r"^answer: blue$", stream="stdout")
        finally:
            code = process.finish(signal.SIGTERM)
        assert code == 0, process.lines
        assert marker.read_text().splitlines() == ["dispose 1 reload", "dispose 2 shutdown"]
        stderr = process.lines["stderr"]
        assert not any(line.lstrip().startswith("{") for line in stderr)
        assert not any("provider.installed" in line for line in stderr)  # quiet by default

    def test_ctrl_c_disposes_every_generation_and_exits_0(self, project: Path) -> None:
        """SIGINT is handled like SIGTERM (here with --polling, which reloads too)."""
        marker = project / "disposed.txt"
        ui = write(project / "providers" / "my_ui.py", _provider(1, marker))
        process = Process(
            "dev",
            "providers",
            "--agent",
            "agent.py:main",
            "--polling",
            cwd=project,
        )
        try:
            process.expect(r"watching")
            write(ui, _provider(2, marker))
            process.expect(r"reloaded providers/my_ui\.py \(generation 2\)")
        finally:
            code = process.finish(signal.SIGINT)
        assert code == 0, process.lines
        assert marker.read_text().splitlines() == ["dispose 1 reload", "dispose 2 shutdown"]

    def test_answers_file_serves_while_no_watched_provider_does(self, project: Path) -> None:
        """--answers is the fallback; the demo agent finishing ends the command with 0."""
        write(project / "providers" / "words.py", "WORD = 'helper only'\n")
        answers = write(
            project / "answers.json",
            '{"answers": ["SQLite", {"recommended": true}, "teal", "No"]}',
        )
        process = Process("dev", "providers", "--answers", str(answers), cwd=project)
        code = process.finish()
        assert code == 0, process.lines
        assert process.lines["stdout"] == [
            "Storage: sqlite",
            "Errors: Exceptions",
            "Theme: teal",
            "Deploy: No",
        ]


class TestRun:
    def test_json_logs_and_sigterm_runs_every_disposer(self, project: Path) -> None:
        """Each stderr line is a JSON object; reloads carry fields and a summary."""
        marker = project / "disposed.txt"
        ui = write(project / "providers" / "my_ui.py", _provider(1, marker))
        write(
            project / "providers" / "other.py",
            _provider(7, marker).replace("USER_INTERACTION, Scripted", "SEAM, Scripted")
            + "\nfrom hotseam import Seam\nSEAM = Seam('other')\n",
        )
        process = Process("run", "providers", "--agent", "agent.py:main", cwd=project)
        try:
            process.expect(r'"event": "reload.committed"')
            process.expect(r"watching")
            write(ui, _provider(2, marker, reply="'green'"))
            line = process.expect(r'"generation": 2').string
            process.expect(r"^answer: green$", stream="stdout")
        finally:
            code = process.finish(signal.SIGTERM)
        assert code == 0, process.lines
        committed = json.loads(line)
        assert committed["event"] == "reload.committed"
        assert committed["summary"].startswith("reloaded providers/my_ui.py (generation 2) in ")
        assert committed["level"] == "info" and "\x1b[" not in line
        records = [json.loads(text) for text in process.lines["stderr"]]
        assert {"provider.installed", "provider.removed"} <= {r["event"] for r in records}
        assert sorted(marker.read_text().splitlines()) == [
            "dispose 1 reload",
            "dispose 2 shutdown",
            "dispose 7 shutdown",
        ]

    def test_a_fatal_error_exits_non_zero_with_the_reason_logged(self, project: Path) -> None:
        """The agent raised: exit 1, reason in a JSON error line; generations disposed."""
        marker = project / "disposed.txt"
        write(project / "providers" / "my_ui.py", _provider(1, marker))
        process = Process(
            "run",
            "providers",
            "--agent",
            "failing_agent.py:main",
            cwd=project,
        )
        code = process.finish()
        assert code == 1, process.lines
        errors = [
            record
            for record in map(json.loads, process.lines["stderr"])
            if record["level"] == "error"
        ]
        assert any("RuntimeError: the agent gave up" in r["event"] for r in errors)
        assert marker.read_text().splitlines() == ["dispose 1 shutdown"]


class TestBadInput:
    @pytest.mark.parametrize("command", ["dev", "run"])
    @pytest.mark.parametrize(
        ("arguments", "message"),
        [
            (["missing_dir"], r"reload path 'missing_dir' does not exist"),
            (["providers", "--agent", "nomodule"], r"importing nomodule failed: ModuleNotFound"),
            (["providers", "--agent", ":main"], r"--agent ':main': expected MODULE\[:FUNCTION\]"),
            (["providers", "--agent", "agent.py:absent"], r"has no attribute 'absent'"),
            (["providers", "--agent", "os:getcwd"], r"must be 'async def getcwd\(context\)'"),
            (["providers", "--answers", "none.json"], r"none\.json: cannot read"),
            (["providers", "--answers", "bad.json"], r"bad\.json:1:\d+: not valid JSON"),
        ],
    )
    def test_bad_input_is_one_line_and_exit_2(
        self,
        project: Path,
        monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str],
        command: str,
        arguments: list[str],
        message: str,
    ) -> None:
        """No traceback: one line naming the problem."""
        write(project / "bad.json", "{nope")
        monkeypatch.chdir(project)
        monkeypatch.setattr(sys, "path", list(sys.path))  # --agent may add the folder
        code = main([command, *arguments])
        captured = capsys.readouterr()
        assert code == 2
        assert captured.out == ""
        (line,) = captured.err.splitlines()
        assert line.startswith(f"hotseam {command}: ")
        assert re.search(message, line), line

"""``hotseam status`` and ``hotseam reload`` talk to a running ``hotseam run`` over its
control socket: a private Unix socket, found by pid or name, replaced when stale."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
from pathlib import Path

import pytest

from ._support import ASKING_AGENT, HELD_PROVIDER, Process, hotseam, write


@pytest.fixture(name="project")
def _project(tmp_path: Path) -> Path:
    write(tmp_path / "agent.py", ASKING_AGENT)
    write(tmp_path / "providers" / "ui.py", HELD_PROVIDER)
    return tmp_path


@pytest.fixture(name="runtime")
def _runtime(tmp_path: Path) -> Path:
    """The control socket folder (short: socket paths are limited to ~100 bytes)."""
    return tmp_path / "rt"


def test_status_and_reload_through_the_control_socket(project: Path, runtime: Path) -> None:
    """The socket is the owner's alone; status shows modules, providers and the open
    question (never an answer); reload by path commits a new generation; the socket goes
    when the process ends."""
    process = Process(
        "run", "providers", "--agent", "agent", "--name", "api", cwd=project, runtime=runtime
    )
    try:
        found = process.expect(r'"control socket: (\S+) \(hotseam status (\d+)\)"')
        socket_path, pid = Path(found.group(1)), int(found.group(2))
        assert socket_path == runtime / f"{pid}.sock"
        assert stat.S_ISSOCK(socket_path.stat().st_mode)
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
        assert stat.S_IMODE(runtime.stat().st_mode) == 0o700
        assert os.readlink(runtime / "api.sock") == f"{pid}.sock"
        process.expect(r'"ask.started"')

        text = hotseam("status", cwd=project, runtime=runtime)
        assert text.returncode == 0, text.stderr
        assert f"hotseam run, pid {pid} (api), up " in text.stdout
        assert "providers/ui.py: provider active, generation 1, loaded in " in text.stdout
        assert "user-interaction: hotseam.providers.scripted.ScriptedProvider" in text.stdout
        assert "registered at providers/ui.py:6" in text.stdout
        assert re.search(r"an agent asks 'Colour' for [\d.]+ s, shown by ", text.stdout)

        outside = hotseam("reload", "agent.py", cwd=project, runtime=runtime)
        assert outside.returncode == 2
        assert outside.stderr == (
            f"hotseam reload: {str(project / 'agent.py')!r} is not under a watched path\n"
        )

        reloaded = hotseam("reload", "providers/ui.py", "--to", "api", cwd=project, runtime=runtime)
        assert reloaded.returncode == 0, reloaded.stderr
        assert reloaded.stdout.splitlines() == ["reloaded providers/ui.py (generation 2)"]

        machine = hotseam("status", str(pid), "--json", cwd=project, runtime=runtime)
        assert machine.returncode == 0, machine.stderr
        reply = json.loads(machine.stdout)
        (module,) = reply["modules"]
        assert (module["path"], module["state"], module["generation"]) == (
            "providers/ui.py",
            "active",
            2,
        )
        (question,) = reply["asks"]
        assert question["header"] == "Colour"
        assert question["attempts"] == 2  # asked again on generation 2
        assert "answer" not in question
        assert reply["uptime_s"] > 0
        assert reply["agent"] == {"name": "agent", "state": "running", "runs": 1}
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    assert not socket_path.exists()
    assert not (runtime / "api.sock").is_symlink()


def test_a_stale_socket_is_detected_and_replaced(project: Path, runtime: Path) -> None:
    """kill -9 leaves the socket and the name behind: a new process takes the name over,
    status removes the dead one's socket, and a live name is not taken over."""
    first = Process(
        "run", "providers", "--agent", "agent", "--name", "api", cwd=project, runtime=runtime
    )
    found = first.expect(r"control socket: \S+/(\d+)\.sock")
    dead = int(found.group(1))
    first.popen.kill()
    first.finish()
    assert (runtime / f"{dead}.sock").exists()
    os.utime(runtime / f"{dead}.sock", (0, 0))  # not one that is starting: a stale one

    second = Process(
        "run", "providers", "--agent", "agent", "--name", "api", cwd=project, runtime=runtime
    )
    try:
        second.expect(r"replaced the stale name api\.sock \(process \d+ is gone\)")
        live = int(second.expect(r"control socket: \S+/(\d+)\.sock").group(1))
        status = hotseam("status", "api", "--json", cwd=project, runtime=runtime)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] == live
        assert f"removed the stale control socket {runtime / f'{dead}.sock'}" in status.stderr
        assert not (runtime / f"{dead}.sock").exists()

        taken = hotseam(
            "run", "providers", "--agent", "agent", "--name", "api", cwd=project, runtime=runtime
        )
        assert taken.returncode == 2
        assert taken.stderr.strip() == (
            f"hotseam run: --name 'api' is taken by the running process {live}"
        )
    finally:
        assert second.finish(signal.SIGTERM) == 0


def test_nothing_running_is_one_line_and_exit_1(project: Path, runtime: Path) -> None:
    for command in ("status", "reload"):
        result = hotseam(command, cwd=project, runtime=runtime)
        assert result.returncode == 1
        assert result.stderr == (
            f"hotseam {command}: no running hotseam dev or run was found (looked in {runtime})\n"
        )


def test_a_configured_project_runs_with_no_arguments_and_run_bounds_the_wait(
    tmp_path: Path, runtime: Path
) -> None:
    """``[tool.hotseam]`` names the paths, the agent and the wait: ``hotseam run`` alone
    starts; the question waits (one line) and fails with NO_PROVIDER at the bound."""
    write(tmp_path / "agent.py", ASKING_AGENT)
    (tmp_path / "providers").mkdir()
    write(
        tmp_path / "pyproject.toml",
        """
        [tool.hotseam]
        paths = ["providers"]
        agent = "agent.py"
        provider-wait = 0.5
        """,
    )
    process = Process("run", cwd=tmp_path, runtime=runtime)
    try:
        process.expect(
            r"waiting for a provider of 'user-interaction' (—|.u2014) save one under providers/"
        )
        process.expect(r"^answer: NO_PROVIDER$", stream="stdout")
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    waits = [line for line in process.lines["stderr"] if "waiting for a provider of" in line]
    assert len(waits) == 1


SETUP_PRINTS = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.scripted import Reply, ScriptedProvider


def setup(scope):
    print("setup of {name}", flush=True)
    {body}
"""


def test_sighup_reloads_every_module_like_hotseam_reload(project: Path, runtime: Path) -> None:
    """SIGHUP to ``hotseam run`` runs every module's setup again, unchanged ones included,
    retries a failed one, and reports the real count."""
    providers = project / "providers"
    write(
        providers / "ui.py",
        SETUP_PRINTS.format(
            name="ui",
            body="scope.provide(USER_INTERACTION, ScriptedProvider(lambda r: Reply.never()))",
        ),
    )
    write(providers / "extra.py", SETUP_PRINTS.format(name="extra", body="pass"))
    write(providers / "broken.py", SETUP_PRINTS.format(name="broken", body="raise OSError(5)"))
    process = Process("run", "providers", "--agent", "agent", cwd=project, runtime=runtime)
    try:
        process.expect(r"hotseam run: watching providers")
        for name in ("broken", "extra", "ui"):
            process.expect(rf"^setup of {name}$", stream="stdout")
        process.popen.send_signal(signal.SIGHUP)
        process.expect(r'"SIGHUP: reloading every module"')
        reported = process.expect(r'"SIGHUP: (\d+) module\(s\) reloaded, (\d+) failed"')
        assert reported.groups() == ("2", "1")
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines
    setups = [line for line in process.lines["stdout"] if line.startswith("setup of ")]
    assert sorted(setups) == sorted(2 * ["setup of broken", "setup of extra", "setup of ui"])
    assert any(
        '"reload.committed"' in line and "generation 2" in line for line in process.lines["stderr"]
    )


def test_reload_with_several_running_names_to_and_takes_a_name(
    project: Path, runtime: Path
) -> None:
    """Two processes: ``hotseam reload`` alone says to name one with ``--to``; ``hotseam
    reload NAME`` (no such file) is read as ``--to NAME``, with a note, and reloads that
    one only; a file of that name is still a file."""
    api = Process(
        "run", "providers", "--agent", "agent", "--name", "api", cwd=project, runtime=runtime
    )
    web = Process(
        "run", "providers", "--agent", "agent", "--name", "web", cwd=project, runtime=runtime
    )
    try:
        pids = [
            int(each.expect(r"control socket: \S+/(\d+)\.sock").group(1)) for each in (api, web)
        ]
        which = hotseam("reload", cwd=project, runtime=runtime)
        assert which.returncode == 1
        first, second = sorted(zip(pids, ("api", "web"), strict=True))
        assert which.stderr == (
            "hotseam reload: several are running; name one with --to PID|NAME: running: "
            f"{first[0]} ({first[1]}), {second[0]} ({second[1]})\n"
        )
        named = hotseam("reload", "web", cwd=project, runtime=runtime)
        assert named.returncode == 0, named.stderr
        assert named.stderr == (
            "hotseam reload: 'web' is no file or folder here but a running process: "
            "reloading all of it (hotseam reload --to web)\n"
        )
        assert named.stdout.splitlines() == ["reloaded providers/ui.py (generation 2)"]
        by_pid = hotseam("reload", str(pids[0]), cwd=project, runtime=runtime)
        assert by_pid.returncode == 0, by_pid.stderr
        assert by_pid.stdout.splitlines() == ["reloaded providers/ui.py (generation 2)"]
        statuses = [
            json.loads(hotseam("status", name, "--json", cwd=project, runtime=runtime).stdout)
            for name in ("api", "web")
        ]
        assert [s["modules"][0]["generation"] for s in statuses] == [2, 2]
        write(project / "web", "")  # a file called web: the argument is that file
        as_file = hotseam("reload", "web", cwd=project, runtime=runtime)
        assert as_file.returncode == 1
        assert "several are running; name one with --to PID|NAME" in as_file.stderr
    finally:
        codes = [each.finish(signal.SIGTERM) for each in (api, web)]
    assert codes == [0, 0]

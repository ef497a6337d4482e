"""Another local user cannot stop a daemon from starting: when the control socket folder is
taken, ``hotseam run`` warns and listens in a private folder of its own, where ``hotseam
status`` and ``hotseam reload`` find it; when it cannot listen at all, it runs without a
control socket, with a warning."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from tests._timing import scaled

from ._support import ASKING_AGENT, DEADLINE, HELD_PROVIDER, Process, hotseam, write

STRANGER = 4242
"""The uid of the other local user."""

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="making a folder another user owns needs root"
)


@pytest.fixture(name="project")
def _project(tmp_path: Path) -> Path:
    write(tmp_path / "agent.py", ASKING_AGENT)
    write(tmp_path / "providers" / "ui.py", HELD_PROVIDER)
    return tmp_path


def plain_env(tmp: Path) -> dict[str, str]:
    """No $HOTSEAM_RUNTIME_DIR, no $XDG_RUNTIME_DIR (a service, cron, a container), and the
    temporary folder in ``tmp``: the sockets go to ``tmp/hotseam-<uid>``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("HOTSEAM_RUNTIME_DIR", "XDG_RUNTIME_DIR")
    }
    return {**env, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}


def cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hotseam", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(DEADLINE),
        check=False,
    )


def stranger_listens(folder: Path, name: str) -> socket.socket:
    """A live socket in ``folder`` that only looks like a hotseam one."""
    decoy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    decoy.bind(str(folder / name))
    decoy.listen()
    return decoy


@needs_root
def test_a_folder_another_user_made_first_is_replaced_by_a_private_one(project: Path) -> None:
    """``/tmp/hotseam-<uid>`` made by someone else (with a socket of theirs in it, and a
    look-alike stand-in of theirs): the daemon starts, warns, and listens in a private folder
    beside it; a second daemon uses the same folder; status and reload find them there and
    never talk to the stranger's sockets."""
    uid = os.getuid()
    tmp = project / "t"
    taken = tmp / f"hotseam-{uid}"
    look_alike = tmp / f"hotseam-{uid}-aaaaaaaa"  # sorts first: would be used if trusted
    decoys = []
    for folder in (taken, look_alike):
        folder.mkdir(parents=True)
        decoys.append(stranger_listens(folder, "1.sock"))
        os.chmod(folder, 0o777)
        os.chown(folder, STRANGER, STRANGER)
    env = plain_env(tmp)

    first = Process("run", "providers", "--agent", "agent", cwd=project, env=env)
    second: Process | None = None
    try:
        warned = first.expect(
            r'"the control socket folder (\S+) belongs to uid (\d+), not to this user '
            r'\(uid (\d+)\); using the private folder (\S+) instead"'
        )
        assert warned.groups()[:3] == (str(taken), str(STRANGER), str(uid))
        assert json.loads(first.lines["stderr"][-1])["level"] == "warning"
        found = first.expect(r'"control socket: (\S+) \(hotseam status (\d+)\)"')
        path, pid = Path(found.group(1)), int(found.group(2))
        private = path.parent
        assert private == Path(warned.group(4))
        assert private.name.startswith(f"hotseam-{uid}-")
        assert private not in (taken, look_alike)
        assert private.parent == tmp
        info = private.lstat()
        assert stat.S_ISDIR(info.st_mode) and info.st_uid == uid
        assert stat.S_IMODE(info.st_mode) == 0o700

        status = cli("status", "--json", cwd=project, env=env)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] == pid

        second = Process(
            "run", "providers", "--agent", "agent", "--name", "two", cwd=project, env=env
        )
        again = second.expect(r'"control socket: (\S+) \(hotseam status (\d+)\)"')
        assert Path(again.group(1)).parent == private  # found again, not one more folder
        reloaded = cli("reload", "providers", "--to", "two", cwd=project, env=env)
        assert reloaded.returncode == 0, reloaded.stderr
        assert reloaded.stdout.splitlines() == ["reloaded providers/ui.py (generation 2)"]
        both = cli("status", cwd=project, env=env)
        assert both.returncode == 1
        assert both.stderr == (
            f"hotseam status: several are running; name one by pid or name: running: "
            f"{', '.join(sorted([str(pid), f'{second.popen.pid} (two)']))}\n"
        )
    finally:
        codes = [process.finish(signal.SIGTERM) for process in (first, second) if process]
        for decoy in decoys:
            decoy.close()
    assert codes == [0, 0], first.lines
    assert sorted(entry.name for entry in tmp.iterdir()) == sorted(
        [taken.name, look_alike.name, private.name]
    )
    assert not list(private.iterdir())  # both sockets (and the name) removed at exit


@needs_root
def test_status_does_not_trust_a_folder_another_user_owns(project: Path) -> None:
    """Nothing runs: status says where it looked and why it skipped the stranger's folder."""
    uid = os.getuid()
    tmp = project / "t"
    taken = tmp / f"hotseam-{uid}"
    taken.mkdir(parents=True)
    decoy = stranger_listens(taken, "1.sock")
    os.chown(taken, STRANGER, STRANGER)
    try:
        status = cli("status", cwd=project, env=plain_env(tmp))
    finally:
        decoy.close()
    assert status.returncode == 1
    assert status.stderr == (
        f"hotseam status: no running hotseam dev or run was found (looked in {taken}, "
        f"skipped: the control socket folder {taken} belongs to uid {STRANGER}, not to this "
        f"user (uid {uid}))\n"
    )


def test_a_socket_that_cannot_be_bound_leaves_the_daemon_running(project: Path) -> None:
    """A temporary folder so deep that no Unix socket path fits in it: the daemon warns that
    it cannot be reached and runs on (it used to exit 1)."""
    deep = project / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    process = Process("run", "providers", "--agent", "agent", cwd=project, env=plain_env(deep))
    try:
        warned = process.expect(r'"no control socket: cannot listen on (\S+): ')
        assert Path(warned.group(1)).parent.parent == deep
        assert json.loads(process.lines["stderr"][-1])["level"] == "warning"
        assert (
            "hotseam status and hotseam reload cannot reach this process"
            in (process.lines["stderr"][-1])
        )
        process.expect(r'"ask.started"')
    finally:
        code = process.finish(signal.SIGTERM)
    assert code == 0, process.lines


@needs_root
def test_a_runtime_dir_named_on_purpose_is_never_replaced(project: Path) -> None:
    """``$HOTSEAM_RUNTIME_DIR`` names the folder: when it is not the user's, that is bad
    input (exit 2, one line), not something to work around."""
    named = project / "rt"
    named.mkdir()
    os.chown(named, STRANGER, STRANGER)
    result = hotseam("run", "providers", "--agent", "agent", cwd=project, runtime=named)
    assert result.returncode == 2
    assert result.stderr == (
        f"hotseam run: HOTSEAM_RUNTIME_DIR: the control socket folder {named} belongs to uid "
        f"{STRANGER}, not to this user (uid {os.getuid()}); refusing to use it\n"
    )

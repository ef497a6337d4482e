"""``hotseam status``'s common forms skip argparse; every form means what argparse makes of it.

The forms ``[PID|NAME] [--json]`` (either order) are read without argparse, a third of what
the command imported; anything else (help, an abbreviation, a second target, ``--``...) is
parsed by argparse. Each form of the table is run both ways against a real control socket
that replies with a fixed status (one process of the test's own, named by its pid): the
output, the errors and the exit code are the same.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests._timing import scaled

from hotseam.cli import _status_forms, build_parser, main

REPLY = {
    "ok": True,
    "command": "hotseam run",
    "pid": 4321,
    "name": "svc",
    "uptime_s": 75.5,
    "watching": ["providers"],
    "cwd": "/srv/app",
    "agent": {"name": "agent.py:main", "state": "running", "runs": 1},
    "journal": None,
    "modules": [
        {"path": "providers/ui.py", "kind": "", "state": "active", "generation": 2,
         "load_ms": 1.5, "error": None}
    ],
    "providers": [],
    "web": [],
    "asks": [],
}  # fmt: skip


class StatusServer:
    """A control socket in ``folder`` that answers every request with :data:`REPLY` (a
    connection that sends nothing, a client's probe, is closed)."""

    def __init__(self, folder: Path, name: str) -> None:
        self.path = folder / f"{os.getpid()}.sock"
        (folder / f"{name}.sock").symlink_to(self.path.name)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.path))
        self.listener.listen(16)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # shut down
                return
            with connection:
                received = b""
                while not received.endswith(b"\n") and (chunk := connection.recv(4096)):
                    received += chunk
                if received:
                    connection.sendall(json.dumps(REPLY).encode() + b"\n")

    def stop(self) -> None:
        self.listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        self.listener.close()
        self.thread.join(timeout=scaled(10))


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("HOTSEAM_RUNTIME_DIR", str(folder))
    return folder


@pytest.fixture
def server(runtime: Path) -> Iterator[StatusServer]:
    running = StatusServer(runtime, "svc")
    try:
        yield running
    finally:
        running.stop()


def _outcome(call: object) -> tuple[int | str | None, str, str]:
    """Exit code, stdout and stderr of ``call()`` (a ``SystemExit`` is its code)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = call()  # type: ignore[operator]
        except SystemExit as leaving:
            code = leaving.code
    return code, out.getvalue(), err.getvalue()


def _through_argparse(argv: list[str]) -> tuple[int | str | None, str, str]:
    def call() -> int:
        args = build_parser({"status"}, list_others=False).parse_args(argv)
        code: int = args._module.run(args)
        return code

    return _outcome(call)


PID = str(os.getpid())
FAST = [
    ["status"],
    ["status", PID],
    ["status", "svc"],
    ["status", "--json"],
    ["status", PID, "--json"],
    ["status", "--json", "svc"],
    ["status", "nobody"],
    ["status", "/no/such.sock"],
    ["status", "other.sock", "--json"],
]
"""Forms read without argparse (including targets that name nothing)."""
PARSED = [
    ["status", "--help"],
    ["status", "-h"],
    ["status", "--js"],
    ["status", "--json", "--json"],
    ["status", PID, "svc"],
    ["status", "--", PID],
    ["status", "-5"],
    ["status", ""],
    ["status", "--json=yes"],
    ["status", "--bogus", PID],
    ["status", PID, "--json", "extra"],
]
"""Forms left to argparse: help, errors and the rarer spellings."""


def _form(argv: list[str]) -> str:
    """The test's id: the same in every xdist worker (each has its own PID)."""
    return " ".join("PID" if arg == PID else arg for arg in argv)


@pytest.mark.parametrize("argv", FAST + PARSED, ids=_form)
def test_each_form_means_what_argparse_makes_of_it(server: StatusServer, argv: list[str]) -> None:
    assert (_status_forms(argv) is not None) == (argv in FAST)
    assert _outcome(lambda: main(argv)) == _through_argparse(argv)


def test_the_fast_forms_print_the_status(server: StatusServer) -> None:
    """Not only the same on both paths: right (the reply as text, as JSON, an error)."""
    code, out, err = _outcome(lambda: main(["status", "svc"]))
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [
        "hotseam run, pid 4321 (svc), up 1 min 15 s",
        "  watching providers from /srv/app",
    ]
    assert "  providers/ui.py: active, generation 2, loaded in 1.5 ms" in out.splitlines()
    assert _outcome(lambda: main(["status", "--json", PID])) == (0, json.dumps(REPLY) + "\n", "")
    assert _outcome(lambda: main(["status", "nobody"])) == (
        1,
        "",
        f"hotseam status: no running hotseam dev or run is called 'nobody'; running: {PID} (svc)\n",
    )


def test_with_nothing_running_both_paths_say_where_they_looked(runtime: Path) -> None:
    argv = ["status"]
    assert (
        _outcome(lambda: main(argv))
        == _through_argparse(argv)
        == (
            1,
            "",
            f"hotseam status: no running hotseam dev or run was found (looked in {runtime})\n",
        )
    )


def test_the_command_imports_neither_argparse_nor_pathlib(server: StatusServer) -> None:
    """The real command, in a fresh interpreter, against the socket."""
    code = (
        "import sys\n"
        "from hotseam.cli import main\n"
        f"assert main(['status', {PID!r}, '--json']) == 0\n"
        "print(sorted({'argparse', 'pathlib', 'glob', 'gettext'} & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=scaled(60)
    )
    first, imported = result.stdout.splitlines()
    assert json.loads(first) == REPLY
    assert imported == "[]"


FOLDERS = """
import json, os, sys
from hotseam.cli._control_client import runtime_dir
found = runtime_dir()
imported = "tempfile" in sys.modules
print(json.dumps([found, runtime_dir(exact=True), imported]))
"""


@pytest.mark.parametrize(
    ("setup", "imports_tempfile"),
    [
        ("made", False),  # $TMPDIR holds the private folder: no tempfile
        ("empty", True),  # nothing made there yet: tempfile answers
        ("shared", True),  # a folder others may enter is no one's sockets folder
        ("relative", False),  # $TMPDIR relative to the working folder
        ("temp", False),  # $TEMP when $TMPDIR is unset
        ("a file", None),  # $TMPDIR names a file: the next candidate, as tempfile does
        ("missing", None),  # $TMPDIR names nothing
    ],
)
def test_a_client_finds_the_temporary_folder_tempfile_finds(
    tmp_path: Path, setup: str, imports_tempfile: bool | None
) -> None:
    """Without ``$XDG_RUNTIME_DIR`` the sockets are in tempfile's folder: the client's
    answer (tempfile not imported when the private folder is already in the first usable
    candidate) is tempfile's."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("HOTSEAM_RUNTIME_DIR", "XDG_RUNTIME_DIR", "TMPDIR", "TEMP", "TMP")
    }
    temp = tmp_path / "temp"
    temp.mkdir()
    mine = temp / f"hotseam-{os.getuid()}"
    variable = "TEMP" if setup == "temp" else "TMPDIR"
    env[variable] = str(temp)
    if setup in ("made", "relative", "temp"):
        mine.mkdir(mode=0o700)
    elif setup == "shared":
        mine.mkdir(mode=0o755)
        mine.chmod(0o755)
    elif setup == "a file":
        env[variable] = str(tmp_path / "file")
        (tmp_path / "file").write_text("")
    elif setup == "missing":
        env[variable] = str(tmp_path / "missing")
    if setup == "relative":
        env[variable] = "temp"
    result = subprocess.run(
        [sys.executable, "-c", FOLDERS],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=scaled(60),
    )
    found, exact, imported = json.loads(result.stdout)
    assert found == exact
    if imports_tempfile is not None:
        assert found == str(mine)
        assert imported is imports_tempfile

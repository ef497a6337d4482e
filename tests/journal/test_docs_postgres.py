"""docs/journal.md's throw-away PostgreSQL server, run as it is written: a new user copies
the block into a shell (as an ordinary user: as root, as the unprivileged user the suite's
own servers run as), and ``hotseam journal`` opens the Unix-socket URL it shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from tests._timing import scaled

from _postgres import PostgresUnavailableError, _runner, find_bindir, postgres_unavailable

ROOT = Path(__file__).resolve().parents[2]
HEADING = "### PostgreSQL over a Unix socket, and a throw-away server"


def _block() -> list[str]:
    """The commands of the page's throw-away-server block, prompts removed."""
    text = (ROOT / "docs" / "journal.md").read_text(encoding="utf-8")
    section = text.split(HEADING, 1)[1]
    found = re.search(r"```console\n(.*?)```", section, re.DOTALL)
    assert found is not None, "the section has no console block"
    lines = found.group(1).splitlines()
    assert all(line.startswith("$ ") for line in lines), lines
    return [line.removeprefix("$ ") for line in lines]


def test_the_unix_socket_url_is_the_one_the_docs_give() -> None:
    text = " ".join((ROOT / "docs" / "journal.md").read_text(encoding="utf-8").split())
    assert "`postgresql://USER@/DATABASE?host=DIR&port=N`" in text
    [url] = [line for line in _block() if "--journal" in line]
    assert "postgresql://$(id -un)@/hotseam?host=$DIR&port=5433" in url


def test_the_throw_away_server_block_runs_as_written() -> None:
    """The block, line by line as the page has it: the server starts, ``hotseam journal
    runs`` opens the Unix-socket URL (an empty journal: no runs), the last line stops the
    server and removes its folder. As root the PostgreSQL lines run as the suite's
    unprivileged user (PostgreSQL refuses root), and the ``hotseam`` line as this user
    (the venv may be root's alone), with ``id -un`` answering that user's name."""
    try:
        bindir = find_bindir()
        runner, uid = _runner()
    except PostgresUnavailableError as error:
        postgres_unavailable(str(error))
    if not str(bindir).startswith("/usr/lib/postgresql/"):
        pytest.skip(f"the block finds Debian's binaries; these are in {bindir}")
    *server, journal, stop = _block()
    assert "hotseam journal" in journal
    assert server[0].startswith("export PATH=")  # each shell below starts with it
    home = Path(tempfile.mkdtemp(prefix="hotseam-docs-pg-"))
    try:
        if uid is not None:
            os.chown(home, uid, -1)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "XDG_STATE_HOME": str(home / "state"),
            "TMPDIR": str(home),
            "LC_ALL": "C.UTF-8",
        }

        def shell(script: str, **extra: str) -> subprocess.CompletedProcess[str]:
            """``script`` as the user PostgreSQL runs as."""
            return subprocess.run(
                [*runner, "/bin/sh", "-c", script],
                env={**env, **extra},
                capture_output=True,
                text=True,
                timeout=scaled(120),
                check=False,
                cwd=home,
            )

        # The server's lines in one shell (a failure stops what started), then its folder.
        started = shell(
            "set -e\ntrap 'test $? = 0 || { "
            + stop
            + "; }' EXIT\n"
            + "\n".join(server)
            + '\necho "$DIR"\n'
        )
        assert started.returncode == 0, (started.stdout, started.stderr)
        folder = started.stdout.strip().splitlines()[-1]
        try:
            user = _user_of(uid)
            fake = home / "fake-bin"
            fake.mkdir()
            (fake / "id").write_text(f"#!/bin/sh\necho {user}\n")
            (fake / "id").chmod(0o755)
            listed = subprocess.run(
                ["/bin/sh", "-c", journal],
                env={
                    **env,
                    "PATH": f"{fake}:{Path(sys.executable).parent}:/usr/bin:/bin",
                    "DIR": folder,
                },
                capture_output=True,
                text=True,
                timeout=scaled(60),
                check=False,
                cwd=home,
            )
            assert listed.returncode == 0, (listed.stdout, listed.stderr)
        finally:
            stopped = shell(f"{server[0]}\n{stop}", DIR=folder)  # the PATH line, then stop
        assert stopped.returncode == 0, stopped.stderr
        assert not Path(folder).exists(), "the last line removes the folder"
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _user_of(uid: int | None) -> str:
    import pwd

    return pwd.getpwuid(os.geteuid() if uid is None else uid).pw_name

"""A throw-away PostgreSQL server for tests and benchmarks: Debian's binaries, a Unix socket.

``PostgresServer.start()`` makes a cluster in a new temporary folder (``initdb``, ~1.5 s) and
starts it listening on a Unix socket in that folder only (no TCP port), with durability
switched off (it is thrown away). PostgreSQL refuses to run as root, and this sandbox and CI
run as root: then an unprivileged system user, ``hotseam-pg``, is created once if missing
and runs ``initdb``/``pg_ctl`` through ``runuser``. ``stop()`` is ``pg_ctl -m immediate
stop`` and removes the folder.

The binaries are looked for in ``$HOTSEAM_PG_BINDIR`` (only there, when it is set), else in
the newest ``/usr/lib/postgresql/*/bin`` (Debian's layout; not on PATH), then on PATH.
``.ci/run`` installs Debian's ``postgresql`` package when it is missing.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import NoReturn
from urllib.parse import quote

from tests._timing import scaled

PG_USER = "hotseam-pg"
PORT = 5432


class PostgresUnavailableError(RuntimeError):
    """No PostgreSQL server can be started here (the message says why)."""


def postgres_unavailable(reason: str) -> NoReturn:
    """Skip the test that needs PostgreSQL, saying why; under ``$CI``, fail it instead (CI
    must never pass without the PostgreSQL tests)."""
    import pytest

    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL must run in CI, and cannot start: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL server can be started here: {reason}")


def find_bindir() -> Path:
    """The folder of ``initdb`` and ``pg_ctl``."""
    given = os.environ.get("HOTSEAM_PG_BINDIR")
    if given:
        candidates = [Path(given)]
    else:
        candidates = sorted(
            Path("/usr/lib/postgresql").glob("*/bin"),
            key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
            reverse=True,
        )
        on_path = shutil.which("pg_ctl")
        if on_path:
            candidates.append(Path(on_path).parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    raise PostgresUnavailableError(
        "no PostgreSQL binaries (initdb, pg_ctl) in "
        f"{', '.join(map(str, candidates)) or '/usr/lib/postgresql/*/bin or on PATH'}: "
        "apt-get install postgresql"
    )


def _runner() -> tuple[list[str], int | None]:
    """The command prefix that runs a program as a user PostgreSQL accepts, and its uid
    (``None``: this user)."""
    if os.geteuid() != 0:
        return [], None
    # One creation at a time: test workers racing two useradds on a new machine left
    # /etc/passwd naming another uid than the one initdb then ran as.
    with open("/tmp/hotseam-pg-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _created_runner()


def _created_runner() -> tuple[list[str], int | None]:
    try:
        uid = pwd.getpwnam(PG_USER).pw_uid
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            raise PostgresUnavailableError(
                f"running as root, and no useradd to create the user {PG_USER}"
            ) from None
        made = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0 and "already exists" not in made.stderr:
            raise PostgresUnavailableError(
                f"cannot create the user {PG_USER}: {made.stderr.strip()}"
            ) from None
        uid = pwd.getpwnam(PG_USER).pw_uid
    runuser = shutil.which("runuser")
    if runuser is None:
        raise PostgresUnavailableError("running as root, and no runuser to drop privileges")
    return [runuser, "-u", PG_USER, "--"], uid


class PostgresServer:
    """A running throw-away server; ``url()`` gives libpq URLs for its databases."""

    def __init__(self, folder: Path, bindir: Path, runner: list[str]) -> None:
        self.folder = folder
        self.bindir = bindir
        self._runner = runner

    @classmethod
    def start(cls) -> PostgresServer:
        """Make and start a server (raises :class:`PostgresUnavailableError`)."""
        bindir = find_bindir()
        runner, uid = _runner()
        folder = Path(tempfile.mkdtemp(prefix="hotseam-pg-"))
        server = cls(folder, bindir, runner)
        try:
            if uid is not None:
                os.chown(folder, uid, -1)
            server._run(
                "initdb",
                "-A",
                "trust",
                "-U",
                "postgres",
                "-D",
                str(folder / "data"),
                "-N",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-instructions",
            )
            server._pg_ctl("start")
        except BaseException:
            server.stop()
            raise
        return server

    def restart(self) -> None:
        """Stop (``-m fast``: every connection is cut) and start again, data kept."""
        self._pg_ctl("restart", "-m", "fast")

    def _pg_ctl(self, action: str, *args: str) -> None:
        options = (
            f"-k {self.folder} -c listen_addresses='' -p {PORT} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        data, log = str(self.folder / "data"), str(self.folder / "server.log")
        self._run("pg_ctl", "-D", data, "-o", options, "-l", log, "-w", "-t", "30", *args, action)

    def _run(self, program: str, *args: str) -> None:
        result = subprocess.run(
            [*self._runner, str(self.bindir / program), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=scaled(60),
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            log = ""
            with contextlib.suppress(OSError):
                log = (self.folder / "server.log").read_text()[-2000:]
            raise PostgresUnavailableError(
                f"{program} failed ({result.returncode}): {result.stderr.strip()[-2000:]}"
                f"{' / server log: ' + log if log else ''}"
            )

    def url(self, database: str = "postgres", *, schema: str | None = None) -> str:
        """A libpq URL of ``database`` (its tables in ``schema`` when given)."""
        host = quote(str(self.folder), safe="/")
        url = f"postgresql://postgres@/{database}?host={host}&port={PORT}"
        if schema is not None:
            url += "&options=" + quote(f"-csearch_path={schema}", safe="")
        return url

    def new_schema(self) -> str:
        """A URL of the ``postgres`` database whose tables go to a new, empty schema."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f"CREATE SCHEMA {name}")
        return self.url(schema=name)

    def stop(self) -> None:
        """Stop at once (``-m immediate``) and remove the folder."""
        if (self.folder / "data" / "postmaster.pid").exists():
            with contextlib.suppress(PostgresUnavailableError, subprocess.TimeoutExpired):
                self._run("pg_ctl", "-D", str(self.folder / "data"), "-m", "immediate", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

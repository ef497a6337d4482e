"""Where a journal is: its URL forms, the default file, and what the SQLite file lets others
read (answers are personal data)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from _postgres import PostgresUnavailableError, find_bindir, postgres_unavailable
from hotseam.interaction._journal import (
    JournalError,
    JournalErrorCode,
    default_journal_path,
    open_journal,
    parse_journal_url,
)


@pytest.mark.parametrize(
    ("url", "engine", "target"),
    [
        ("memory:", "memory", ""),
        ("sqlite:///var/lib/j.sqlite3", "sqlite", "/var/lib/j.sqlite3"),
        ("sqlite:////var/lib/j.sqlite3", "sqlite", "/var/lib/j.sqlite3"),
        ("sqlite:relative/j.db", "sqlite", "relative/j.db"),
        ("/var/lib/j.sqlite3", "sqlite", "/var/lib/j.sqlite3"),
        ("j.db", "sqlite", "j.db"),
        (
            "postgresql://app@db.example/journal",
            "postgresql",
            "postgresql://app@db.example/journal",
        ),
        ("postgres:///journal?host=/run/postgresql", "postgresql", None),
    ],
)
def test_each_accepted_form_names_its_engine(url: str, engine: str, target: str | None) -> None:
    location = parse_journal_url(url)
    assert location.engine == engine
    assert location.target == (url if target is None else target)


def test_a_password_is_never_shown() -> None:
    location = parse_journal_url("postgresql://app:s3cret@db:5433/journal?sslmode=require")
    assert location.target.count("s3cret") == 1  # libpq gets it
    assert "s3cret" not in location.shown
    assert location.shown == "postgresql://app:***@db:5433/journal?sslmode=require"
    in_query = parse_journal_url("postgresql:///journal?user=app&password=s3cret")
    assert "s3cret" not in in_query.shown
    with pytest.raises(JournalError) as unknown:
        parse_journal_url("mysql://app:s3cret@db/journal")
    assert "s3cret" not in str(unknown.value.to_dict())


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("mysql://db/journal", "unknown journal engine 'mysql'"),
        ("sqlite://host/j.db", "no host"),
        ("sqlite:///tmp/j.db?mode=ro", "no ?query"),
        ("sqlite:///tmp/", "names no SQLite file"),
        ("memory:name", "exactly 'memory:'"),
        ("postgresql://db:port/journal", "Port could not be cast"),
    ],
)
def test_a_bad_url_is_a_clear_error(url: str, why: str) -> None:
    with pytest.raises(JournalError) as invalid:
        parse_journal_url(url)
    assert invalid.value.code == JournalErrorCode.JOURNAL_INVALID_URL
    assert why in str(invalid.value)
    assert "invalid journal URL" in str(invalid.value)


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """The umask most users have (022): files would be readable by all unless hotseam says."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.anyio
@pytest.mark.usefixtures("usual_umask")
async def test_the_default_journal_is_an_owner_only_file_in_the_state_folder(
    state_home: Path,
) -> None:
    assert default_journal_path() == state_home / "hotseam" / "journal.sqlite3"
    async with open_journal() as journal:
        daemon = await journal.register_daemon("d")  # a write: the WAL files exist now
        await journal.start_run("agent", daemon.id)
        folder = state_home / "hotseam"
        files = sorted(path.name for path in folder.iterdir())
        assert files == ["journal.sqlite3", "journal.sqlite3-shm", "journal.sqlite3-wal"]
        assert _mode(folder) == 0o700
        assert {name: _mode(folder / name) for name in files} == dict.fromkeys(files, 0o600)
        assert journal.engine == "sqlite"


@pytest.mark.anyio
async def test_a_memory_journal_is_sqlite_in_memory_empty_at_each_open_and_writes_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_journal("memory:") as first, open_journal("memory:") as second:
        assert (first.engine, first.url) == ("sqlite", "memory:")
        daemon = await first.register_daemon("d")
        await first.start_run("agent", daemon.id)
        assert [d.id for d in await first.daemons()] == [daemon.id]
        assert await second.daemons() == []  # another open, another journal
    async with open_journal("memory:") as again:
        assert await again.daemons() == []  # nothing outlives the block
    assert list(tmp_path.iterdir()) == []  # noqa: ASYNC240 - once, after every journal closed


@pytest.mark.anyio
async def test_a_journal_file_others_can_read_is_warned_about(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite3"
    async with open_journal(str(path)):
        pass
    path.chmod(0o644)
    with capture_logs() as logs:
        async with open_journal(str(path)):
            pass
    warnings = [log for log in logs if log["event"] == "journal.file_shared"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
    assert "chmod 600" in warnings[0]["summary"] and str(path) in warnings[0]["summary"]


def test_without_postgresql_its_tests_skip_saying_why_except_in_ci(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOTSEAM_PG_BINDIR", str(tmp_path))  # no initdb there
    with pytest.raises(PostgresUnavailableError) as missing:
        find_bindir()
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        postgres_unavailable(str(missing.value))
    assert f"no PostgreSQL binaries (initdb, pg_ctl) in {tmp_path}" in str(skipped.value)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        postgres_unavailable(str(missing.value))
    assert "PostgreSQL must run in CI" in str(failed.value)

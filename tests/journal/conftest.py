"""Fixtures of the journal tests: a journal URL per engine, and a throw-away PostgreSQL.

``journal_url`` runs a test on each engine — SQLite in memory (``memory:``, run on the event
loop), SQLite in a file, PostgreSQL: the contract suite holds all three to one behaviour.
The PostgreSQL server is started once per test session (per xdist worker: each worker has
its own server) and each test gets a new, empty schema of it. Where no server can be
started the PostgreSQL cases skip, saying why — except when ``$CI`` is set: there they
fail, so CI never passes without them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from _postgres import PostgresServer, PostgresUnavailableError, postgres_unavailable

ENGINES = ["memory", "sqlite", "postgres"]


def _serve() -> Iterator[PostgresServer]:
    """A throw-away PostgreSQL server, stopped when the fixture ends."""
    try:
        import psycopg  # noqa: F401
    except ImportError as error:
        postgres_unavailable(f"psycopg is not installed ({error}): pip install -e '.[dev]'")
    try:
        server = PostgresServer.start()
    except PostgresUnavailableError as error:
        postgres_unavailable(str(error))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this session (this xdist worker)."""
    yield from _serve()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A server of this test alone: it is stopped and started again."""
    yield from _serve()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    """A URL of the server whose tables go to a new, empty schema."""
    return postgres_server.new_schema()


def engine_url(engine: str, request: pytest.FixtureRequest, folder: Path) -> str:
    """A URL of a new, empty journal on ``engine``."""
    if engine == "memory":
        return "memory:"
    if engine == "sqlite":
        return str(folder / "journal.sqlite3")
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture(params=ENGINES)
def journal_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new, empty journal on each engine in turn."""
    return engine_url(request.param, request, tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new journal that several journal objects (and processes) can open: SQL engines."""
    return engine_url(request.param, request, tmp_path)

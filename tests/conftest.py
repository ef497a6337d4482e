"""Shared fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import structlog

pytest_plugins = ["pytester"]


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {"debug": True}), id="asyncio"),
        pytest.param(("trio", {}), id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    """Run each ``@pytest.mark.anyio`` test on both anyio backends."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture(autouse=True)
def _private_state_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What hotseam keeps between runs (the web inbox's token, the journal) goes to a folder
    of the test's own, never the user's home; the processes a test starts inherit it."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    """Undo structlog configuration a test made (capture_logs leaves it 'configured')."""
    yield
    structlog.reset_defaults()

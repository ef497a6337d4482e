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
def _structlog_defaults() -> Iterator[None]:
    """Undo structlog configuration a test made (capture_logs leaves it 'configured')."""
    yield
    structlog.reset_defaults()

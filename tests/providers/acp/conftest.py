"""The ACP tests run on asyncio only: the agent-client-protocol SDK is asyncio-based."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """Override the suite's asyncio+trio parametrization (the SDK forces asyncio)."""
    return ("asyncio", {"debug": True})

"""Browser tests: the web inbox in a real headless Chromium, driven by Playwright.

They run only through ``make browser-test`` (``tests/browser/run.sh`` sets
``HOTSEAM_BROWSER_TESTS=1``, installs Debian's ``chromium`` and Playwright's Python package);
``make test`` leaves them out. Playwright never downloads a browser here: it is pointed at
``/usr/bin/chromium`` (or ``$HOTSEAM_CHROMIUM``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

if os.environ.get("HOTSEAM_BROWSER_TESTS") != "1":
    collect_ignore_glob = ["test_*.py"]

CHROMIUM = os.environ.get("HOTSEAM_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(autouse=True)
def _private_state_folder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept web token goes to a folder of the test's own (and of the processes it
    starts), never the user's home."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """Playwright's async API runs on asyncio (the server runs in the same loop)."""
    return ("asyncio", {})


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            await browser.close()

"""Planted defect: a timer scheduled in setup and never cancelled."""

import asyncio

from hotseam import Scope


def refresh() -> None:
    pass


async def setup(scope: Scope) -> None:
    asyncio.get_running_loop().call_later(3600, refresh)  # PLANTED

"""Planted defect: a task started with asyncio.create_task in setup, never owned by the scope."""

import asyncio

from hotseam import Scope


def refresh() -> None:
    pass


async def poll() -> None:
    while True:
        await asyncio.sleep(60)
        refresh()


async def setup(scope: Scope) -> None:
    asyncio.get_running_loop().create_task(poll())  # PLANTED: not scope.spawn

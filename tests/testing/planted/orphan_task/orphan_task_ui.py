"""Planted defect: a task started with asyncio.create_task in setup, never owned by the scope."""

import asyncio

from hotseam import Scope


async def poll() -> None:
    await asyncio.Event().wait()  # until cancelled


async def setup(scope: Scope) -> None:
    asyncio.get_running_loop().create_task(poll())  # PLANTED: not scope.spawn

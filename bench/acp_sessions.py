"""Memory of a long-lived ACP agent over many sessions: flat when sessions are released.

    .venv/bin/python bench/acp_sessions.py [--sessions 10000]

Serves the ACP agent in process (the SDK's memory transport and its own client) and, for
each of N sessions, opens it, runs one prompt turn (the agent says one chunk) and then:

* ``session/close``: the client closes each session;
* ``idle bound``: the client never closes them; the agent releases sessions idle past
  ``session_idle_timeout`` (0 s here, so each is released when the next one opens);
* ``no release``: neither (``session_idle_timeout=None``), for comparison.

Prints the memory allocated by Python (tracemalloc, after a full collection) at
checkpoints, and the sessions the agent still holds.
"""

from __future__ import annotations

import argparse
import gc
import logging
import platform
import time
import tracemalloc
from typing import Any

import anyio
import structlog
from acp import PROTOCOL_VERSION, text_block
from acp._transport import memory_transport_pair
from acp.client.connection import ClientSideConnection

from hotseam import Context
from hotseam.providers.acp import current_turn, serve

MODES = {"session/close": (True, 3600.0), "idle bound": (False, 0.0), "no release": (False, None)}


class _Client:
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass


async def _agent(context: Context) -> None:
    await current_turn().say("ok\n")


async def _measure(
    sessions: int, close: bool, idle: float | None, checkpoints: list[int]
) -> list[tuple[int, float, int]]:
    agent_side, client_side = memory_transport_pair()
    rows: list[tuple[int, float, int]] = []
    async with anyio.create_task_group() as group:
        context = Context("bench")
        group.start_soon(
            lambda: serve(
                _agent,
                context,
                transport=agent_side,
                session_idle_timeout=idle,
            )
        )
        conn = ClientSideConnection(_Client(), client_side)  # type: ignore[arg-type]
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        baseline = 0
        for index in range(1, sessions + 1):
            session_id = (await conn.new_session(cwd="/tmp")).session_id
            await conn.prompt(session_id=session_id, prompt=[text_block("hello")])
            if close:
                await conn._conn.send_request("session/close", {"sessionId": session_id})
            if index == 1 or index in checkpoints:
                gc.collect()
                current, _ = tracemalloc.get_traced_memory()
                if index == 1:
                    baseline = current
                rows.append((index, (current - baseline) / 1024, _held_sessions()))
        await conn.close()
        group.cancel_scope.cancel()
    return rows


def _held_sessions() -> int:
    """The sessions the agent holds, found through the garbage collector (no private hook)."""
    from hotseam.providers._acp._sessions import Sessions

    return sum(len(obj) for obj in gc.get_objects() if isinstance(obj, Sessions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    checkpoints = sorted(
        {args.sessions // 10, args.sessions // 4, args.sessions // 2, args.sessions}
    )
    print(
        f"# {args.sessions} sessions, one prompt turn each; Python "
        f"{platform.python_version()} on {platform.machine()}"
    )
    print()
    print("| release | sessions | allocated since session 1 (KiB) | sessions held | time (s) |")
    print("|---|---:|---:|---:|---:|")
    for mode, (close, idle) in MODES.items():
        tracemalloc.start()
        started = time.perf_counter()
        rows = anyio.run(_measure, args.sessions, close, idle, checkpoints, backend="asyncio")
        elapsed = time.perf_counter() - started
        tracemalloc.stop()
        for index, kib, held in rows[1:]:
            last = index == args.sessions
            print(
                f"| {mode} | {index} | {kib:,.0f} | {held} | {f'{elapsed:.1f}' if last else ''} |"
            )


if __name__ == "__main__":
    main()

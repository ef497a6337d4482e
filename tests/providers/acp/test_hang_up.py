"""A client that hangs up while the agent still has something to send.

A client exits as soon as its last request is answered; if the agent is sending at that
moment (a withdrawal, an update), the SDK's sender task dies on the broken pipe and its
``close()`` re-raised the error, so ``hotseam acp`` exited 1 at a normal end (seen in the
interop suite: "a reload while a permission prompt is open", about one run in three).
Here the pipe is real and the client's end is closed before the agent sends.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, cast

import pytest
from acp import text_block, update_agent_message
from acp.agent.connection import AgentSideConnection

from hotseam.providers._acp._wire import close_connection, guard_lines


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the ACP SDK is asyncio-only
@pytest.mark.anyio
async def test_closing_after_the_client_hung_up_is_the_end_not_an_error() -> None:
    loop = asyncio.get_running_loop()
    client_end, agent_end = os.pipe()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(agent_end, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    reader = asyncio.StreamReader()
    connection = AgentSideConnection(cast(Any, object()), writer, reader, listening=False)
    guard_lines(connection, reader, max_line_bytes=1 << 20)
    os.close(client_end)  # the client exited
    # The write finds the pipe closed: the SDK's sender task dies with it (and a later send
    # would wait for it for ever: hotseam bounds every send it makes after a hang-up).
    with pytest.raises(ConnectionError):
        await connection.session_update("sess_1", update_agent_message(text_block("bye")))
    reader.feed_eof()
    await close_connection(connection)  # what serve() does: raised ConnectionResetError

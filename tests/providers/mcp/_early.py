"""A stdio host's side for the early-answer tests: a real ``hotseam mcp`` / ``hotseam acp``
process, its stdin a pipe (the front answers first) or a socket (no front: the SDK alone
answers, as before it), the given lines written, stdout read to its end."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from tests._timing import scaled

WAIT = 60.0  # a whole exchange, a fresh interpreter importing the SDK included


@dataclass
class Exchange:
    """What the host got: every stdout line parsed, in order; the log; the exit code."""

    messages: list[dict[str, Any]]
    stderr: str
    code: int

    def answer(self, request_id: object) -> dict[str, Any]:
        [found] = [m for m in self.messages if m.get("id") == request_id and "method" not in m]
        return found

    def log(self, event: str) -> list[dict[str, Any]]:
        entries = []
        for line in self.stderr.splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                if entry.get("event") == event:
                    entries.append(entry)
        return entries


def line(message: dict[str, Any] | str) -> bytes:
    text = message if isinstance(message, str) else json.dumps(message, separators=(",", ":"))
    return (text + "\n").encode()


async def exchange(
    args: Sequence[str],
    first: Sequence[dict[str, Any] | str],
    *,
    pipe: bool,
    cwd: Path,
    then: Sequence[dict[str, Any] | str] = (),
    answers_before_then: int = 0,
) -> Exchange:
    """Start ``hotseam ARGS`` (debug log), write ``first`` in one write; once
    ``answers_before_then`` lines came back, write ``then``; close stdin and read stdout to
    its end."""
    ours: socket.socket | None = None
    theirs: socket.socket | None = None
    stdin: int = subprocess.PIPE
    if not pipe:
        ours, theirs = socket.socketpair()
        stdin = theirs.fileno()
    errors = cwd / f"stderr-{'pipe' if pipe else 'socket'}-{id(first)}.log"
    messages: list[dict[str, Any]] = []
    with errors.open("wb") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "hotseam", *args, "--log-level", "debug"],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            cwd=cwd,
        )
        if theirs is not None:
            theirs.close()
        async with process:
            assert process.stdout is not None

            async def write(data: bytes) -> None:
                if ours is not None:
                    ours.sendall(data)  # a few hundred bytes: the socket's buffer takes them
                else:
                    assert process.stdin is not None
                    await process.stdin.send(data)

            async def close() -> None:
                if ours is not None:
                    ours.close()
                else:
                    assert process.stdin is not None
                    await process.stdin.aclose()

            buffer = b""
            with anyio.fail_after(scaled(WAIT)):
                await write(b"".join(line(each) for each in first))
                if not then:
                    await close()
                while True:
                    try:
                        buffer += await process.stdout.receive()
                    except anyio.EndOfStream:
                        break
                    *complete, buffer = buffer.split(b"\n")
                    messages.extend(json.loads(each) for each in complete if each.strip())
                    if then and len(messages) >= answers_before_then:
                        await write(b"".join(line(each) for each in then))
                        await close()
                        then = ()
                code = await process.wait()
    return Exchange(messages, errors.read_text(errors="replace"), code)


async def both(
    args: Sequence[str], first: Sequence[dict[str, Any] | str], *, cwd: Path, **more: Any
) -> tuple[Exchange, Exchange]:
    """The same exchange over a pipe (the front) and over a socket (the SDK alone), at once."""
    found: dict[bool, Exchange] = {}

    async def one(pipe: bool) -> None:
        found[pipe] = await exchange(args, first, pipe=pipe, cwd=cwd, **more)

    async with anyio.create_task_group() as group:
        group.start_soon(one, True)
        group.start_soon(one, False)
    return found[True], found[False]

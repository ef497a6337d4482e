"""Answer a stdio host's first messages before the protocol SDK is imported.

``import mcp`` takes about a second, and Claude Code gives an MCP server 3 s to answer its
``server/discover`` probe. What ``initialize`` and ``server/discover`` answer is known
without the SDK, so a thread (:class:`EarlyFront`) answers them while the command imports
the SDK and loads its modules.

Nothing is lost or reordered: every byte the front read is read first by the SDK, whose own
answers to what the front answered are dropped after a comparison (:class:`SkippingWriter`;
a difference is logged). From the first line the front does not know, it stops reading.
Only the standard library is imported here."""

from __future__ import annotations

import asyncio
import json
import os
import select
import stat
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Answer = Callable[[Mapping[str, Any]], dict[str, Any] | None]
"""The answer to a host's message, or ``None``: the SDK's to give."""

_READ = 64 * 1024
_MOST_BUFFERED = 1024 * 1024
"""Past this many bytes without a line the front knows, it stops reading."""

# -- MCP: what the SDK's low-level server answers (mcp 2.3.0, mcp_types.version) ------------------

MCP_HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""``initialize``: the versions answered as asked; any other gets the latest of them."""
MCP_MODERN_VERSIONS = ("2026-07-28",)
"""``server/discover``: answered only when asked at one of these (else the SDK's error)."""
_MCP_CAPABILITIES = {"tools": {"listChanged": True}}
_CLIENT_CAPABILITY_FLAGS = frozenset({"listChanged"})


def _is_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _params(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """The params of a JSON-RPC request (a valid id, params an object), else ``None``."""
    params = message.get("params")
    if message.get("jsonrpc") != "2.0" or not _is_id(message.get("id")):
        return None
    return params if isinstance(params, dict) else None


def _implementation(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and isinstance(value.get("version"), str)
        and all(isinstance(value.get(key, ""), str) for key in ("title", "description"))
    )


def _capabilities(value: object) -> bool:
    """A client's capabilities the SDK takes for certain: an object of objects."""
    if not isinstance(value, dict):
        return False
    for entry in value.values():
        if not isinstance(entry, dict):
            return False
        for key in _CLIENT_CAPABILITY_FLAGS & entry.keys():
            if not isinstance(entry[key], bool):
                return False
    return True


def mcp_answer(version: str, name: str = "hotseam") -> Answer:
    """The answers of ``hotseam mcp`` (server ``name`` at ``version``) to ``initialize``
    and ``server/discover``, as the SDK's server gives them."""
    info = {"name": name, "version": version}

    def answer(message: Mapping[str, Any]) -> dict[str, Any] | None:
        if (params := _params(message)) is None:
            return None
        method = message.get("method")
        if method == "initialize":
            asked = params.get("protocolVersion")
            if not (
                isinstance(asked, str)
                and _capabilities(params.get("capabilities"))
                and _implementation(params.get("clientInfo"))
            ):
                return None
            agreed = asked if asked in MCP_HANDSHAKE_VERSIONS else MCP_HANDSHAKE_VERSIONS[-1]
            result: dict[str, Any] = {
                "capabilities": _MCP_CAPABILITIES,
                "protocolVersion": agreed,
                "serverInfo": info,
            }
        elif method == "server/discover":
            meta = params.get("_meta")
            if not isinstance(meta, dict) or set(params) != {"_meta"}:
                return None
            prefix = "io.modelcontextprotocol/"
            if not (
                meta.get(prefix + "protocolVersion") in MCP_MODERN_VERSIONS
                and _implementation(meta.get(prefix + "clientInfo"))
                and _capabilities(meta.get(prefix + "clientCapabilities"))
            ):
                return None
            result = {
                "cacheScope": "private",
                "capabilities": _MCP_CAPABILITIES,
                "resultType": "complete",
                "supportedVersions": list(MCP_MODERN_VERSIONS),
                "ttlMs": 0,
                "_meta": {prefix + "serverInfo": info},
            }
        else:
            return None
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    return answer


# -- ACP: what hotseam's agent answers (providers/_acp/_agent.py, acp.meta.PROTOCOL_VERSION) -------

ACP_PROTOCOL_VERSION = 1


def acp_answer(version: str, name: str = "hotseam", title: str = "hotseam") -> Answer:
    """The answer of ``hotseam acp`` to ``initialize``, as its agent gives it."""
    info = {"name": name, "title": title, "version": version}

    def answer(message: Mapping[str, Any]) -> dict[str, Any] | None:
        params = _params(message)
        if params is None or message.get("method") != "initialize":
            return None
        asked = params.get("protocolVersion")
        if not isinstance(asked, int) or isinstance(asked, bool) or not 0 <= asked <= 65535:
            return None
        capabilities = params.get("clientCapabilities", {})
        if not isinstance(capabilities, dict) or not all(
            isinstance(value, dict | bool) for value in capabilities.values()
        ):
            return None
        if "clientInfo" in params and not _implementation(params["clientInfo"]):
            return None
        return {
            "jsonrpc": "2.0",
            "id": message["id"],
            "result": {
                "protocolVersion": ACP_PROTOCOL_VERSION,
                "agentCapabilities": {"sessionCapabilities": {"close": {}}},
                "agentInfo": info,
            },
        }

    return answer


# -- the front -----------------------------------------------------------------------------------

_Key = tuple[bool, int | str]


def _key(request_id: int | str) -> _Key:
    return (isinstance(request_id, str), request_id)


@dataclass(slots=True)
class HandOff:
    """What the front leaves the SDK: every byte it read (to be read again, first), whether
    the input ended there, and the answers it sent, by request id."""

    prefix: bytes = b""
    ended: bool = False
    answered: dict[_Key, dict[str, Any]] = field(default_factory=dict)


class EarlyFront:
    """A thread that answers the first messages on ``in_fd`` (a pipe) on ``out_fd`` until
    :meth:`hand_off`."""

    def __init__(self, answer: Answer, in_fd: int = 0, out_fd: int = 1) -> None:
        self._answer = answer
        self._in = in_fd
        self._out = os.dup(out_fd)  # the protocol's stdout, whatever fd 1 becomes later
        self._wake_read, self._wake_write = os.pipe()
        self._buffer = bytearray()
        self._scanned = 0
        self._done = HandOff()
        self._thread = threading.Thread(
            target=self._run, name="hotseam: early answers", daemon=True
        )

    def start(self) -> EarlyFront:
        self._thread.start()
        return self

    def hand_off(self) -> HandOff:
        """Stop reading (a read in progress completes) and return what the SDK is owed."""
        os.write(self._wake_write, b"x")
        self._thread.join()
        for fd in (self._wake_read, self._wake_write, self._out):
            os.close(fd)
        self._done.prefix = bytes(self._buffer)
        return self._done

    def _run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._in, self._wake_read], [], [])
                if self._wake_read in ready:
                    return
                data = os.read(self._in, _READ)
                if not data:
                    self._done.ended = True
                    return
                self._buffer += data
                if not self._answer_lines() or len(self._buffer) - self._scanned > _MOST_BUFFERED:
                    return  # the rest is the SDK's
        except OSError:
            return  # the SDK's reader will meet whatever this was

    def _answer_lines(self) -> bool:
        """Answer the first complete line if it is the front's; ``False`` once one is not,
        or was answered: what a first answer means for the next (an ``initialize`` after a
        ``server/discover`` is refused) is the SDK's to decide."""
        while (end := self._buffer.find(b"\n", self._scanned)) >= 0:
            line = bytes(self._buffer[self._scanned : end])
            if not line.strip():
                self._scanned = end + 1
                continue
            try:
                message = json.loads(line)
            except ValueError:
                return False
            reply = self._answer(message) if isinstance(message, dict) else None
            if reply is None:
                return False
            encoded = (json.dumps(reply, separators=(",", ":")) + "\n").encode()
            view = memoryview(encoded)
            while view:
                view = view[os.write(self._out, view) :]
            self._done.answered[_key(reply["id"])] = reply
            self._scanned = end + 1
            return False
        return True


def start_front(answer: Answer, out_fd: int = 1) -> EarlyFront | None:
    """An :class:`EarlyFront` reading stdin and answering on ``out_fd``, started, when both
    are pipes (a host's)."""
    try:
        pipes = all(stat.S_ISFIFO(os.fstat(fd).st_mode) for fd in (0, out_fd))
    except OSError:
        return None
    return EarlyFront(answer, out_fd=out_fd).start() if pipes else None


class SkippingWriter(asyncio.StreamWriter):
    """stdout for the SDK: its answers to the requests the front answered are dropped
    (each once), after a comparison with the front's; everything else is written."""

    def __init__(
        self,
        transport: asyncio.WriteTransport,
        protocol: asyncio.BaseProtocol,
        answered: dict[_Key, dict[str, Any]],
        log: Any,
    ) -> None:
        super().__init__(transport, protocol, None, asyncio.get_running_loop())
        self._answered = answered
        self._log = log

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._answered and self._skipped(bytes(data)):
            return
        super().write(data)

    def _skipped(self, data: bytes) -> bool:
        if data.count(b"\n") != 1 or not data.endswith(b"\n"):
            return False
        try:
            message = json.loads(data)
        except ValueError:
            return False
        if not isinstance(message, dict) or not _is_id(message.get("id")):
            return False
        if "result" not in message and "error" not in message:
            return False  # a request of the server's with the same id
        sent = self._answered.pop(_key(message["id"]), None)
        if sent is None:
            return False
        if sent == message:
            self._log.debug("early_answer.confirmed", id=message["id"], sdk_agrees=True)
        else:
            self._log.warning(
                "early_answer.differs",
                id=message["id"],
                sdk_agrees=False,
                early=sent,
                sdk=message,
                reason="the answer given before the SDK was imported is not the SDK's",
            )
        return True

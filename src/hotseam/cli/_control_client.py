"""The client side of the control socket: one request, one reply (``hotseam status`` and
``hotseam reload``).

Kept apart from the server (:mod:`._control`) so that the clients import only the standard
library and the error tree: no anyio, no pydantic, no structlog. Where the sockets are and
how one is chosen is :mod:`._control_folder`'s.
"""

from __future__ import annotations

import json
import socket
import time

from ._control_folder import ControlError, Endpoint

# typing.TYPE_CHECKING without importing typing (this module is
# part of `hotseam status`): type checkers take any constant of this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CLIENT_TIMEOUT", "MAX_CONNECTIONS", "MAX_REPLY", "request"]

MAX_REPLY = 64 * 2**20
"""The largest reply a client reads (a status of many thousand modules fits)."""
MAX_CONNECTIONS = 64
"""The most connections a process serves at once; past it a new one is closed at once."""
CLIENT_TIMEOUT = 10.0


def request(endpoint: Endpoint, message: dict[str, Any], timeout: float = CLIENT_TIMEOUT) -> Any:
    """Send one request and return the decoded reply.

    A connection closed before any reply came was not served (the process was serving its
    most connections at once, or was out of file descriptors): it is tried again, a little
    later each time, until ``timeout``.

    Raises:
        ControlError: the connection failed, the reply did not come within ``timeout``, or it
            is not JSON (nested too deeply, larger than ``MAX_REPLY``...).
    """
    deadline = time.monotonic() + timeout
    pause = 0.02
    while True:
        reply = _exchange(endpoint, json.dumps(message).encode() + b"\n", deadline, timeout)
        if reply or time.monotonic() + pause >= deadline:
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.5)
    if not reply:
        raise ControlError(
            f"{endpoint.path} closed every connection without a reply for {timeout:g} s "
            f"(it serves at most {MAX_CONNECTIONS} at once)"
        )
    try:
        return json.loads(reply)
    except (ValueError, RecursionError) as error:  # nested too deeply: '[[[[...'
        raise ControlError(
            f"{endpoint.path} replied with something that is not JSON "
            f"({'recursion limit exceeded' if isinstance(error, RecursionError) else error})"
        ) from None


def _exchange(endpoint: Endpoint, data: bytes, deadline: float, timeout: float) -> bytes:
    """Send ``data`` on a new connection; return all that came back (empty: unserved)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        reply = bytearray()
        try:
            client.settimeout(max(deadline - time.monotonic(), 0.001))
            client.connect(str(endpoint.path))
            client.sendall(data)
            while chunk := client.recv(65536):
                reply += chunk
                if len(reply) > MAX_REPLY:
                    raise ControlError(f"{endpoint.path} replied with more than {MAX_REPLY} bytes")
                client.settimeout(max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            raise ControlError(f"no reply from {endpoint.path} within {timeout:g} s") from None
        except (ConnectionResetError, BrokenPipeError):
            if reply:
                raise ControlError(f"{endpoint.path} broke the connection mid-reply") from None
        except OSError as error:
            raise ControlError(f"cannot talk to {endpoint.path}: {error}") from None
    return bytes(reply)

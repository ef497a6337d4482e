"""The control socket of ``hotseam dev`` and ``hotseam run``, and how clients find it.

A running session listens on a Unix socket so that ``hotseam status`` and ``hotseam
reload`` can talk to it from another terminal (or a deploy script). The socket is private
to its owner: it lives in a folder only the owner can enter (``$XDG_RUNTIME_DIR/hotseam``,
else ``/tmp/hotseam-<uid>``; ``$HOTSEAM_RUNTIME_DIR`` overrides) and is created readable
and writable by the owner only.

Each process listens on ``<pid>.sock``; ``--name NAME`` adds ``NAME.sock``, a symbolic link
to it. A socket left by a process that died (``kill -9``, a crash, a reboot of the
container) is *stale*: its pid is gone or nothing accepts on it. Clients skip and remove
stale sockets, and a new process replaces a stale one in its way; a live process keeps its
name (a second one asking for it is refused).

The protocol is one JSON object per line each way: ``{"op": "status"}`` or ``{"op":
"reload", "paths": [...]}`` in, ``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}``
out, then the server closes the connection.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import socket
import stat
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from .._errors import HarnessError

__all__ = [
    "ControlError",
    "Endpoint",
    "find_endpoints",
    "request",
    "runtime_dir",
    "serving",
]

MAX_REQUEST = 64 * 1024
CLIENT_TIMEOUT = 10.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class ControlError(HarnessError):
    """No running process to talk to, an unsafe socket folder, or a refused name."""

    default_code = "CONTROL_FAILED"


def runtime_dir() -> Path:
    """The folder of the control sockets (not created)."""
    override = os.environ.get("HOTSEAM_RUNTIME_DIR")
    if override:
        return Path(override)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "hotseam"
    return Path(tempfile.gettempdir()) / f"hotseam-{os.getuid()}"


def private_dir() -> Path:
    """:func:`runtime_dir`, created if needed, and checked to be the owner's alone.

    Raises:
        ControlError: it belongs to someone else, or others may enter it.
    """
    folder = runtime_dir()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError as error:
        raise ControlError(f"cannot create the control socket folder {folder}: {error}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ControlError(f"{folder} is not a folder of this user's; refusing to use it")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A control socket: the process's pid and socket path, and its name if it has one."""

    pid: int
    path: Path
    name: str | None = None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _accepts(path: Path) -> bool:
    """False only when nothing listens on ``path`` (the connection is refused, or there is
    no socket): a busy process that is slow to accept is alive, not stale."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except (ConnectionRefusedError, FileNotFoundError, NotADirectoryError):
            return False
        except OSError:
            return True
    return True


def _just_made(path: Path) -> bool:
    """True for a socket created in the last two seconds (its process may be starting)."""
    try:
        return time.time() - path.lstat().st_mtime < 2.0
    except OSError:
        return False


def find_endpoints(folder: Path | None = None) -> tuple[list[Endpoint], list[str]]:
    """The live control sockets, and a note for each stale one removed on the way."""
    folder = folder or runtime_dir()
    live: dict[int, Endpoint] = {}
    notes: list[str] = []
    if not folder.is_dir():
        return [], notes
    names: dict[int, str] = {}
    for entry in sorted(folder.glob("*.sock")):
        stem = entry.name.removesuffix(".sock")
        if entry.is_symlink():
            target = Path(os.readlink(entry)).name.removesuffix(".sock")
            if target.isdigit() and (folder / f"{target}.sock").exists():
                names[int(target)] = stem
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()
                notes.append(f"removed the stale name {entry.name} (its process is gone)")
            continue
        if not stem.isdigit():
            continue
        pid = int(stem)
        # Stale means nothing accepts on it: the pid alone could be a live process of
        # another PID namespace (a container sharing /tmp).
        if _accepts(entry):
            live[pid] = Endpoint(pid, entry)
        elif _just_made(entry):
            continue  # bound, not yet listening: a process that is starting
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
            gone = "is gone" if not _pid_alive(pid) else "does not answer on it"
            notes.append(f"removed the stale control socket {entry} (process {pid} {gone})")
    for pid, name in names.items():
        if pid in live:
            live[pid] = Endpoint(pid, live[pid].path, name)
    return sorted(live.values(), key=lambda endpoint: endpoint.pid), notes


def locate(target: str | None) -> tuple[Endpoint, list[str]]:
    """The endpoint for ``target``: a pid, a name, a socket path, or (``None``) the only one.

    Raises:
        ControlError: nothing matches, or several do; the message says what is running.
    """
    folder = runtime_dir()
    endpoints, notes = find_endpoints(folder)
    if target is not None and ("/" in target or target.endswith(".sock")):
        path = Path(target)
        if not _accepts(path):
            raise ControlError(f"nothing listens on {path}")
        return Endpoint(0, path), notes
    if target is not None:
        for endpoint in endpoints:
            if str(endpoint.pid) == target or endpoint.name == target:
                return endpoint, notes
        running = _listing(endpoints)
        raise ControlError(f"no running hotseam dev or run is called {target!r}; {running}")
    if len(endpoints) == 1:
        return endpoints[0], notes
    if not endpoints:
        raise ControlError(f"no running hotseam dev or run was found (looked in {folder})")
    raise ControlError(f"several are running; name one by pid or name: {_listing(endpoints)}")


def _listing(endpoints: list[Endpoint]) -> str:
    if not endpoints:
        return "none is running"
    shown = [f"{e.pid}" + (f" ({e.name})" if e.name else "") for e in endpoints]
    return "running: " + ", ".join(shown)


def request(endpoint: Endpoint, message: dict[str, Any], timeout: float = CLIENT_TIMEOUT) -> Any:
    """Send one request and return the decoded reply.

    Raises:
        ControlError: the connection failed or the reply is not JSON.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        try:
            client.connect(str(endpoint.path))
            client.sendall(json.dumps(message).encode() + b"\n")
            chunks: list[bytes] = []
            while chunk := client.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            raise ControlError(f"no reply from {endpoint.path} within {timeout:g} s") from None
        except OSError as error:
            raise ControlError(f"cannot talk to {endpoint.path}: {error}") from None
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        raise ControlError(f"{endpoint.path} replied with something that is not JSON") from None


# -- the server side ---------------------------------------------------------------------------


def check_name(name: str) -> str:
    """``name`` if it can name a socket, else :class:`ControlError`."""
    if not _NAME.fullmatch(name) or name.isdigit():
        raise ControlError(
            f"--name {name!r}: use letters, digits, '.', '_' and '-' (at most 64, not only digits)"
        )
    return name


def claim(name: str | None) -> tuple[Path, Path | None, list[str]]:
    """Make room for this process's socket (and name): stale ones are removed.

    Returns the socket path, the name link's path, and a note per stale file replaced.

    Raises:
        ControlError: the folder is unsafe, or a live process holds ``name``.
    """
    folder = private_dir()
    notes: list[str] = []
    path = folder / f"{os.getpid()}.sock"
    if path.exists() or path.is_symlink():
        path.unlink()  # a dead process had our pid
        notes.append(f"replaced the stale control socket {path}")
    link: Path | None = None
    if name is not None:
        link = folder / f"{check_name(name)}.sock"
        if link.is_symlink() or link.exists():
            owner = Path(os.readlink(link)).name.removesuffix(".sock") if link.is_symlink() else ""
            target = folder / f"{owner}.sock"
            if owner.isdigit() and _accepts(target):
                raise ControlError(f"--name {name!r} is taken by the running process {owner}")
            link.unlink()
            notes.append(f"replaced the stale name {link.name} (process {owner or '?'} is gone)")
    return path, link, notes


@contextlib.asynccontextmanager
async def serving(
    path: Path, link: Path | None, handler: Handler
) -> AsyncIterator[anyio.abc.TaskGroup]:
    """Listen on ``path`` (owner-only) while the block runs; remove it (and ``link``) after."""
    listener = await anyio.create_unix_listener(path, mode=0o600)
    if link is not None:
        with contextlib.suppress(FileExistsError):
            os.symlink(path.name, link)
    # A forced exit (a second Ctrl-C while the loop is blocked) skips the 'finally' below
    # but runs exit handlers: the socket goes either way. Only SIGKILL leaves it (stale).
    atexit.register(_remove, path, link)
    try:
        async with listener, anyio.create_task_group() as tg:

            async def serve() -> None:
                async def handle(stream: anyio.abc.SocketStream) -> None:
                    async with stream:
                        await _answer(stream, handler)

                await listener.serve(handle, task_group=tg)

            tg.start_soon(serve)
            try:
                yield tg
            finally:
                tg.cancel_scope.cancel()
    finally:
        atexit.unregister(_remove)
        _remove(path, link)


def _remove(path: Path, link: Path | None) -> None:
    """Remove this process's socket, and its name unless another process took it."""
    if link is not None and link.is_symlink() and os.readlink(link) == path.name:
        with contextlib.suppress(OSError):
            link.unlink()
    with contextlib.suppress(OSError):
        path.unlink()


async def _answer(stream: anyio.abc.SocketStream, handler: Handler) -> None:
    """Read one request line, reply with one JSON line; a bad request gets an error reply."""
    data = b""
    with anyio.move_on_after(CLIENT_TIMEOUT):
        while b"\n" not in data and len(data) < MAX_REQUEST:
            try:
                data += await stream.receive(65536)
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
    reply: dict[str, Any]
    try:
        message = json.loads(data.split(b"\n", 1)[0])
    except ValueError as error:
        message = f"not JSON: {error}"
    if not isinstance(message, dict):
        reply = {"ok": False, "error": f"bad request: {message}"}
    else:
        try:
            reply = await handler(message)
        except HarnessError as error:
            reply = {"ok": False, "error": str(error), "code": error.code}
        except Exception as error:  # a bug here must not take the session down
            reply = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        await stream.send(json.dumps(reply).encode() + b"\n")

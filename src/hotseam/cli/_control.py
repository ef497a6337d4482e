"""The control socket of ``hotseam dev`` and ``hotseam run``, and how clients find it.

A running session listens on a Unix socket so that ``hotseam status`` and ``hotseam
reload`` can talk to it from another terminal (or a deploy script). The socket is private
to its owner: it lives in a folder only the owner can enter (``$XDG_RUNTIME_DIR/hotseam``,
else ``/tmp/hotseam-<uid>``; ``$HOTSEAM_RUNTIME_DIR`` overrides) and is created readable
and writable by the owner only. When that folder is not the user's (another local user
made ``/tmp/hotseam-<uid>`` first), the session warns and uses a private folder of its own
beside it instead, ``/tmp/hotseam-<uid>-<random>``, where clients look too (only in
folders the user owns and nobody else may enter); when no such folder can be made, or the
socket cannot be bound, it runs without a control socket, with a warning.

Each process listens on ``<pid>.sock``; ``--name NAME`` adds ``NAME.sock``, a symbolic link
to it. A socket left by a process that died (``kill -9``, a crash, a reboot of the
container) is *stale*: its pid is gone or nothing accepts on it. Clients skip and remove
stale sockets, and a new process replaces a stale one in its way; a live process keeps its
name (a second one asking for it is refused).

The protocol is one JSON object per line each way: ``{"op": "status"}`` or ``{"op":
"reload", "paths": [...]}`` in, ``{"ok": true, ...}`` or ``{"ok": false, "error": "...",
"code": "..."}`` out, then the server closes the connection. Nothing a client sends ends
more than its own connection: a request line is read within ``REQUEST_TIMEOUT`` and at most
``MAX_REQUEST`` bytes, decoded by a parser that bounds nesting (pydantic-core's, which
stops at 200 levels instead of recursing into a ``RecursionError``), and checked field by
field; whatever is wrong with it is the reply.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
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
from typing import Annotated, Any, Literal

import anyio
import anyio.abc
import pydantic_core
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, ValidationError

from .._errors import HarnessError

__all__ = [
    "Claim",
    "ControlError",
    "Endpoint",
    "claim",
    "find_endpoints",
    "locate",
    "parse_request",
    "request",
    "runtime_dir",
    "search_dirs",
    "serving",
]

MAX_REQUEST = 64 * 1024
"""The longest request line, in bytes (a reload of 1,000 long paths fits)."""
MAX_PATHS = 1024
"""The most paths one reload request may name (folders name many modules at once)."""
REQUEST_TIMEOUT = 2.0
"""A connection that has not sent its request line this long after connecting is closed."""
REPLY_TIMEOUT = 10.0
"""A client that does not take its reply within this is dropped."""
MAX_REPLY = 64 * 2**20
"""The largest reply a client reads (a status of many thousand modules fits)."""
CLIENT_TIMEOUT = 10.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class ControlError(HarnessError):
    """No running process to talk to, an unsafe socket folder, or a refused name."""

    default_code = "CONTROL_FAILED"


class BadRequestError(HarnessError):
    """A request line the protocol does not accept; the message says what is wrong."""

    default_code = "BAD_REQUEST"


# -- where the sockets are ---------------------------------------------------------------------


def runtime_dir() -> Path:
    """The preferred folder of the control sockets (not created)."""
    override = os.environ.get("HOTSEAM_RUNTIME_DIR")
    if override:
        return Path(override)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "hotseam"
    return Path(tempfile.gettempdir()) / f"hotseam-{os.getuid()}"


def _unsafe(folder: Path) -> str | None:
    """Why ``folder`` (which exists) cannot hold this user's sockets, or ``None``: it must be
    a real folder (not a link to one) that this user owns."""
    try:
        info = folder.lstat()
    except OSError as error:
        return f"cannot inspect the control socket folder {folder}: {error.strerror or error}"
    if not stat.S_ISDIR(info.st_mode):
        return f"the control socket folder {folder} is not a folder"
    if info.st_uid != os.getuid():
        return (
            f"the control socket folder {folder} belongs to uid {info.st_uid}, not to this "
            f"user (uid {os.getuid()})"
        )
    return None


def _private(folder: Path) -> bool:
    """True for a folder this user owns that nobody else may enter (clients look there)."""
    with contextlib.suppress(OSError):
        info = folder.lstat()
        return (
            stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077
        )
    return False


def _stand_ins(folder: Path) -> list[Path]:
    """The private folders made beside ``folder`` while someone else held it."""
    try:
        entries = sorted(folder.parent.glob(f"{glob.escape(folder.name)}-*"))
    except OSError:
        return []
    return [entry for entry in entries if _private(entry)]


def search_dirs() -> list[Path]:
    """The folders where clients look for sockets: the preferred one when it is the user's
    alone, then each private stand-in made beside it (none under ``HOTSEAM_RUNTIME_DIR``)."""
    folder = runtime_dir()
    found = [folder] if _private(folder) else []
    if not os.environ.get("HOTSEAM_RUNTIME_DIR"):
        found += _stand_ins(folder)
    return found


def _make_private(folder: Path) -> str | None:
    """Create ``folder`` (owner only) if needed; why it cannot be used, or ``None``."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot create the control socket folder {folder}: {error.strerror or error}"
    problem = _unsafe(folder)
    if problem is None and folder.lstat().st_mode & 0o077:
        try:
            os.chmod(folder, 0o700)
        except OSError as error:
            return f"cannot make {folder} private: {error.strerror or error}"
    return problem


def private_dir() -> tuple[Path, str | None]:
    """The folder to listen in, created if needed and the owner's alone, and a warning when
    it is a stand-in for the preferred one (which someone else holds).

    Raises:
        ControlError: no private folder can be had (``HOTSEAM_RUNTIME_DIR`` names one that
            cannot be used, or none can be made beside the preferred one).
    """
    folder = runtime_dir()
    problem = _make_private(folder)
    if problem is None:
        return folder, None
    if os.environ.get("HOTSEAM_RUNTIME_DIR"):  # named on purpose: its owner must fix it
        raise ControlError(f"{problem} (HOTSEAM_RUNTIME_DIR); refusing to use it")
    stand_ins = _stand_ins(folder)
    if stand_ins:
        stand_in = stand_ins[0]
    else:
        try:
            stand_in = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=folder.parent))
        except OSError as error:
            raise ControlError(
                f"{problem}, and no private folder can be made beside it: {error.strerror or error}"
            ) from None
    return stand_in, f"{problem}; using the private folder {stand_in} instead"


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
    """The live control sockets in ``folder`` (default: every folder of :func:`search_dirs`),
    and a note for each stale one removed on the way."""
    if folder is None:
        live: list[Endpoint] = []
        notes: list[str] = []
        for each in search_dirs():
            found, removed = find_endpoints(each)
            live += found
            notes += removed
        return sorted(live, key=lambda endpoint: endpoint.pid), notes
    return _endpoints_in(folder)


def _endpoints_in(folder: Path) -> tuple[list[Endpoint], list[str]]:
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
    endpoints, notes = find_endpoints()
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
        raise ControlError(f"no running hotseam dev or run was found (looked in {_looked_in()})")
    raise ControlError(f"several are running; name one by pid or name: {_listing(endpoints)}")


def _looked_in() -> str:
    folder = runtime_dir()
    where = [str(each) for each in search_dirs()]
    if str(folder) not in where:
        problem = _unsafe(folder) if folder.exists() or folder.is_symlink() else None
        where.insert(0, f"{folder}, skipped: {problem}" if problem else str(folder))
    return "; ".join(where)


def _listing(endpoints: list[Endpoint]) -> str:
    if not endpoints:
        return "none is running"
    shown = [f"{e.pid}" + (f" ({e.name})" if e.name else "") for e in endpoints]
    return "running: " + ", ".join(shown)


def request(endpoint: Endpoint, message: dict[str, Any], timeout: float = CLIENT_TIMEOUT) -> Any:
    """Send one request and return the decoded reply.

    Raises:
        ControlError: the connection failed, the reply did not come within ``timeout``, or it
            is not JSON (nested too deeply, larger than ``MAX_REPLY``...).
    """
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        try:
            client.connect(str(endpoint.path))
            client.sendall(json.dumps(message).encode() + b"\n")
            reply = bytearray()
            while chunk := client.recv(65536):
                reply += chunk
                if len(reply) > MAX_REPLY:
                    raise ControlError(f"{endpoint.path} replied with more than {MAX_REPLY} bytes")
                client.settimeout(max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            raise ControlError(f"no reply from {endpoint.path} within {timeout:g} s") from None
        except OSError as error:
            raise ControlError(f"cannot talk to {endpoint.path}: {error}") from None
    try:
        # Bounded nesting: a reply of '[[[[...' is an error, not a RecursionError.
        return pydantic_core.from_json(bytes(reply))
    except ValueError as error:
        raise ControlError(
            f"{endpoint.path} replied with something that is not JSON ({error})"
        ) from None


# -- the server side ---------------------------------------------------------------------------


def check_name(name: str) -> str:
    """``name`` if it can name a socket, else :class:`ControlError`."""
    if not _NAME.fullmatch(name) or name.isdigit():
        raise ControlError(
            f"--name {name!r}: use letters, digits, '.', '_' and '-' (at most 64, not only digits)"
        )
    return name


@dataclass(frozen=True, slots=True)
class Claim:
    """Where this process will listen: ``socket`` (``None``: it will not, ``warnings`` say
    why), the ``--name`` link, a note per stale file replaced, and what to warn about."""

    socket: Path | None
    link: Path | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def claim(name: str | None) -> Claim:
    """Make room for this process's socket (and name): stale ones are removed.

    When no private folder can be had, the claim has no socket and says why: a session
    without its control socket is better than none (another user could otherwise stop
    every start by creating ``/tmp/hotseam-<uid>``).

    Raises:
        ControlError: ``HOTSEAM_RUNTIME_DIR`` names an unsafe folder, or a live process
            holds ``name``.
    """
    if name is not None:
        check_name(name)
    try:
        folder, warning = private_dir()
    except ControlError as error:
        if os.environ.get("HOTSEAM_RUNTIME_DIR"):
            raise
        return Claim(None, warnings=(f"no control socket: {error}; {_UNREACHABLE}",))
    notes: list[str] = []
    path = folder / f"{os.getpid()}.sock"
    if path.exists() or path.is_symlink():
        path.unlink()  # a dead process had our pid
        notes.append(f"replaced the stale control socket {path}")
    link: Path | None = None
    if name is not None:
        _check_name_free(name, folder)
        link = folder / f"{name}.sock"
        if link.is_symlink() or link.exists():
            owner = Path(os.readlink(link)).name.removesuffix(".sock") if link.is_symlink() else ""
            link.unlink()
            notes.append(f"replaced the stale name {link.name} (process {owner or '?'} is gone)")
    return Claim(path, link, tuple(notes), () if warning is None else (warning,))


_UNREACHABLE = "hotseam status and hotseam reload cannot reach this process"


def _check_name_free(name: str, folder: Path) -> None:
    """Raise :class:`ControlError` when a live process holds ``name`` (in any folder clients
    search: a stand-in's process keeps its name when the preferred folder comes back)."""
    for each in dict.fromkeys([folder, *search_dirs()]):
        link = each / f"{name}.sock"
        if not link.is_symlink():
            continue
        owner = Path(os.readlink(link)).name.removesuffix(".sock")
        if owner.isdigit() and owner != str(os.getpid()) and _accepts(each / f"{owner}.sock"):
            raise ControlError(f"--name {name!r} is taken by the running process {owner}")


def _no_nul(path: str) -> str:
    if "\0" in path:
        raise ValueError("a path cannot contain a NUL character")
    return path


class _Request(BaseModel):
    """One request line as the protocol accepts it (unknown fields are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    op: Literal["status", "reload"]
    paths: Annotated[
        list[Annotated[StrictStr, AfterValidator(_no_nul)]], Field(max_length=MAX_PATHS)
    ] = []


def parse_request(line: bytes) -> dict[str, Any]:
    """The request in ``line``, checked, with each path once (a path named 1,000 times is
    reloaded once).

    Raises:
        BadRequestError: ``line`` is not a JSON object of this protocol; the message names the
            field and what is wrong with it.
    """
    if not line.strip():
        raise BadRequestError(
            'bad request: empty request; expected one JSON object, such as {"op": "status"}'
        )
    try:
        checked = _Request.model_validate_json(line)
    except ValidationError as error:
        raise BadRequestError(_explain(error)) from None
    return {"op": checked.op, "paths": list(dict.fromkeys(checked.paths))}


def _explain(error: ValidationError) -> str:
    """A validation error as one line naming each field (never echoing the input)."""
    problems: list[str] = []
    for item in error.errors(include_url=False, include_input=False):
        where = ".".join(str(part) for part in item["loc"])
        if item["type"] == "json_invalid":
            detail = item.get("ctx", {}).get("error", item["msg"])
            problems.append(f"not valid JSON: {detail}")
        elif item["type"] == "model_type":
            problems.append('expected a JSON object, such as {"op": "status"}')
        else:
            problems.append(f"{where}: {item['msg']}" if where else item["msg"])
    shown = "; ".join(problems[:3])
    if len(problems) > 3:
        shown += f" (and {len(problems) - 3} more)"
    return f"bad request: {shown}"


@contextlib.asynccontextmanager
async def serving(claimed: Claim, handler: Handler, log: Any) -> AsyncIterator[None]:
    """Listen on the claimed socket (owner-only) while the block runs; remove it (and its
    name) after. Without a socket, or when it cannot be bound, the block runs all the same
    and ``log`` warns that the process cannot be reached."""
    for note in claimed.notes:
        log.info(note)
    for warning in claimed.warnings:
        log.warning(warning)
    path, link = claimed.socket, claimed.link
    if path is None:
        yield
        return
    try:
        listener = await anyio.create_unix_listener(path, mode=0o600)
    except OSError as error:
        log.warning(f"no control socket: cannot listen on {path}: {error}; {_UNREACHABLE}")
        yield
        return
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
                        await answer(stream, handler, log)

                await listener.serve(handle, task_group=tg)

            tg.start_soon(serve)
            log.info(f"control socket: {path} (hotseam status {os.getpid()})")
            try:
                yield
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


async def answer(
    stream: anyio.abc.ByteStream,
    handler: Handler,
    log: Any,
    *,
    request_timeout: float = REQUEST_TIMEOUT,
    reply_timeout: float = REPLY_TIMEOUT,
) -> None:
    """Read one request line and reply with one JSON line. Whatever is wrong with the
    request is the reply; a client that is slow to send, sends too much, hangs up or never
    reads costs its own connection only; a failure of ``handler`` is logged and replied."""
    try:
        line = await _request_line(stream, request_timeout)
        reply = await _reply(handler, parse_request(line), log)
    except BadRequestError as error:
        reply = {"ok": False, "error": str(error), "code": error.code}
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        return  # the client hung up before its request was complete
    try:
        data = json.dumps(reply).encode() + b"\n"
    except (TypeError, ValueError, RecursionError) as error:
        log.exception("a control reply cannot be encoded")
        failure = {"ok": False, "error": f"the reply cannot be encoded: {error}", "code": "FAILED"}
        data = json.dumps(failure).encode() + b"\n"
    with (
        anyio.move_on_after(reply_timeout),
        contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError),
    ):
        await stream.send(data)


async def _request_line(stream: anyio.abc.ByteReceiveStream, timeout: float) -> bytes:
    """The first line the client sends (or all it sent before closing its side).

    Raises:
        BadRequestError: it is longer than ``MAX_REQUEST`` or not complete within ``timeout``.
    """
    buffer = bytearray()
    with anyio.move_on_after(timeout):
        while (end := buffer.find(b"\n", 0, MAX_REQUEST + 1)) < 0:
            if len(buffer) > MAX_REQUEST:
                break
            try:
                buffer += await stream.receive()
            except anyio.EndOfStream:  # the client shut its side: what came is the request
                end = len(buffer)
                break
        if end < 0 or end > MAX_REQUEST:
            raise BadRequestError(
                f"bad request: the request line is longer than {MAX_REQUEST} bytes"
            )
        return bytes(buffer[:end])
    raise BadRequestError(f"bad request: no complete request line within {timeout:g} s")


async def _reply(handler: Handler, message: dict[str, Any], log: Any) -> dict[str, Any]:
    try:
        return await handler(message)
    except HarnessError as error:
        return {"ok": False, "error": str(error), "code": error.code}
    except Exception as error:  # a bug here must not take the session down
        failure = f"{type(error).__name__}: {error}"
        log.error(f"control request {message['op']!r} failed: {failure}", exc_info=True)
        return {"ok": False, "error": failure, "code": "FAILED"}

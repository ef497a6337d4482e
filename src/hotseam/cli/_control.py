"""The control socket of ``hotseam dev`` and ``hotseam run``: its protocol, served and asked.

``hotseam status`` and ``hotseam reload`` (the client: :mod:`._control_client`, without
anyio or pydantic) send one JSON line, ``{"op": "status"}`` or ``{"op": "reload", "paths":
[...]}``, and get one, ``{"ok": true, ...}`` or ``{"ok": false, "error": ..., "code": ...}``.
Nothing a client sends ends more than its own connection: the line is bounded in time and
size and checked field by field, and connections are accepted by the loop every listener
shares (at most ``MAX_CONNECTIONS`` at once, out of descriptors waited out).

The sockets live in a folder only their owner can enter (``$XDG_RUNTIME_DIR/hotseam``, else
``/tmp/hotseam-<uid>``; ``$HOTSEAM_RUNTIME_DIR`` overrides, and is never replaced). When
another user made ``/tmp/hotseam-<uid>`` first, the session warns and uses a private folder
beside it, where clients look too; without any it runs with no control socket. Each process
listens on ``<pid>.sock`` (``--name`` adds the link ``NAME.sock``); a socket nothing accepts
on is stale and removed, and a live process keeps its name."""

from __future__ import annotations

import atexit
import collections
import contextlib
import functools
import json
import os
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import anyio.abc

from .._core import HarnessError
from ..providers import JsonLines, Refusal, accept_connections, decode_bytes
from ._control_client import (
    MAX_CONNECTIONS,
    ControlError,
    accepts,
    runtime_dir,
    search_dirs,
    stand_ins,
    unsafe,
)

if TYPE_CHECKING:
    from typing import NamedTuple

    from pydantic import ValidationError

MAX_REQUEST = 64 * 1024
"""The longest request line, in bytes (a reload of 1,000 long paths fits)."""
MAX_PATHS = 1024
"""The most paths one reload request may name (folders name many modules at once)."""
REQUEST_TIMEOUT = 2.0
"""A connection that has not sent its request line this long after connecting is closed."""
REPLY_TIMEOUT = 10.0
"""A client that does not take its reply within this is dropped."""

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class BadRequestError(HarnessError):
    """A request line the protocol does not accept; the message says what is wrong."""

    default_code = "BAD_REQUEST"


# -- where the sockets live -------------------------------------------------------------------

UNREACHABLE = "hotseam status and hotseam reload cannot reach this process"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _make_private(folder: Path) -> str | None:
    """Create ``folder`` (owner only) if needed; why it cannot be used, or ``None``."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        return f"cannot create the control socket folder {folder}: {error.strerror or error}"
    problem = unsafe(folder)
    if problem is None and folder.lstat().st_mode & 0o077:
        try:
            os.chmod(folder, 0o700)
        except OSError as error:
            return f"cannot make {folder} private: {error.strerror or error}"
    return problem


def private_dir() -> tuple[Path, str | None]:
    """The folder to listen in (created, the owner's alone), and a warning when it stands
    in for the preferred one (which someone else holds).

    Raises:
        ControlError: no private folder can be had (``HOTSEAM_RUNTIME_DIR`` names one that
            cannot be used, or none can be made beside the preferred one).
    """
    folder = Path(runtime_dir(exact=True))
    problem = _make_private(folder)
    if problem is None:
        return folder, None
    if os.environ.get("HOTSEAM_RUNTIME_DIR"):  # named on purpose: its owner must fix it
        raise ControlError(f"HOTSEAM_RUNTIME_DIR: {problem}; refusing to use it")
    beside = stand_ins(str(folder))
    if beside:
        stand_in = Path(beside[0])
    else:
        import tempfile

        try:
            stand_in = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=folder.parent))
        except OSError as error:
            raise ControlError(
                f"{problem}, and no private folder can be made beside it: {error.strerror or error}"
            ) from None
    return stand_in, f"{problem}; using the private folder {stand_in} instead"


def check_name(name: str) -> str:
    """``name`` if it can name a socket, else :class:`ControlError`."""
    if not _NAME.fullmatch(name) or name.isdigit():
        raise ControlError(
            f"--name {name!r}: use letters, digits, '.', '_' and '-' (at most 64, not only digits)"
        )
    return name


if TYPE_CHECKING:

    class Claim(NamedTuple):
        socket: Path | None
        link: Path | None = None
        notes: tuple[str, ...] = ()
        warnings: tuple[str, ...] = ()

else:
    Claim = collections.namedtuple(
        "Claim", ["socket", "link", "notes", "warnings"], defaults=[None, (), ()]
    )
Claim.__doc__ = """Where this process will listen: ``socket`` (``None``: it will not,
``warnings`` say why), the ``--name`` link, a note per stale file replaced, and what to warn
about."""


def claim(name: str | None) -> Claim:
    """Make room for this process's socket (and name), removing stale ones. Without a
    private folder the claim has no socket and says why (else another user could stop every
    start by creating ``/tmp/hotseam-<uid>``).

    Raises:
        ControlError: ``HOTSEAM_RUNTIME_DIR`` names an unsafe folder, or a live process
            holds ``name``."""
    if name is not None:
        check_name(name)
    try:
        folder, warning = private_dir()
    except ControlError as error:
        if os.environ.get("HOTSEAM_RUNTIME_DIR"):
            raise
        return Claim(None, warnings=(f"no control socket: {error}; {UNREACHABLE}",))
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
            # Daemons started at once for one name (racing for its agent's run) may each
            # find the stale link: the first removes it, the others find it gone.
            try:
                owner = Path(os.readlink(link)).name.removesuffix(".sock")
            except OSError:
                owner = ""
            link.unlink(missing_ok=True)
            notes.append(f"replaced the stale name {link.name} (process {owner or '?'} is gone)")
    return Claim(path, link, tuple(notes), () if warning is None else (warning,))


def _check_name_free(name: str, folder: Path) -> None:
    """Raise :class:`ControlError` when a live process holds ``name`` in any folder clients
    search."""
    for each in dict.fromkeys([folder, *map(Path, search_dirs())]):
        link = each / f"{name}.sock"
        if not link.is_symlink():
            continue
        owner = Path(os.readlink(link)).name.removesuffix(".sock")
        if owner.isdigit() and owner != str(os.getpid()) and accepts(each / f"{owner}.sock"):
            raise ControlError(f"--name {name!r} is taken by the running process {owner}")


# -- the server side ---------------------------------------------------------------------------


def _no_nul(path: str) -> str:
    if "\0" in path:
        raise ValueError("a path cannot contain a NUL character")
    return path


@functools.cache
def _request_model() -> Any:
    """The request model (unknown fields ignored), made at the first request: ``hotseam
    status`` and ``reload`` never import pydantic."""
    from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr

    class _Request(BaseModel):
        model_config = ConfigDict(extra="ignore", frozen=True)

        op: Literal["status", "reload"]
        paths: Annotated[
            list[Annotated[StrictStr, AfterValidator(_no_nul)]], Field(max_length=MAX_PATHS)
        ] = []

    return _Request


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
    from pydantic import ValidationError

    decoded = decode_bytes(line)
    if isinstance(decoded, Refusal):
        raise BadRequestError(_refused(decoded))
    try:
        # Bounded and well-formed: pydantic reads it again, naming the fields in JSON's words.
        checked = _request_model().model_validate_json(line)
    except ValidationError as error:
        raise BadRequestError(_explain(error)) from None
    return {"op": checked.op, "paths": list(dict.fromkeys(checked.paths))}


def _refused(refusal: Refusal) -> str:
    """A line the reader refused, as the one-line reply (never echoing the input)."""
    if refusal.kind == "too_deep":
        return f"bad request: not valid JSON: recursion limit exceeded ({refusal.detail})"
    return f"bad request: not valid JSON: {refusal.detail}"


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
    """Listen on the claimed socket while the block runs; remove it (and its name) after.
    Without a socket the block runs all the same, and ``log`` warns."""
    for note in claimed.notes:
        log.info(note)
    for warning in claimed.warnings:
        log.warning(warning)
    path, link = claimed.socket, claimed.link
    if path is None:
        yield
        return
    try:
        listener = _listen(path)
    except OSError as error:
        log.warning(f"no control socket: cannot listen on {path}: {error}; {UNREACHABLE}")
        yield
        return
    if link is not None:
        with contextlib.suppress(FileExistsError):
            os.symlink(path.name, link)
    # A forced exit (a second Ctrl-C while the loop is blocked) skips the 'finally' below
    # but runs exit handlers: the socket goes either way. Only SIGKILL leaves it (stale).
    atexit.register(_remove, path, link)

    async def handle(connection: socket.socket) -> None:
        stream = await anyio.abc.SocketStream.from_socket(connection)
        async with stream:
            await answer(stream, handler, log)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                functools.partial(
                    accept_connections,
                    listener,
                    handle,
                    limit=MAX_CONNECTIONS,
                    what="control socket",
                    logger=log,
                )
            )
            log.info(f"control socket: {path} (hotseam status {os.getpid()})")
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
    finally:
        listener.close()
        atexit.unregister(_remove)
        _remove(path, link)


def _listen(path: Path) -> socket.socket:
    """A non-blocking Unix socket listening on ``path``, its owner's only."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.setblocking(False)
        listener.bind(os.fspath(path))
        os.chmod(path, 0o600)
        listener.listen(socket.SOMAXCONN)
    except BaseException:
        listener.close()
        raise
    return listener


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
    """Read one request line and reply with one JSON line: what is wrong with the request,
    or a failure of ``handler`` (logged), is the reply; a bad client costs its own
    connection only."""
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
    """The first line the client sends (or all it sent before closing its side); a
    :class:`BadRequestError` when it is too long or not complete within ``timeout``."""
    lines = JsonLines(stream, max_line_bytes=MAX_REQUEST, discard_long=False)
    with anyio.move_on_after(timeout):
        line = await lines.receive_line()
        if line is None:  # the client shut its side at once: an empty request
            return b""
        if line.too_long:
            raise BadRequestError(
                f"bad request: the request line is longer than {MAX_REQUEST} bytes"
            )
        return line.data
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

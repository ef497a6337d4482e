"""The client side of the control socket (``hotseam status`` and ``hotseam reload``): where
the sockets are, which one a target names, one request and its reply. Apart from the server
so that the clients import only the standard library and the error tree: ``hotseam status``
is mostly the start of an interpreter and its imports."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import time

from .._core import HarnessError

# typing.TYPE_CHECKING without importing typing (this module is
# part of `hotseam status`): type checkers take any constant of this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NamedTuple

MAX_REPLY = 64 * 2**20
"""The largest reply a client reads (a status of many thousand modules fits)."""
MAX_CONNECTIONS = 64
"""The most connections a process serves at once; past it a new one is closed at once."""
CLIENT_TIMEOUT = 10.0


class ControlError(HarnessError):
    """No running process to talk to, an unsafe socket folder, or a refused name."""

    default_code = "CONTROL_FAILED"


if TYPE_CHECKING:

    class Endpoint(NamedTuple):
        pid: int
        path: str | os.PathLike[str]
        name: str | None = None

else:  # the same named tuple, made without typing
    import collections

    Endpoint = collections.namedtuple("Endpoint", ["pid", "path", "name"], defaults=[None])
Endpoint.__doc__ = """A control socket: the process's pid, socket path and name (if any).
(``collections.namedtuple``: ``dataclasses`` would be a fifth of ``hotseam status``'s start.)"""


def _plain(path: str) -> str:
    """``path`` as :class:`pathlib.PurePosixPath` shows it (``..`` kept: a link may stand
    before it), for messages that say the same as the server's."""
    parts = [part for part in path.split("/") if part not in ("", ".")]
    root = "/" if path.startswith("/") else ""
    return root + "/".join(parts) or "."


def runtime_dir(*, exact: bool = False) -> str:
    """The preferred folder of the control sockets (not created); ``exact`` (the process that
    listens) always asks :mod:`tempfile` for the temporary folder (see :func:`_temp_dir`)."""
    override = os.environ.get("HOTSEAM_RUNTIME_DIR")
    if override:
        return _plain(override)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return os.path.join(_plain(runtime), "hotseam")
    name = f"hotseam-{os.getuid()}"
    return os.path.join(_plain(_temp_dir(name, exact=exact)), name)


def _temp_dir(name: str, *, exact: bool) -> str:
    """:func:`tempfile.gettempdir` as a client needs it, without importing :mod:`tempfile`
    (an eighth of ``hotseam status``) when the first of its candidates this user may write
    in holds the private folder ``name``."""
    if not exact:
        named = [os.environ.get(each) for each in ("TMPDIR", "TEMP", "TMP")]
        for candidate in [*(each for each in named if each), "/tmp", "/var/tmp", "/usr/tmp"]:
            folder = os.path.abspath(candidate)
            if os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK):
                if _private(os.path.join(folder, name)):
                    return folder
                break
    import tempfile  # here: see above

    return tempfile.gettempdir()


def unsafe(folder: str | os.PathLike[str]) -> str | None:
    """Why ``folder`` (which exists) cannot hold this user's sockets: not a real folder, or
    not this user's; else ``None``."""
    try:
        info = os.lstat(folder)
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


def _private(folder: str) -> bool:
    """True for a folder this user owns that nobody else may enter (clients look there)."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


def stand_ins(folder: str) -> list[str]:
    """The private folders made beside ``folder`` while someone else held it."""
    parent, name = os.path.split(folder)
    try:
        entries = sorted(
            entry for entry in os.listdir(parent or ".") if entry.startswith(f"{name}-")
        )
    except OSError:
        return []
    found = [os.path.join(parent, entry) for entry in entries]
    return [entry for entry in found if _private(entry)]


def search_dirs() -> list[str]:
    """Where clients look for sockets: the preferred folder when it is the user's alone,
    then each private stand-in (none under ``HOTSEAM_RUNTIME_DIR``)."""
    folder = runtime_dir()
    found = [folder] if _private(folder) else []
    if not os.environ.get("HOTSEAM_RUNTIME_DIR"):
        found += stand_ins(folder)
    return found


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def accepts(path: str | os.PathLike[str]) -> bool:
    """False only when nothing listens on ``path`` (the connection is refused, or there is
    no socket): a busy process that is slow to accept is alive, not stale."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(os.fspath(path))
        except (ConnectionRefusedError, FileNotFoundError, NotADirectoryError):
            return False
        except OSError:
            return True
    return True


def _just_made(path: str) -> bool:
    """True for a socket created in the last two seconds (its process may be starting)."""
    try:
        return time.time() - os.lstat(path).st_mtime < 2.0
    except OSError:
        return False


def find_endpoints(folder: str | None = None) -> tuple[list[Endpoint], list[str]]:
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


def _endpoints_in(folder: str) -> tuple[list[Endpoint], list[str]]:
    live: dict[int, Endpoint] = {}
    notes: list[str] = []
    try:
        entries = sorted(os.listdir(folder))
    except OSError:  # not a folder (any more)
        return [], notes
    names: dict[int, str] = {}
    for entry_name in entries:
        if not entry_name.endswith(".sock") or entry_name.startswith("."):
            continue  # what the glob '*.sock' leaves out
        entry = os.path.join(folder, entry_name)
        stem = entry_name.removesuffix(".sock")
        if os.path.islink(entry):
            target = os.path.basename(os.readlink(entry).rstrip("/")).removesuffix(".sock")
            if target.isdigit() and os.path.exists(os.path.join(folder, f"{target}.sock")):
                names[int(target)] = stem
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry)
                notes.append(f"removed the stale name {entry_name} (its process is gone)")
            continue
        if not stem.isdigit():
            continue
        pid = int(stem)
        # Stale means nothing accepts on it: the pid alone could be a live process of
        # another PID namespace (a container sharing /tmp).
        if accepts(entry):
            live[pid] = Endpoint(pid, entry)
        elif _just_made(entry):
            continue  # bound, not yet listening: a process that is starting
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry)
            gone = "is gone" if not _pid_alive(pid) else "does not answer on it"
            notes.append(f"removed the stale control socket {entry} (process {pid} {gone})")
    for pid, name in names.items():
        if pid in live:
            live[pid] = Endpoint(pid, live[pid].path, name)
    return sorted(live.values(), key=lambda endpoint: endpoint.pid), notes


def locate(target: str | None, *, choose: str = "by pid or name") -> tuple[Endpoint, list[str]]:
    """The endpoint for ``target``: a pid, a name, a socket path, or (``None``) the only one;
    ``choose`` is how the command names one (``"with --to PID|NAME"``) when several run.

    Raises:
        ControlError: nothing matches, or several do; the message says what is running."""
    endpoints, notes = find_endpoints()
    if target is not None and ("/" in target or target.endswith(".sock")):
        path = _plain(target)
        if not accepts(path):
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
    raise ControlError(f"several are running; name one {choose}: {_listing(endpoints)}")


def _looked_in() -> str:
    folder = runtime_dir()
    where = search_dirs()
    if folder not in where:
        problem = unsafe(folder) if os.path.lexists(folder) else None
        where.insert(0, f"{folder}, skipped: {problem}" if problem else folder)
    return "; ".join(where)


def _listing(endpoints: list[Endpoint]) -> str:
    if not endpoints:
        return "none is running"
    shown = [f"{e.pid}" + (f" ({e.name})" if e.name else "") for e in endpoints]
    return "running: " + ", ".join(shown)


def request(endpoint: Endpoint, message: dict[str, Any], timeout: float = CLIENT_TIMEOUT) -> Any:
    """Send one request and return the decoded reply. A connection closed before any reply
    was not served (the process was at its most connections): it is tried again until
    ``timeout``.

    Raises:
        ControlError: the connection failed, the reply did not come within ``timeout``, or it
            is not JSON (nested too deeply, larger than ``MAX_REPLY``...)."""
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
            client.connect(os.fspath(endpoint.path))
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

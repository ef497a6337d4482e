"""Where the control sockets of ``hotseam dev`` and ``hotseam run`` live, and how clients
find them.

The sockets are private to their owner: they live in a folder only the owner can enter
(``$XDG_RUNTIME_DIR/hotseam``, else ``/tmp/hotseam-<uid>``; ``$HOTSEAM_RUNTIME_DIR``
overrides). When that folder is not the user's (another local user made
``/tmp/hotseam-<uid>`` first: a denial of service if it stopped the start), the session uses
a private folder of its own beside it, ``/tmp/hotseam-<uid>-<random>`` (one made by
:func:`tempfile.mkdtemp`, reused by later sessions), and warns; clients look there too, only
in folders the user owns and nobody else may enter. When no private folder can be had, the
session runs without a control socket, with a warning. A folder named on purpose by
``$HOTSEAM_RUNTIME_DIR`` is never replaced: an unsafe one is bad input.

Each process listens on ``<pid>.sock``; ``--name NAME`` adds ``NAME.sock``, a symbolic link
to it. A socket left by a process that died (``kill -9``, a crash, a reboot of the
container) is *stale*: its pid is gone or nothing accepts on it. Clients skip and remove
stale sockets, and a new process replaces a stale one in its way; a live process keeps its
name (a second one asking for it is refused).
"""

from __future__ import annotations

import collections
import contextlib
import glob
import os
import re
import socket
import stat
import time
from pathlib import Path

from .._core import HarnessError

# typing.TYPE_CHECKING without importing typing (`hotseam status` imports this module; typing
# was a tenth of its imports): type checkers take any constant of this name as true.
TYPE_CHECKING = False

__all__ = [
    "UNREACHABLE",
    "Claim",
    "ControlError",
    "Endpoint",
    "claim",
    "find_endpoints",
    "locate",
    "runtime_dir",
    "search_dirs",
]

UNREACHABLE = "hotseam status and hotseam reload cannot reach this process"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class ControlError(HarnessError):
    """No running process to talk to, an unsafe socket folder, or a refused name."""

    default_code = "CONTROL_FAILED"


def runtime_dir() -> Path:
    """The preferred folder of the control sockets (not created)."""
    override = os.environ.get("HOTSEAM_RUNTIME_DIR")
    if override:
        return Path(override)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Path(runtime) / "hotseam"
    import tempfile  # here: its import (shutil, random) is most of what a client's start costs

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
        raise ControlError(f"HOTSEAM_RUNTIME_DIR: {problem}; refusing to use it")
    stand_ins = _stand_ins(folder)
    if stand_ins:
        stand_in = stand_ins[0]
    else:
        import tempfile

        try:
            stand_in = Path(tempfile.mkdtemp(prefix=f"{folder.name}-", dir=folder.parent))
        except OSError as error:
            raise ControlError(
                f"{problem}, and no private folder can be made beside it: {error.strerror or error}"
            ) from None
    return stand_in, f"{problem}; using the private folder {stand_in} instead"


if TYPE_CHECKING:
    from typing import NamedTuple

    class Endpoint(NamedTuple):
        pid: int
        path: Path
        name: str | None = None

else:  # the same named tuple, made without typing
    Endpoint = collections.namedtuple("Endpoint", ["pid", "path", "name"], defaults=[None])
Endpoint.__doc__ = """A control socket: the process's pid and socket path, and its name if it
has one."""


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
about.

(Named tuples, not dataclasses, here and for :class:`Endpoint`, and made with
``collections.namedtuple``: ``hotseam status`` imports this module, and ``dataclasses`` would
be a fifth of its start, ``typing`` a tenth.)"""


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
            owner = Path(os.readlink(link)).name.removesuffix(".sock") if link.is_symlink() else ""
            link.unlink()
            notes.append(f"replaced the stale name {link.name} (process {owner or '?'} is gone)")
    return Claim(path, link, tuple(notes), () if warning is None else (warning,))


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

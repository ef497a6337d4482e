"""Where the control sockets of ``hotseam dev`` and ``hotseam run`` live, and how clients
find them.

The sockets live in a folder only their owner can enter (``$XDG_RUNTIME_DIR/hotseam``, else
``/tmp/hotseam-<uid>``; ``$HOTSEAM_RUNTIME_DIR`` overrides). When another local user made
``/tmp/hotseam-<uid>`` first (a denial of service if it stopped the start), the session
warns and uses a private folder beside it (``/tmp/hotseam-<uid>-<random>``, reused later),
where clients look too; with no private folder at all it runs without a control socket. A
folder named by ``$HOTSEAM_RUNTIME_DIR`` is never replaced: an unsafe one is bad input.

Each process listens on ``<pid>.sock``; ``--name NAME`` adds the link ``NAME.sock``. A
socket whose process died (``kill -9``, a crash) is *stale*: nothing accepts on it.
Clients remove stale sockets, a new process replaces one in its way, and a live process
keeps its name (a second one asking for it is refused)."""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

from ._control_client import (
    ControlError,
    Endpoint,
    accepts,
    find_endpoints,
    locate,
    runtime_dir,
    search_dirs,
    stand_ins,
    unsafe,
)

# typing.TYPE_CHECKING without importing typing: type checkers take any constant of this name
# as true. The clients' side (finding a socket) is _control_client's, without pathlib.
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
    """The folder to listen in, created if needed and the owner's alone, and a warning when
    it is a stand-in for the preferred one (which someone else holds).

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
    from typing import NamedTuple

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

(A named tuple made with ``collections.namedtuple``, as the clients' :class:`Endpoint` is.)"""


def claim(name: str | None) -> Claim:
    """Make room for this process's socket (and name): stale ones are removed. Without a
    private folder the claim has no socket and says why: better than no session (another user
    could otherwise stop every start by creating ``/tmp/hotseam-<uid>``).

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
    """Raise :class:`ControlError` when a live process holds ``name`` (in any folder clients
    search: a stand-in's process keeps its name when the preferred folder comes back)."""
    for each in dict.fromkeys([folder, *map(Path, search_dirs())]):
        link = each / f"{name}.sock"
        if not link.is_symlink():
            continue
        owner = Path(os.readlink(link)).name.removesuffix(".sock")
        if owner.isdigit() and owner != str(os.getpid()) and accepts(each / f"{owner}.sock"):
            raise ControlError(f"--name {name!r} is taken by the running process {owner}")

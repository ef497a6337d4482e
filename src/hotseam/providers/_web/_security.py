"""Who may talk to the inbox: the token, the Host and Origin checks, the response headers.

A page on another site can reach a loopback port, so nothing but the token is trusted:
every request carries it (the page and event stream in the query, the API in a header);
the Host must name this server (DNS rebinding); an Origin, when sent, must be ours; state
changes need a JSON body and a token header, which no cross-site form can send (CSRF).
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import os
import secrets
import socket
import stat
from pathlib import Path

from ..._core import get_logger

DEFAULT_HOST = "127.0.0.1"
"""Where an inbox listens unless told otherwise: only this machine can connect."""

TOKEN_ENV = "HOTSEAM_WEB_TOKEN"
TOKEN_FILE_ENV = "HOTSEAM_WEB_TOKEN_FILE"
TOKEN_FILE_NAME = "web-token"
_MIN_TOKEN = 16

_PROCESS_TOKEN: str | None = None
_STORED: dict[Path, str] = {}

_log = get_logger("hotseam.providers.web")

SECURITY_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "cross-origin-resource-policy": "same-origin",
}


def process_token() -> str:
    """This process's token: generated once, so every page and every reload shares it."""
    global _PROCESS_TOKEN
    if _PROCESS_TOKEN is None:
        _PROCESS_TOKEN = secrets.token_urlsafe(24)
    return _PROCESS_TOKEN


def state_dir() -> Path:
    """Where what outlives a process is kept: ``$XDG_STATE_HOME/hotseam``, else
    ``~/.local/state/hotseam`` (not created here)."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "hotseam"


def stored_token_path() -> Path:
    return state_dir() / TOKEN_FILE_NAME


def stored_token() -> str:
    """The token kept in :func:`stored_token_path`, made (mode 0600) the first time.

    Read once per process, so a reload sees the first page's token. Where no file can be
    written (no home, a read-only one) a warning says so and the token is the process's.

    Raises:
        ValueError: the file or its folder is not this user's alone (others could read or
            replace the token), or the file does not hold a valid token.
    """
    try:
        path = stored_token_path()
    except RuntimeError as error:  # Path.home(): no $HOME and no password entry
        return _unstored(f"no state folder: {error}")
    cached = _STORED.get(path)
    if cached is not None:
        return cached
    try:
        token = _read_stored(path)
        if token is None:
            token = _create_stored(path)
    except _UnwritableError as error:
        return _unstored(str(error))
    _STORED[path] = token
    return token


class _UnwritableError(Exception):
    """The state folder cannot hold the token file (not an unsafe one: that is refused)."""


def _unstored(why: str) -> str:
    _log.warning(
        "web.token_not_kept",
        summary=f"the web inbox token cannot be kept across restarts ({why}): this process "
        "makes its own, so links change at each start; give one with --web-token-file",
    )
    return process_token()


def _private_folder(folder: Path) -> None:
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError as error:
        raise _UnwritableError(f"cannot create {folder}: {error.strerror or error}") from None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ValueError(
            f"{folder} is not a folder of this user's: refusing to keep the web inbox's token there"
        )
    if info.st_mode & 0o022:
        raise ValueError(
            f"{folder} can be written by other users, who could replace the web inbox's "
            f"token: run chmod go-w {folder}"
        )


def _read_stored(path: Path) -> str | None:
    """The token in ``path``, or ``None`` when there is no such file yet."""
    _private_folder(path.parent)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ValueError(
            f"cannot read the web token from {path}: {error.strerror or error} (a symbolic "
            "link is refused); delete it to make a new token"
        ) from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise ValueError(f"{path} is not a file of this user's: delete it")
        if info.st_mode & 0o077:
            raise ValueError(
                f"{path} can be read by other users (mode {stat.S_IMODE(info.st_mode):o}), "
                f"so the web inbox's token may be known: run chmod 600 {path}, or delete it "
                "to make a new token"
            )
        raw = file.read(1024)
    text = raw.decode("utf-8", "replace").strip()  # not UTF-8: refused as not a token
    return _checked(text, str(path), hint=": delete the file to make a new token")


def _create_stored(path: Path) -> str:
    """Write a new token to ``path`` whole and owner-only; a concurrent start may win."""
    token = secrets.token_urlsafe(24)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(temporary, flags, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(token + "\n")
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, path)  # never replaces: the first start's token stands
        except FileExistsError:
            stored = _read_stored(path)
            if stored is None:
                raise _UnwritableError(f"{path} vanished while it was being made") from None
            return stored
    except OSError as error:
        raise _UnwritableError(f"cannot write {path}: {error.strerror or error}") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    _log.info(
        "web.token_created",
        summary=f"made a web inbox token, kept in {path} (delete it for a new one)",
        path=str(path),
    )
    return token


def load_token(token: str | None = None, token_file: str | os.PathLike[str] | None = None) -> str:
    """The token to require: given, else from a file, else ``$HOTSEAM_WEB_TOKEN`` or
    ``$HOTSEAM_WEB_TOKEN_FILE``, else the one kept across restarts (:func:`stored_token`).

    Raises:
        ValueError: a token that is too short or has characters a URL would mangle, a
            token file that cannot be read, or a kept token file others could read.
    """
    source = "token"
    if token is None and token_file is None:
        if os.environ.get(TOKEN_ENV):
            token, source = os.environ[TOKEN_ENV], f"${TOKEN_ENV}"
        elif os.environ.get(TOKEN_FILE_ENV):
            token_file = os.environ[TOKEN_FILE_ENV]
    if token is None and token_file is not None:
        source = f"token file {os.fspath(token_file)!r}"
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ValueError(f"cannot read the web token from {source}: {error}") from None
    if token is None:
        return stored_token()
    return _checked(token, source)


def _checked(token: str, source: str, *, hint: str = "") -> str:
    if len(token) < _MIN_TOKEN or not all(
        c.isascii() and (c.isalnum() or c in "-_.~") for c in token
    ):
        raise ValueError(
            f"the web token from {source} must be at least {_MIN_TOKEN} characters of "
            f"A-Z a-z 0-9 - _ . ~{hint}"
        )
    return token


def token_matches(expected: str, given: str | None) -> bool:
    """Compare in constant time (the length of ``expected`` aside)."""
    if given is None:
        return False
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def checked_host(host: str, port: int, allow_remote: bool) -> str:
    """``host`` as an inbox listens on it (blank: :data:`DEFAULT_HOST`), checked before binding.

    Raises:
        ValueError: a port outside 0-65535, or a host other machines can reach without
            ``allow_remote``.
    """
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an integer from 0 to 65535, got {port!r}")
    host = host.strip().strip("[]") or DEFAULT_HOST
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"refusing to listen on {host!r}: it is not a loopback address, so other machines "
            "could reach the inbox; pass allow_remote=True (--web-allow-remote) to mean it"
        )
    return host


def warn_if_remote(loopback: bool, address: str, what: str, reads: str) -> None:
    if not loopback:
        _log.warning(
            "web.remote",
            summary=f"{what} listens on {address}, reachable from other machines: anyone "
            f"with the token can answer (and read) {reads}",
            address=address,
        )


class HostPolicy:
    """Which ``Host`` and ``Origin`` values name this server."""

    __slots__ = ("_hosts", "port")

    def __init__(self, bind_host: str, port: int, extra_hosts: tuple[str, ...] = ()) -> None:
        self.port = port
        hosts = {"localhost", "127.0.0.1", "[::1]"}
        if not is_loopback(bind_host):
            hosts.update(_names_of(bind_host))
        hosts.update(host.lower() for host in extra_hosts)
        self._hosts = frozenset(hosts)

    def host_ok(self, header: str | None) -> bool:
        """True when the Host header names this server (one of its names, and its port)."""
        if not header:
            return False
        name, _, port = header.lower().rpartition(":")
        if not name or "]" in port:  # no port given (or a bare IPv6 address)
            name, port = header.lower(), "80"
        return name in self._hosts and port == str(self.port)

    def origin_ok(self, origin: str | None) -> bool:
        """True when there is no Origin (not a browser's cross-site request) or it is ours."""
        if origin is None:
            return True
        scheme, _, rest = origin.lower().partition("://")
        return scheme == "http" and "/" not in rest and self.host_ok(rest)


def _names_of(bind_host: str) -> set[str]:
    names: set[str] = set()
    try:
        address = ipaddress.ip_address(bind_host.strip("[]"))
    except ValueError:
        names.add(bind_host.lower())
        return names
    if not address.is_unspecified:
        names.add(f"[{address}]" if address.version == 6 else str(address))
        return names
    hostname = socket.gethostname()
    names.update({hostname.lower(), socket.getfqdn().lower()})
    with contextlib.suppress(OSError, ValueError):
        for info in socket.getaddrinfo(hostname, None):
            ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
            names.add(f"[{ip}]" if ip.version == 6 else str(ip))
    return names

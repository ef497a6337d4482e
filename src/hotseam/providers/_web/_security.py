"""Who may talk to the inbox: the token, the Host and Origin checks, the response headers.

A browser page on another site can reach a loopback port, so the server trusts nothing
about a request but the token: every request carries it (the page and the event stream in
the query, the API in a header); the Host header must name this server (DNS rebinding);
an Origin, when sent, must be this server's own; and state changes need a JSON body and a
token header, which no cross-site form or simple request can produce (CSRF).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket
from pathlib import Path

__all__ = [
    "SECURITY_HEADERS",
    "TOKEN_ENV",
    "TOKEN_FILE_ENV",
    "HostPolicy",
    "is_loopback",
    "load_token",
    "process_token",
    "token_matches",
]

TOKEN_ENV = "HOTSEAM_WEB_TOKEN"
TOKEN_FILE_ENV = "HOTSEAM_WEB_TOKEN_FILE"
_MIN_TOKEN = 16

_PROCESS_TOKEN: str | None = None

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


def load_token(token: str | None = None, token_file: str | os.PathLike[str] | None = None) -> str:
    """The token to require: given, else from a file, else ``$HOTSEAM_WEB_TOKEN`` or
    ``$HOTSEAM_WEB_TOKEN_FILE``, else the process's own.

    Raises:
        ValueError: a token that is too short or has characters a URL would mangle, or a
            token file that cannot be read.
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
        return process_token()
    if len(token) < _MIN_TOKEN or not all(
        c.isascii() and (c.isalnum() or c in "-_.~") for c in token
    ):
        raise ValueError(
            f"the web token from {source} must be at least {_MIN_TOKEN} characters of "
            "A-Z a-z 0-9 - _ . ~"
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
    """The names a client may use for a server bound to ``bind_host``."""
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
    try:
        for info in socket.getaddrinfo(hostname, None):
            ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
            names.add(f"[{ip}]" if ip.version == 6 else str(ip))
    except (OSError, ValueError):
        pass
    return names

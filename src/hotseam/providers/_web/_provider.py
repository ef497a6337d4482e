"""WebProvider: the user-interaction provider behind the web inbox."""

from __future__ import annotations

import math
import os

import anyio

from ..._core import CloseReason, Scope, ScopeExit, get_logger
from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
    current_ask,
)
from ._answers import InboxError
from ._app import build_app
from ._inbox import Entry, Inbox, cancelled_error
from ._rules import daemon_rules
from ._security import DEFAULT_HOST, HostPolicy, checked_host, load_token, warn_if_remote
from ._server import DRAIN_GRACE, DRAIN_LIMIT, Listener, Mount, WebServer

DEFAULT_PORT = 8765
_CARRY_KEY = "hotseam.providers.web.server"

_log = get_logger("hotseam.providers.web")


class WebProvider:
    """Asks the human in a web page: an inbox of every pending question, live.

    Start it with :meth:`serve`, which binds the socket, runs the server as a task of the
    scope and withdraws every pending question from every open page when the scope closes::

        def setup(scope: Scope) -> None:
            web = WebProvider.serve(scope, port=8765)
            scope.provide(USER_INTERACTION, web)

    In a hot-reloaded provider module the server (its socket and open connections) is
    carried to the next generation (``scope.carry``), which swaps its own app in: no
    request is dropped, and open pages see the re-asked questions. Every question of an
    ask is on one card. The page's Rules are the approval rules the tool gate decides by
    (the daemon's journal's, else its ``HumanGate``'s own). See ``docs/web.md`` for the
    page, the API and the security model.
    """

    multiple_questions = True
    """An ask of several questions is put whole on one card (``ask()`` reads this)."""

    __slots__ = (
        "_hosts",
        "_inbox",
        "_mount",
        "_scope",
        "_server",
        "_shutdown",
        "timeout",
        "token",
    )

    def __init__(
        self,
        server: WebServer,
        token: str,
        hosts: HostPolicy,
        *,
        timeout: float | None,
        scope: Scope,
    ) -> None:
        self._server = server
        self._hosts = hosts
        self._scope = scope
        self._inbox = Inbox()
        self._shutdown = anyio.Event()
        self._mount: Mount | None = None
        self.token = token
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"<WebProvider {self._server.listener.address} pending={len(self._inbox)}>"

    @classmethod
    def serve(
        cls,
        scope: Scope,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        token: str | None = None,
        token_file: str | os.PathLike[str] | None = None,
        allow_remote: bool = False,
        allowed_hosts: tuple[str, ...] = (),
        timeout: float | None = None,
    ) -> WebProvider:
        """Listen on ``host:port`` and serve the inbox until ``scope`` closes.

        Args:
            scope: Owns the server; a provider module's ``setup`` scope hands it (the
                listening socket and its connections) over to the next generation on a
                hot reload. Its task host (its own task group, the reloader's, or a
                parent's) runs the server.
            host: Where to listen; loopback (the default) unless ``allow_remote`` is true.
            port: The TCP port; 0 picks a free one (see :attr:`url`).
            token: The secret every request must carry (default: ``$HOTSEAM_WEB_TOKEN``,
                else the file named by ``$HOTSEAM_WEB_TOKEN_FILE``, else one generated per
                process). At least 16 characters of ``A-Z a-z 0-9 - _ . ~``.
            token_file: Read the token from this file instead.
            allow_remote: Needed to listen on an address other machines can reach; a
                warning is logged, since anyone holding the token can then answer.
            allowed_hosts: Extra names the page may be reached by (``Host`` header), for
                example a DNS name of this machine.
            timeout: Seconds a question may wait; then the ask fails with ``ASK_TIMEOUT``.

        Raises:
            ValueError: a bad host, port, token or timeout, or a non-loopback host without
                ``allow_remote``.
            OSError: the port cannot be listened on (in use?).
        """
        if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        host = checked_host(host, port, allow_remote)
        secret = load_token(token, token_file)
        server = _serve_on(scope, host, port)
        listener = server.listener
        warn_if_remote(listener.loopback, listener.address, "the web inbox", "questions")
        hosts = HostPolicy(host, listener.port, tuple(allowed_hosts))
        web = cls(server, secret, hosts, timeout=timeout, scope=scope)
        scope.spawn(web._mount_app, name="web inbox app")  # when the generation goes live
        scope.defer_exit(web._close)
        return web

    # -- what callers see ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The inbox page's address, with the token."""
        return self._server.listener.url(self.token)

    @property
    def port(self) -> int:
        """The TCP port listened on."""
        return self._server.listener.port

    @property
    def listener(self) -> Listener:
        """The listening socket (the same object across hot reloads)."""
        return self._server.listener

    @property
    def inbox(self) -> Inbox:
        """The pending questions."""
        return self._inbox

    @property
    def pending(self) -> int:
        """How many questions wait for an answer."""
        return len(self._inbox)

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Put the ask in the inbox and wait for the first answer from any page.

        Raises:
            UserInteractionError: ``ASK_CANCELLED`` when dismissed in a page, ``ASK_TIMEOUT``
                when the optional time limit passed. Cancellation (the caller's signal, a
                reload, the turn cancelled) withdraws it from every page and propagates.
        """
        try:
            entry = self._inbox.add(request)
        except InboxError as closed:
            raise UserInteractionError(
                f"the web inbox is closed: {closed.message}", ErrorCode.PROVIDER_FAILED
            ) from None
        try:
            with anyio.move_on_after(math.inf if self.timeout is None else self.timeout):
                await entry.done.wait()
        except anyio.get_cancelled_exc_class():
            if entry.outcome == "answered":
                assert entry.answer is not None
                return entry.answer  # answered in the same turn: the answer stands
            elsewhere = asked.answered_elsewhere if (asked := current_ask()) else None
            if elsewhere is not None:  # another process's inbox answered: pages say so
                entry.answer = elsewhere.answer
                self._inbox.settle(entry, "answered", "answered elsewhere", by=elsewhere.by)
            else:
                self._inbox.settle(entry, "withdrawn", self._withdrawal_note(request))
            raise
        if entry.outcome is None:
            self._inbox.settle(entry, "timed_out", "timed out")
            raise UserInteractionError(
                f"no answer within the web inbox's time limit of {self.timeout:g} s "
                "(nothing was chosen for the human)",
                ErrorCode.ASK_TIMEOUT,
            )
        return _outcome(entry)

    # -- lifecycle ------------------------------------------------------------------------------

    async def _mount_app(self) -> None:
        """Serve this generation's app: a task, so it starts when the generation is live."""
        if self._scope.closed:
            return
        context = self._scope.context
        app = build_app(self._current_inbox, self.token, self._hosts, lambda: daemon_rules(context))
        self._mount = self._server.mount(app)
        first = self._server.mounts == 1  # later generations serve the same URL
        _log.info(
            "web.serving",
            summary=f"web inbox: {self.url}" if first else f"web inbox reloaded: {self.url}",
            address=self._server.listener.address,
            url=self.url,
            first=first,
        )

    def _current_inbox(self) -> Inbox | None:
        return None if self._shutdown.is_set() else self._inbox

    async def _close(self, exit: ScopeExit) -> None:
        """Unmount (new requests wait for the next generation's app), tell every open page
        why, and let this generation's requests in flight finish, within a bound."""
        mount, self._mount = self._mount, None
        self._inbox.close(_close_note(exit))
        if mount is not None:
            left = await self._server.unmount(mount, DRAIN_GRACE)
            if left:
                _log.warning(
                    "web.requests_cut",
                    summary=f"{left} request(s) of the web inbox's unmounted app were "
                    f"cancelled: waiting {DRAIN_GRACE:g} s on their peer, or still running "
                    f"{DRAIN_LIMIT:g} s after the unmount",
                    requests=left,
                )
        self._shutdown.set()
        if mount is not None:  # else this generation never served (a failed reload)
            _log.info(
                "web.stopped", address=self._server.listener.address, reason=exit.reason.value
            )

    def _withdrawal_note(self, request: AskUserQuestionRequest) -> str:
        exit = self._scope.exit
        if exit is not None:
            return _close_note(exit)
        signal = request.signal
        if signal is not None and signal.aborted:
            reason = signal.reason
            detail = f": {reason}" if reason is not None and str(reason) else ""
            return f"withdrawn by the agent{detail}"
        return "withdrawn (the agent stopped waiting)"


def _outcome(entry: Entry) -> AskUserQuestionAnswer:
    if entry.outcome == "answered":
        assert entry.answer is not None
        return entry.answer
    if entry.outcome == "dismissed":
        raise cancelled_error()
    # Withdrawn without the ask being cancelled: the server closed under a provider
    # registered elsewhere (its serving scope is not the one that provides it).
    raise UserInteractionError(
        f"the web inbox withdrew the question: {entry.note}", ErrorCode.ASK_ABORTED
    )


def _close_note(exit: ScopeExit) -> str:
    if exit.reason is CloseReason.RELOAD:
        return "the provider was reloaded or removed: whichever provider serves next asks it again"
    if exit.reason is CloseReason.SHUTDOWN:
        return "hotseam is shutting down"
    if exit.reason is CloseReason.CANCELLED:  # what a stop signal does to the CLI's scope
        return "the web inbox stopped: the program serving it is stopping"
    return "the web inbox closed"


def _serve_on(scope: Scope, host: str, port: int) -> WebServer:
    """Start a server, or take the one the previous generation carried (a hot reload).

    It accepts in a task of the scope's task host (the reloader's, outliving every
    generation) and stops only when no generation carries it. Another host or port refuses
    the carried one: the new address is bound while the old generation still serves.
    """
    host_tasks = scope._task_host()  # fails (ScopeError) before anything is bound

    def start() -> WebServer:
        server = WebServer(Listener(host, port))
        server.start(host_tasks)
        return server

    return scope.carry(
        _CARRY_KEY,
        start,
        dispose=WebServer.aclose,
        accept=lambda old: old.matches(host, port),
    )

"""A renamed module that owns a resource comes back (issue 21, item 5).

``git mv providers/web.py providers/inbox.py`` for a module listening on a fixed port: the
new module's setup runs while the old one still listens (before it in the same reload, or
during the deletion grace) and fails with "address already in use". Once the unload of the
old generation commits, every module that failed while it was alive is loaded again; and a
renamed module that carries the same key takes the carried socket over instead.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from tests._timing import scaled

from hotseam import Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ask,
    waiting_for_provider,
)
from hotseam.providers.web import WebProvider
from hotseam.reload import (
    ModuleState,
    ModuleUnloaded,
    ReloadAborted,
    ReloadCommitted,
    Reloader,
    ReloadEvent,
    WatchOptions,
)

from ._support import Probe
from .conftest import write

pytestmark = pytest.mark.anyio

BIND = """
import socket
import reload_probe


def listen(port):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    sock.listen()
    return sock


def close(sock):
    reload_probe.log.append(("closed", __name__))
    sock.close()
"""


def plain(port: int) -> str:
    """A module that binds ``port`` in its setup and closes it when disposed."""
    return (
        BIND
        + f"""

def setup(scope):
    sock = listen({port})
    scope.defer(lambda: close(sock))
    reload_probe.probe.values[__name__] = sock
"""
    )


def carried(port: int) -> str:
    """A module that carries a socket bound to ``port`` (key ``listener``)."""
    return (
        BIND
        + f"""

def setup(scope):
    sock = scope.carry("listener", lambda: listen({port}), dispose=close)
    reload_probe.probe.values[__name__] = sock
"""
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture(name="port")
def _port() -> int:
    return _free_port()


GRACE = 0.2
"""The deletion grace of these tests (``hotseam dev`` and ``run`` hold for 2 s)."""


def _connect(port: int) -> socket.socket:
    """A client waiting in the listener's backlog (nobody accepts it yet)."""
    return socket.create_connection(("127.0.0.1", port), timeout=scaled(5))


def _accepts(listener: socket.socket) -> bool:
    """True when ``listener`` still holds the connection made before the rename."""
    listener.settimeout(5)
    connection, _ = listener.accept()
    connection.close()
    return True


def _outcomes(events: list[ReloadEvent]) -> list[tuple[str, str]]:
    kinds = {ReloadCommitted: "committed", ReloadAborted: "aborted", ModuleUnloaded: "unloaded"}
    return [
        (kinds[type(event)], getattr(event, "module", ""))
        for event in events
        if type(event) in kinds
    ]


def _retries(logs: list[MutableMapping[str, Any]]) -> list[tuple[str, list[str]]]:
    return [
        (entry["module"], entry["unloaded"]) for entry in logs if entry["event"] == "reload.retry"
    ]


class TestTakeover:
    async def test_a_renamed_module_takes_over_the_carried_socket_in_the_same_reload(
        self, context: Context, folder: Path, probe: Probe, port: int
    ) -> None:
        """Renamed and reloaded at once: the new module receives the old one's socket (still
        open, its backlog kept); nothing fails and nothing is closed."""
        write(folder / "web.py", carried(port))
        async with Reloader(context, [folder], watch=False) as reloader:
            listener = probe.values["web"]
            with _connect(port):
                os.rename(folder / "web.py", folder / "inbox.py")
                result = await reloader.reload()
                assert _outcomes(list(result.events)) == [
                    ("unloaded", "web"),
                    ("committed", "inbox"),
                ]
                assert probe.values["inbox"] is listener
                assert _accepts(listener)
            assert probe.entries("closed") == []
        assert probe.entries("closed") == ["web"]  # once, at the end (web.py's dispose)

    async def test_a_rename_seen_by_the_watcher_takes_over_when_the_old_module_goes(
        self, context: Context, folder: Path, probe: Probe, port: int
    ) -> None:
        """The real watcher and deletion grace: the new module fails at once (the old one
        listens), then takes the socket over in the reload that unloads the old one."""
        write(folder / "web.py", carried(port))
        with anyio.fail_after(scaled(10)):
            async with (
                Reloader(context, [folder], watch=WatchOptions(deletion_grace=GRACE)) as reloader,
                reloader.events() as events,
            ):
                listener = probe.values["web"]
                with _connect(port):
                    os.rename(folder / "web.py", folder / "inbox.py")
                    aborted = await events.next(ReloadAborted, module="inbox")
                    assert "Address already in use" in aborted.error.message
                    unloaded = await events.next(ModuleUnloaded, module="web")
                    committed = await events.next(ReloadCommitted, module="inbox")
                    assert committed.batch == unloaded.batch  # one swap
                    assert probe.values["inbox"] is listener
                    assert _accepts(listener)
                assert reloader.status_of(folder / "inbox.py").state is ModuleState.ACTIVE
                assert probe.entries("closed") == []

    async def test_two_carriers_unloaded_at_once_hand_nothing_over(
        self, context: Context, folder: Path, probe: Probe, port: int
    ) -> None:
        """Two modules renamed in one reload: which would succeed which is a guess, so
        nothing is taken over; the old sockets close, and the retry loads both afresh."""
        write(folder / "web.py", carried(port))
        write(folder / "other.py", carried(_free_port()))
        async with Reloader(context, [folder], watch=False) as reloader:
            old = probe.values["web"], probe.values["other"]
            os.rename(folder / "web.py", folder / "inbox.py")
            os.rename(folder / "other.py", folder / "renamed.py")
            result = await reloader.reload()
            outcomes = _outcomes(list(result.events))
            assert sorted(outcomes[:4]) == [
                ("aborted", "inbox"),
                ("aborted", "renamed"),
                ("unloaded", "other"),
                ("unloaded", "web"),
            ]
            assert outcomes[4:] == [("committed", "inbox"), ("committed", "renamed")]
            new = probe.values["inbox"], probe.values["renamed"]
            assert all(sock.fileno() == -1 for sock in old)  # closed by the unload
            assert all(sock.fileno() != -1 for sock in new)


class TestRetryAfterUnload:
    async def test_a_module_that_failed_on_a_port_the_old_one_held_is_retried(
        self, context: Context, folder: Path, probe: Probe, port: int
    ) -> None:
        """No carry: the new module binds the port itself. It fails while the old module
        listens; once the old one is unloaded (after the grace), it is retried, and loads."""
        write(folder / "web.py", plain(port))
        with (
            anyio.fail_after(scaled(10)),
            structlog.testing.capture_logs() as logs,
        ):
            async with (
                Reloader(context, [folder], watch=WatchOptions(deletion_grace=GRACE)) as reloader,
                reloader.events() as events,
            ):
                os.rename(folder / "web.py", folder / "inbox.py")
                aborted = await events.next(ReloadAborted, module="inbox")
                assert "Address already in use" in aborted.error.message
                unloaded = await events.next(ModuleUnloaded, module="web")
                committed = await events.next(ReloadCommitted, module="inbox")
                assert unloaded.batch is not None
                assert committed.batch == unloaded.batch + 1  # the retry, right after
                assert probe.entries("closed") == ["web"]
                with _connect(port):
                    assert _accepts(probe.values["inbox"])
        assert _retries(logs) == [("inbox", [str(folder / "web.py")])]

    async def test_a_failure_of_its_own_is_retried_only_for_generations_it_lived_with(
        self, context: Context, folder: Path, probe: Probe
    ) -> None:
        """``broken.py`` fails in setup whatever happens: the unload of a module loaded
        before its failure retries it once; the unload of one loaded after does not."""
        write(folder / "before.py", "def setup(scope):\n    pass\n")
        broken = write(folder / "broken.py", "def setup(scope):\n    raise ValueError('own')\n")
        async with Reloader(context, [folder], watch=False) as reloader:
            write(folder / "broken.py", "def setup(scope):\n    raise ValueError('own!')\n")
            assert [e.module for e in (await reloader.reload(broken)).aborted] == ["broken"]
            os.unlink(folder / "before.py")
            result = await reloader.reload(folder / "before.py")
            assert _outcomes(list(result.events)) == [("unloaded", "before"), ("aborted", "broken")]
            await reloader.reload(write(folder / "after.py", "def setup(scope):\n    pass\n"))
            os.unlink(folder / "after.py")
            result = await reloader.reload(folder / "after.py")
            assert _outcomes(list(result.events)) == [("unloaded", "after")]


WEB = """
from hotseam.interaction import USER_INTERACTION
from hotseam.providers.web import WebProvider


def setup(scope):
    scope.provide(USER_INTERACTION, WebProvider.serve(scope, port={port}, token={token!r}))
"""


async def test_the_web_inbox_renamed_by_git_mv_keeps_its_port_and_its_question(
    context: Context, folder: Path, port: int
) -> None:
    """The issue's case: ``providers/web.py`` serving the inbox on a fixed port becomes
    ``providers/inbox.py``. Under the deletion grace the new module first fails (the port
    is taken), then takes the carried listener over when web.py is unloaded; the question
    asked meanwhile is answered on the same port."""
    import httpx

    token = "t" * 24
    write(folder / "web.py", WEB.format(port=port, token=token))
    question = AskUserQuestionRequest(
        "Which database?",
        options=(AskUserQuestionOption("SQLite"), AskUserQuestionOption("Postgres")),
    )
    answers: list[str] = []
    with anyio.fail_after(scaled(15)):
        async with (
            Reloader(context, [folder], watch=WatchOptions(deletion_grace=GRACE)) as reloader,
            reloader.events() as events,
            anyio.create_task_group() as tg,
            httpx.AsyncClient(
                base_url=f"http://127.0.0.1:{port}", headers={"x-hotseam-token": token}
            ) as client,
        ):
            first = context.get(USER_INTERACTION)
            assert isinstance(first, WebProvider)

            async def agent() -> None:
                with waiting_for_provider():
                    answers.append((await ask(question, context=context)).answer)

            tg.start_soon(agent)
            os.rename(folder / "web.py", folder / "inbox.py")
            aborted = await events.next(ReloadAborted, module="inbox")
            assert aborted.error.type == "OSError" and "in use" in aborted.error.message
            unloaded = await events.next(ModuleUnloaded, module="web")
            committed = await events.next(ReloadCommitted, module="inbox")
            assert committed.batch == unloaded.batch
            second = context.get(USER_INTERACTION)
            assert isinstance(second, WebProvider)
            assert second.listener is first.listener and not first.listener.closed
            question_id = await _first_question(port, token)
            reply = await client.post(f"/api/questions/{question_id}/answer", json={"option": 1})
            assert reply.status_code == 200, reply.text
    assert answers == ["Postgres"]


async def _first_question(port: int, token: str) -> str:
    """The id of the first question the inbox's event stream shows, read as a page's
    EventSource reads it (plain HTTP over TCP: no streaming client's async generators)."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(
            f"GET /api/events?token={token} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        )
        rest = b""
        while True:
            *lines, rest = (rest + await stream.receive()).split(b"\n")
            for line in lines:  # complete lines only
                if line.startswith(b"data:"):
                    event = json.loads(line[len(b"data:") :])
                    shown = event.get("questions") or [event.get("question")]
                    if shown[0] is not None:
                        return str(shown[0]["id"])

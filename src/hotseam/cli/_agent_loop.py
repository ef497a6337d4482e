"""Running the agent of ``hotseam dev`` and ``hotseam run``, and running it again on a save
of its module or Enter (a save withdraws the open question; a module that no longer loads
is reported and the running agent left alone). The module is read and executed off the
loop, so a slow body leaves the control socket and the web inbox serving.

Whatever the agent raises is its failure, ``BaseException`` included (SIGINT is routed to
a receiver, so a ``KeyboardInterrupt`` it raises is its own); only the cancellation of the
command's own scopes goes through. ``sys.exit()`` and ``sys.exit(0)`` finish the run; any
other exit status is a failure (exit 1). With a journal, each run is started (or resumed)
in it, and of several daemons started for one agent the journal lets one take it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import sniffio

from .._core import Context, use_context
from ..interaction import AskEnded, ErrorCode, on_ask_ended, waiting_for_provider
from ..interaction.journal import AgentRun, JournalDaemon, JournalError, JournalErrorCode
from ..reload import is_fatal
from ._agent import (
    AgentFunction,
    AgentImporter,
    AgentLoadError,
    agent_file,
    alone,
    describe_error,
    shown_path,
)
from ._snapshot import SessionFacts
from ._stdio_cmd import EXIT_BAD_INPUT, EXIT_FATAL, EXIT_OK

DOUBLE_CTRL_C = 1.0
"""Seconds within which a second Ctrl-C at a question stops the command."""

FILE_POLL = 0.25
"""Seconds between two looks at the agent's module for a save."""


_TAKEN = frozenset({JournalErrorCode.RUN_CLAIMED, JournalErrorCode.RUN_EXISTS})
"""Refusals of a run's start that mean another live daemon runs the agent."""

_GONE = frozenset({JournalErrorCode.RUN_FINISHED, JournalErrorCode.RUN_UNKNOWN})
"""Refusals of a run's start that mean the run looked at ended meanwhile: look again."""

_START_ATTEMPTS = 3


class AgentLoop:
    """Run ``agent`` in ``context``; run it again on a save of its module or on Enter.

    Args:
        spec: The ``--agent`` spec (``None`` for the built-in demo agent, never reloaded).
        keep_alive: Keep watching after the agent ends (``hotseam dev`` on a terminal).
        provider_wait: Seconds a question waits for a provider to appear.
        on_wait: Called (with the seam's name) when questions start waiting for one.
        stop: Stops the command (a second Ctrl-C).
        import_timeout: Seconds the module's body may execute when it is saved.
        journal: Where each run of the agent is recorded (``None``: nowhere); a run cut
            short (a stop, a save of the agent's module) is resumed by the next one.
        agent_key: The agent's name in the journal.
        fresh: Abandon the agent's unfinished run instead of resuming it (first run only).
    """

    def __init__(
        self,
        spec: str | None,
        agent: AgentFunction,
        context: Context,
        log: Any,
        facts: SessionFacts,
        *,
        keep_alive: bool,
        provider_wait: float,
        on_wait: Callable[[str], object],
        stop: Callable[[], None],
        import_timeout: float = 10.0,
        journal: JournalDaemon | None = None,
        agent_key: str = "demo",
        fresh: bool = False,
    ) -> None:
        self._spec = spec
        self._agent = agent
        self._context = context
        self._log = log
        self._facts = facts
        self._keep_alive = keep_alive
        self._provider_wait = provider_wait
        self._on_wait = on_wait
        self._stop = stop
        self._file: Path | None = None
        self._importer = AgentImporter(spec, import_timeout) if spec is not None else None
        self._restart = anyio.Event()
        self._running: anyio.CancelScope | None = None
        self._last_dismissal = -float("inf")
        self._journal = journal
        self._agent_key = agent_key
        self._fresh = fresh

    async def run(self) -> int:
        """Run the agent until the command stops (without ``keep_alive``: until it ends);
        the exit code its last run earns."""
        outcome = EXIT_OK
        seen = None
        if self._spec is not None:
            # Looked at before the agent runs: a save before the watching task starts counts.
            self._file, seen = await anyio.to_thread.run_sync(
                _locate, self._agent, abandon_on_cancel=True
            )
        stop_listening = on_ask_ended(self._ask_ended)
        try:
            async with anyio.create_task_group() as tg:
                if self._file is not None:
                    tg.start_soon(self._watch_file, self._file, seen)
                while True:
                    self._restart = anyio.Event()
                    try:
                        outcome, restarted = await self._run_once()
                    except _RunTakenError as taken:
                        self._facts.agent_state = "not started: run by another daemon"
                        # One write (print makes two): the log's writer cannot cut it.
                        sys.stderr.write(f"{taken.line}\n")
                        sys.stderr.flush()
                        tg.cancel_scope.cancel()
                        return EXIT_BAD_INPUT
                    if restarted:
                        continue
                    if not self._keep_alive:
                        tg.cancel_scope.cancel()
                        return outcome
                    await self._idle()
        finally:
            stop_listening()
            if self._importer is not None:
                self._importer.close()
        return outcome  # pragma: no cover - the loop returns or is cancelled

    async def _run_once(self) -> tuple[int, bool]:
        """One run of the agent: (exit code it earns, whether a restart cancelled it)."""
        facts = self._facts
        facts.agent_runs += 1
        facts.agent_state = "running"
        outcome = EXIT_OK
        with anyio.CancelScope() as running:
            self._running = running
            try:
                with (
                    use_context(self._context),
                    waiting_for_provider(self._provider_wait, self._on_wait),
                ):
                    async with self._recorded():
                        await self._agent(self._context)
            except _RunTakenError:
                raise  # the run never started: nothing of the agent ran
            except BaseException as error:  # SystemExit, KeyboardInterrupt... are the agent's
                if not _raised_by_agent(error):
                    raise
                outcome = self._ended_by(error)
            else:
                facts.agent_state = "finished"
                self._log.info("the agent finished")
            finally:
                self._running = None
        if running.cancelled_caught:
            facts.agent_state = "restarting"
            return EXIT_OK, True
        return outcome, False

    @contextlib.asynccontextmanager
    async def _recorded(self) -> AsyncIterator[None]:
        """The run of the agent in the journal (resumed when the last one was cut short)."""
        if self._journal is None:
            yield
            return
        fresh, self._fresh = self._fresh, False
        async with contextlib.AsyncExitStack() as stack:
            run = await self._start_run(stack, fresh)
            self._facts.run = f"run {run.id[:12]}"
            if run.recorded:
                self._log.info(
                    f"resuming the agent's run {run.id[:12]}: {len(run.recorded)} question(s) "
                    "recorded; those answered are replayed without asking"
                )
            try:
                yield
            finally:
                self._facts.run = f"run {run.id[:12]} ({run.replayed} replayed)"

    async def _start_run(self, stack: contextlib.AsyncExitStack, fresh: bool) -> AgentRun:
        """Start or resume the agent's run, entered on ``stack``. Of daemons started for one
        agent at once (a supervisor's retry, a deploy), the journal lets one take the run;
        the others get :class:`_RunTakenError`. A run that ended meanwhile is looked at
        again."""
        assert self._journal is not None
        for attempt in range(_START_ATTEMPTS):
            last = attempt == _START_ATTEMPTS - 1
            try:
                return await stack.enter_async_context(
                    self._journal.run(self._agent_key, fresh=fresh)
                )
            except JournalError as error:
                if error.code in _TAKEN:
                    owner = await self._owner_now(error)
                    if owner is not None or last:
                        raise _RunTakenError(await self._taken_line(owner, error)) from None
                elif error.code not in _GONE or last:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _owner_now(self, error: JournalError) -> str | None:
        """The daemon running the unfinished run the refusal named (``None``: it ended or
        changed hands since, so the start is tried again)."""
        assert self._journal is not None
        with contextlib.suppress(JournalError):
            record = await self._journal.journal.unfinished_run(self._agent_key)
            if record is not None and record.id == error.details.get("run_id"):
                return record.daemon_id
        return None

    async def _taken_line(self, owner_id: str | None, error: JournalError) -> str:
        """What happened, who runs the agent, what to do: one line for stderr."""
        assert self._journal is not None
        journal = self._journal.journal
        owner_id = owner_id or str(error.details.get("owner", "?"))
        owner = f"the daemon {owner_id}"
        with contextlib.suppress(JournalError):
            found = await journal.get_daemon(owner_id)
            owner = f"{found.name} (host {found.host}, pid {found.pid})"
        return (
            f"{self._facts.command}: the agent {self._agent_key!r} was taken by {owner} in "
            f"{journal.url} while this daemon started; stop that one first, or name this "
            "agent otherwise with --name"
        )

    def _ended_by(self, error: BaseException) -> int:
        """Report how ``error`` ended the agent's run; return the exit code it earns."""
        if _finishes(error):
            self._facts.agent_state = "finished"
            self._log.info(f"the agent finished (it called sys.exit({_shown_code(error)}))")
            return EXIT_OK
        self._facts.agent_state = f"failed: {describe_error(error)}"
        self._log.error(f"the agent failed: {describe_error(error)}", exc_info=error)
        return EXIT_FATAL

    async def _idle(self) -> None:
        """Wait for a reason to run the agent again: a save of its module, or Enter."""
        again = []
        if self._file is not None:
            again.append(f"save {shown_path(self._file)}")
        reads_enter = _terminal_input() is not None
        if reads_enter:
            again.append("press Enter")
        hint = f"; {' or '.join(again)} to run it again" if again else ""
        self._log.info(f"hotseam dev keeps watching{hint} (Ctrl-C to stop)")
        # Left before the agent runs again: a prompt it opens must find stdin free.
        async with anyio.create_task_group() as tg:
            if reads_enter:
                tg.start_soon(self._wait_for_enter)
            await self._restart.wait()
            tg.cancel_scope.cancel()

    async def _wait_for_enter(self) -> None:
        fd = _terminal_input()
        assert fd is not None
        while True:
            await anyio.wait_readable(fd)
            try:
                data = os.read(fd, 4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return
            if not data:
                return  # the input ended
            if b"\n" in data or b"\r" in data:
                self._log.info("Enter: running the agent again")
                self._restart.set()
                return

    async def _watch_file(self, file: Path, seen: Fingerprint | None) -> None:
        """Run the agent again when its module is saved (and still loads); the file is read
        in a worker thread, so a stalled file system stalls this task only."""
        importer = self._importer
        assert importer is not None
        while True:
            await anyio.sleep(FILE_POLL)
            now = await anyio.to_thread.run_sync(_fingerprint, file, seen, abandon_on_cancel=True)
            if now is None or now == seen or now[2] is None:
                continue  # unchanged, or not readable now: looked at again
            # A baseline without content (it could not be read at start) was loaded from
            # whatever the file held then: a moved stamp counts as a save.
            changed = seen is None or seen[2] is None or now[2] != seen[2]
            seen = now
            if not changed:
                continue  # touched, not changed
            try:
                self._agent = await importer.load(fresh=True)
            except AgentLoadError as error:
                self._log.error(f"{shown_path(file)} changed but cannot run: {error}")
                continue
            if self._running is not None:
                self._log.info(
                    f"{shown_path(file)} changed: withdrawing the agent's question and running "
                    "it again"
                )
                self._running.cancel()
            else:
                self._log.info(f"{shown_path(file)} changed: running the agent again")
                self._restart.set()

    def _ask_ended(self, ended: AskEnded) -> None:
        if ended.code != ErrorCode.ASK_CANCELLED or "Ctrl-C" not in (ended.message or ""):
            return
        now = time.monotonic()
        if now - self._last_dismissal <= DOUBLE_CTRL_C:
            self._log.info("Ctrl-C twice: stopping")
            self._stop()
            return
        self._last_dismissal = now
        self._log.info(
            f"question dismissed; Ctrl-C again within {DOUBLE_CTRL_C:g} s stops the command"
        )


class _RunTakenError(Exception):
    """The agent's run belongs to another live daemon, which took it first."""

    def __init__(self, line: str) -> None:
        super().__init__(line)
        self.line = line


Fingerprint = tuple[int, int, bytes | None]
"""A module file's modification time, size and content (``None``: not read)."""


def _locate(agent: AgentFunction) -> tuple[Path | None, Fingerprint | None]:
    """The agent's module file and its :func:`_fingerprint` (file-system work: off the loop)."""
    file = agent_file(agent)
    return file, (_fingerprint(file) if file is not None else None)


def _fingerprint(file: Path, seen: Fingerprint | None = None) -> Fingerprint | None:
    """Modification time, size and content (read only when the first two moved); ``None``
    while the file cannot be looked at. Without ``seen``, an unreadable file gives its stamp
    alone: the baseline, so the first read that works is not taken for a save."""
    try:
        info = file.stat()
    except OSError:
        return None
    stamp = (info.st_mtime_ns, info.st_size)
    if seen is not None and stamp == seen[:2]:
        return seen
    try:
        return (*stamp, file.read_bytes())
    except OSError:
        return (*stamp, None) if seen is None else None


def _terminal_input() -> int | None:
    """stdin's descriptor when it is a terminal in the foreground (a background read would
    stop the process with SIGTTIN)."""
    stdin = sys.stdin
    with contextlib.suppress(AttributeError, OSError, ValueError):
        if stdin is not None and stdin.isatty():
            fd = stdin.fileno()
            if os.tcgetpgrp(fd) == os.getpgrp():
                return fd
    return None


def _raised_by_agent(error: BaseException) -> bool:
    """False for what must go through: the cancellation of the command's own scopes, and a
    ``KeyboardInterrupt`` that may be the user's Ctrl-C. A ``CancelledError`` the agent
    raised itself (no cancellation requested) is the agent's."""
    if not is_fatal(error):
        return True
    if isinstance(error, asyncio.CancelledError) and sniffio.current_async_library() == "asyncio":
        task = asyncio.current_task()
        return task is not None and task.cancelling() == 0
    return False


def _finishes(error: BaseException) -> bool:
    """True for ``sys.exit()`` and ``sys.exit(0)``: the agent's way to finish."""
    error = alone(error)
    return isinstance(error, SystemExit) and error.code in (None, 0)


def _shown_code(error: BaseException) -> str:
    code = getattr(alone(error), "code", None)
    return "" if code is None else repr(code)

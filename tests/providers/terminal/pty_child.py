"""Programs the pseudo-terminal tests run: ``python pty_child.py SCENARIO``.

Each prints ``RESULT ...`` lines the test reads, and acts on SIGUSR1 where the scenario
needs an agent-side event while a prompt is open (the test sends it after seeing the
prompt on the screen).
"""

from __future__ import annotations

import signal
import sys
import termios
import time

import anyio

from hotseam import Agent, Context, Scope
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    UserInteractionError,
    ask,
)
from hotseam.providers.terminal import TerminalProvider

DB = AskUserQuestionRequest(
    "Which database?",
    header="Storage",
    options=(
        AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True),
        AskUserQuestionOption("SQLite", description="One file, zero setup"),
        AskUserQuestionOption("DuckDB"),
    ),
    agent=Agent("planner", "Planner"),
)
STRICT = AskUserQuestionRequest(
    "Deploy now?",
    header="Deploy",
    options=(AskUserQuestionOption("Yes"), AskUserQuestionOption("No")),
    allow_custom=False,
)
FREE = AskUserQuestionRequest("What colour?", header="Theme")
STACK = AskUserQuestionRequest.of(
    [
        Question(
            "Which database?",
            header="Storage",
            options=(
                AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True),
                AskUserQuestionOption("SQLite", description="One file, zero setup"),
                AskUserQuestionOption("DuckDB"),
            ),
        ),
        Question(
            "Which features?",
            header="Features",
            options=(
                AskUserQuestionOption("Auth", recommended=True),
                AskUserQuestionOption("Billing", recommended=True),
                AskUserQuestionOption("Search", description="Full-text search"),
            ),
            multi_select=True,
            max_selections=2,
            id="features",
        ),
        Question("Anything else?", header="Notes", allow_skip=True, id="notes"),
    ],
    agent=Agent("planner", "Planner"),
)


def report(what: str) -> None:
    print(f"RESULT {what}", flush=True)


def terminal_state() -> str:
    attrs = termios.tcgetattr(sys.stdin.fileno())
    echo = bool(attrs[3] & termios.ECHO)
    icanon = bool(attrs[3] & termios.ICANON)
    return f"echo={echo} icanon={icanon}"


async def ask_and_report(provider: TerminalProvider, request: AskUserQuestionRequest) -> None:
    try:
        answer = await provider.ask(request)
    except UserInteractionError as error:
        report(f"error={error.code}")
    else:
        label = answer.option.label if answer.option is not None else None
        report(f"answer={answer.answer} option={label}")


async def answers() -> None:
    """The same questions as the unit tests, one after another; the test types replies."""
    provider = TerminalProvider()
    for request in (DB, DB, DB, FREE, STRICT, DB, FREE):
        await ask_and_report(provider, request)


def entries(answer: AskUserQuestionAnswer) -> str:
    """``q1=SQLite features=Auth,Search notes=(skipped)``: what each question got."""
    return " ".join(
        f"{e.id}={f'({e.skipped})' if e.skipped else ','.join(e.values)}" for e in answer.answers
    )


async def stepper() -> None:
    """The three-question ask, three times through ask(): the test steps through it."""
    context = Context("pty")
    async with Scope("ui", context=context) as scope:
        scope.provide(USER_INTERACTION, TerminalProvider())
        for _ in range(3):
            try:
                answer = await ask(STACK, context=context)
            except UserInteractionError as error:
                report(f"error={error.code} {error.message}")
            else:
                report(entries(answer))


async def withdraw() -> None:
    """SIGUSR1 cancels the open prompt; report the time it took and the terminal state,
    then read a plain line with input() to show the terminal is usable."""
    before = termios.tcgetattr(sys.stdin.fileno())
    provider = TerminalProvider()
    scope = anyio.CancelScope()
    unwound = anyio.Event()

    async def asker() -> None:
        with scope:
            await provider.ask(FREE)
        unwound.set()

    with anyio.open_signal_receiver(signal.SIGUSR1) as signals:
        async with anyio.create_task_group() as tg:
            tg.start_soon(asker)
            async for _ in signals:
                started = time.perf_counter()
                scope.cancel()
                await unwound.wait()
                elapsed = (time.perf_counter() - started) * 1000
                break
    same = termios.tcgetattr(sys.stdin.fileno()) == before
    report(
        f"withdrawn ms={elapsed:.1f} {terminal_state()} same={same} "
        f"stdout={sys.stdout is sys.__stdout__} stderr={sys.stderr is sys.__stderr__}"
    )
    line = input("after> ")  # noqa: ASYNC250 - a plain blocking read is the point
    report(f"read={line!r}")


async def reload() -> None:
    """SIGUSR1 replaces the provider (as a hot reload does) while the question is open."""
    before = termios.tcgetattr(sys.stdin.fileno())
    context = Context("pty")
    first = Scope("generation 1", context=context)
    first.provide(USER_INTERACTION, TerminalProvider(banner="generation 1"))
    holder: dict[str, Scope] = {}

    async def swap_on_signal() -> None:
        with anyio.open_signal_receiver(signal.SIGUSR1) as signals:
            async for _ in signals:
                async with context.swap(USER_INTERACTION):
                    await first.aclose()
                    holder["second"] = Scope("generation 2", context=context)
                    holder["second"].provide(
                        USER_INTERACTION, TerminalProvider(banner="generation 2")
                    )
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(swap_on_signal)
        answer = await ask(DB, context=context)
    await holder["second"].aclose()
    same = termios.tcgetattr(sys.stdin.fileno()) == before
    report(f"answer={answer.answer} same={same}")


async def logs() -> None:
    """SIGUSR1 writes log lines while the prompt is open: print, stderr, and structlog
    configured as ``hotseam demo`` configures it."""
    import structlog

    from hotseam.cli import _logging

    _logging.configure_logging("console", level="info")  # as every hotseam command does
    log = structlog.get_logger("pty.child")

    async def log_on_signal() -> None:
        with anyio.open_signal_receiver(signal.SIGUSR1) as signals:
            async for _ in signals:
                print("agent: printed line")
                print("agent: stderr line", file=sys.stderr)
                log.warning("agent.structlog_line")
                report("logged")
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(log_on_signal)
        await ask_and_report(TerminalProvider(), FREE)


if __name__ == "__main__":
    anyio.run(
        {
            "answers": answers,
            "stepper": stepper,
            "withdraw": withdraw,
            "reload": reload,
            "logs": logs,
        }[sys.argv[1]]
    )

"""A process that uses a journal for the cross-process tests; driven by lines on stdin.

python _child.py race URL NAME BACKEND
    registers daemon NAME and prints its id; then for each line "claim I" claims the
    run of agent-I, for each line "answer I" answers ask race-I with NAME, and prints
    what it got (the test sends each line to two such processes at once).
python _child.py answer URL NAME BACKEND
    says "ready", then answers each ask id read from stdin with NAME and prints
    {"sent": monotonic time before the call, "won": bool}.
python _child.py hold URL NAME BACKEND RUN_ID
    finishes RUN_ID, but stops inside the write transaction after its last statement
    (says "holding" and sleeps there): the test kills it with SIGKILL.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import anyio
import anyio.to_thread

from hotseam.interaction import AskUserQuestionAnswer
from hotseam.interaction._journal import JournalError, open_journal
from hotseam.interaction._journal._sql import Db


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def read_line() -> str:
    return (await anyio.to_thread.run_sync(sys.stdin.readline)).strip()


async def race(url: str, name: str) -> None:
    async with open_journal(url, poll_interval=0.05) as journal:
        daemon = await journal.register_daemon(name)
        say(json.dumps({"daemon": daemon.id}))
        while command := await read_line():
            what, index = command.split()
            if what == "claim":
                run = await journal.unfinished_run(f"agent-{index}")
                assert run is not None
                try:
                    await journal.claim_run(run.id, daemon.id)
                    say(json.dumps("won"))
                except JournalError as error:
                    say(json.dumps(error.code))
            else:
                answer = AskUserQuestionAnswer(name)
                settlement = await journal.answer_ask(f"race-{index}", answer, by=name)
                recorded = settlement.ask.answer
                got = {
                    "won": settlement.won,
                    "recorded": None if recorded is None else recorded.answer,
                    "by": settlement.ask.settled_by,
                }
                say(json.dumps(got))


async def answer(url: str, name: str) -> None:
    async with open_journal(url) as journal:
        say("ready")
        while ask_id := await read_line():
            sent = time.monotonic()
            settlement = await journal.answer_ask(ask_id, AskUserQuestionAnswer(name), by=name)
            say(json.dumps({"sent": sent, "won": settlement.won}))


async def hold(url: str, run_id: str) -> None:
    original = Db.announce

    def announce_then_hang(self: Db, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)  # the transaction's last statement ran; no commit
        say("holding")
        time.sleep(3600)

    Db.announce = announce_then_hang  # type: ignore[method-assign]
    async with open_journal(url) as journal:
        await journal.finish_run(run_id)  # the only write: the hang is in its transaction
    say("finished: the transaction was not held")


def main() -> None:
    command, url, name, backend, *rest = sys.argv[1:]
    if command == "race":
        anyio.run(race, url, name, backend=backend)
    elif command == "answer":
        anyio.run(answer, url, name, backend=backend)
    elif command == "hold":
        anyio.run(hold, url, rest[0], backend=backend)
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()

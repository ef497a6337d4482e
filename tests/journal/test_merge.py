"""What a daemon holds merged into a journal another process made again at its path.

Two real SQLite files stand for the daemon's split-off view and the file now at the path
(made again by a peer from its own, older copy): the merge adds what the file lacks and
brings up to date what the view knows more of, and never undoes what the file knows more.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hotseam.interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from hotseam.interaction._journal import AskState, RunState, open_journal
from hotseam.interaction._journal._sqlite import _merge

pytestmark = pytest.mark.anyio

QUESTION = AskUserQuestionRequest("Deploy now?")


async def test_the_merge_adds_what_is_missing_and_keeps_the_most_settled_of_each_record(
    tmp_path: Path,
) -> None:
    view, path = tmp_path / "view.sqlite3", tmp_path / "path.sqlite3"
    async with open_journal(path) as at_path:
        # the peer's older copy: the daemon, one run, two asks pending; another run ended
        daemon = await at_path.register_daemon("daemon")
        run = await at_path.start_run("deployer", daemon.id)
        await at_path.record_ask("answered-in-view", run.id, 0, QUESTION)
        await at_path.record_ask("answered-at-path", run.id, 1, QUESTION)
    # the daemon's view: the same records, further on — and a record the peer never saw
    view.write_bytes(path.read_bytes())
    view.chmod(0o600)
    async with open_journal(view) as held:
        await held.answer_ask("answered-in-view", AskUserQuestionAnswer("yes"), by="view")
        await held.record_ask("only-in-view", run.id, 2, QUESTION)
        other = await held.start_run("reviewer", daemon.id)
        await held.finish_run(other.id)
    async with open_journal(path) as at_path:  # the peer's answer to the other
        await at_path.answer_ask("answered-at-path", AskUserQuestionAnswer("no"), by="path")
    source = sqlite3.connect(view, isolation_level=None)
    try:
        said = _merge(source, path)
    finally:
        source.close()
    async with open_journal(path) as merged:
        asks = {ask.id: ask for ask in await merged.run_asks(run.id)}
        runs = {overview.run.id: overview.run.state for overview in await merged.runs()}
    assert asks["answered-in-view"].state is AskState.ANSWERED
    assert asks["answered-in-view"].answer == AskUserQuestionAnswer("yes")
    assert asks["answered-at-path"].answer == AskUserQuestionAnswer("no")  # not undone
    assert asks["only-in-view"].state is AskState.PENDING
    assert runs == {run.id: RunState.RUNNING, other.id: RunState.FINISHED}
    # added: the view's new ask and run; brought up to date: its answer, and the daemon
    # (the view's later start of a run beat its heartbeat)
    assert said == "2 record(s) added and 2 brought up to date"

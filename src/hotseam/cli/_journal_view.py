"""How ``hotseam journal`` shows the journal's records: table rows, lines and JSON.

An ask is shown as its questions, every one alike. An answer is personal data: shown only
when the caller asks for it (``show --answer``). Text from an agent is shown with its
control characters escaped, so that it cannot drive the terminal.
"""

from __future__ import annotations

import json
import socket
import sys
import textwrap
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..interaction import Question, QuestionAnswer
from ..interaction.journal import (
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    RunOverview,
    pid_alive,
)


def ask_lines(entry: InboxEntry, *, answer: bool) -> list[str]:
    """What ``show`` prints of one ask: each question, with its answer only when ``answer``
    says so."""
    ask, run, daemon = entry.ask, entry.run, entry.daemon
    request = ask.request
    lines = [f"question {ask.id}: {state_text(ask)}", f"  asked:      {local(ask.created_at)}"]
    if ask.settled_at is not None:
        by = f", by {clean(ask.settled_by)}" if ask.settled_by else ""
        lines.append(f"  settled:    {local(ask.settled_at)}{by}")
    entries = {} if ask.answer is None or not answer else {e.id: e for e in ask.answer.answers}
    for item in request.questions:
        lines.extend(_question_lines(item))
        given = entries.pop(str(item.id), None)
        if given is not None:
            lines.extend(_answer_lines(given))
    for given in entries.values():  # of no question of the request: never for a checked one
        lines.extend(_answer_lines(given))
    if request.agent is not None:
        lines.append(
            f"  for:        {clean(request.agent.display_name)} ({clean(request.agent.id)})"
        )
    key = f", key {clean(ask.key)}" if ask.key else ""
    lines.append(
        f"  run:        {run.id} ({run.state.value}), agent {clean(run.agent)}, "
        f"question {ask.seq + 1}{key}"
    )
    lines.append(f"  daemon:     {daemon_text(daemon)}, id {daemon.id}")
    if ask.answer is None:
        lines.append("  answer:     none recorded")
    elif not answer:
        lines.append("  answer:     not shown (answers are personal data): --answer shows it")
    return lines


def _question_lines(item: Question) -> list[str]:
    """One question of an ask, in full: its header, text, options and what it takes."""
    lines = [f"  header:     {clean(item.header)}"] if item.header else []
    lines.extend(_block("  question:   ", item.question))
    for number, option in enumerate(item.choices, start=1):
        label = "  options:    " if number == 1 else _INDENT
        value = (
            f" (value {clean(option.value)})" if option.value not in (None, option.label) else ""
        )
        about = f" - {clean(option.description)}" if option.description else ""
        mark = " [recommended]" if option.recommended else ""
        lines.append(f"{label}{number}. {clean(option.label)}{value}{about}{mark}")
    lines.append(f"  takes:      {item.hint}")
    return lines


def _answer_lines(given: QuestionAnswer) -> list[str]:
    """A question's recorded answer: the text the model read, and the options chosen."""
    if given.skipped is not None:
        return [f"  answer:     none ({given.skipped})"]
    lines = _block("  answer:     ", given.answer or "")
    if given.options:
        labels = ", ".join(clean(option.label) for option in given.options)
        lines.append(f"  chosen:     {labels}")
    return lines


_INDENT = " " * 14


def _block(label: str, text: str) -> list[str]:
    """``label`` then ``text``, its further lines indented under the first."""
    return [
        f"{label if number == 0 else _INDENT}{clean(line)}"
        for number, line in enumerate(text.splitlines() or [""])
    ]


def entry_json(entry: InboxEntry, *, full: bool = False, answer: bool = False) -> dict[str, Any]:
    """An ask for scripts: its whole request when ``full``; its answer only with ``answer``."""
    ask = entry.ask
    data: dict[str, Any] = {
        "id": ask.id,
        "state": ask.state.value,
        "code": ask.code,
        "asked_at": iso(ask.created_at),
        "settled_at": iso(ask.settled_at),
        "settled_by": ask.settled_by,
        "questions": [
            {"id": item.id, "header": item.header, "question": item.question}
            for item in ask.request.questions
        ],
        "run": {"id": entry.run.id, "agent": entry.run.agent, "state": entry.run.state.value},
        "position": ask.seq,
        "key": ask.key,
        "daemon": daemon_json(entry.daemon),
    }
    if full:
        data["request"] = ask.request.to_dict()
        data["has_answer"] = ask.answer is not None
        if answer:
            data["answer"] = None if ask.answer is None else ask.answer.to_dict()
    return data


def run_json(overview: RunOverview) -> dict[str, Any]:
    """A run for scripts, with its daemon and its asks counted by state."""
    run = overview.run
    return {
        "id": run.id,
        "agent": run.agent,
        "state": run.state.value,
        "started_at": iso(run.started_at),
        "claimed_at": iso(run.claimed_at),
        "finished_at": iso(run.finished_at),
        "daemon": daemon_json(overview.daemon),
        "asks": {state.value: count for state, count in overview.asks.items()},
    }


def daemon_json(daemon: DaemonRecord) -> dict[str, Any]:
    """A daemon for scripts (``state`` as :func:`liveness` tells it)."""
    return {
        "id": daemon.id,
        "name": daemon.name,
        "host": daemon.host,
        "pid": daemon.pid,
        "agent": daemon.agent,
        "state": liveness(daemon),
        "started_at": iso(daemon.started_at),
        "heartbeat_at": iso(daemon.heartbeat_at),
        "stopped_at": iso(daemon.stopped_at),
    }


def liveness(daemon: DaemonRecord) -> str:
    """``up``, ``gone`` (up by its heartbeat, but a process of this machine that no longer
    runs: ``kill -9``), ``stopped`` (it said so), or ``down`` (no heartbeat for too long)."""
    if daemon.stopped_at is not None:
        return "stopped"
    if not daemon.alive:
        return "down"
    if daemon.host == socket.gethostname() and not pid_alive(daemon.pid):
        return "gone"
    return "up"


def daemon_text(daemon: DaemonRecord) -> str:
    """``name on host, pid N, up``."""
    return f"{clean(daemon.name)} on {clean(daemon.host)}, pid {daemon.pid}, {liveness(daemon)}"


def state_text(ask: AskRecord) -> str:
    """The state, and the code of a failure (``failed ASK_TIMEOUT``)."""
    return f"failed {ask.code}" if ask.state is AskState.FAILED and ask.code else ask.state.value


def headline(ask: AskRecord) -> str:
    """Each question on one line: its header in brackets and its first words, the words
    shared out among the questions (``[Storage] Which database? · [Features] Which…``)."""
    items = ask.request.questions
    width = max(_HEADLINE // len(items), _HEADLINE_LEAST)
    return " · ".join(_brief(item, width) for item in items)


_HEADLINE = 60  # characters of question text in a list's row
_HEADLINE_LEAST = 16


def _brief(item: Question, width: int) -> str:
    text = " ".join(clean(item.question).split())
    short = textwrap.shorten(text, width=width, placeholder="…")
    if short == "…":  # one long word
        short = text[: width - 1] + "…"
    header = f"[{' '.join(clean(item.header).split())}] " if item.header else ""
    return header + short


def counts(overview: RunOverview) -> str:
    """``3: 2 answered, 1 pending``."""
    if not overview.total:
        return "none"
    parts = ", ".join(f"{count} {state.value}" for state, count in sorted(overview.asks.items()))
    return f"{overview.total}: {parts}"


def clean(text: str | None) -> str:
    """``text`` safe for a terminal: control and format characters (escape sequences,
    bidirectional overrides) shown as escapes, never interpreted."""
    if text is None:
        return ""
    return "".join(
        f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch
        for ch in text
    )


def local(when: float) -> str:
    """A journal time in this machine's time zone, to the second."""
    return datetime.fromtimestamp(when).astimezone().strftime("%Y-%m-%d %H:%M:%S")


def iso(when: float | None) -> str | None:
    """A journal time as ISO 8601 in UTC, for scripts."""
    return None if when is None else datetime.fromtimestamp(when, UTC).isoformat()


def ago(when: float) -> str:
    """How long ago, roughly (``3 s ago``, ``2 h ago``)."""
    seconds = max(0.0, datetime.now().timestamp() - when)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def plural(count: int, noun: str) -> str:
    """``1 run``, ``2 runs``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns aligned to their widest cell (the last one is not padded)."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers) - 1)]
    for row in [headers, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        print("  ".join([*cells, row[-1]]).rstrip())


def print_json(data: dict[str, Any]) -> None:
    """One JSON object on one line."""
    print(json.dumps(data, ensure_ascii=False))


def say_if_cut(command: str, shown: int, limit: int) -> None:
    """On stderr: the listing was cut at ``limit``."""
    if shown == limit:
        print(f"{command}: the newest {limit} shown; --limit N shows more", file=sys.stderr)

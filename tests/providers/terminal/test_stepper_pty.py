"""The stepper on a real pseudo-terminal (pexpect), keys typed as a human types them and the
screen rendered by pyte: an ask of three questions answered, changed, ticked, refused,
skipped and dismissed; and a real hot reload (``hotseam dev``) in the middle of it."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from .conftest import PtyChild

CHILD = str(Path(__file__).with_name("pty_child.py"))

Spawn = Callable[..., PtyChild]

UP, DOWN, SHIFT_TAB, CTRL_S, CTRL_U, CTRL_C = "\x1b[A", "\x1b[B", "\x1b[Z", "\x13", "\x15", "\x03"


def _result(child: PtyChild, number: int) -> str:
    """Wait for the ``number``-th ``RESULT`` line and return it."""
    child.wait_for(lambda c: len(re.findall(r"RESULT ([^\r\n]*)\r\n", c.raw)) >= number)
    found: list[str] = re.findall(r"RESULT ([^\r\n]*)\r\n", child.raw)
    return found[number - 1]


def _at(child: PtyChild, place: str, line: str = "") -> None:
    """Wait until question ``place`` ("2 of 3") is open with ``line`` typed."""

    def open_there(c: PtyChild) -> bool:
        asks = [row for row in c.lines if " asks (" in row]
        return bool(asks) and place in asks[-1] and c.lines[-1] == f"> {line}".rstrip()

    child.wait_for(open_there)


def _block(child: PtyChild, first: str) -> list[str]:
    """The screen from the last line starting with ``first`` to the end."""
    lines = child.lines
    start = max(i for i, row in enumerate(lines) if row.startswith(first))
    return lines[start:]


def test_the_stepper_answers_goes_back_ticks_refuses_skips_and_dismisses(spawn: Spawn) -> None:
    """ "Which database?" (one), "Which features?" (several, at most 2), "Anything else?"
    (free text, optional), in one ask, three times on one terminal: answered with a
    refusal, a step back and a changed answer; answered with recommended ticks, a skip
    and a min refusal; dismissed at question 2."""
    child = spawn(sys.executable, "-W", "error", CHILD, "stepper", rows=50)
    _at(child, "(1 of 3)", "Postgres")  # greyed: Enter alone picks it
    assert _block(child, "[Storage]") == [
        "[Storage] Planner asks (1 of 3):",
        "Which database?",
        "  1. Postgres (recommended)",
        "     Server database",
        "  2. SQLite",
        "     One file, zero setup",
        "  3. DuckDB",
        "Type a number or a label, or your own answer; Enter alone picks Postgres.",
        "Tab completes a label; Ctrl-C or Ctrl-D dismisses all 3 questions.",
        "> Postgres",
    ]
    child.send("2\r")
    _at(child, "(2 of 3)")
    # The recommended options are ticked; Down twice, Space ticks Search: one too many.
    child.send(DOWN + DOWN + " \r")
    child.wait_for(lambda c: "untick 1 with Space" in c.text)
    _at(child, "(2 of 3)")  # still open, the line empty
    assert _block(child, "[Features]") == [
        "[Features] Planner asks (2 of 3):",
        "Which features?",
        "  [x] 1. Auth (recommended)",
        "  [x] 2. Billing (recommended)",
        "> [x] 3. Search",
        "         Full-text search",
        "Pick 1 to 2, or add your own answer: Space ticks, Enter sends what is ticked.",
        "Up/Down moves; Shift-Tab goes back; Ctrl-C or Ctrl-D dismisses all 3 questions.",
        "  3 chosen, but this question takes at most 2: untick 1 with Space.",
        ">",
    ]
    child.send(UP + " ")  # untick Billing
    child.wait_for(lambda c: "> [ ] 2. Billing (recommended)" in c.lines)
    assert "untick 1 with Space" not in child.text  # the refusal went with the ticks
    # Back to question 1, its answer ready in the line; changed to DuckDB (Tab completes).
    child.send(SHIFT_TAB)
    _at(child, "(1 of 3)", "SQLite")
    assert "(back to question 1 of 3)" in child.lines
    child.send(CTRL_U + "du\t")
    child.wait_for(lambda c: "> DuckDB" in c.lines)
    child.send("\r")
    _at(child, "(2 of 3)")
    assert _block(child, "  [x] 1.")[:3] == [  # the ticks and the highlight as left
        "  [x] 1. Auth (recommended)",
        "> [ ] 2. Billing (recommended)",
        "  [x] 3. Search",
    ]
    child.send("\r")
    _at(child, "(3 of 3)")
    assert _block(child, "[Notes]")[-3:] == [
        "Type your answer.",
        "Shift-Tab goes back; Ctrl-S skips; Ctrl-C or Ctrl-D dismisses all 3 questions.",
        ">",
    ]
    child.send("ship it friday\r")
    assert _result(child, 1) == "q1=DuckDB features=Auth,Search notes=ship it friday"
    assert (
        "> ship it friday\n-> ship it friday (your own answer)\n(all 3 answers sent)\n"
        "RESULT q1=DuckDB features=Auth,Search notes=ship it friday"
    ) in child.text

    # Second ask: Enter takes the recommended; nothing ticked is refused; Ctrl-S skips.
    _at(child, "(1 of 3)", "Postgres")
    child.send("\r")
    _at(child, "(2 of 3)")
    child.send(" " + DOWN + " \r")  # untick Auth and Billing: nothing is ticked
    child.wait_for(lambda c: "0 chosen, but this question takes at least 1" in c.text)
    child.send(" \r")  # Billing again
    _at(child, "(3 of 3)")
    assert "-> Billing" in child.lines
    child.send(CTRL_S)
    assert _result(child, 2) == "q1=pg features=Billing notes=(skipped)"
    assert "-> (skipped)" in child.lines

    # Third ask: Ctrl-C at question 2 dismisses the whole ask.
    _at(child, "(1 of 3)", "Postgres")
    child.send("\r")
    _at(child, "(2 of 3)")
    child.send(CTRL_C)
    assert _result(child, 3) == (
        "error=ASK_CANCELLED the human dismissed the question (Ctrl-C) at question 2 of 3; "
        "the whole ask is dismissed"
    )
    assert "(dismissed with Ctrl-C)" in child.lines
    assert child.exit_status() == 0
    assert not child.cursor_hidden


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

AGENT = """
import json

from hotseam import Agent, Context

QUESTIONS = {  # Claude Code's AskUserQuestion input, verbatim
    "questions": [
        {
            "question": "Which database?",
            "header": "Storage",
            "options": [
                {"label": "Postgres", "description": "Server database"},
                {"label": "SQLite", "description": "One file, zero setup"},
            ],
            "multiSelect": False,
        },
        {
            "question": "Which features?",
            "header": "Features",
            "options": [
                {"label": "Auth", "description": "Sign-in"},
                {"label": "Billing", "description": "Invoices"},
                {"label": "Search", "description": "Full-text search"},
            ],
            "multiSelect": True,
        },
        {"question": "Anything else?", "header": "Notes"},
    ]
}


async def main(context: Context) -> None:
    result = await context.tools.execute(
        "ask_user_question", QUESTIONS, agent=Agent("planner", "Planner")
    )
    print("ANSWERS", json.dumps(result.output["answers"] if result.ok else result.error))
"""


def test_a_reload_in_the_middle_of_the_stepper_keeps_the_answers_and_the_place(
    spawn: Spawn, tmp_path: Path
) -> None:
    """``hotseam dev`` with the walkthrough's provider (it carries a Draft) and an agent
    asking Claude Code's three questions: question 1 answered, question 2's ticks changed,
    then my_ui.py is saved. The new generation resumes at "2 of 3" with the answer, the
    ticks and the highlight as they were, and the agent gets all three answers."""
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "stack_agent.py").write_text(AGENT, encoding="utf-8")
    ui = tmp_path / "examples" / "providers" / "my_ui.py"
    child = spawn(
        sys.executable,
        *("-m", "hotseam", "dev", "examples/providers", "--agent", "stack_agent.py:main"),
        columns=120,
        rows=60,
        cwd=str(tmp_path),
    )
    _at(child, "(1 of 3)")
    assert "== my_ui, first version" in child.text
    child.send("2\r")
    _at(child, "(2 of 3)")
    child.send(" " + DOWN + DOWN + " ")  # nothing is recommended: tick Auth and Search
    child.wait_for(lambda c: "> [x] 3. Search" in c.lines)
    ui.write_text(
        ui.read_text(encoding="utf-8").replace("first version", "second version"),
        encoding="utf-8",
    )
    child.wait_for(lambda c: "== my_ui, second version" in c.text)
    _at(child, "(2 of 3)")
    block = _block(child, "(resumed")
    assert block[:6] == [
        "(resumed: 1 answer kept from before)",
        "[Features] Planner asks (2 of 3):",
        "Which features?",
        "  [x] 1. Auth",
        "         Sign-in",
        "  [ ] 2. Billing",
    ]
    assert "> [x] 3. Search" in block  # the highlight where it was, with the ticks
    assert "(question withdrawn)" in child.text
    child.send("\r")
    _at(child, "(3 of 3)")
    child.send("ship it friday\r")
    child.wait_for(lambda c: re.search(r"ANSWERS ([^\r\n]*)\r\n", c.raw) is not None)
    line = re.findall(r"ANSWERS ([^\r\n]*)\r\n", child.raw)[0]
    assert json.loads(line) == {
        "Which database?": "SQLite",
        "Which features?": "Auth, Search",
        "Anything else?": "ship it friday",
    }

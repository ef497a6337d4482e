"""What ``hotseam journal`` shows of an ask: every question of it alike, one or several,
each with its own answer (only when asked for), in ``list``, ``show`` and JSON."""

from __future__ import annotations

from hotseam.cli._journal_view import ask_lines, entry_json, headline
from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    check_answer,
    validate_request,
)
from hotseam.interaction.journal import (
    AskRecord,
    AskState,
    DaemonRecord,
    InboxEntry,
    RunRecord,
    RunState,
)

PG = AskUserQuestionOption("Postgres", "pg")
SEVERAL = validate_request(
    AskUserQuestionRequest.of(
        [
            Question("Which database?", "Storage", [PG, AskUserQuestionOption("SQLite")]),
            Question(
                "Which features?",
                "Features",
                [AskUserQuestionOption("auth"), AskUserQuestionOption("billing")],
                multi_select=True,
            ),
            Question("Anything else?", allow_skip=True),
        ]
    )
)
ONE = validate_request(AskUserQuestionRequest("Which database?", "Storage", [PG]))


def _entry(request: AskUserQuestionRequest, answer: AskUserQuestionAnswer | None) -> InboxEntry:
    daemon = DaemonRecord("d1", "hotseam run", "here", 1, None, 0.0, 0.0, 1.0, False)
    run = RunRecord("r1", "agent.py:main", "d1", RunState.RUNNING, 0.0, 0.0, None)
    state = AskState.PENDING if answer is None else AskState.ANSWERED
    ask = AskRecord("a1", "r1", 0, None, "x", request, state, None, answer, None, 0.0, None)
    return InboxEntry(ask, run, daemon)


def _answered() -> AskUserQuestionAnswer:
    db, features, notes = SEVERAL.questions
    entries = [
        QuestionAnswer.chosen(db, [PG]),
        QuestionAnswer.chosen(features, ["auth", "billing"]),
        QuestionAnswer.skip(notes),
    ]
    return check_answer(SEVERAL, AskUserQuestionAnswer.of(entries, SEVERAL))


def test_the_headline_of_an_ask_names_every_question() -> None:
    """`list`'s one line: each question's header and first words, sharing the width."""
    assert headline(_entry(SEVERAL, None).ask) == (
        "[Storage] Which database? · [Features] Which features? · Anything else?"
    )
    assert headline(_entry(ONE, None).ask) == "[Storage] Which database?"


def test_show_prints_every_question_in_full_and_each_answer_under_its_question() -> None:
    lines = ask_lines(_entry(SEVERAL, _answered()), answer=True)
    shown = "\n".join(lines)
    for text in ("Which database?", "Which features?", "Anything else?"):
        assert f"  question:   {text}" in lines
    assert [line for line in lines if line.startswith("  takes:")] == [
        "  takes:      pick one, or type your own",
        "  takes:      pick one or more, or type your own",
        "  takes:      type your answer; optional",
    ]
    assert "  chosen:     auth, billing" in lines and "  answer:     none (skipped)" in lines
    database = shown.index("Which database?")
    assert database < shown.index("  answer:     pg") < shown.index("Which features?")


def test_show_leaves_every_answer_out_unless_asked() -> None:
    lines = ask_lines(_entry(SEVERAL, _answered()), answer=False)
    assert not [line for line in lines if line.startswith(("  chosen:", "  answer:     pg"))]
    assert lines[-1].endswith("not shown (answers are personal data): --answer shows it")


def test_the_json_of_an_ask_lists_every_question() -> None:
    data = entry_json(_entry(SEVERAL, None))
    assert data["questions"] == [
        {"id": "q1", "header": "Storage", "question": "Which database?"},
        {"id": "q2", "header": "Features", "question": "Which features?"},
        {"id": "q3", "header": None, "question": "Anything else?"},
    ]
    assert "question" not in data and "header" not in data

"""The text protocol both paths speak, and the question block both paths show."""

from __future__ import annotations

import pytest

from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    check_answer,
)
from hotseam.providers._terminal._protocol import Reprompt, answer_line, hint, resolve_reply
from hotseam.providers._terminal._render import plain, question_block, waiting_line
from hotseam.providers._terminal._tty import wrap_fragments

from .conftest import DB, FREE, STRICT

POSTGRES, SQLITE, DUCKDB = DB.choices
YES, NO = STRICT.choices


@pytest.mark.parametrize(
    ("reply", "option"),
    [
        ("2", SQLITE),
        (" 3 ", DUCKDB),
        ("sqlite", SQLITE),
        ("  SQLite\t", SQLITE),
        ("DUCKDB", DUCKDB),
        ("pg", POSTGRES),  # the model-facing value names the option too
        ("2.", SQLITE),  # the matcher every surface uses: a number as a list shows it
        ("3)", DUCKDB),
        ("postgres (Recommended)", POSTGRES),  # as a chat shows a recommended option
        ("", POSTGRES),
        ("   ", POSTGRES),
    ],
)
def test_numbers_labels_values_and_empty_pick_options(
    reply: str, option: AskUserQuestionOption
) -> None:
    """A number, a label (any case), a value, or nothing for the recommended option."""
    answer = resolve_reply(DB, reply)
    assert answer == AskUserQuestionAnswer(option.model_value, option)
    assert check_answer(DB, answer) == answer


def test_other_text_is_the_humans_own_answer_when_allowed() -> None:
    """Free text is the custom answer, trimmed, with no option."""
    assert resolve_reply(DB, "  MySQL, please ") == AskUserQuestionAnswer("MySQL, please")
    assert resolve_reply(FREE, "blue") == AskUserQuestionAnswer("blue")
    assert resolve_reply(FREE, "7") == AskUserQuestionAnswer("7")  # no options: digits are text


@pytest.mark.parametrize(
    ("request_", "reply", "reason"),
    [
        (DB, "0", "There is no option 0: choose a number from 1 to 3."),
        (DB, "4", "There is no option 4: choose a number from 1 to 3."),
        (
            STRICT,
            "maybe",
            "'maybe' is not an option: type a number from 1 to 2 or a label (Yes, No).",
        ),
        (STRICT, "", "Nothing chosen: type a number from 1 to 2 or a label."),
        (FREE, "  ", "An empty line is not an answer: type your answer."),
        (
            AskUserQuestionRequest("Which?", options=(YES, NO)),
            "",
            "Nothing chosen: type a number from 1 to 2, a label, or your own answer.",
        ),
    ],
)
def test_anything_else_asks_again_with_a_one_line_reason(
    request_: AskUserQuestionRequest, reply: str, reason: str
) -> None:
    """Out-of-range numbers, unknown text without custom answers, and empty lines."""
    result = resolve_reply(request_, reply)
    assert result == Reprompt(reason)
    assert "\n" not in result.reason


def test_text_that_names_two_options_picks_neither() -> None:
    """An option's label that is another's value is ambiguous: never read as either (here
    the human's own answer, or asked again when none is allowed)."""
    crossed = (AskUserQuestionOption("Alpha", "beta"), AskUserQuestionOption("Beta", "b"))
    loose = AskUserQuestionRequest("Which?", options=crossed)
    assert resolve_reply(loose, "beta") == AskUserQuestionAnswer("beta")
    strict = AskUserQuestionRequest("Which?", options=crossed, allow_custom=False)
    assert isinstance(resolve_reply(strict, "BETA"), Reprompt)
    assert resolve_reply(strict, "alpha") == AskUserQuestionAnswer("beta", crossed[0])


def test_long_replies_are_shortened_in_the_reason() -> None:
    """The reason stays one readable line."""
    result = resolve_reply(STRICT, "x" * 200)
    assert isinstance(result, Reprompt)
    assert result.reason.startswith("'" + "x" * 21 + "...' is not an option")
    assert len(result.reason) < 100


def test_hints_name_what_can_be_typed() -> None:
    """The hint line follows the question's shape."""
    assert hint(DB) == "Type a number or a label, or your own answer; Enter alone picks Postgres."
    assert hint(STRICT) == "Type a number or a label."
    assert hint(FREE) == "Type your answer."


def test_answer_lines_show_the_label_or_the_own_answer() -> None:
    """The outcome line that stays in the scrollback."""
    assert answer_line(AskUserQuestionAnswer("pg", POSTGRES)) == "-> Postgres"
    assert answer_line(AskUserQuestionAnswer("blue")) == "-> blue (your own answer)"


def test_the_question_block_shows_who_asks_and_every_option() -> None:
    """Agent, header, question, numbered options with descriptions, recommended marked."""
    assert plain(question_block(DB, banner="generation 2")) == (
        "\n"
        "generation 2\n"
        "[Storage] Planner asks:\n"
        "Which database?\n"
        "  1. Postgres (recommended)\n"
        "     Server database\n"
        "  2. SQLite\n"
        "     One file, zero setup\n"
        "  3. DuckDB\n"
        "Type a number or a label, or your own answer; Enter alone picks Postgres.\n"
    )
    assert plain(question_block(FREE, keys="Ctrl-C dismisses.")) == (
        "\n[Theme]\nWhat colour?\nType your answer.\nCtrl-C dismisses.\n"
    )


def test_ten_options_keep_their_descriptions_aligned() -> None:
    """Numbers are right-aligned and descriptions start under the labels."""
    options = [AskUserQuestionOption(f"o{i}", description=f"d{i}") for i in range(1, 11)]
    lines = plain(question_block(AskUserQuestionRequest("Pick?", options=options))).splitlines()
    assert lines[2:4] == ["   1. o1", "      d1"]
    assert lines[20:22] == ["  10. o10", "      d10"]


def test_the_waiting_line_counts_the_questions_behind() -> None:
    """Nothing when none wait; singular and plural otherwise."""
    assert waiting_line(0) == []
    assert plain(waiting_line(1)) == "(1 more question waiting)\n"
    assert plain(waiting_line(3)) == "(3 more questions waiting)\n"


def test_wrapping_breaks_at_spaces_and_keeps_the_indentation() -> None:
    """Long lines wrap at the width, at a space when there is one; styles are kept."""
    fragments = [
        ("class:question", "Which database should the new service use?"),
        ("", "\n"),
        ("", "     "),
        ("class:description", "Server database; the safe default for a team"),
        ("", "\n"),
        ("", "x" * 25),
    ]
    wrapped = wrap_fragments(fragments, 20)
    assert plain(wrapped).splitlines() == [
        "Which database",
        "should the new",
        "service use?",
        "     Server",
        "     database; the",
        "     safe default",
        "     for a team",
        "x" * 20,
        "x" * 5,
    ]
    assert ("class:description", "safe default") in wrapped
    assert plain(wrap_fragments(fragments, 200)) == plain(fragments)

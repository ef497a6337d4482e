"""The ``ask_user_question`` tool with several questions: Claude Code's AskUserQuestion input
verbatim, hotseam's own fields, the output a model reads, the three definition formats."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hotseam import Agent, Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionInput,
    ErrorCode,
    ask_user_question_tool,
)
from hotseam.providers.scripted import Reply, ScriptedProvider

from ._multi_support import OneByOne

pytestmark = pytest.mark.anyio

# What a model wrote for Claude Code's AskUserQuestion tool (its shape, unchanged): three
# questions, the second multiSelect, the third answered with "Other" (custom text).
CLAUDE_CODE_INPUT = json.loads(
    """
{
  "questions": [
    {
      "question": "Which database should the new orders service use?",
      "header": "Database",
      "multiSelect": false,
      "options": [
        {"label": "PostgreSQL (Recommended)",
         "description": "Relational, already run by the billing service"},
        {"label": "SQLite", "description": "One file, the simplest to run locally"},
        {"label": "DynamoDB", "description": "Managed key-value store, no servers to run"}
      ]
    },
    {
      "question": "Which features should the first release include?",
      "header": "Features",
      "multiSelect": true,
      "options": [
        {"label": "Authentication", "description": "Sign-in with the company SSO"},
        {"label": "Billing", "description": "Invoices and payment status"},
        {"label": "Search", "description": "Full-text search over orders"},
        {"label": "Audit log", "description": "Who changed what, and when"}
      ]
    },
    {
      "question": "Anything else I should know before I start?",
      "header": "Notes",
      "multiSelect": false,
      "options": [
        {"label": "No, go ahead", "description": "Start with the choices above"},
        {"label": "Not yet", "description": "Wait until I have checked with the team"}
      ]
    }
  ]
}
"""
)
DB_TEXT, FEATURES_TEXT, NOTES_TEXT = (q["question"] for q in CLAUDE_CODE_INPUT["questions"])
EXPECTED = {
    "answers": {
        DB_TEXT: "PostgreSQL (Recommended)",
        FEATURES_TEXT: "Authentication, Audit log",
        NOTES_TEXT: "Use the staging cluster",
    },
    "questions": [
        {
            "id": "q1",
            "question": DB_TEXT,
            "answer": "PostgreSQL (Recommended)",
            "values": ["PostgreSQL (Recommended)"],
            "custom": None,
            "skipped": None,
        },
        {
            "id": "q2",
            "question": FEATURES_TEXT,
            "answer": "Authentication, Audit log",
            "values": ["Authentication", "Audit log"],
            "custom": None,
            "skipped": None,
        },
        {
            "id": "q3",
            "question": NOTES_TEXT,
            "answer": "Use the staging cluster",
            "values": ["Use the staging cluster"],
            "custom": "Use the staging cluster",
            "skipped": None,
        },
    ],
}


def _context(provider: object) -> Context:
    context = Context("tool")
    context.provide(USER_INTERACTION, provider)
    context.tools.register(ask_user_question_tool())
    return context


async def test_claude_codes_input_verbatim_gets_claude_codes_answers() -> None:
    """The exact JSON a model wrote for AskUserQuestion; `answers` keyed by question text,
    multi-select labels joined by ", " as Claude Code does; one entry per question."""
    provider = ScriptedProvider(
        [["PostgreSQL (Recommended)", ["Audit log", "Authentication"], "Use the staging cluster"]]
    )
    context = _context(provider)
    result = await context.tools.execute(
        "ask_user_question", CLAUDE_CODE_INPUT, agent=Agent("builder", "Builder")
    )
    assert result.ok, result.error
    assert result.output == EXPECTED
    (request,) = provider.requests
    assert request.agent == Agent("builder", "Builder")
    assert [item.multi_select for item in request.questions] == [False, True, False]
    assert request.questions[0].choices[2].description == (
        "Managed key-value store, no servers to run"
    )
    assert all(item.allow_custom for item in request.questions)  # "Other" is always there


async def test_a_one_question_ui_answers_the_same_call_one_by_one() -> None:
    """A provider without multiple_questions: three one-question prompts, the same output."""
    provider = OneByOne(
        ["PostgreSQL (Recommended)", "Authentication,Audit log", "Use the staging cluster"]
    )
    result = await _context(provider).tools.execute("ask_user_question", CLAUDE_CODE_INPUT)
    assert result.output == EXPECTED
    assert [request.question for request in provider.requests] == [
        DB_TEXT,
        FEATURES_TEXT,
        NOTES_TEXT,
    ]


async def test_hotseams_own_fields_and_a_skipped_question() -> None:
    """id, allowCustom/allow_custom, min/maxSelections, allowSkip, option value and
    recommended; a skipped question is left out of `answers` and says why."""
    tool_input = {
        "questions": [
            {
                "id": "region",
                "question": "Which region?",
                "options": [
                    {"label": "Europe", "value": "eu", "recommended": True},
                    {"label": "America", "value": "us"},
                ],
                "allow_custom": False,
            },
            {
                "id": "zones",
                "question": "Which zones?",
                "options": [{"label": "a"}, {"label": "b"}, {"label": "c"}],
                "multiSelect": True,
                "minSelections": 2,
                "maxSelections": 2,
                "allowCustom": False,
            },
            {"id": "why", "question": "Why?", "allowSkip": True},
        ]
    }
    provider = ScriptedProvider(
        [{"region": {"recommended": True}, "zones": ["c", "a"], "why": {"skip": True}}]
    )
    result = await _context(provider).tools.execute("ask_user_question", tool_input)
    assert result.output == {
        "answers": {"Which region?": "eu", "Which zones?": "a, c"},
        "questions": [
            {"id": "region", "question": "Which region?", "answer": "eu", "values": ["eu"],
             "custom": None, "skipped": None},
            {"id": "zones", "question": "Which zones?", "answer": "a, c", "values": ["a", "c"],
             "custom": None, "skipped": None},
            {"id": "why", "question": "Why?", "answer": None, "values": [], "custom": None,
             "skipped": "skipped"},
        ],
    }  # fmt: skip
    (request,) = provider.requests
    zones = request.questions[1]
    assert (zones.min_selections, zones.max_selections, zones.allow_custom) == (2, 2, False)


async def test_one_question_in_the_questions_shape_answers_in_that_shape() -> None:
    """A model that used AskUserQuestion with one question reads `answers` as it expects."""
    provider = ScriptedProvider(["Blue"])
    tool_input = {
        "questions": [{"question": "Colour?", "options": [{"label": "Blue"}, {"label": "Red"}]}]
    }
    result = await _context(provider).tools.execute("ask_user_question", tool_input)
    assert result.output["answers"] == {"Colour?": "Blue"}
    assert provider.requests[0].questions[0].id == "q1"


async def test_a_declined_question_ends_the_whole_call() -> None:
    """Decline of any question, on a provider showing them together or one by one: the
    model reads ASK_DECLINED, and no answer."""
    together = ScriptedProvider([["SQLite", Reply.fail(ErrorCode.ASK_DECLINED, "not now"), "x"]])
    one_by_one = ScriptedProvider(
        lambda request: (
            Reply.fail(ErrorCode.ASK_DECLINED) if request.question == FEATURES_TEXT else "SQLite"
        )
    )
    one_by_one.multiple_questions = False
    for provider in (together, one_by_one):
        result = await _context(provider).tools.execute("ask_user_question", CLAUDE_CODE_INPUT)
        assert result.error is not None and result.error["code"] == ErrorCode.ASK_DECLINED
    assert [r.question for r in one_by_one.requests] == [DB_TEXT, FEATURES_TEXT]


@pytest.mark.parametrize(
    ("tool_input", "code", "message"),
    [
        ({"questions": []}, "INVALID_INPUT", "questions: List should have at least 1 item"),
        ({"questions": [{"question": f"Q{i}?"} for i in range(9)]}, "INVALID_INPUT", "at most 8"),
        (
            {"questions": [{"question": "Q?", "options": [{"label": "a", "preview": "x"}]}]},
            "INVALID_INPUT",
            "questions[0].options[0].preview",
        ),
        # Neither question nor questions: the input is what is wrong, as for any missing
        # field (it was INVALID_INPUT before questions came; None is no input at all).
        ({"header": "Storage"}, "INVALID_INPUT", "question: Field required (or give questions"),
        ({}, "INVALID_INPUT", "question: Field required (or give questions"),
        (None, "INVALID_INPUT", "question: Field required (or give questions"),
        ("{}", "INVALID_INPUT", "question: Field required (or give questions"),
        (
            {"question": "Other?", "questions": [{"question": "A?"}, {"question": "B?"}]},
            ErrorCode.INVALID_REQUEST,
            "question differs from questions[0].question",
        ),
        (
            {"questions": [{"question": "A?", "multiSelect": True}]},
            ErrorCode.INVALID_REQUEST,
            "questions[0].multi_select needs options",
        ),
    ],
)
async def test_input_that_does_not_fit_names_the_field(
    tool_input: dict[str, Any] | str | None, code: str, message: str
) -> None:
    """The model reads what was wrong with its call, field by field."""
    result = await _context(ScriptedProvider(["x"])).tools.execute("ask_user_question", tool_input)
    assert result.error is not None
    assert result.error["code"] == code
    assert message in result.error["message"]
    if code == "INVALID_INPUT":
        assert result.error["name"] == "ToolError"
        assert result.error["details"]["errors"][0]["field"]


@pytest.mark.parametrize(
    ("format", "path"),
    [
        ("anthropic", ("input_schema",)),
        ("openai", ("function", "parameters")),
        ("mcp", ("inputSchema",)),
    ],
)
async def test_every_definition_format_describes_the_new_fields(
    format: str, path: tuple[str, ...]
) -> None:
    """questions (1-8) of Claude Code's item fields and hotseam's, each described."""
    context = Context("tool")
    context.tools.register(ask_user_question_tool())
    (definition,) = context.tools.definitions(format)  # type: ignore[arg-type]
    schema = definition
    for key in path:
        schema = schema[key]
    questions = schema["properties"]["questions"]
    listed = next(branch for branch in questions["anyOf"] if branch.get("type") == "array")
    assert (listed["minItems"], listed["maxItems"]) == (1, 8)
    assert "Instead of `question`" in questions["description"]
    item = schema["$defs"][listed["items"]["$ref"].rpartition("/")[2]]
    fields = item["properties"]
    assert set(fields) == {
        "question", "header", "options", "multiSelect", "id", "allowCustom",
        "minSelections", "maxSelections", "allowSkip",
    }  # fmt: skip
    assert item["required"] == ["question"]
    assert all(field.get("description") for field in fields.values())
    assert "question" not in schema.get("required", [])


async def test_the_description_tells_a_model_how_to_ask_several_questions() -> None:
    """When to use `questions`, the item fields, the output shape, the failure codes."""
    context = Context("tool")
    context.tools.register(ask_user_question_tool())
    (definition,) = context.tools.definitions("anthropic")
    text = definition["description"]
    for phrase in (
        "`questions`",
        "multiSelect",
        "allowSkip",
        "minSelections",
        '{"answers": {<question text>: <answer>}',
        'joined by ", "',
        "Ask related questions in one call",
        "ASK_DECLINED",
    ):
        assert phrase in text, phrase


async def test_a_dump_of_the_input_is_the_same_call() -> None:
    """What a UI reports of the call (ACP's raw input and title) and what re-validates a
    dumped input (a tool replaced by a reload) see the first question as `question`; the
    dump, fields at their defaults and all, asks the same."""
    parsed = AskUserQuestionInput.model_validate(CLAUDE_CODE_INPUT)
    assert parsed.question == DB_TEXT
    dump = parsed.model_dump()
    assert (dump["question"], dump["header"], dump["allow_custom"]) == (DB_TEXT, None, True)
    provider = ScriptedProvider(
        [["PostgreSQL (Recommended)", ["Audit log", "Authentication"], "Use the staging cluster"]]
    )
    result = await _context(provider).tools.execute("ask_user_question", dump)
    assert result.output == EXPECTED
    (request,) = provider.requests
    assert request.header == "Database"  # mirrored, not the dump's None

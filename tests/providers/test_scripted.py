"""ScriptedProvider: every situation a test (or CI) needs to script."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hotseam import Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    UserInteractionError,
    UserInteractionProvider,
    ask,
)
from hotseam.providers.scripted import Reply, ScriptedProvider, ScriptError

pytestmark = pytest.mark.anyio

DB = AskUserQuestionRequest(
    "Which database?",
    options=(
        AskUserQuestionOption("Postgres", "pg", recommended=True),
        AskUserQuestionOption("SQLite"),
    ),
)
NAME = AskUserQuestionRequest("What is your name?")
Option = AskUserQuestionOption


async def _ask(provider: ScriptedProvider, request: AskUserQuestionRequest) -> str:
    context = Context("scripted")
    context.provide(USER_INTERACTION, provider)
    return (await ask(request, context=context)).answer


async def test_it_is_a_user_interaction_provider() -> None:
    """It satisfies the seam's protocol."""
    assert isinstance(ScriptedProvider(), UserInteractionProvider)


async def test_a_list_answers_in_order_matching_labels_and_values() -> None:
    """Strings pick an option by label or value (case-insensitive), else are custom text."""
    provider = ScriptedProvider(["sqlite", "PG", "MySQL", "Ada"])
    assert [await _ask(provider, DB) for _ in range(3)] == ["SQLite", "pg", "MySQL"]
    assert await _ask(provider, NAME) == "Ada"
    assert provider.requests == [DB, DB, DB, NAME]


async def test_a_string_names_an_option_as_a_human_would() -> None:
    """The matcher every surface uses: a number, spacing and a "(Recommended)" suffix are
    read as a human typing them would be; text naming two options is neither (custom)."""
    provider = ScriptedProvider(["2", "  postgres  (recommended) ", "3"])
    assert [await _ask(provider, DB) for _ in range(3)] == ["SQLite", "pg", "3"]
    crossed = AskUserQuestionRequest(
        "Which?", options=(Option("Alpha", "beta"), Option("Beta", "b"))
    )
    assert await _ask(ScriptedProvider(["BETA"]), crossed) == "BETA"
    assert await _ask(ScriptedProvider([Reply.choose("alpha")]), crossed) == "beta"


async def test_a_mapping_answers_by_question_text() -> None:
    """Keyed by question; a list answers repeated asks in turn."""
    provider = ScriptedProvider({"Which database?": ["Postgres", "SQLite"], NAME.question: "Ada"})
    assert await _ask(provider, NAME) == "Ada"
    assert await _ask(provider, DB) == "pg"
    assert await _ask(provider, DB) == "SQLite"


async def test_a_callable_answers_sync_or_async() -> None:
    """The script can be computed from the request."""

    async def answer(request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        await anyio.sleep(0)
        return AskUserQuestionAnswer(request.question[::-1])

    assert await _ask(ScriptedProvider(lambda r: r.question.upper()), NAME) == NAME.question.upper()
    assert await _ask(ScriptedProvider(answer), NAME) == NAME.question[::-1]


async def test_replies_choose_by_position_label_and_recommendation() -> None:
    """Reply.choose and Reply.recommended resolve against the request's options."""
    provider = ScriptedProvider([Reply.choose(2), Reply.choose("postgres"), Reply.recommended()])
    assert [await _ask(provider, DB) for _ in range(3)] == ["SQLite", "pg", "pg"]


async def test_replies_that_do_not_fit_fail_clearly() -> None:
    """A scripted reply that cannot apply is PROVIDER_FAILED naming the question."""
    for reply in (Reply.choose(5), Reply.choose("MySQL")):
        with pytest.raises(UserInteractionError) as caught:
            await _ask(ScriptedProvider([reply]), DB)
        assert caught.value.code == ErrorCode.PROVIDER_FAILED
        assert "Which database?" in str(caught.value)
    with pytest.raises(UserInteractionError, match="none is"):
        await _ask(ScriptedProvider([Reply.recommended()]), NAME)


async def test_failures_with_a_given_code() -> None:
    """Reply.fail raises the code a UI would."""
    provider = ScriptedProvider(
        [Reply.fail(ErrorCode.ASK_DECLINED), Reply.fail(ErrorCode.ASK_CANCELLED, "closed")]
    )
    for code in (ErrorCode.ASK_DECLINED, ErrorCode.ASK_CANCELLED):
        with pytest.raises(UserInteractionError) as caught:
            await _ask(provider, NAME)
        assert caught.value.code == code


async def test_an_exhausted_script_says_so() -> None:
    """Running out of answers is a clear failure, not a hang."""
    provider = ScriptedProvider(["one"])
    await _ask(provider, NAME)
    with pytest.raises(UserInteractionError, match=r"no scripted answer left \(1 were scripted"):
        await _ask(provider, NAME)


async def test_a_default_reply_covers_the_rest() -> None:
    """default= answers whatever the script does not."""
    provider = ScriptedProvider(["first"], default="later")
    assert [await _ask(provider, NAME) for _ in range(3)] == ["first", "later", "later"]


async def test_hold_until_released() -> None:
    """A held question is recorded at once and answered after release()."""
    provider = ScriptedProvider(["Ada"])
    provider.hold()
    answers: list[str] = []
    async with anyio.create_task_group() as tg:

        async def asker() -> None:
            answers.append(await _ask(provider, NAME))

        tg.start_soon(asker)
        assert await provider.wait_for_requests(1) == NAME
        await anyio.sleep(0.01)
        assert answers == []
        provider.release()
    assert answers == ["Ada"]


async def test_never_answers_until_cancelled_and_records_the_cancellation() -> None:
    """Reply.never waits; cancellation is recorded in provider.cancelled."""
    provider = ScriptedProvider([Reply.never()])
    with anyio.move_on_after(0.02) as scope:
        await _ask(provider, NAME)
    assert scope.cancelled_caught
    assert provider.cancelled == [NAME]


async def test_push_appends_replies() -> None:
    """Scripts can grow while a test runs."""
    provider = ScriptedProvider()
    provider.push("late")
    assert await _ask(provider, NAME) == "late"


class TestAnswersFile:
    async def test_a_list_file(self, tmp_path: Path) -> None:
        """Every entry form loads from JSON."""
        path = tmp_path / "answers.json"
        path.write_text(
            json.dumps(
                {
                    "answers": [
                        "SQLite",
                        {"text": "pg"},
                        {"option": 1},
                        {"recommended": True},
                        {"error": "ASK_DECLINED", "message": "not today"},
                    ]
                }
            )
        )
        provider = ScriptedProvider.from_file(path)
        assert provider.name == "answers.json"
        assert [await _ask(provider, DB) for _ in range(4)] == ["SQLite", "pg", "pg", "pg"]
        with pytest.raises(UserInteractionError, match="not today") as caught:
            await _ask(provider, DB)
        assert caught.value.code == ErrorCode.ASK_DECLINED

    async def test_a_mapping_file(self, tmp_path: Path) -> None:
        """An object keyed by question text."""
        path = tmp_path / "answers.json"
        path.write_text(json.dumps({"What is your name?": "Ada", "Which database?": ["SQLite"]}))
        provider = ScriptedProvider.from_file(path)
        assert await _ask(provider, DB) == "SQLite"
        assert await _ask(provider, NAME) == "Ada"

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            ('{"answers": [\n  "a",\n  oops\n]}', "answers.json:3:3: not valid JSON"),
            ('"just a string"', "expected a list of answers"),
            ('["a", 7]', "answers[1]: expected a string or an object, got int"),
            ('[{"opton": 2}]', "answers[0]: an answer object needs exactly one of"),
            ('[{"text": "a", "option": 1}]', "found option, text"),
            ('[{"option": true}]', "'option' must be a 1-based number or a label, got true"),
            ('[{"error": "NOPE"}]', "unknown error code 'NOPE'"),
            ('{"Q?": [1]}', 'answers["Q?"][0]: expected a string'),
        ],
    )
    async def test_bad_files_name_the_file_and_entry(
        self, tmp_path: Path, content: str, message: str
    ) -> None:
        """A malformed answers file is a ScriptError naming file, line or entry."""
        path = tmp_path / "answers.json"
        path.write_text(content)
        with pytest.raises(ScriptError) as caught:
            ScriptedProvider.from_file(path)
        assert message in str(caught.value)
        assert str(path) in str(caught.value)
        assert caught.value.code == "INVALID_SCRIPT"

    async def test_a_missing_file(self, tmp_path: Path) -> None:
        """A missing file names itself."""
        with pytest.raises(ScriptError, match="cannot read the answers file"):
            ScriptedProvider.from_file(tmp_path / "missing.json")


# -- several questions in one ask ----------------------------------------------------------------

STACK = AskUserQuestionRequest.of(
    [
        Question("Which database?", options=[Option("Postgres", "pg"), Option("SQLite")], id="db"),
        Question(
            "Which features?",
            options=[Option("Auth", "auth", recommended=True), Option("Billing"), Option("Search")],
            multi_select=True,
            id="features",
        ),
        Question("Anything else?", id="notes", allow_skip=True),
    ]
)
FEATURES_ONLY = AskUserQuestionRequest.of([STACK.questions[1]])


async def _answers(provider: ScriptedProvider, request: AskUserQuestionRequest) -> list[object]:
    """Each question's answer (None when skipped) of one ask."""
    context = Context("scripted")
    context.provide(USER_INTERACTION, provider)
    answer = await ask(request, context=context)
    return [entry.answer if entry.skipped is None else entry.skipped for entry in answer.answers]


class TestSeveralQuestions:
    async def test_it_shows_several_questions_at_once(self) -> None:
        """multiple_questions: the whole ask reaches it as one request."""
        provider = ScriptedProvider([["pg", ["auth"], "no"]])
        assert ScriptedProvider.multiple_questions is True
        await _answers(provider, STACK)
        assert [len(request.questions) for request in provider.requests] == [3]

    async def test_in_question_order_by_id_and_by_question_text(self) -> None:
        """A list in question order, an object by id, a script keyed by each question's text."""
        in_order = ScriptedProvider([["Postgres", ["search", "Auth"], {"skip": True}]])
        assert await _answers(in_order, STACK) == ["pg", "auth, Search", "skipped"]
        by_id = ScriptedProvider([{"notes": "none", "db": {"option": 2}, "features": []}])
        with pytest.raises(UserInteractionError, match=r"0 selections"):
            await _answers(by_id, STACK)  # min_selections defaults to 1
        by_id = ScriptedProvider([{"notes": "none", "db": {"option": 2}, "features": "Billing"}])
        assert await _answers(by_id, STACK) == ["SQLite", "Billing", "none"]
        by_text = ScriptedProvider(
            {
                "Which database?": "SQLite",
                "Which features?": [["Billing", "Dark mode"]],
                "Anything else?": {"skip": "dismissed"},
            }
        )
        assert await _answers(by_text, STACK) == ["SQLite", "Billing, Dark mode", "dismissed"]

    async def test_a_list_is_the_choices_of_a_single_multi_select_question(self) -> None:
        """[["auth", "billing"]]: the selection; {"recommended": true}: every recommended."""
        provider = ScriptedProvider([["Billing", "auth"], {"recommended": True}, "Search"])
        assert [await _answers(provider, FEATURES_ONLY) for _ in range(3)] == [
            ["auth, Billing"],
            ["auth"],
            ["Search"],
        ]

    async def test_the_python_replies(self) -> None:
        """Reply.each / select / by_question_id / skip, and plain lists and dicts."""
        provider = ScriptedProvider(
            [
                Reply.each("SQLite", Reply.select("Search", Reply.choose(1)), Reply.skip()),
                Reply.by_question_id({"db": "pg", "features": "Billing", "notes": "later"}),
                {"db": "pg", "features": ["Billing", "Search"], "notes": Reply.skip("dismissed")},
            ]
        )
        assert await _answers(provider, STACK) == ["SQLite", "auth, Search", "skipped"]
        assert await _answers(provider, STACK) == ["pg", "Billing", "later"]
        assert await _answers(provider, STACK) == ["pg", "Billing, Search", "dismissed"]

    async def test_a_declining_question_declines_the_whole_ask(self) -> None:
        """An error reply for one question is the UI's error for the ask."""
        provider = ScriptedProvider([["pg", {"error": "ASK_DECLINED"}, "x"]])
        with pytest.raises(UserInteractionError) as caught:
            await _answers(provider, STACK)
        assert caught.value.code == ErrorCode.ASK_DECLINED

    @pytest.mark.parametrize(
        ("script", "message"),
        [
            (["pg"], "gives one answer to an ask of 3 questions"),
            ([["pg", "auth"]], "gives 2 answers to an ask of 3 questions"),
            ([{"db": "pg", "features": "auth"}], "has no answer for question 'notes'"),
            ([{"db": "pg", "feature": "auth", "notes": "x"}], "unknown question ids 'feature'"),
            ([["pg", ["one", "two"], "x"]], "gives 'features' more than one custom text"),
            (
                [[["pg", "SQLite"], "auth", "x"]],
                "questions[0] (Which database?): 2 selections, but the question takes exactly one",
            ),
            ({"Which database?": "pg"}, "has no scripted answer for 'Which features?'"),
        ],
    )
    async def test_replies_that_do_not_fit_fail_naming_what(
        self, script: Any, message: str
    ) -> None:
        """PROVIDER_FAILED (or INVALID_ANSWER) saying what the script got wrong."""
        with pytest.raises(UserInteractionError) as caught:
            await _answers(ScriptedProvider(script), STACK)
        assert message in str(caught.value)

    async def test_a_script_error_in_python_is_raised_at_once(self) -> None:
        """A malformed list or dict in a Python script names its entry when built."""
        with pytest.raises(ScriptError, match=r"<script>: answers\[1\]\[0\]: 'skip' must be"):
            ScriptedProvider(["a", [{"skip": 3}]])


class TestSeveralQuestionsFile:
    async def test_a_file_of_asks_of_several_questions(self, tmp_path: Path) -> None:
        """The module docstring's example loads and answers."""
        path = tmp_path / "answers.json"
        path.write_text(
            json.dumps(
                {
                    "answers": [
                        ["Postgres", ["auth", "billing"], {"skip": True}],
                        {"db": "SQLite", "features": ["Search"], "notes": "none"},
                        ["auth", "billing"],
                        [["Search"]],
                    ]
                }
            )
        )
        provider = ScriptedProvider.from_file(path)
        assert await _answers(provider, STACK) == ["pg", "auth, Billing", "skipped"]
        assert await _answers(provider, STACK) == ["SQLite", "Search", "none"]
        assert await _answers(provider, FEATURES_ONLY) == ["auth, Billing"]
        assert await _answers(provider, FEATURES_ONLY) == ["Search"]  # in question order

    @pytest.mark.parametrize(
        ("content", "message"),
        [
            ('[[["a", ["b"]]]]', "answers[0][0][1]: a list inside a list of choices"),
            (
                '[{"db": 3}]',
                "answers[0]: an answer object needs exactly one of text, option, recommended, "
                "error, never, skip (plus 'message' with 'error'); found db; or, read as "
                'answers by question id: ["db"]: expected a string or an object, got int',
            ),
            (
                '[{"db": {"features": "x"}}]',
                'found db; or, read as answers by question id: ["db"]: an answer object needs',
            ),
            ('[{"skip": 1}]', 'answers[0]: \'skip\' must be true, "skipped" or "dismissed"'),
            ('[{"skip": true, "text": "x"}]', "found skip, text"),
            ('{"Q?": [[1]]}', 'answers["Q?"][0][0]: expected a string or an object, got int'),
        ],
    )
    async def test_bad_entries_name_the_file_and_entry(
        self, tmp_path: Path, content: str, message: str
    ) -> None:
        """A ScriptError naming the file and the entry, as for one question."""
        path = tmp_path / "answers.json"
        path.write_text(content)
        with pytest.raises(ScriptError) as caught:
            ScriptedProvider.from_file(path)
        assert str(caught.value).startswith(f"{path}: ")
        assert message in str(caught.value)
        assert caught.value.code == "INVALID_SCRIPT"


async def test_a_list_in_a_python_script_is_the_choices_of_a_multi_select_question() -> None:
    """What a test author writes first: ``Reply.each("SQLite", ["auth", "search"], ...)``
    (a list for the several choices) answers the ask; anything else is refused when the
    reply is built, not with a crash inside the provider."""
    from hotseam.interaction import AskUserQuestionOption as Option
    from hotseam.interaction import Question, validate_request

    request = validate_request(
        AskUserQuestionRequest.of(
            [
                Question("Which database?", options=[Option("Postgres"), Option("SQLite")]),
                Question(
                    "Which features?",
                    options=[Option("auth"), Option("billing"), Option("search")],
                    multi_select=True,
                ),
            ]
        )
    )
    provider = ScriptedProvider([Reply.each("SQLite", ["auth", "search"])])
    answer = await provider.ask(request)
    assert [entry.answer for entry in answer.answers] == ["SQLite", "auth, search"]
    with pytest.raises(TypeError, match="a text, a Reply or a list of them, got int"):
        Reply.each("SQLite", 3)  # type: ignore[arg-type]

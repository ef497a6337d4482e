"""The pytest plugin and ReloadDriver with asks of several questions, unchanged: a user's
test file run by pytester (strict mode and the leak check on), as users meet them."""

from __future__ import annotations

import pytest
from tests._pytester import run_pytest
from tests._timing import scaled

pytest_plugins = ["pytester"]

USER_TESTS = '''
import anyio
import pytest

from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    ask,
    ask_user_question_tool,
)
from hotseam.testing import assert_generation_active, assert_no_provider

pytestmark = pytest.mark.anyio

# A one-question UI, as most providers are: asked the questions one by one.
MY_UI = """
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer


class CannedUI:
    async def ask(self, request):
        option = request.recommended or request.choices[0]
        return AskUserQuestionAnswer(option.model_value, option)


def setup(scope):
    scope.provide(USER_INTERACTION, CannedUI())
"""

STACK = AskUserQuestionRequest.of([
    Question("Which database?", options=[AskUserQuestionOption("SQLite"),
             AskUserQuestionOption("Postgres", recommended=True)]),
    Question("Which features?", multi_select=True,
             options=[AskUserQuestionOption("auth"), AskUserQuestionOption("billing")]),
])


async def test_a_reloaded_one_question_ui_answers_an_ask_of_several(
    hotseam_reloader, hotseam_context
):
    status = await hotseam_reloader.load("my_ui.py", MY_UI)  # strict: set up, unload, set up
    answer = await ask(STACK, context=hotseam_context)
    assert [entry.answer for entry in answer.answers] == ["Postgres", "auth"]

    hotseam_reloader.write("my_ui.py", MY_UI.replace("request.recommended or ", ""))
    (await hotseam_reloader.reload("my_ui.py")).raise_for_errors()
    assert_generation_active(hotseam_reloader, "my_ui.py", status.generation + 1)
    answer = await ask(STACK, context=hotseam_context)
    assert [entry.answer for entry in answer.answers] == ["SQLite", "auth"]

    hotseam_reloader.delete("my_ui.py")
    await hotseam_reloader.reload()
    assert_no_provider(hotseam_context, USER_INTERACTION)


async def test_the_scripted_human_answers_claude_codes_shape(
    hotseam_scope, hotseam_context, hotseam_provider
):
    hotseam_scope.register_tool(ask_user_question_tool())
    hotseam_provider.push(["Postgres", ["billing", "auth"]])
    result = await hotseam_context.tools.execute("ask_user_question", {"questions": [
        {"question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]},
        {"question": "Which features?", "multiSelect": True,
         "options": [{"label": "auth"}, {"label": "billing"}]},
    ]})
    assert result.output["answers"] == {
        "Which database?": "Postgres", "Which features?": "auth, billing"
    }
    (request,) = hotseam_provider.requests
    assert len(request.questions) == 2
'''


def test_the_plugin_and_the_reload_driver_serve_asks_of_several_questions(
    pytester: pytest.Pytester,
) -> None:
    """The fixtures as the testing guide shows them, with multi-question asks: both tests
    pass under --hotseam-strict and --hotseam-leak-check, on asyncio and trio."""
    pytester.makeconftest(
        """
import pytest

@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
"""
    )
    pytester.makepyfile(test_user_multi=USER_TESTS)
    result = run_pytest(pytester, "--hotseam-strict", "--hotseam-leak-check", timeout=scaled(120))
    result.assert_outcomes(passed=4)

"""The provider contract, run against every provider: one driver per surface, one table of
what a surface cannot do by design.

``surface`` gives each contract case a driver (see ``_surface``) and the anyio backend it
runs on: every backend-neutral provider runs on asyncio and trio; the ACP provider and the
terminal's prompt_toolkit path run on asyncio only (the ACP SDK is asyncio-based;
prompt_toolkit cannot run under trio). A case a surface cannot do by design is skipped,
with the reason, from :data:`CANNOT`; a case a surface fails today is ``xfail(strict)``
from :data:`DEFECTS`, naming the defect.
"""

from __future__ import annotations

from typing import Any

import pytest

from ._acp import acp_form, acp_permission
from ._mcp import mcp_legacy, mcp_modern
from ._scripted import scripted
from ._surface import Opener
from ._terminal import terminal_lines, terminal_prompt
from ._web import web

SURFACES: dict[str, tuple[Opener, tuple[str, ...]]] = {
    "scripted": (scripted, ("asyncio", "trio")),
    "terminal-lines": (terminal_lines, ("asyncio", "trio")),
    "terminal-prompt": (terminal_prompt, ("asyncio",)),
    "acp-form": (acp_form, ("asyncio",)),
    "acp-permission": (acp_permission, ("asyncio",)),
    "mcp": (mcp_legacy, ("asyncio", "trio")),
    "mcp-2026": (mcp_modern, ("asyncio", "trio")),
    "web": (web, ("asyncio", "trio")),
}
"""Each surface: its driver, and the backends it runs on."""

_TYPED = "a permission prompt offers the question's options only: nothing can be typed"
_TYPEAHEAD = (
    "a line typed with no question on screen is read by the next question (typeahead, "
    "what lets piped answers land on the questions they were typed for): a terminal "
    "cannot address a withdrawn question"
)

CANNOT: dict[tuple[str, str], str] = {
    ("test_a_typed_answer_is_returned_once_without_an_option", "acp-permission"): _TYPED,
    ("test_several_questions_answered_are_returned_once_in_question_order", "acp-permission"): (
        _TYPED + " (its several questions of choices: the one-at-a-time case)"
    ),
    ("test_the_answer_text_is_in_no_log_line_above_debug", "acp-permission"): _TYPED,
    ("test_the_answer_text_is_in_no_log_line_when_asked_again_after_a_reload", "acp-permission"): (
        _TYPED
    ),
    ("test_a_late_answer_to_a_withdrawn_question_reaches_no_one", "terminal-lines"): _TYPEAHEAD,
    ("test_a_late_answer_to_a_withdrawn_question_reaches_no_one", "terminal-prompt"): _TYPEAHEAD,
    ("test_a_late_answer_is_not_the_answer_of_the_same_question_asked_afresh", "terminal-lines"): (
        _TYPEAHEAD
    ),
    (
        "test_a_late_answer_is_not_the_answer_of_the_same_question_asked_afresh",
        "terminal-prompt",
    ): _TYPEAHEAD,
}
"""(case, surface): why the surface cannot do the case by design."""


_NO_MESSAGE = (
    "2026-07-28 has no message from server to client: a withdrawal reaches the client only "
    "as the result of its retry, and a question asked again after a reload keeps its key, "
    "so the form already shown answers it (it is not shown again)"
)
for _case in (
    "test_a_question_the_agent_stops_waiting_for_is_withdrawn_from_the_surface",
    "test_a_late_answer_to_a_withdrawn_question_reaches_no_one",
    "test_a_late_answer_is_not_the_answer_of_the_same_question_asked_afresh",
    "test_a_question_waiting_when_its_generation_is_disposed_is_asked_again_once",
    "test_a_reload_in_the_middle_of_an_ask_of_several_keeps_the_answers_given",
    "test_the_answer_text_is_in_no_log_line_when_asked_again_after_a_reload",
):
    CANNOT[_case, "mcp-2026"] = _NO_MESSAGE

DEFECTS: dict[tuple[str, str], str] = {}
"""(case, surface): the defect that makes the surface fail the case today (strict xfail)."""


_PARAMS = [
    pytest.param((name, backend), id=f"{name}-{backend}")
    for name, (_, backends) in SURFACES.items()
    for backend in backends
]


@pytest.fixture(params=_PARAMS)
def surface_and_backend(request: pytest.FixtureRequest) -> tuple[str, str]:
    """Each surface on each backend it runs on."""
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def anyio_backend(surface_and_backend: tuple[str, str]) -> tuple[str, dict[str, Any]]:
    """The backend of this surface's run (asyncio in debug mode, as the suite's is)."""
    backend = surface_and_backend[1]
    return (backend, {"debug": True} if backend == "asyncio" else {})


@pytest.fixture
def surface(surface_and_backend: tuple[str, str]) -> Opener:
    """The driver of this run's surface: ``async with surface() as s:``."""
    return SURFACES[surface_and_backend[0]][0]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each (case, surface) of the tables: skipped with its reason, or strict xfail."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "surface_and_backend" not in callspec.params:
            continue
        name = callspec.params["surface_and_backend"][0]
        case = getattr(item, "originalname", item.name)
        if (case, name) in CANNOT:
            item.add_marker(pytest.mark.skip(reason=f"{name} cannot: {CANNOT[case, name]}"))
        if (case, name) in DEFECTS:
            item.add_marker(pytest.mark.xfail(strict=True, reason=DEFECTS[case, name]))

"""The session/request_permission fallback, as pure mapping: no loop."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import RequestPermissionRequest

from hotseam.interaction import (
    ASK_CANCELLED,
    INVALID_ANSWER,
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    UserInteractionError,
)
from hotseam.providers._acp._permission import build_permission_form, fits_permission

YES = AskUserQuestionOption("Yes", "yes", "Ship it to staging", recommended=True)
NO = AskUserQuestionOption("No")
DEPLOY = AskUserQuestionRequest("Deploy now?", "Deploy", (YES, NO), allow_custom=False)


def test_only_closed_questions_fit() -> None:
    """Options and no custom answers: a permission request cannot carry free text."""
    assert fits_permission(DEPLOY)
    assert not fits_permission(AskUserQuestionRequest("Deploy now?", options=(YES, NO)))
    assert not fits_permission(AskUserQuestionRequest("Why?", allow_custom=False))
    with pytest.raises(ValueError, match="no custom answers"):
        build_permission_form(AskUserQuestionRequest("Why?"))


def test_params() -> None:
    """Option ids are the model values; the recommended one is marked in its name."""
    params = build_permission_form(DEPLOY).params("sess_1", "tc_1")
    assert params == {
        "sessionId": "sess_1",
        "toolCall": {
            "toolCallId": "tc_1",
            "title": "Deploy: Deploy now?",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "Yes: Ship it to staging"}}
            ],
        },
        "options": [
            {"optionId": "yes", "name": "Yes (Recommended)", "kind": "allow_once"},
            {"optionId": "No", "name": "No", "kind": "allow_once"},
        ],
    }
    RequestPermissionRequest.model_validate(params)


def test_a_question_outside_a_tool_call_gets_its_own_id() -> None:
    """A permission request always names a tool call."""
    request = AskUserQuestionRequest("Sure?", options=(NO,), allow_custom=False)
    tool_call = build_permission_form(request).params("sess_1")["toolCall"]
    assert tool_call["toolCallId"].startswith("ask_")
    assert tool_call == {"toolCallId": tool_call["toolCallId"], "title": "Sure?"}


def test_selected() -> None:
    """The selected option is the answer."""
    result = {"outcome": {"outcome": "selected", "optionId": "yes"}}
    assert build_permission_form(DEPLOY).read(result) == AskUserQuestionAnswer("yes", YES)


def test_cancelled() -> None:
    """Outcome cancelled → ASK_CANCELLED."""
    with pytest.raises(UserInteractionError) as caught:
        build_permission_form(DEPLOY).read({"outcome": {"outcome": "cancelled"}})
    assert caught.value.code == ASK_CANCELLED


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            {"outcome": {"outcome": "selected", "optionId": "maybe"}},
            "outcome.optionId is none of the offered options ('yes', 'No') (an id of 5 characters)",
        ),
        ({"outcome": {"outcome": "selected"}}, "outcome.selected.optionId: Field required"),
        ({}, "outcome: Field required"),
        ("yes", "the result must be an object, got string"),
    ],
)
def test_what_does_not_fit_is_named(result: Any, message: str) -> None:
    """INVALID_ANSWER naming the field."""
    with pytest.raises(UserInteractionError) as caught:
        build_permission_form(DEPLOY).read(result)
    assert caught.value.code == INVALID_ANSWER
    assert message in caught.value.message

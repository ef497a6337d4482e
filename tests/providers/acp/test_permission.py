"""The session/request_permission fallback, as pure mapping: no loop."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import RequestPermissionRequest

from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    UserInteractionError,
)
from hotseam.providers._acp._permission import (
    CUSTOM_DROPPED,
    build_permission_form,
    fits_permission,
    is_negative,
)

YES = AskUserQuestionOption("Yes", "yes", "Ship it to staging", recommended=True)
NO = AskUserQuestionOption("No")
DEPLOY = AskUserQuestionRequest("Deploy now?", "Deploy", (YES, NO), allow_custom=False)


def test_every_question_with_options_fits() -> None:
    """Options, custom answers allowed or not: a permission request carries them."""
    assert fits_permission(DEPLOY)
    assert fits_permission(AskUserQuestionRequest("Deploy now?", options=(YES, NO)))
    assert not fits_permission(AskUserQuestionRequest("Why?", allow_custom=False))
    with pytest.raises(ValueError, match="only a question with options"):
        build_permission_form(AskUserQuestionRequest("Why?"))


def test_params() -> None:
    """Option ids are the model values; the recommended one is marked in its name; "No" is
    a reject_once; descriptions are a Markdown list, one per line."""
    wait = AskUserQuestionOption("No", description="Wait for Monday")
    request = AskUserQuestionRequest("Deploy now?", "Deploy", (YES, wait), allow_custom=False)
    params = build_permission_form(request).params("sess_1", "tc_1")
    assert params == {
        "sessionId": "sess_1",
        "toolCall": {
            "toolCallId": "tc_1",
            "title": "Deploy: Deploy now?",
            "content": [
                {
                    "type": "content",
                    "content": {
                        "type": "text",
                        "text": "- **Yes**: Ship it to staging\n- **No**: Wait for Monday",
                    },
                }
            ],
        },
        "options": [
            {"optionId": "yes", "name": "Yes (Recommended)", "kind": "allow_once"},
            {"optionId": "No", "name": "No", "kind": "reject_once"},
        ],
    }
    RequestPermissionRequest.model_validate(params)


def test_a_dropped_custom_answer_is_said_in_the_prompt() -> None:
    """Custom answers allowed: the choice is gone on this client, and the prompt says so."""
    request = AskUserQuestionRequest("Deploy now?", options=(YES, NO))
    (content,) = build_permission_form(request).params("sess_1", "tc_1")["toolCall"]["content"]
    assert content["content"]["text"] == (f"- **Yes**: Ship it to staging\n\n{CUSTOM_DROPPED}")
    assert "write your own" in CUSTOM_DROPPED


@pytest.mark.parametrize(
    ("label", "value", "negative"),
    [
        ("No", None, True),
        ("no.", None, True),
        ("Nope", None, True),
        ("Cancel", None, True),
        ("Don't deploy", None, True),
        ("Don\u2019t deploy", None, True),
        ("Do not deploy", None, True),
        ("Reject the change", None, True),
        ("Skip", None, True),
        ("Later", "no", True),
        ("Yes", None, False),
        ("Node.js", None, False),
        ("Nothing fancy", None, False),
        ("Now", None, False),
        ("Notify me", None, False),
        ("Balanced", "balanced", False),
        ("Stopwatch", None, False),
    ],
)
def test_only_clearly_negative_options_are_rejections(
    label: str, value: str | None, negative: bool
) -> None:
    """The first word decides ("Node.js" and "Now" are not "No")."""
    assert is_negative(AskUserQuestionOption(label, value)) is negative


def test_markdown_in_labels_cannot_break_the_list() -> None:
    """A label with * or _ is escaped inside the bold span."""
    odd = AskUserQuestionOption("a*b_c", description="d")
    request = AskUserQuestionRequest("?", options=(odd,), allow_custom=False)
    (content,) = build_permission_form(request).params("s", "t")["toolCall"]["content"]
    assert content["content"]["text"] == "- **a\\*b\\_c**: d"


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
    assert caught.value.code == ErrorCode.ASK_CANCELLED


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
    assert caught.value.code == ErrorCode.INVALID_ANSWER
    assert message in caught.value.message

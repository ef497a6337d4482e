"""The fallback for clients without form elicitation: a question as ``session/request_permission``.

Every ACP client answers a permission request, by picking one option: so it carries the
questions with options (a custom-answer choice dropped, and a multi-select question taking
one, each said in the prompt; "Skip" added for a question that may be skipped). A clearly
negative option is ``reject_once`` so that clients style it as a refusal; descriptions are
a Markdown list in the tool call's content (Toad renders Markdown, joining single lines)::

    {"sessionId": "sess_1",
     "toolCall": {"toolCallId": "tc_1", "title": "Deploy: Deploy the service now?",
                  "content": [{"type": "content", "content": {"type": "text",
                               "text": "- **Yes**: Ship it\n- **No**: Wait"}}]},
     "options": [{"optionId": "yes", "name": "Yes (Recommended)", "kind": "allow_once"},
                 {"optionId": "no", "name": "No", "kind": "reject_once"}]}

The outcome ``cancelled`` is the human (or ``session/cancel``) dismissing the question.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from acp.helpers import text_block, tool_content
from acp.schema import (
    AllowedOutcome,
    PermissionOption,
    RequestPermissionRequest,
    RequestPermissionResponse,
    ToolCallUpdate,
)
from pydantic import ValidationError

from ..._core import format_validation_error
from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    QuestionAnswer,
    UserInteractionError,
)
from .._kit import RECOMMENDED_SUFFIX, type_name, unused_value
from ._conversation import escape_markdown

REQUEST_PERMISSION = "session/request_permission"
CUSTOM_DROPPED = (
    "_This client cannot take a typed answer here, so the option to write your own is left "
    "out: choose one of the options._"
)
ONE_CHOICE = (
    "_This question takes several choices, but this client can take one here: choose the "
    "one that matters most._"
)
SKIP_NAME = "Skip"
_SKIP_ID = "_skip"

# First words that make an option a refusal. Kept short on purpose: a wrong "reject" kind
# on a positive option would mislead more than a missing one on a negative option.
_NEGATIVE = frozenset(
    {
        "no",
        "nope",
        "not",
        "don't",
        "dont",
        "do not",
        "never",
        "cancel",
        "reject",
        "deny",
        "decline",
        "abort",
        "stop",
        "skip",
        "refuse",
        "disallow",
    }
)


def fits_permission(request: AskUserQuestionRequest) -> bool:
    """True when a permission request can carry the request: one question, with options,
    that one choice can answer (a multi-select question that needs two or more cannot)."""
    (question, *more) = request.questions
    return not more and not question.is_free_form and question.selection_range[0] <= 1


def is_negative(option: AskUserQuestionOption) -> bool:
    """True for an option that clearly refuses ("No", "Cancel", "Don't deploy"...)."""
    for text in (option.label, option.model_value):
        words = text.strip().lower().replace("\u2019", "'").split()
        if not words:
            continue
        first = words[0].rstrip(".,!:;")
        if first in _NEGATIVE or " ".join(words[:2]).rstrip(".,!:;") in _NEGATIVE:
            return True
    return False


@dataclass(frozen=True, slots=True)
class PermissionForm:
    """One question as a permission request, and how to read the outcome back."""

    request: AskUserQuestionRequest

    def params(self, session_id: str, tool_call_id: str | None = None) -> dict[str, Any]:
        """The ``session/request_permission`` params (outside a tool call, a fresh id: a
        permission request always names one)."""
        request = self.request
        question = request.questions[0]
        options = [
            PermissionOption(
                option_id=option.model_value,
                name=option.label + (RECOMMENDED_SUFFIX if option.recommended else ""),
                kind="reject_once" if is_negative(option) else "allow_once",
            )
            for option in request.choices
        ]
        if question.allow_skip:
            options.append(
                PermissionOption(option_id=self.skip_id, name=SKIP_NAME, kind="reject_once")
            )
        lines = [
            f"- **{escape_markdown(option.label)}**: {option.description}"
            for option in request.choices
            if option.description is not None
        ]
        notes = [ONE_CHOICE] if question.is_multi_select else []
        if request.allow_custom:
            notes.append(CUSTOM_DROPPED)
        if notes:
            lines.append(("\n" if lines else "") + "\n".join(notes))
        title = (
            request.question if request.header is None else f"{request.header}: {request.question}"
        )
        tool_call = ToolCallUpdate(
            tool_call_id=tool_call_id or f"ask_{uuid.uuid4().hex[:12]}",
            title=title,
            content=[tool_content(text_block("\n".join(lines)))] if lines else None,
        )
        params = RequestPermissionRequest(
            session_id=session_id, tool_call=tool_call, options=options
        )
        return params.model_dump(mode="json", by_alias=True, exclude_none=True)

    def read(self, result: object) -> AskUserQuestionAnswer:
        """Turn the client's ``session/request_permission`` result into an answer.

        Raises:
            UserInteractionError: ``ASK_CANCELLED`` (outcome ``cancelled``) or
                ``INVALID_ANSWER`` naming what does not fit.
        """
        if not isinstance(result, dict):
            raise _invalid(f"the result must be an object, got {type_name(result)}")
        try:
            response = RequestPermissionResponse.model_validate(result)
        except ValidationError as invalid:
            raise _invalid(format_validation_error(invalid)) from None
        outcome = response.outcome
        if not isinstance(outcome, AllowedOutcome):
            raise UserInteractionError(
                "the human dismissed the question (the ACP client answered the permission "
                "request with outcome 'cancelled')",
                ErrorCode.ASK_CANCELLED,
            )
        question = self.request.questions[0]
        if question.allow_skip and outcome.option_id == self.skip_id:
            return AskUserQuestionAnswer.of([QuestionAnswer.skip(question)], self.request)
        option = self.request.option_for(outcome.option_id)
        if option is None:
            offered = ", ".join(repr(o.model_value) for o in self.request.choices)
            raise _invalid(  # the id is described, never quoted: errors reach the logs
                f"outcome.optionId is none of the offered options ({offered}) (an id of "
                f"{len(outcome.option_id)} characters)"
            )
        return AskUserQuestionAnswer.of([QuestionAnswer.chosen(question, (option,))], self.request)

    @property
    def skip_id(self) -> str:
        """The ``optionId`` of "Skip": one that no option of the question uses."""
        return unused_value(self.request.questions[0], _SKIP_ID)


def build_permission_form(request: AskUserQuestionRequest) -> PermissionForm:
    """Map a question with options onto a permission request (custom answers dropped)."""
    if not fits_permission(request):
        raise ValueError(
            "only a question with options, one of which can answer it, fits a permission request"
        )
    return PermissionForm(request)


def _invalid(problem: str) -> UserInteractionError:
    return UserInteractionError(
        f"the ACP client's answer to the permission request does not fit the question: {problem}",
        ErrorCode.INVALID_ANSWER,
    )

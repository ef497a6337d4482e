"""An approval asked in the seed's vocabulary, and the answer read back as a decision.

An approval is asked through the user-interaction seam like any question, so that every
provider can answer it: :func:`approval_request` builds an ordinary request — a choice of the
decisions offered, and a free-text question for the reason, the response or the edited
arguments — and attaches the :class:`~._approval.Approval` itself (``request.approval``)
for a provider that renders approvals its own way. :func:`read_decision` reads any answer
back the same way (edited arguments re-validated against the tool's input model) and binds
the decision to the digest of the call it lets run.
"""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

from ._approval import Approval, ApprovalDecision, Decision, call_digest, canonical_json
from ._model import AskUserQuestionOption, AskUserQuestionRequest, Question

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ._model import AskUserQuestionAnswer

_LABELS = {
    Decision.APPROVE: ("Approve", "run the call as shown"),
    Decision.EDIT: ("Edit", "run it with the arguments typed below (JSON)"),
    Decision.REJECT: ("Reject", "do not run it; the text below tells the model why"),
    Decision.RESPOND: ("Respond", "do not run it; the text below is its result"),
    Decision.ALWAYS: ("Always allow", "run it, and every later call of this tool, unasked"),
    Decision.NEVER: ("Always reject", "refuse it and every later call of this tool"),
}

DECISION_ID = "decision"
"""The id of the question that offers the decisions."""
TEXT_ID = "text"
"""The id of the free-text question: a reason, a response, or the edited arguments."""


def approval_request(approval: Approval, *, note: str | None = None) -> AskUserQuestionRequest:
    """The request that asks ``approval`` in the seed's vocabulary (``request.approval`` is
    ``approval``): the decisions as options of one question, and a free-text question for
    what goes with them. ``note`` says why an earlier answer was refused."""
    reason = f" ({approval.reason})" if approval.reason else ""
    asked = f"Allow {approval.describe()}?{reason}"
    if note:
        asked = f"{asked}\n{note}"
    questions = [
        Question(
            asked, "Approval", _options(approval.decisions), allow_custom=False, id=DECISION_ID
        )
    ]
    if any(item not in (Decision.APPROVE, Decision.ALWAYS) for item in approval.decisions):
        questions.append(_TEXT_QUESTION)
    return AskUserQuestionRequest.of(questions, approval=approval)


@functools.cache
def _options(decisions: tuple[Decision, ...]) -> tuple[AskUserQuestionOption, ...]:
    """The options offering ``decisions``: made once for each set offered (they are frozen,
    so every request may share them)."""
    return tuple(
        AskUserQuestionOption(label, item.value, description, recommended=item is Decision.APPROVE)
        for item in decisions
        for label, description in [_LABELS[item]]
    )


_TEXT_QUESTION = Question(
    "The reason, the response, or the edited arguments (JSON)",
    "Details",
    None,
    id=TEXT_ID,
    allow_skip=True,
)
"""The free-text question (frozen, the same in every request)."""


class ApprovalAnswerError(ValueError):
    """An answer that does not make a decision (an edit that is not valid input, a
    rejection without a reason...): the note says what to change, and it is asked again."""


def read_decision(
    approval: Approval,
    answer: AskUserQuestionAnswer,
    *,
    input_model: type[BaseModel] | None = None,
    decided_by: str | None = None,
) -> ApprovalDecision:
    """The decision ``answer`` (to :func:`approval_request`) gives.

    Raises:
        ApprovalAnswerError: an edit whose arguments are not a JSON object or not valid
            input for ``input_model``, or an edit, rejection or response without text.
    """
    by_id = {entry.id: entry for entry in answer.answers}
    chosen = by_id.get(DECISION_ID)
    value = chosen.answer if chosen is not None else answer.answer
    try:
        decision = Decision(value)
    except ValueError:
        raise ApprovalAnswerError(
            f"choose one of {[d.value for d in approval.decisions]}"
        ) from None
    if decision not in approval.decisions:
        raise ApprovalAnswerError(f"{decision.value!r} is not offered for this call")
    text_entry = by_id.get(TEXT_ID)
    text = (text_entry.answer or "").strip() if text_entry is not None else ""
    if decision in (Decision.APPROVE, Decision.ALWAYS):
        return ApprovalDecision(
            decision,
            approval.digest,
            dict(approval.arguments),
            message=text or None,
            decided_by=decided_by,
        )
    if decision is Decision.NEVER:  # the rule's reason, when given, is told to the model
        return ApprovalDecision(
            decision, approval.digest, message=text or "always rejected", decided_by=decided_by
        )
    if not text:
        needed = {
            Decision.EDIT: "the edited arguments, as a JSON object",
            Decision.REJECT: "the reason, for the model",
            Decision.RESPOND: "the response, for the model",
        }[decision]
        raise ApprovalAnswerError(f"{decision.value} needs {needed}")
    if decision is not Decision.EDIT:
        return ApprovalDecision(decision, approval.digest, message=text, decided_by=decided_by)
    edited = checked_arguments(approval.tool, text, input_model)
    return ApprovalDecision(
        decision, call_digest(approval.tool, edited), edited, decided_by=decided_by
    )


def checked_arguments(tool: str, text: str, input_model: type[BaseModel] | None) -> dict[str, Any]:
    """Edited arguments (JSON text) as canonical JSON values, valid for ``input_model`` —
    and, with a model, as it reads them (its defaults filled in, values coerced), so that
    the decision is bound to the input the tool will get.

    Raises:
        ApprovalAnswerError: naming the line and column of bad JSON, or each invalid field.
    """
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise ApprovalAnswerError(
            f"the edited arguments are not JSON: {error.msg} (line {error.lineno}, "
            f"column {error.colno})"
        ) from None
    if not isinstance(parsed, dict):
        raise ApprovalAnswerError(
            f"the edited arguments must be a JSON object, got {type(parsed).__name__}"
        )
    if input_model is not None:
        from pydantic import ValidationError

        from .._core import format_validation_error

        try:
            parsed = input_model.model_validate(parsed).model_dump(mode="json")
        except ValidationError as invalid:
            raise ApprovalAnswerError(
                f"the edited arguments are not valid input for {tool}: "
                f"{format_validation_error(invalid)}"
            ) from None
    result: dict[str, Any] = json.loads(canonical_json(parsed))
    return result

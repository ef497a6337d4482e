"""An approval as ACP's own permission request: the tool call shown, Approve or Reject.

An ask carrying ``request.approval`` is put to the client as ``session/request_permission``
titled with the call, its canonical arguments as a JSON block and the agent's reason in
the content, and the decisions as options of ACP's kinds::

    {"sessionId": "sess_1",
     "toolCall": {"toolCallId": "approve_1f…", "title": "deploy({\\"service\\":\\"api\\"})",
                  "kind": "other", "status": "pending", "rawInput": {"service": "api"},
                  "content": [{"type": "content", "content": {"type": "text",
                               "text": "**deploy** asks to run with:\\n\\n```json\\n…"}}]},
     "options": [{"optionId": "approve", "name": "Approve", "kind": "allow_once"},
                 {"optionId": "edit", "name": "Edit", "kind": "allow_once"},
                 {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
                 {"optionId": "respond", "name": "Respond", "kind": "reject_once"}]}

A permission outcome carries no text, so Edit and Respond are offered only to a client that
takes forms: choosing one asks the text as a form (the edit pre-filled with the arguments),
and the two make one answer to the approval's plain questions (``decision``, ``text``), read
by ``read_decision`` as every surface's is. A client without forms gets the questions one at
a time from ``ask()``: the ``decision`` part is the permission request, and the ``text``
part that follows in the same ask is answered from that decision (:class:`Decided`), never
put to the human. A rejection gets :data:`REJECTED_HERE` as its reason, so the model is
told something. A gate keeping rules (``HumanGate(offer_rules=True)``) also offers Always
allow and Always reject, ACP's ``allow_always`` and ``reject_always``: the decisions
``always`` and ``never``, which the gate turns into rules.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any, Literal

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
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    QuestionAnswer,
    UserInteractionError,
)
from ...interaction.approvals import (
    DECISION_ID,
    TEXT_ID,
    Approval,
    Decision,
    approval_request,
    canonical_json,
)
from .._kit import build_form, type_name
from ._conversation import escape_markdown

REJECTED_HERE = "rejected in the editor"
"""The reason a rejection gives the model: a permission outcome carries no text."""
TITLE_AT_MOST = 200
"""Characters of the call in the title; the content shows all of it."""

# The kinds say what happens to the call: it runs (allow) or it does not (reject), and
# whether a rule decides the later calls too (always: offered only by a gate keeping rules).
_Kind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]
_OPTIONS: dict[Decision, tuple[str, _Kind]] = {
    Decision.APPROVE: ("Approve", "allow_once"),
    Decision.EDIT: ("Edit", "allow_once"),
    Decision.REJECT: ("Reject", "reject_once"),
    Decision.RESPOND: ("Respond", "reject_once"),
    Decision.ALWAYS: ("Always allow", "allow_always"),
    Decision.NEVER: ("Always reject", "reject_always"),
}
_NEEDS_TEXT = (Decision.EDIT, Decision.RESPOND)


@dataclass(frozen=True, slots=True)
class ApprovalPermission:
    """An approval's request as a permission request, and its outcome read back."""

    request: AskUserQuestionRequest
    approval: Approval
    decisions: tuple[Decision, ...]
    """The decisions offered as options (Edit and Respond only with a form to follow)."""

    def params(self, session_id: str) -> dict[str, Any]:
        """The ``session/request_permission`` params. The call is a tool call of its own (a
        fresh id): one asked inside a tool call is another call than that one."""
        approval = self.approval
        title = approval.describe()
        if len(title) > TITLE_AT_MOST:
            title = title[: TITLE_AT_MOST - 1] + "…"
        tool_call = ToolCallUpdate(
            tool_call_id=f"approve_{uuid.uuid4().hex[:12]}",
            title=title,
            kind="other",
            status="pending",
            raw_input=dict(approval.arguments),
            content=[tool_content(text_block(self.text()))],
        )
        options = [
            PermissionOption(option_id=item.value, name=name, kind=kind)
            for item in self.decisions
            for name, kind in [_OPTIONS[item]]
        ]
        params = RequestPermissionRequest(
            session_id=session_id, tool_call=tool_call, options=options
        )
        return params.model_dump(mode="json", by_alias=True, exclude_none=True)

    def text(self) -> str:
        """The content: why it was asked again, the arguments as JSON, the agent's reason."""
        approval = self.approval
        arguments = json.dumps(dict(approval.arguments), indent=2, sort_keys=True)
        fence = "`" * max(3, _longest_run(arguments, "`") + 1)
        lines = []
        note = _note(self.request, approval)
        if note:
            lines += [f"_{escape_markdown(note)}_", ""]
        lines += [
            f"**{escape_markdown(approval.tool)}** asks to run with:",
            "",
            f"{fence}json",
            arguments,
            fence,
        ]
        if approval.reason:
            lines += ["", f"Reason: {approval.reason}"]
        return "\n".join(lines)

    def read(self, result: object) -> AskUserQuestionAnswer:
        """The client's result as the answer to the approval's questions; for Edit and
        Respond the text is still to come (:meth:`follow_up`).

        Raises:
            UserInteractionError: ``ASK_CANCELLED`` (outcome ``cancelled``: the human
                dismissed it) or ``INVALID_ANSWER`` naming what does not fit.
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
                f"the human dismissed the approval of {self.approval.tool!r} (the ACP client "
                "answered the permission request with outcome 'cancelled')",
                ErrorCode.ASK_CANCELLED,
            )
        decision = next((d for d in self.decisions if d.value == outcome.option_id), None)
        if decision is None:
            offered = ", ".join(repr(item.value) for item in self.decisions)
            raise _invalid(  # the id is described, never quoted: errors reach the logs
                f"outcome.optionId is none of the offered options ({offered}) (an id of "
                f"{len(outcome.option_id)} characters)"
            )
        return self._answer(decision, REJECTED_HERE if decision is Decision.REJECT else None)

    @property
    def is_part(self) -> bool:
        """True for the ``decision`` part of an ask put one question at a time: its
        ``text`` part comes next."""
        return (
            len(self.request.questions) == 1 and len(approval_request(self.approval).questions) == 2
        )

    def text_of(self, answer: AskUserQuestionAnswer) -> str | None:
        """The text that goes with ``answer``'s decision (a rejection's reason), if any."""
        return REJECTED_HERE if _decision_of(answer) == Decision.REJECT.value else None

    def follow_up(self, answer: AskUserQuestionAnswer) -> AskUserQuestionRequest | None:
        """The question for the text that ``answer``'s decision needs (Edit: the arguments,
        Respond: the response), or ``None`` when the answer is whole."""
        decision = Decision(_decision_of(answer))
        if decision not in _NEEDS_TEXT:
            return None
        approval = self.approval
        if decision is Decision.EDIT:
            asked = f"Edit the arguments of {approval.tool} (a JSON object), then accept to run it"
            header = "Edit"
        else:
            asked = (
                f"Your response instead of running {approval.tool}: the model gets it as the "
                "tool's result"
            )
            header = "Respond"
        question = Question(asked, header, None, id=TEXT_ID)
        return AskUserQuestionRequest.of([question], agent=self.request.agent)

    def prefill(self, follow_up: AskUserQuestionRequest) -> dict[str, Any] | None:
        """What the follow-up form starts with: an edit, the call's arguments."""
        if follow_up.questions[0].header != "Edit":
            return None
        (name,) = build_form(follow_up).names
        return {name: canonical_json(dict(self.approval.arguments))}

    def completed(
        self, answer: AskUserQuestionAnswer, text: AskUserQuestionAnswer
    ) -> AskUserQuestionAnswer:
        """``answer`` (Edit or Respond) with the follow-up's text."""
        return self._answer(Decision(_decision_of(answer)), text.answer or "")

    def _answer(self, decision: Decision, text: str | None) -> AskUserQuestionAnswer:
        entries = []
        for question in self.request.questions:
            if question.id == DECISION_ID:
                entries.append(QuestionAnswer.chosen(question, [decision.value]))
            elif text is None:
                entries.append(QuestionAnswer.skip(question))
            else:
                entries.append(QuestionAnswer.chosen(question, custom=text))
        return AskUserQuestionAnswer.of(entries, self.request)


class Decided:
    """The decisions made on a ``decision`` part, for the ``text`` part of the same ask
    (``current_ask().question_id``) to be answered from."""

    KEPT_AT_MOST = 256
    """Decisions kept (an ask ended between its parts never collects its own)."""

    def __init__(self) -> None:
        self._texts: dict[str, tuple[str, str | None]] = {}

    def keep(
        self, question_id: str, native: ApprovalPermission, answer: AskUserQuestionAnswer
    ) -> None:
        """Keep the text ``answer``'s decision gives the ``text`` part to come."""
        while len(self._texts) >= self.KEPT_AT_MOST:
            del self._texts[next(iter(self._texts))]
        self._texts[question_id] = (native.approval.digest, native.text_of(answer))

    def answer(
        self, question_id: str, request: AskUserQuestionRequest
    ) -> AskUserQuestionAnswer | None:
        """The answer to an approval's ``text`` part whose decision was made here, or
        ``None`` (not such a part, or decided elsewhere: asked as a plain question)."""
        approval = request.approval
        if approval is None or [item.id for item in request.questions] != [TEXT_ID]:
            return None
        kept = self._texts.pop(question_id, None)
        if kept is None or kept[0] != approval.digest:
            return None
        (question,) = request.questions
        text = kept[1]
        entry = (
            QuestionAnswer.skip(question)
            if text is None
            else QuestionAnswer.chosen(question, custom=text)
        )
        return AskUserQuestionAnswer.of([entry], request)


def approval_permission(
    request: AskUserQuestionRequest, *, forms: bool
) -> ApprovalPermission | None:
    """The permission request of an approval's ask, or ``None`` to ask it as plain questions
    (not an approval, not in the approval's shape, or no decision a permission can make).

    ``forms``: the client takes forms, so Edit and Respond can ask their text after.
    """
    approval = request.approval
    if approval is None:
        return None
    ids = [question.id for question in request.questions]
    if ids not in ([DECISION_ID], [DECISION_ID, TEXT_ID]):
        return None
    whole = len(ids) == 2  # a part's text is answered apart, so no form can follow it
    decisions = tuple(
        item for item in approval.decisions if item not in _NEEDS_TEXT or (forms and whole)
    )
    if not decisions:
        return None
    return ApprovalPermission(request, approval, decisions)


def _note(request: AskUserQuestionRequest, approval: Approval) -> str | None:
    """Why an earlier answer was not taken: what ``approval_request(note=...)`` added."""
    plain = approval_request(approval).questions[0].question
    asked = request.questions[0].question
    if asked == plain or not asked.startswith(plain):
        return None
    return asked[len(plain) :].strip() or None


def _decision_of(answer: AskUserQuestionAnswer) -> str:
    by_id = {entry.id: entry for entry in answer.answers}
    return str(by_id[DECISION_ID].answer)


def _longest_run(text: str, char: str) -> int:
    longest = run = 0
    for each in text:
        run = run + 1 if each == char else 0
        longest = max(longest, run)
    return longest


def _invalid(problem: str) -> UserInteractionError:
    return UserInteractionError(
        f"the ACP client's answer to the approval's permission request does not fit: {problem}",
        ErrorCode.INVALID_ANSWER,
    )

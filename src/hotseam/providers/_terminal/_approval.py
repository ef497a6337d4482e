"""An approval read as one: the call first, then the decision, then the text it needs.

The request stays the two questions of ``approval_request`` (``decision``, ``text``) and the
answer is theirs, so ``read_decision`` reads it as it reads any provider's; only the showing
differs. The decision's block shows the tool, its arguments as indented JSON (sorted keys,
as ``Approval.arguments`` are) and the agent's reason, with the gate's note of a refused
answer. The text question is worded for the decision chosen, an edit's line starts from the
current arguments where the surface can; it is not asked (skipped) after Approve or Always
allow, and may be skipped after Always reject.
"""

from __future__ import annotations

import json
from dataclasses import replace

from prompt_toolkit.formatted_text import StyleAndTextTuples

from ...interaction import AskUserQuestionRequest, Question, QuestionAnswer
from ...interaction.approvals import DECISION_ID, TEXT_ID, Approval, Decision, approval_request
from ._protocol import visible
from ._stepper import Shown, Stepper, Steps

ALLOW = "Allow this call?"
"""The decision's question once the call is shown above it."""

TEXT_PROMPTS = {
    Decision.EDIT: "Edit the arguments (JSON):",
    Decision.REJECT: "Why reject? (told to the model)",
    Decision.RESPOND: "Your response (given to the model instead of running the tool)",
    Decision.NEVER: "Why always reject? (told to the model)",
}
"""The text question, worded for the decision it goes with."""

NEEDS_TEXT = frozenset({Decision.EDIT, Decision.REJECT, Decision.RESPOND})
"""Decisions the gate refuses without text: their text question cannot be skipped."""
NO_TEXT = frozenset({Decision.APPROVE, Decision.ALWAYS})
"""Decisions nothing goes with: their text question is not asked (skipped)."""


def stepper_for(request: AskUserQuestionRequest, kept: Steps | None) -> Stepper:
    """The stepper of ``request``: an approval's when it asks one in the questions of
    ``approval_request``, else the plain one."""
    approval = request.approval
    ids = [item.id for item in request.questions]
    if approval is not None and ids in ([DECISION_ID], [DECISION_ID, TEXT_ID]):
        return ApprovalStepper(request, approval, kept)
    return Stepper(request, kept)


class ApprovalStepper(Stepper):
    """The stepper of an approval: no "1 of 2" (Approve ends it), the call above the
    decision, the text question worded for the decision, and skipped after Approve."""

    __slots__ = ("_approval", "_asked", "_note")

    def __init__(
        self, request: AskUserQuestionRequest, approval: Approval, kept: Steps | None
    ) -> None:
        self._approval = approval
        self._asked, self._note = wording(request.questions[0].question, approval)
        super().__init__(request, kept)

    def shown(self, *, prefills: bool) -> Shown:
        question = self.question
        if question.id == DECISION_ID:
            preface = call_block(self._approval, self._note)
            return Shown(replace(question, question=self._asked), None, preface)
        decision = self.decision
        asked = question.question
        if decision is not None and decision in TEXT_PROMPTS:
            asked = TEXT_PROMPTS[decision]
        worded = replace(
            question,
            question=asked,
            header="Approval",
            allow_skip=question.allow_skip and decision not in NEEDS_TEXT,
        )
        if decision is not Decision.EDIT:
            return Shown(worded, None)
        now = json_text(self._approval.arguments)
        if prefills:
            return Shown(worded, None, hint="Change the JSON and press Enter.", prefill=now)
        return Shown(worded, None, hint=f"Type the arguments as one line of JSON; now: {now}")

    def went_back(self) -> str:
        return "(back to the decision)"

    def sent(self) -> str | None:
        decision = self.decision
        return f"(decision sent: {decision.value})" if decision is not None else None

    @property
    def decision(self) -> Decision | None:
        """The decision chosen so far, if any."""
        entry = self.answered(DECISION_ID)
        if entry is None or not entry.options:
            return None
        try:
            return Decision(entry.options[0].model_value)
        except ValueError:
            return None

    def answer(self, entry: QuestionAnswer) -> None:
        """As a stepper does; a decision changed forgets the text typed for the old one,
        and Approve (or Always allow) skips the text question: nothing goes with it."""
        if entry.id != DECISION_ID:
            super().answer(entry)
            return
        before = self.decision
        super().answer(entry)
        text = self._text_question()
        if text is None:
            return
        if self.decision is not before:
            self.forget(text)
        if self.decision in NO_TEXT:
            super().answer(QuestionAnswer.skip(text))

    def _text_question(self) -> Question | None:
        return next((item for item in self.request.questions if item.id == TEXT_ID), None)


def wording(asked: str, approval: Approval) -> tuple[str, str | None]:
    """The decision's question shown under the call, and the note ``approval_request``
    added to ``asked`` (why an earlier answer was not taken), if any. A question worded
    otherwise is shown as it is, nothing of it lost."""
    plain = approval_request(approval).questions[0].question
    if asked == plain:
        return ALLOW, None
    if asked.startswith(plain + "\n"):
        return ALLOW, asked[len(plain) + 1 :]
    return asked, None


def call_block(approval: Approval, note: str | None) -> StyleAndTextTuples:
    """The call as the human reads it: the tool, the arguments as indented JSON, the
    agent's reason, and the note of a refused answer."""
    fragments: StyleAndTextTuples = [
        ("class:label-of", "Tool: "),
        ("class:tool", visible(approval.tool)),
        ("", "\n"),
    ]
    arguments = json_text(approval.arguments, indent=2)
    if "\n" in arguments:
        indented = "  " + arguments.replace("\n", "\n  ")
        fragments += [("class:label-of", "Arguments:"), ("", "\n")]
        fragments += [("class:arguments", indented), ("", "\n")]
    else:
        fragments += [("class:label-of", "Arguments: "), ("class:arguments", arguments), ("", "\n")]
    if approval.reason:
        reason = visible(approval.reason, lines=True).replace("\n", "\n  ")
        fragments += [("class:label-of", "Reason: "), ("", reason), ("", "\n")]
    if note:
        fragments += [("class:reason", visible(note, lines=True)), ("", "\n")]
    return fragments


def json_text(value: object, *, indent: int | None = None) -> str:
    """``value`` as JSON with sorted keys; with every non-ASCII character escaped when a
    terminal would obey one of them (still the same JSON, and nothing shown is run)."""
    text = json.dumps(value, indent=indent, sort_keys=True, ensure_ascii=False)
    if visible(text, lines=True) != text:
        text = json.dumps(value, indent=indent, sort_keys=True)
    return text

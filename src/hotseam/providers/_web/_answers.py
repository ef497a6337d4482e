"""What the page and the API see of an ask, and what they send back.

An ask is one card (``question_dict``): who asks, when, and ``questions`` (one or several,
alike: a script reads an ask of one question as a list of one). An answer body is checked
with the seam's own rules (``check_question_answer``, ``check_answer``), so a page, a
script and the fleet inbox are refused alike, naming the question. Any ask takes
``{"answers": {question id: its answer, ...}}``; an ask of one question also takes the
answer alone (``{"option": 0}``, ``{"text": "..."}``, ``{"options": [0, 2]}``,
``{"skip": true}``). Other pages are told one item per question of what was answered.
An ask carrying an approval also has ``approval`` (``Approval.to_dict()``), and an answer
to it must make a decision the gate takes (``_approvals``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ...interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    UserInteractionError,
    check_answer,
    check_question_answer,
    where,
)
from ._approvals import approval_problem

MAX_ANSWER_CHARS = 20_000
"""A custom answer longer than this is refused (a model reads it; a page can paste a lot)."""

_SHOWN_TEXT = 300  # characters of a typed answer that other pages are shown
_ONE_ANSWER = ("option", "options", "text", "skip")


class InboxError(Exception):
    """A request the inbox refuses; ``status`` and ``code`` go into the HTTP response."""

    def __init__(
        self, status: int, code: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        """``{"error": {"code": ..., "message": ..., **details}}``, the API's error body."""
        return {"error": {"code": self.code, "message": self.message, **self.details}}


def _bad(message: str) -> InboxError:
    return InboxError(400, "BAD_REQUEST", message)


def _invalid(message: str) -> InboxError:
    return InboxError(422, "INVALID_ANSWER", message)


def questions_of(request: AskUserQuestionRequest) -> tuple[Question, ...]:
    """The questions of ``request``, each with its id (a request put in an inbox directly,
    not through ``ask()``, may have none)."""
    return tuple(
        item if item.id is not None else replace(item, id=f"q{index + 1}")
        for index, item in enumerate(request.questions)
    )


# -- what the page shows ------------------------------------------------------------------------


def question_dict(
    question_id: str, seq: int, asked_at: float, request: AskUserQuestionRequest
) -> dict[str, Any]:
    """An ask as the API and the page see it, whichever inbox shows it (model-written text
    travels as JSON strings, never HTML)."""
    agent = request.agent
    shown: dict[str, Any] = {
        "id": question_id,
        "seq": seq,
        "askedAt": asked_at,
        "agent": None if agent is None else agent.to_dict(),
        "questions": [_question(item) for item in questions_of(request)],
    }
    if request.approval is not None:  # the page renders it as an approval card
        shown["approval"] = request.approval.to_dict()
    return shown


def _question(item: Question) -> dict[str, Any]:
    least, most = item.selection_range
    return {
        "id": item.id,
        "header": item.header,
        "question": item.question,
        "options": [
            {
                "index": index,
                "label": option.label,
                "description": option.description,
                "recommended": option.recommended,
            }
            for index, option in enumerate(item.choices)
        ],
        "allowCustom": item.accepts_custom,
        "multiSelect": item.is_multi_select,
        "minSelections": least,
        "maxSelections": most,
        "allowSkip": item.allow_skip,
        "hint": item.hint,
    }


# -- what the page sends ------------------------------------------------------------------------


def parse_answer(request: AskUserQuestionRequest, body: object) -> AskUserQuestionAnswer:
    """An API body → the seam's answer to the whole ask, checked as ``ask()`` checks a
    provider's; or an :class:`InboxError` naming the question (400 for the body's shape,
    422 ``INVALID_ANSWER`` for an answer the question does not take)."""
    questions = questions_of(request)
    several = len(questions) > 1
    if not isinstance(body, dict):
        shapes = '{"answers": {"q1": {"option": 0}, ...}}' if several else '{"option": 0}'
        raise _bad(f'expected a JSON object: {shapes} or {{"text": "..."}}')
    unknown = sorted(set(body) - {"answers", *_ONE_ANSWER})
    if unknown:
        raise _bad(f"unknown field(s): {', '.join(unknown)}")
    if "answers" in body:
        if len(body) > 1:
            extra = ", ".join(sorted(set(body) - {"answers"}))
            raise _bad(f'"answers" goes alone (each question\'s answer is in it), not with {extra}')
        entries = _parse_answers(questions, body["answers"])
    elif several:
        ids = ", ".join(str(item.id) for item in questions)
        shape = f'{{"answers": {{"{questions[0].id}": {{"option": 0}}, ...}}}}'
        if not body:
            raise _bad(f"give the answer of each question in {shape} (its ids: {ids})")
        raise _invalid(
            f"one answer to an ask of {len(questions)} questions: give the answer of each "
            f"question in {shape} (its ids: {ids})"
        )
    else:  # the answer of the only question, alone
        entries = [_parse_one(questions[0], 0, body, named="")]
    try:
        answer = check_answer(request, AskUserQuestionAnswer.of(entries, request))
    except UserInteractionError as error:  # every rule was checked per question already
        raise _invalid(error.message) from None
    problem = approval_problem(request, answer)
    if problem is not None:
        raise _invalid(problem)
    return answer


def _parse_answers(questions: tuple[Question, ...], given: object) -> list[QuestionAnswer]:
    if not isinstance(given, dict):
        raise _bad('"answers" must be an object: the answer of each question by its id')
    known = {str(item.id): index for index, item in enumerate(questions)}
    strangers = [key for key in given if key not in known]
    if strangers:
        ids = ", ".join(known)
        raise _bad(f'"answers" names no question {strangers[0]!r} of this ask (its ids: {ids})')
    entries = []
    for index, item in enumerate(questions):
        named = where(item, index)
        if str(item.id) not in given:
            skip = ' (one that allows skipping takes {"skip": true})' if item.allow_skip else ""
            raise _invalid(f"{named} has no answer: give one for every question{skip}")
        entries.append(_parse_one(item, index, given[str(item.id)], named=f"{named}: "))
    return entries


def _parse_one(question: Question, index: int, body: object, *, named: str) -> QuestionAnswer:
    """One question's answer; ``named`` prefixes every refusal (empty for an only question)."""
    assert question.id is not None
    if not isinstance(body, dict):
        example = '{"options": [0]}' if question.is_multi_select else '{"option": 0}'
        shapes = f'{example}, {{"text": "..."}} or {{"skip": true}}'
        raise _bad(f"{named}expected a JSON object: {shapes}")
    unknown = sorted(set(body) - set(_ONE_ANSWER))
    if unknown:
        raise _bad(f"{named}unknown field(s): {', '.join(unknown)}")
    skip = body.get("skip")
    if skip is not None and not isinstance(skip, bool):
        raise _bad(f'{named}"skip" must be true or false')
    if skip:
        if any(body.get(key) is not None for key in ("option", "options", "text")):
            raise _bad(f'{named}"skip" goes alone: a skipped question has no answer')
        return _checked(question, index, QuestionAnswer.skip(question))
    text = body.get("text")
    if text is not None and not isinstance(text, str):
        raise _bad(f'{named}"text" must be a string')
    if question.is_multi_select:
        if body.get("option") is not None:
            raise _bad(
                f'{named}the question takes several choices: give "options" (a list of '
                'indexes), not "option"'
            )
        picked = body.get("options")
        if picked is None and text is None:
            raise _bad(f'{named}give "options" (a list of indexes), "text", or both')
        chosen = _indexes(question, [] if picked is None else picked, named)
    else:
        if body.get("options") is not None:
            raise _bad(
                f'{named}the question takes one choice: give "option" (an index), not "options"'
            )
        if (body.get("option") is None) == (text is None):
            raise _bad(f'{named}give exactly one of "option" (an index) or "text"')
        chosen = () if body.get("option") is None else _indexes(question, [body["option"]], named)
    typed = None if text is None else _typed(question, text, named)
    return _checked(question, index, QuestionAnswer(question.id, None, chosen, typed))


def _indexes(question: Question, given: object, named: str) -> tuple[AskUserQuestionOption, ...]:
    key = "options" if question.is_multi_select else "option"
    if not isinstance(given, list):
        raise _bad(f'{named}"{key}" must be a list of integer indexes')
    choices = question.choices
    picked = []
    for index in given:
        if isinstance(index, bool) or not isinstance(index, int):
            what = "a list of integer indexes" if key == "options" else "an integer index"
            raise _bad(f'{named}"{key}" must be {what}')
        if not 0 <= index < len(choices):
            raise _invalid(f"{named}option {index} does not exist ({len(choices)} options)")
        picked.append(choices[index])
    return tuple(picked)


def _typed(question: Question, text: str, named: str) -> str:
    if not text.strip():
        raise _invalid(f"{named}the answer is empty")
    if len(text) > MAX_ANSWER_CHARS:
        raise _invalid(f"{named}the answer is longer than {MAX_ANSWER_CHARS} characters")
    if not question.accepts_custom:
        only = "its options" if question.is_multi_select else "one of its options"
        raise _invalid(f"{named}this question accepts only {only}")
    return text


def _checked(question: Question, index: int, entry: QuestionAnswer) -> QuestionAnswer:
    try:
        return check_question_answer(question, entry, index=index)
    except UserInteractionError as error:
        raise _invalid(error.message) from None


# -- what other pages are told ------------------------------------------------------------------


def shown_answer(answer: AskUserQuestionAnswer, request: AskUserQuestionRequest) -> dict[str, Any]:
    """What pages are told was answered: per question its ``id``, ``question``, the
    ``labels`` chosen and the start of the ``text`` typed, or ``skipped``."""
    texts = {item.id: item.question for item in questions_of(request)}
    items = []
    for entry in answer.answers:
        item: dict[str, Any] = {"id": entry.id, "question": texts.get(entry.id, entry.id)}
        if entry.skipped is not None:
            item["skipped"] = entry.skipped
        else:
            item["labels"] = [option.label for option in entry.options]
            typed = entry.custom
            if typed is None and not entry.options and entry.answer:
                typed = entry.answer  # a text answer not yet completed by the seam's check
            if typed is not None:
                item["text"] = _cut(typed)
        items.append(item)
    return {"answers": items}


def answer_label(shown: dict[str, Any]) -> str:
    """A shown answer in a refusal's message: labels, never a typed text."""
    parts = []
    for item in shown["answers"]:
        if "skipped" in item:
            said = f"({item['skipped']})"
        else:
            typed = ["a typed answer"] if "text" in item else []
            said = ", ".join([*item.get("labels", []), *typed]) or "(none)"
        parts.append(said if len(shown["answers"]) == 1 else f"{item['question']} {said}")
    return "; ".join(parts)


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN_TEXT else text[: _SHOWN_TEXT - 1] + "…"

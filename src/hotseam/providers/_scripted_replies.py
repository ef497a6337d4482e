"""The replies of a :class:`~hotseam.providers.scripted.ScriptedProvider`: what each does
to a request (one question or several), and how an answers file's entries are read."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

import anyio

from .._core import HarnessError
from ..interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    ErrorCode,
    Question,
    QuestionAnswer,
    SkipReason,
    UserInteractionError,
)

__all__ = ["Reply", "ScriptError", "brief", "coerce", "parse_entry", "script_failure"]


class ScriptError(HarnessError):
    """A script (usually an answers file) is malformed; the message names file and entry."""

    default_code = "INVALID_SCRIPT"


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted reaction to a question. Build it with the class methods."""

    kind: Literal[
        "match", "text", "option", "recommended", "error", "never", "skip", "list", "by_id"
    ]
    text: str | None = None
    option: int | str | None = None
    code: str | None = None
    message: str | None = None
    replies: tuple[Reply, ...] = ()
    by_id: tuple[tuple[str, Reply], ...] = ()

    @classmethod
    def match(cls, text: str) -> Reply:
        """The option ``text`` names, as a human's reply would
        (:meth:`~hotseam.interaction.Question.option_named`: label, value or number); else
        custom text."""
        return cls("match", text=text)

    @classmethod
    def exactly(cls, text: str) -> Reply:
        """Answer with exactly this text (the option is filled in if a value matches)."""
        return cls("text", text=text)

    @classmethod
    def choose(cls, which: int | str) -> Reply:
        """Choose an option by 1-based position, label or value."""
        return cls("option", option=which)

    @classmethod
    def recommended(cls) -> Reply:
        """Choose the recommended option (every one, on a multi-select question)."""
        return cls("recommended")

    @classmethod
    def fail(cls, code: str | ErrorCode, message: str | None = None) -> Reply:
        """Raise ``UserInteractionError(message, code)``, as a UI would (``ASK_DECLINED``...)."""
        return cls("error", code=str(code), message=message)

    @classmethod
    def never(cls) -> Reply:
        """Never answer; the ask waits until it is cancelled."""
        return cls("never")

    @classmethod
    def skip(cls, reason: SkipReason = "skipped") -> Reply:
        """Leave a question unanswered (one whose request has ``allow_skip``)."""
        return cls("skip", text=reason)

    @classmethod
    def select(cls, *choices: str | Reply | Sequence[str | Reply]) -> Reply:
        """Several choices for one question (each a label, value or text, or a reply that
        picks one option); for an ask of several questions, one reply per question in
        order."""
        return cls("list", replies=tuple(_as_reply(choice) for choice in choices))

    @classmethod
    def each(cls, *replies: str | Reply | Sequence[str | Reply]) -> Reply:
        """One reply per question of the ask, in question order (same as :meth:`select`:
        which one it is depends on the ask)."""
        return cls.select(*replies)

    @classmethod
    def by_question_id(cls, replies: Mapping[str, str | Reply | Sequence[str | Reply]]) -> Reply:
        """One reply per question of the ask, keyed by question id."""
        return cls("by_id", by_id=tuple((key, _as_reply(value)) for key, value in replies.items()))

    async def resolve(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Turn this reply into an answer to ``request`` (or raise, or wait forever)."""
        await self._end_without_answer(request)
        questions = request.questions
        if self.kind == "by_id":
            known = {item.id for item in questions}
            unknown = sorted(key for key, _ in self.by_id if key not in known)
            if unknown:
                raise script_failure(
                    request, f"answers unknown question ids {', '.join(map(repr, unknown))}"
                )
            given = dict(self.by_id)
            replies = [given.get(str(item.id)) for item in questions]
        elif self.kind == "list" and len(questions) > 1:
            if len(self.replies) != len(questions):
                raise script_failure(
                    request,
                    f"gives {len(self.replies)} answers to an ask of {len(questions)} questions",
                )
            replies = list(self.replies)
        elif len(questions) > 1:
            raise script_failure(
                request,
                f"gives one answer to an ask of {len(questions)} questions (give a list in "
                "question order, or an object keyed by question id)",
            )
        elif self.kind in ("match", "text", "option", "recommended") and not (
            questions[0].is_multi_select
        ):
            return self._plain_answer(request)
        elif self.kind == "list" and len(self.replies) == 1 and self.replies[0].kind == "list":
            replies = list(self.replies)  # [[choices]]: the one question's, in question order
        else:
            replies = [self]
        entries = []
        for item, reply in zip(questions, replies, strict=True):
            if reply is None:
                raise script_failure(request, f"has no answer for question {item.id!r}")
            await reply._end_without_answer(request)
            entries.append(reply._entry(request, item))
        return AskUserQuestionAnswer.of(entries, request)

    async def _end_without_answer(self, request: AskUserQuestionRequest) -> None:
        if self.kind == "never":
            await anyio.sleep_forever()
        if self.kind == "error":
            assert self.code is not None
            raise UserInteractionError(
                self.message or f"scripted failure {self.code} for {request.question!r}",
                self.code,
            )

    def _plain_answer(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """The answer to a single-select question in text, as a one-question UI gives it."""
        if self.kind == "recommended":
            option = request.recommended
            if option is None:
                raise script_failure(request, "chooses the recommended option, but none is")
            return AskUserQuestionAnswer(option.model_value, option)
        if self.kind == "option":
            option = _choose(request, request.questions[0], self.option)
            return AskUserQuestionAnswer(option.model_value, option)
        assert self.text is not None
        if self.kind == "match":
            option = request.questions[0].option_named(self.text)
            if option is not None:
                return AskUserQuestionAnswer(option.model_value, option)
        return AskUserQuestionAnswer(self.text)

    def _entry(self, request: AskUserQuestionRequest, question: Question) -> QuestionAnswer:
        """This reply as the answer to one question of ``request``."""
        if self.kind == "skip":
            return QuestionAnswer.skip(question, cast("SkipReason", self.text))
        if self.kind in ("by_id", "list") and any(r.kind == "list" for r in self.replies):
            raise script_failure(request, f"nests lists in the answer to {question.id!r}")
        if self.kind == "by_id":
            raise script_failure(request, f"answers {question.id!r} with answers by id")
        parts = self.replies if self.kind == "list" else (self,)
        chosen: list[AskUserQuestionOption] = []
        custom: list[str] = []
        for part in parts:
            if part.kind in ("error", "never", "skip"):
                raise script_failure(request, f"puts {part.kind} among choices of {question.id!r}")
            if part.kind == "recommended":
                found = question.recommended_options
                if not found:
                    raise script_failure(request, "chooses the recommended option, but none is")
                chosen.extend(found if question.is_multi_select else found[:1])
            elif part.kind == "option":
                chosen.append(_choose(request, question, part.option))
            else:
                assert part.text is not None
                option = question.option_named(part.text) if part.kind == "match" else None
                option = option or question.option_for(part.text)
                if option is not None:
                    chosen.append(option)
                else:
                    custom.append(part.text)
        if len(custom) > 1:
            raise script_failure(request, f"gives {question.id!r} more than one custom text")
        return QuestionAnswer.chosen(question, chosen, custom[0] if custom else None)


_ENTRY_KEYS = ("text", "option", "recommended", "error", "never", "skip")
SKIP_REASONS: tuple[str, ...] = get_args(SkipReason)
_QUESTION_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # as validate_request() requires


def brief(text: str, limit: int = 60) -> str:
    """``text`` on one short line, for an error message."""
    if not text.isprintable():
        text = json.dumps(text)[1:-1]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_entry(entry: Any, where: str, depth: int = 0) -> Reply:
    """One reply of a script: ``depth`` 0 answers an ask, 1 a question of it, 2 a choice
    (a :class:`Reply` in a Python script's list or dict is taken as it is)."""
    if isinstance(entry, Reply):
        return entry
    if isinstance(entry, str):
        return Reply.match(entry)
    if isinstance(entry, list):
        if depth >= 2:
            raise ScriptError(
                f"{where}: a list inside a list of choices (a list answers the questions of "
                "an ask in order, and a list in it is one question's choices)"
            )
        return Reply(
            "list",
            replies=tuple(
                parse_entry(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(entry)
            ),
        )
    if not isinstance(entry, Mapping):
        raise ScriptError(
            f"{where}: expected a string or an object, got {type(entry).__name__} (or a list: "
            "choices, or answers in question order)"
        )
    keys = [key for key in entry if key in _ENTRY_KEYS]
    unknown = sorted(set(entry) - set(_ENTRY_KEYS) - {"message"})
    if unknown or len(keys) != 1:
        found = ", ".join(brief(str(key)) for key in sorted(map(str, entry))) or "nothing"
        problem = (
            f"{where}: an answer object needs exactly one of {', '.join(_ENTRY_KEYS)} "
            f"(plus 'message' with 'error'); found {found}"
        )
        if depth == 0 and not keys and entry and all(map(_is_question_id, entry)):
            return _parse_by_id(entry, where, problem)
        raise ScriptError(problem)
    key = keys[0]
    value = entry[key]
    if key == "text" and isinstance(value, str):
        return Reply.exactly(value)
    if key == "option" and isinstance(value, int | str) and not isinstance(value, bool):
        return Reply.choose(value)
    if key == "recommended" and value is True:
        return Reply.recommended()
    if key == "never" and value is True:
        return Reply.never()
    if key == "skip" and (value is True or (isinstance(value, str) and value in SKIP_REASONS)):
        return Reply.skip("skipped" if value is True else cast("SkipReason", value))
    if key == "error" and isinstance(value, str):
        if value not in ErrorCode.__members__:
            raise ScriptError(
                f"{where}: unknown error code {brief(repr(value))}; "
                f"use one of {', '.join(ErrorCode)}"
            )
        message = entry.get("message")
        if message is not None and not isinstance(message, str):
            raise ScriptError(f"{where}: 'message' must be a string")
        return Reply.fail(value, message)
    expected = {
        "text": "a string",
        "option": "a 1-based number or a label",
        "recommended": "true",
        "never": "true",
        "skip": 'true, "skipped" or "dismissed"',
        "error": "an error code string",
    }[key]
    raise ScriptError(f"{where}: '{key}' must be {expected}, got {brief(json.dumps(value))}")


def _parse_by_id(entry: Mapping[str, Any], where: str, problem: str) -> Reply:
    """An object keyed by question id; when a value is no answer, both readings are said."""
    replies = []
    for key, value in entry.items():
        try:
            replies.append((key, parse_entry(value, f"{where}[{json.dumps(key)}]", 1)))
        except ScriptError as error:
            raise ScriptError(
                f"{problem}; or, read as answers by question id: "
                f"{error.message.removeprefix(where)}"
            ) from None
    return Reply("by_id", by_id=tuple(replies))


def _is_question_id(key: object) -> bool:
    return isinstance(key, str) and _QUESTION_ID.fullmatch(key) is not None


def _as_reply(value: str | Reply | Sequence[str | Reply]) -> Reply:
    """A reply from what a script writes: a reply, a text, or a list of them (the choices
    of a multi-select question)."""
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply.match(value)
    if isinstance(value, list | tuple):
        return Reply.select(*value)
    raise TypeError(
        f"a scripted reply is a text, a Reply or a list of them, got {type(value).__name__}"
    )


def coerce(reply: Any, where: str) -> Any:
    """A list or a mapping in a Python script is read as in a file (errors at once)."""
    if isinstance(reply, list | tuple | Mapping):
        return parse_entry(list(reply) if isinstance(reply, tuple) else reply, where)
    return reply


def _choose(
    request: AskUserQuestionRequest, question: Question, which: int | str | None
) -> AskUserQuestionOption:
    choices = question.choices
    if isinstance(which, int):
        if 1 <= which <= len(choices):
            return choices[which - 1]
        raise script_failure(request, f"chooses option {which}, but there are {len(choices)}")
    option = question.option_named(str(which))
    if option is not None:
        return option
    raise script_failure(request, f"chooses option {which!r}, which is not among the options")


def script_failure(request: AskUserQuestionRequest, problem: str) -> UserInteractionError:
    return UserInteractionError(
        f"the scripted provider {problem} (question: {request.question!r})",
        ErrorCode.PROVIDER_FAILED,
    )

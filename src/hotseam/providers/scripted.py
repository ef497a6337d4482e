"""ScriptedProvider: answers questions from a script, for tests and automation.

It answers from a list (in order), from a mapping keyed by question text, or from a callable;
records every request; can hold questions until released, fail with a given code, or never
answer. ``ScriptedProvider.from_file("answers.json")`` loads a script for CI (the CLI's
``--answers FILE``). The file is JSON, either a list or ``{"answers": ...}``::

    {"answers": [
        "Postgres",                          # an option's label or value, else custom text
        {"text": "blue"},                    # this exact text
        {"option": 2},                       # the 2nd option (or a label: {"option": "SQLite"})
        {"recommended": true},               # the recommended option
        {"error": "ASK_DECLINED", "message": "not today"},
        {"never": true}                      # never answer (until cancelled)
    ]}

or ``{"answers": {"Which database?": "Postgres", "Colour?": ["blue", "red"]}}`` keyed by
question text (a list answers repeated asks of the same question in turn).

An ask of several questions takes one entry answering each question, in question order or
keyed by question id, where a list is the choices of a multi-select question and
``{"skip": true}`` leaves a question unanswered (``{"skip": "dismissed"}`` says why)::

    {"answers": [
        ["Postgres", ["auth", "billing"], {"skip": true}],      # in question order
        {"db": "SQLite", "features": ["search"], "notes": "none"}  # by question id
    ]}

For an ask of one question a list entry is its choices: the file ``[["auth", "billing"]]``
answers a multi-select question with two. A script keyed by question text answers each
question of an ask by its own text.
"""

from __future__ import annotations

import inspect
import json
import re
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Literal, TypeAlias, cast, get_args

import anyio

from .._core import HarnessError, present_as
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

__all__ = ["Reply", "ScriptError", "ScriptedProvider", "ScriptedReply"]


class ScriptError(HarnessError):
    """A script (usually an answers file) is malformed; the message names file and entry."""

    default_code = "INVALID_SCRIPT"


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted reaction to a question. Build it with the class methods."""

    kind: Literal[
        "match",
        "text",
        "option",
        "recommended",
        "error",
        "never",
        "skip",
        "list",
        "by_id",
        "approval",
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

    @classmethod
    def approve(cls) -> Reply:
        """Approve the call an approval asks about, as it is."""
        return cls("approval", option="approve")

    @classmethod
    def edit(cls, arguments: Mapping[str, Any] | str) -> Reply:
        """Approve the call with edited ``arguments`` (a mapping, or JSON text as typed)."""
        text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        return cls("approval", option="edit", text=text)

    @classmethod
    def reject(cls, reason: str) -> Reply:
        """Reject the call; ``reason`` tells the model why."""
        return cls("approval", option="reject", text=reason)

    @classmethod
    def always_allow(cls) -> Reply:
        """Approve the call, and every later call of the tool (a rule is added)."""
        return cls("approval", option="always")

    @classmethod
    def always_reject(cls, reason: str | None = None) -> Reply:
        """Reject the call, and every later call of the tool (a rule is added)."""
        return cls("approval", option="never", text=reason)

    @classmethod
    def respond(cls, text: str) -> Reply:
        """Do not run the call; ``text`` is given to the model as its result."""
        return cls("approval", option="respond", text=text)

    async def resolve(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Turn this reply into an answer to ``request`` (or raise, or wait forever)."""
        await self._end_without_answer(request)
        questions = request.questions
        if self.kind == "approval":
            return self._decide(request)
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

    def _decide(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """The answer to an approval's request that makes this reply's decision."""
        from ..interaction.approvals import DECISION_ID, TEXT_ID

        if request.approval is None:
            raise script_failure(request, f"makes an approval's decision ({self.option})")
        entries = []
        for item in request.questions:
            if item.id == DECISION_ID:
                entries.append(QuestionAnswer.chosen(item, [str(self.option)]))
            elif item.id == TEXT_ID:
                entries.append(
                    QuestionAnswer.skip(item)
                    if self.text is None
                    else QuestionAnswer.chosen(item, custom=self.text)
                )
        return AskUserQuestionAnswer.of(entries, request)

    def _plain_answer(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """As a one-question UI answers a single-select question."""
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
    """A reply, a text, or a list of them (a multi-select question's choices)."""
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


ReplyResult: TypeAlias = "str | AskUserQuestionAnswer | Reply | Sequence[Any] | Mapping[str, Any]"
ScriptedReply: TypeAlias = (
    "str | AskUserQuestionAnswer | Reply | Sequence[Any] | Mapping[str, Any]"
    " | Callable[[AskUserQuestionRequest], ReplyResult | Awaitable[ReplyResult]]"
)


class ScriptedProvider:
    """A user-interaction provider that answers from a script.

    It shows several questions at once (``multiple_questions``): an ask of several
    questions reaches it whole, and one reply answers each question (see the module).

    Args:
        script: A list of replies (used in order), a mapping from question text to a reply
            or a list of replies, or a callable ``request -> reply`` (sync or async). A reply
            is a string (an option's label or value, else custom text), an
            :class:`~hotseam.interaction.AskUserQuestionAnswer` or a :class:`Reply`; a list
            or a dict is read as in an answers file (choices, answers in question order,
            or answers keyed by question id).
        default: What to do when the script has nothing for a question; by default the ask
            fails with ``PROVIDER_FAILED`` saying the script ran out.
        name: Shown in logs.
    """

    multiple_questions = True
    """An ask of several questions is put to it whole."""

    def __init__(
        self,
        script: Sequence[ScriptedReply]
        | Mapping[str, ScriptedReply | Sequence[ScriptedReply]]
        | Callable[[AskUserQuestionRequest], Any]
        | None = None,
        *,
        default: ScriptedReply | None = None,
        name: str = "scripted",
    ) -> None:
        self.name = name
        self.requests: list[AskUserQuestionRequest] = []
        self.answers: list[AskUserQuestionAnswer] = []
        self.cancelled: list[AskUserQuestionRequest] = []
        self._default = default
        self._queue: deque[ScriptedReply] = deque()
        self._by_question: dict[str, deque[ScriptedReply]] = {}
        self._callable: Callable[[AskUserQuestionRequest], Any] | None = None
        self._scripted = 0
        self._released: anyio.Event | None = None
        self._held = False
        self._waiters: list[tuple[int, anyio.Event]] = []
        if isinstance(script, Mapping):
            for question, replies in script.items():
                where = f"<script>: answers[{json.dumps(brief(question))}]"
                if isinstance(replies, list | tuple):
                    self._by_question[question] = deque(
                        coerce(reply, f"{where}[{i}]") for i, reply in enumerate(replies)
                    )
                else:
                    self._by_question[question] = deque([coerce(replies, where)])
                self._scripted += len(self._by_question[question])
        elif callable(script):
            self._callable = script
        elif script is not None:
            self._queue.extend(coerce(r, f"<script>: answers[{i}]") for i, r in enumerate(script))
            self._scripted = len(self._queue)

    def __repr__(self) -> str:
        return f"<ScriptedProvider {self.name!r} asked={len(self.requests)}>"

    # -- the provider ---------------------------------------------------------------------------

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        """Record the request, then answer it from the script."""
        self.requests.append(request)
        self._notify()
        try:
            while self._held:
                if self._released is None:
                    self._released = anyio.Event()
                await self._released.wait()
            reply = self._next_reply(request)
            answer = await _resolve(reply, request)
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(request)
            raise
        self.answers.append(answer)
        return answer

    def _next_reply(self, request: AskUserQuestionRequest) -> ScriptedReply:
        if self._callable is not None:
            return self._callable
        if self._by_question:
            return self._reply_by_question_text(request)
        if self._queue:
            return self._queue.popleft()
        if self._default is not None:
            return self._default
        raise script_failure(
            request,
            f"has no scripted answer left ({self._scripted} were scripted, "
            f"{len(self.requests)} questions asked)",
        )

    def _reply_by_question_text(self, request: AskUserQuestionRequest) -> ScriptedReply:
        """Each question answered by its own text's next reply (or the default), taken only
        once every question has one; several are joined with :meth:`Reply.each`."""
        replies: list[ScriptedReply] = []
        for item in request.questions:
            queue = self._by_question.get(item.question)
            reply = queue[0] if queue else self._default
            if reply is None:
                raise script_failure(
                    request,
                    f"has no scripted answer for {item.question!r} ({self._scripted} were "
                    f"scripted, {len(self.requests)} questions asked)",
                )
            replies.append(reply)
        joined = replies[0] if len(replies) == 1 else _each(request, replies)
        for item in request.questions:
            queue = self._by_question.get(item.question)
            if queue:
                queue.popleft()
        return joined

    # -- controls for tests ---------------------------------------------------------------------

    def hold(self) -> None:
        """Make asks wait (after being recorded) until :meth:`release`."""
        self._held = True

    def release(self) -> None:
        """Let held asks go on to their scripted replies."""
        self._held = False
        if self._released is not None:
            self._released.set()
            self._released = None

    def push(self, *replies: ScriptedReply) -> None:
        """Append replies to a list script."""
        self._queue.extend(coerce(reply, "<script>: pushed") for reply in replies)
        self._scripted += len(replies)

    async def wait_for_requests(self, count: int = 1) -> AskUserQuestionRequest:
        """Wait until ``count`` questions were asked in all; return the latest one."""
        if len(self.requests) < count:
            event = anyio.Event()
            self._waiters.append((count, event))
            await event.wait()
        return self.requests[-1]

    def _notify(self) -> None:
        for count, event in self._waiters:
            if len(self.requests) >= count:
                event.set()
        self._waiters = [(count, event) for count, event in self._waiters if not event.is_set()]

    # -- loading --------------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | PathLike[str], *, name: str | None = None) -> ScriptedProvider:
        """Load a script from a JSON file (see the module docstring for the format).

        An answers file is input: whatever it holds, the outcome is a provider or one
        ``ScriptError`` line (the CLI exits 2, never with a traceback).

        Raises:
            ScriptError: the file is missing, larger than 16 MiB, not UTF-8, not JSON,
                nested deeper than 64 levels, or an entry is malformed; the message names
                the file, and ``line:column`` or the entry.
        """
        file = Path(path)
        try:
            with file.open("rb") as stream:
                raw = stream.read(_MAX_FILE_BYTES + 1)
        except OSError as error:
            reason = error.strerror or str(error)
            raise ScriptError(f"{file}: cannot read the answers file: {reason}") from None
        if len(raw) > _MAX_FILE_BYTES:
            raise ScriptError(
                f"{file}: the answers file is larger than {_MAX_FILE_BYTES // 2**20} MiB"
            )
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as error:
            line, column = _line_column(raw[: error.start].decode("utf-8"), error.start)
            raise ScriptError(
                f"{file}:{line}:{column}: not UTF-8 text (byte 0x{raw[error.start]:02x})"
            ) from None
        deep = _too_deep(text)
        if deep is not None:
            line, column = _line_column(text, deep)
            raise ScriptError(
                f"{file}:{line}:{column}: nested more than {_MAX_DEPTH} levels deep "
                "(an answers file needs four)"
            )
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise ScriptError(
                f"{file}:{error.lineno}:{error.colno}: not valid JSON: {error.msg}"
            ) from None
        except (ValueError, RecursionError) as error:  # a number too long to convert, ...
            raise ScriptError(f"{file}: not usable JSON: {brief(str(error))}") from None
        return cls.from_data(data, source=str(file), name=name or file.name)

    @classmethod
    def from_data(
        cls, data: Any, *, source: str = "<script>", name: str = "scripted"
    ) -> ScriptedProvider:
        """Build a provider from already-parsed JSON data (see :meth:`from_file`)."""
        if isinstance(data, Mapping) and set(data) == {"answers"}:
            data = data["answers"]
        if isinstance(data, list):
            return cls(
                [parse_entry(entry, f"{source}: answers[{i}]") for i, entry in enumerate(data)],
                name=name,
            )
        if isinstance(data, Mapping):
            script: dict[str, list[ScriptedReply]] = {}
            for question, entry in data.items():
                where = f"{source}: answers[{json.dumps(brief(question))}]"
                entries = entry if isinstance(entry, list) else [entry]
                script[question] = [
                    parse_entry(item, f"{where}[{i}]" if isinstance(entry, list) else where)
                    for i, item in enumerate(entries)
                ]
            return cls(script, name=name)
        raise ScriptError(
            f"{source}: expected a list of answers or an object keyed by question text, "
            f"got {type(data).__name__}"
        )


_MAX_FILE_BYTES = 16 * 2**20
_MAX_DEPTH = 64
# A JSON string (possibly unterminated: json.loads reports that one) or a bracket.
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def _too_deep(text: str) -> int | None:
    """Where ``text`` first nests deeper than ``_MAX_DEPTH``: ``json.loads`` recurses per
    level, and ``[[[...`` would end in a ``RecursionError`` without a position."""
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > _MAX_DEPTH:
                return match.start()
        elif char in "]}":
            depth -= 1
    return None


def _line_column(text: str, offset: int) -> tuple[int, int]:
    """1-based, as ``json`` reports them."""
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start + 1


async def _resolve(reply: Any, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
    if callable(reply) and not isinstance(reply, Reply):
        reply = reply(request)
        if inspect.isawaitable(reply):
            reply = await reply
    if isinstance(reply, AskUserQuestionAnswer):
        return reply
    if isinstance(reply, str):
        reply = Reply.match(reply)
    elif isinstance(reply, list | tuple | Mapping):
        reply = coerce(reply, "<script>: a computed reply")
    if isinstance(reply, Reply):
        return await reply.resolve(request)
    raise script_failure(request, f"produced {type(reply).__name__}, which is not a reply")


present_as(__name__, globals(), __all__)


def _each(request: AskUserQuestionRequest, replies: list[ScriptedReply]) -> Reply:
    for item, reply in zip(request.questions, replies, strict=True):
        if not isinstance(reply, Reply | str):
            kind = type(reply).__name__
            raise script_failure(request, f"answers {item.question!r} with a {kind}")
    return Reply.each(*cast("list[Reply | str]", replies))

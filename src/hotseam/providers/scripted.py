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
from os import PathLike
from pathlib import Path
from typing import Any, TypeAlias, cast

import anyio

from .._core import present_as
from ..interaction import AskUserQuestionAnswer, AskUserQuestionRequest
from ._scripted_replies import Reply, ScriptError, brief, coerce, parse_entry, script_failure

__all__ = ["Reply", "ScriptError", "ScriptedProvider", "ScriptedReply"]


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
        if script is None:
            pass
        elif isinstance(script, Mapping):
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
        else:
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
        """Each question of an ask answered by its own text's next reply (or the default),
        taken only once every question has one. The replies of several questions answer
        them together (:meth:`Reply.each`: each a string or a :class:`Reply`); the one
        reply of a request of one question answers it, whatever it is."""
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
        asked = len(self.requests)
        still: list[tuple[int, anyio.Event]] = []
        for count, event in self._waiters:
            if asked >= count:
                event.set()
            else:
                still.append((count, event))
        self._waiters = still

    # -- loading --------------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: str | PathLike[str], *, name: str | None = None) -> ScriptedProvider:
        """Load a script from a JSON file (see the module docstring for the format).

        Whatever the file holds, the outcome is a provider or one ``ScriptError`` line: an
        answers file is input, and the CLI reports it and exits 2, never with a traceback.

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
    """Where ``text`` first nests deeper than ``_MAX_DEPTH``, or ``None``.

    Checked before parsing: ``json.loads`` recurses once per level, and a file of
    ``[[[...`` would end in a ``RecursionError`` without a position.
    """
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
    """1-based line and column of ``offset`` in ``text``, as ``json`` reports them."""
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
        return await Reply.match(reply).resolve(request)
    if isinstance(reply, Reply):
        return await reply.resolve(request)
    if isinstance(reply, list | tuple | Mapping):
        parsed: Reply = coerce(reply, "<script>: a computed reply")
        return await parsed.resolve(request)
    raise script_failure(request, f"produced {type(reply).__name__}, which is not a reply")


present_as(__name__, globals(), __all__)


def _each(request: AskUserQuestionRequest, replies: list[ScriptedReply]) -> Reply:
    """The replies of several questions as one (each must say one question's answer)."""
    for item, reply in zip(request.questions, replies, strict=True):
        if not isinstance(reply, Reply | str):
            kind = type(reply).__name__
            raise script_failure(request, f"answers {item.question!r} with a {kind}")
    return Reply.each(*cast("list[Reply | str]", replies))

"""Helpers of the multi-question tests: the three questions of issue 24, and a provider that
shows one question at a time (no ``multiple_questions``), as the terminal of today does."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from hotseam.interaction import (
    AskUserQuestionAnswer,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
)

Option = AskUserQuestionOption

DATABASE = Question(
    "Which database?",
    "Database",
    [Option("Postgres", "pg", recommended=True), Option("SQLite", "sqlite")],
    allow_custom=False,
    id="db",
)
FEATURES = Question(
    "Which features?",
    "Features",
    [Option("Auth", "auth"), Option("Billing", "billing"), Option("Search", "search")],
    multi_select=True,
    id="features",
)
NOTES = Question("Anything else?", "Notes", id="notes", allow_skip=True)
THREE = AskUserQuestionRequest.of([DATABASE, FEATURES, NOTES])

NEVER = "<never>"
"""A reply of :class:`OneByOne` that never answers (the question stays open)."""


class OneByOne:
    """Answers each one-question request with the next text of ``replies`` (``NEVER``:
    stays open until cancelled); records every request it was given."""

    def __init__(self, replies: Sequence[str], name: str = "one-by-one") -> None:
        self.replies = list(replies)
        self.name = name
        self.requests: list[AskUserQuestionRequest] = []
        self.cancelled: list[AskUserQuestionRequest] = []
        self.asked = anyio.Event()

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        assert len(request.questions) == 1, "a one-question UI got several questions"
        self.requests.append(request)
        self.asked.set()
        self.asked = anyio.Event()
        reply = self.replies.pop(0)
        if reply == NEVER:
            try:
                await anyio.sleep_forever()
            finally:
                self.cancelled.append(request)
        return AskUserQuestionAnswer(reply)

    @property
    def ids(self) -> list[str | None]:
        """The id of each question asked, in order."""
        return [request.questions[0].id for request in self.requests]


LOADED: list[OneByOne] = []
"""The providers the provider modules of the reload tests set up, generation by generation."""

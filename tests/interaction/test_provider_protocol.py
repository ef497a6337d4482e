"""The provider protocol: ``ask`` is all the seam needs (the seed's interface), and
``multiple_questions`` is the one declared capability, ``False`` unless a provider says
``True``."""

from __future__ import annotations

import pytest

from hotseam import Context
from hotseam.interaction import (
    USER_INTERACTION,
    AskUserQuestionAnswer,
    AskUserQuestionRequest,
    Question,
    QuestionAnswer,
    UserInteractionProvider,
    ask,
)
from hotseam.interaction import takes_several as takes_several

pytestmark = pytest.mark.anyio

TWO = AskUserQuestionRequest.of([Question("First?", id="a"), Question("Second?", id="b")])


def _all_ok(request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
    return AskUserQuestionAnswer.of([QuestionAnswer(q.id, "ok") for q in request.questions])


class SeedProvider:
    """The seed's provider: an ``ask`` method and nothing else."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.sizes.append(len(request.questions))
        return _all_ok(request)


class Together(UserInteractionProvider):
    """Subclasses the protocol and says it shows several questions at once."""

    multiple_questions = True

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        self.sizes.append(len(request.questions))
        return _all_ok(request)


class Inherits(UserInteractionProvider):
    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        raise NotImplementedError


def test_a_provider_with_ask_alone_is_a_provider_and_takes_one_question_at_a_time() -> None:
    assert isinstance(SeedProvider(), UserInteractionProvider)
    assert not takes_several(SeedProvider())
    Context("seed").provide(USER_INTERACTION, SeedProvider())


def test_an_object_without_ask_is_refused_by_the_seam() -> None:
    class NoAsk:
        multiple_questions = True

    class AskIsNone:
        ask = None

    for wrong in (NoAsk(), AskIsNone(), object()):
        assert not isinstance(wrong, UserInteractionProvider)
        with pytest.raises(TypeError, match="does not provide seam 'user-interaction'"):
            Context("wrong").provide(USER_INTERACTION, wrong)


def test_the_default_is_false_and_only_true_counts() -> None:
    assert Inherits().multiple_questions is False
    assert not takes_several(Inherits())
    assert takes_several(Together())
    truthy = SeedProvider()
    truthy.multiple_questions = "yes"  # type: ignore[attr-defined]
    assert not takes_several(truthy)


async def test_ask_reads_the_capability_to_split_or_not() -> None:
    seed, together = SeedProvider(), Together()
    for provider in (seed, together):
        context = Context("split")
        context.provide(USER_INTERACTION, provider)
        await ask(TWO, context=context)
    assert (seed.sizes, together.sizes) == ([1, 1], [2])

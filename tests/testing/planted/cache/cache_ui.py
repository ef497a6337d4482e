"""Planted defect: a helper's module-level cache keeps the old generation's provider."""

import planted_cache

from hotseam import Scope
from hotseam.interaction import USER_INTERACTION, AskUserQuestionAnswer, AskUserQuestionRequest


class CachedUI:
    async def ask(self, request: AskUserQuestionRequest) -> AskUserQuestionAnswer:
        return AskUserQuestionAnswer("yes")


def setup(scope: Scope) -> None:
    provider = CachedUI()
    planted_cache.remember(provider)  # PLANTED: the cache outlives the generation
    scope.provide(USER_INTERACTION, provider)

"""A helper outside the reloaded folder with a module-level cache of providers."""

_providers: list[object] = []


def remember(provider: object) -> None:
    _providers.append(provider)

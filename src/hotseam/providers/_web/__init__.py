"""The web inbox provider's private modules (the public name is ``hotseam.providers.web``)."""

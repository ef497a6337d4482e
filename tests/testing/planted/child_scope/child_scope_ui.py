"""Planted defect: each setup opens a scope on the application's, not on its own."""

import planted_app

from hotseam import Scope


def setup(scope: Scope) -> None:
    assert planted_app.APP is not None
    panel = planted_app.APP.child("panel")  # PLANTED: closes with the app, not on reload
    panel.defer(lambda: None)

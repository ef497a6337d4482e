"""A long-lived application scope outside the reloaded folder (a test sets APP)."""

from hotseam import Scope

APP: Scope | None = None

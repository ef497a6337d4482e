"""Agent: who is asking, so that a UI (and a log line) can say so."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Agent:
    """The agent on whose behalf a tool runs or a question is asked.

    Args:
        id: A stable identifier (``"planner"``, a session id...).
        name: A display name for UIs; defaults to ``id``.
        metadata: Extra JSON-ready facts (model, session...) for UIs and logs.
    """

    id: str
    name: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def display_name(self) -> str:
        """The name a UI shows."""
        return self.name or self.id

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict (``id``, ``name``, and ``metadata`` when not empty)."""
        data: dict[str, Any] = {"id": self.id, "name": self.display_name}
        if self.metadata:
            data["metadata"] = dict(self.metadata)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Agent:
        """Build an agent from :meth:`to_dict`'s form (a bare string is taken as the id)."""
        return cls(
            id=str(data["id"]),
            name=data.get("name"),
            metadata=dict(data.get("metadata") or {}),
        )

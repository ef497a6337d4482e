"""An approval: a tool call put to the human before it runs, bound to its exact arguments.

How it is asked in the seed's vocabulary is ``_approval_questions``; this module is what
an approval and a decision are, which the request model carries (``request.approval``).

The digest is SHA-256 over the canonical JSON (sorted keys, no spaces) of the tool's name
and arguments: two calls with the same digest are the same call.
"""

from __future__ import annotations

import enum
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._errors import ErrorCode, UserInteractionError


class Decision(enum.Enum):
    """What the human decides about a call."""

    APPROVE = "approve"
    """Run the call as it is."""
    EDIT = "edit"
    """Run the call with edited arguments (re-validated; the approval is bound to them)."""
    REJECT = "reject"
    """Do not run it; the message tells the model why."""
    RESPOND = "respond"
    """Do not run it; the text is given to the model as the tool's result."""
    ALWAYS = "always"
    """Run it, and add a rule that allows every later call of the tool without asking."""
    NEVER = "never"
    """Do not run it, and add a rule that rejects every later call of the tool."""


ALL_DECISIONS = (Decision.APPROVE, Decision.EDIT, Decision.REJECT, Decision.RESPOND)
"""The decisions offered by default (the rule-making ones, ``ALWAYS`` and ``NEVER``, are
offered by a gate that keeps rules: ``HumanGate(offer_rules=True)``)."""


def canonical_json(value: object) -> str:
    """``value`` as canonical JSON: sorted keys, no spaces, UTF-8 kept (what a digest is
    taken over).

    Raises:
        TypeError: ``value`` is not JSON (a set, bytes, an object).
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_digest(tool: str, arguments: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of the call: the canonical JSON of ``{"tool", "arguments"}``."""
    text = canonical_json({"arguments": dict(arguments), "tool": tool})
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Approval:
    """A tool call awaiting the human's decision.

    Build one with :meth:`of`, which makes the arguments canonical and takes their digest.
    ``expires_at`` (a ``time.time()`` value) bounds how long the decision may be used;
    ``input_schema`` (the tool's JSON schema) lets a surface check an edit as it is typed.
    """

    tool: str
    arguments: Mapping[str, Any]
    digest: str
    reason: str | None = None
    decisions: tuple[Decision, ...] = ALL_DECISIONS
    expires_at: float | None = None
    input_schema: Mapping[str, Any] | None = field(default=None, compare=False)

    @classmethod
    def of(
        cls,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        reason: str | None = None,
        decisions: Sequence[Decision] = ALL_DECISIONS,
        expires_at: float | None = None,
        input_schema: Mapping[str, Any] | None = None,
    ) -> Approval:
        """The approval of calling ``tool`` with ``arguments`` (JSON values).

        Raises:
            UserInteractionError: ``INVALID_REQUEST`` for arguments that are not JSON, no
                decision offered, or an empty tool name.
        """
        if not isinstance(tool, str) or not tool:
            raise _invalid(f"approval: tool must be a non-empty string, got {tool!r}")
        offered = tuple(dict.fromkeys(decisions))
        if not offered or not all(isinstance(item, Decision) for item in offered):
            raise _invalid(f"approval: decisions must be 1 to 4 Decision values, got {decisions!r}")
        try:
            canonical = json.loads(canonical_json(dict(arguments)))
        except (TypeError, ValueError) as error:
            raise _invalid(f"approval: arguments must be JSON values ({error})") from None
        return cls(
            tool,
            canonical,
            call_digest(tool, canonical),
            reason,
            offered,
            expires_at,
            input_schema,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (what the journal keeps, and a surface renders)."""
        data: dict[str, Any] = {
            "tool": self.tool,
            "arguments": dict(self.arguments),
            "digest": self.digest,
            "decisions": [item.value for item in self.decisions],
        }
        if self.reason is not None:
            data["reason"] = self.reason
        if self.expires_at is not None:
            data["expires_at"] = self.expires_at
        if self.input_schema is not None:
            data["input_schema"] = dict(self.input_schema)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Approval:
        """The approval :meth:`to_dict` wrote; its digest is taken again, never trusted.

        Raises:
            UserInteractionError: ``INVALID_REQUEST`` naming the field that is wrong.
        """
        given: object = data
        if not isinstance(given, Mapping):
            raise _invalid(f"approval: expected an object, got {type(given).__name__}")
        arguments = given.get("arguments")
        if not isinstance(arguments, Mapping):
            raise _invalid("approval.arguments: expected an object")
        try:
            decisions = [Decision(item) for item in given.get("decisions", [])]
        except (TypeError, ValueError):
            raise _invalid(
                f"approval.decisions: each must be one of {[d.value for d in Decision]}"
            ) from None
        expires = given.get("expires_at")
        if expires is not None and not isinstance(expires, int | float):
            raise _invalid("approval.expires_at: expected a number (seconds since the epoch)")
        reason = given.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise _invalid("approval.reason: expected a string")
        schema = given.get("input_schema")
        approval = cls.of(
            str(given.get("tool", "")),
            arguments,
            reason=reason,
            decisions=decisions,
            expires_at=expires,
            input_schema=schema if isinstance(schema, Mapping) else None,
        )
        if "digest" in given and given["digest"] != approval.digest:
            raise _invalid("approval.digest: does not match the tool and arguments")
        return approval

    def expired(self, now: float | None = None) -> bool:
        """True once ``expires_at`` has passed."""
        return self.expires_at is not None and (time.time() if now is None else now) >= (
            self.expires_at
        )

    def describe(self) -> str:
        """One line: the call, as a human reads it."""
        return f"{self.tool}({canonical_json(dict(self.arguments))})"


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """The human's decision about one call, bound to the digest of the call it lets run
    (the edited call's, for an edit).

    ``arguments`` are the arguments to run with (approve: the call's; edit: the edited
    ones; reject and respond: none); ``message`` is the rejection's reason or the response.
    """

    decision: Decision
    digest: str
    arguments: Mapping[str, Any] | None = None
    message: str | None = None
    decided_by: str | None = None

    @property
    def runs(self) -> bool:
        """True when the call runs (approved, as it is or edited, or always allowed)."""
        return self.decision in (Decision.APPROVE, Decision.EDIT, Decision.ALWAYS)


def _invalid(message: str) -> UserInteractionError:
    return UserInteractionError(f"invalid request: {message}", ErrorCode.INVALID_REQUEST)

"""The error tree of hotseam.

Every error a caller may want to tell apart carries a stable string ``code``, so that
model-facing layers (``ctx.tools.execute``) can hand ``{"name", "code", "message"}`` to a
model without losing what went wrong::

    Exception
     ├── HarnessError                      .name, .code, .to_dict()
     │    ├── ScopeClosedError             SCOPE_CLOSED      effect added to a closing/closed scope
     │    ├── ScopeError                   SCOPE_MISUSE      a scope used in a way it cannot serve
     │    ├── ProviderConflictError        PROVIDER_CONFLICT second provider for an active seam
     │    ├── NoProviderError              NO_PROVIDER       no provider for a seam (LookupError)
     │    ├── DisposerTimeoutError         DISPOSE_TIMEOUT   a disposer overran its time bound
     │    ├── AbortError                   ABORTED, TIMEOUT  an AbortSignal's default reason
     │    ├── ToolError                    TOOL_NOT_FOUND, DUPLICATE_TOOL, INVALID_INPUT, INTERNAL
     │    └── UserInteractionError         (hotseam.interaction) NO_PROVIDER, ASK_ABORTED, ...
     └── ExceptionGroup
          └── DisposalError                DISPOSAL_FAILED   every disposer failure of one close

Subclasses get their ``name`` from their class name (``UserInteractionError``), which is what
the TypeScript original does with ``this.name = ...``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# typing.TYPE_CHECKING without importing typing (the clients of the control socket load
# this module): type checkers take any constant of this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar, Self


class HarnessError(Exception):
    """An error with a stable ``code`` that survives the trip to a model.

    Args:
        message: What went wrong, for humans and models.
        code: A stable, upper-case identifier such as ``"NO_PROVIDER"``.
        cause: The underlying error, stored as ``__cause__`` (as ``raise ... from cause``).
        details: Extra JSON-ready facts included in :meth:`to_dict`.
    """

    name: ClassVar[str] = "HarnessError"
    default_code: ClassVar[str] = "HARNESS_ERROR"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = cls.__name__

    def __init__(
        self,
        message: str,
        code: str | None = None,
        *,
        cause: BaseException | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        # A code from a StrEnum (ErrorCode, JournalErrorCode) is kept as its plain string: it
        # reads, prints and serialises as the seed's value ('NO_PROVIDER', never the member).
        self.code = str(code) if code else self.default_code
        self.details: dict[str, Any] = dict(details or {})
        if cause is not None:
            self.__cause__ = cause

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"

    def to_dict(self) -> dict[str, Any]:
        """Return ``{"name", "code", "message"}`` (plus ``"details"`` when there are any)."""
        data: dict[str, Any] = {"name": self.name, "code": self.code, "message": self.message}
        if self.details:
            data["details"] = self.details
        return data


class ScopeClosedError(HarnessError, RuntimeError):
    """An effect was added to a scope that is closing or closed."""

    default_code = "SCOPE_CLOSED"


class ScopeError(HarnessError, RuntimeError):
    """A scope was asked for something it cannot do (for example ``spawn`` with no task host)."""

    default_code = "SCOPE_MISUSE"


class ProviderConflictError(HarnessError):
    """A second provider was offered for a seam that already has an active one."""

    default_code = "PROVIDER_CONFLICT"


class NoProviderError(HarnessError, LookupError):
    """No provider is active for a seam."""

    default_code = "NO_PROVIDER"


class DisposerTimeoutError(HarnessError, TimeoutError):
    """A disposer did not finish within its scope's time bound and was cancelled."""

    default_code = "DISPOSE_TIMEOUT"


class AbortError(HarnessError):
    """The default reason of an aborted :class:`~hotseam.AbortSignal` (code ``ABORTED``).

    :meth:`AbortSignal.timeout`'s uses ``TIMEOUT``; for a non-exception reason
    (``abort("tab closed")``) the AbortError raised carries it as ``reason``.
    """

    default_code = "ABORTED"
    reason: object = None


class ToolError(HarnessError):
    """A tool could not be registered or run (unknown name, duplicate, invalid input)."""

    default_code = "TOOL_ERROR"


class DisposalError(ExceptionGroup[Exception]):
    """Every failure of one scope close, raised together after the last disposer ran.

    Catch it with ``except DisposalError`` or pick members with ``except*``. ``scope_name``
    names the scope; ``code`` is ``"DISPOSAL_FAILED"`` so it reads like a HarnessError.
    """

    code: ClassVar[str] = "DISPOSAL_FAILED"
    name: ClassVar[str] = "DisposalError"
    scope_name: str

    def __new__(
        cls, message: str, exceptions: Sequence[Exception], *, scope_name: str = ""
    ) -> Self:
        self = super().__new__(cls, message, exceptions)
        self.scope_name = scope_name
        return self

    def __init__(
        self, message: str, exceptions: Sequence[Exception], *, scope_name: str = ""
    ) -> None:
        super().__init__(message, exceptions)

    def derive(self, excs: Sequence[Exception]) -> DisposalError:  # type: ignore[override]
        """Keep the class (and scope name) when ``except*`` splits the group."""
        return DisposalError(self.message, excs, scope_name=self.scope_name)

    def to_dict(self) -> dict[str, Any]:
        """Return the model-facing form, listing each failure's own name and code."""
        return {
            "name": self.name,
            "code": self.code,
            "message": self.message,
            "details": {"failures": [_error_dict(exc) for exc in self.exceptions]},
        }


def _error_dict(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, HarnessError | DisposalError):
        return exc.to_dict()
    return {"name": type(exc).__name__, "code": "INTERNAL", "message": str(exc)}

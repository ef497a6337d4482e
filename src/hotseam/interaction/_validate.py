"""The rules a request and an answer must follow, with errors that name the field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .._core import AbortSignal, Agent
from ._errors import INVALID_ANSWER, INVALID_REQUEST, UserInteractionError
from ._model import AskUserQuestionAnswer, AskUserQuestionOption, AskUserQuestionRequest

__all__ = ["check_answer", "validate_request"]


def validate_request(request: object) -> AskUserQuestionRequest:
    """Check every rule of the seam and return the request with ``options`` as a tuple.

    An empty options list becomes ``None`` (free-form).

    Raises:
        UserInteractionError: ``INVALID_REQUEST``, naming every broken rule, for example
            ``options[2].value duplicates options[0].value``.
    """
    if not isinstance(request, AskUserQuestionRequest):
        raise UserInteractionError(
            f"invalid request: expected an AskUserQuestionRequest, got {type(request).__name__}",
            INVALID_REQUEST,
        )
    problems: list[tuple[str, str]] = []
    # Callers may ignore the type hints; every field is checked as the object it really is.
    fields: dict[str, object] = {
        "allow_custom": request.allow_custom,
        "agent": request.agent,
        "signal": request.signal,
        "options": request.options,
    }
    _check_text(problems, "question", request.question, required=True)
    _check_text(problems, "header", request.header, required=False)
    if not isinstance(fields["allow_custom"], bool):
        problems.append(("allow_custom", _wrong_type("a bool", fields["allow_custom"])))
    if fields["agent"] is not None and not isinstance(fields["agent"], Agent):
        problems.append(("agent", _wrong_type("an Agent", fields["agent"])))
    if fields["signal"] is not None and not isinstance(fields["signal"], AbortSignal):
        problems.append(("signal", _wrong_type("an AbortSignal", fields["signal"])))
    options: tuple[AskUserQuestionOption, ...] | None = None
    raw_options = fields["options"]
    if raw_options is not None:
        if not isinstance(raw_options, list | tuple):
            problems.append(("options", _wrong_type("a list of options", raw_options)))
        else:
            options = tuple(raw_options) or None
            _check_options(problems, options or ())
    if problems:
        message = "; ".join(f"{field} {problem}" for field, problem in problems)
        raise UserInteractionError(
            f"invalid request: {message}",
            INVALID_REQUEST,
            details={"errors": [{"field": f, "message": p} for f, p in problems]},
        )
    if options == request.options:
        return request
    return replace(request, options=options)


def _check_options(
    problems: list[tuple[str, str]], options: tuple[AskUserQuestionOption, ...]
) -> None:
    labels: dict[str, int] = {}
    values: dict[str, int] = {}
    recommended: int | None = None
    items: tuple[object, ...] = options
    for index, item in enumerate(items):
        where = f"options[{index}]"
        if not isinstance(item, AskUserQuestionOption):
            problems.append((where, _wrong_type("an AskUserQuestionOption", item)))
            continue
        option = item
        recommended_flag: object = option.recommended
        label_ok = _check_text(problems, f"{where}.label", option.label, required=True)
        value_ok = _check_text(problems, f"{where}.value", option.value, required=False)
        _check_text(problems, f"{where}.description", option.description, required=False)
        if not isinstance(recommended_flag, bool):
            problems.append((f"{where}.recommended", _wrong_type("a bool", recommended_flag)))
        elif recommended_flag:
            if recommended is None:
                recommended = index
            else:
                problems.append(
                    (
                        f"{where}.recommended",
                        f"is a second recommended option (options[{recommended}] already is); "
                        "mark at most one",
                    )
                )
        if label_ok:
            key = option.label.strip().casefold()
            if key in labels:
                problems.append(
                    (
                        f"{where}.label",
                        f"duplicates options[{labels[key]}].label (labels are matched "
                        "case-insensitively)",
                    )
                )
            else:
                labels[key] = index
        if label_ok and value_ok:
            value = option.model_value
            if value in values:
                first = values[value]
                problems.append(
                    (
                        f"{where}.value",
                        f"duplicates options[{first}].value (the model could not tell them apart)",
                    )
                )
            else:
                values[value] = index


def _check_text(
    problems: list[tuple[str, str]], field: str, value: object, *, required: bool
) -> bool:
    if value is None:
        if required:
            problems.append((field, "is required"))
            return False
        return True
    if not isinstance(value, str):
        problems.append((field, _wrong_type("a string", value)))
        return False
    if not value.strip():
        problems.append((field, "is blank" if required else "is blank (leave it out instead)"))
        return False
    return True


def _wrong_type(expected: str, value: Any) -> str:
    return f"must be {expected}, got {type(value).__name__}"


def check_answer(request: AskUserQuestionRequest, answer: object) -> AskUserQuestionAnswer:
    """Check a provider's answer against the request and fill in ``option``.

    ``option`` is set to the request's option whose model-facing value equals the answer
    (and cleared otherwise). When options exist and custom answers are not allowed, an answer
    that is none of the option values is the provider breaking its contract.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` saying what is wrong.
    """
    if not isinstance(answer, AskUserQuestionAnswer):
        raise UserInteractionError(
            f"the provider returned {type(answer).__name__}, not an AskUserQuestionAnswer",
            INVALID_ANSWER,
        )
    text: object = answer.answer
    if not isinstance(text, str):
        raise UserInteractionError(
            f"the provider's answer must be a string, got {type(text).__name__}",
            INVALID_ANSWER,
        )
    if not text.strip():
        raise UserInteractionError(
            "the provider returned a blank answer (a UI should re-prompt, or decline/cancel)",
            INVALID_ANSWER,
        )
    option = request.option_for(answer.answer)
    if option is None and not request.accepts_custom:
        # The answer is what the human typed: described, never quoted (errors reach the logs).
        allowed = ", ".join(repr(o.model_value) for o in request.choices)
        raise UserInteractionError(
            f"the provider's answer is none of the options ({allowed}) of a question that "
            f"allows no custom answer (a custom answer of {len(text)} characters)",
            INVALID_ANSWER,
        )
    if option is answer.option:
        return answer
    return AskUserQuestionAnswer(answer.answer, option)

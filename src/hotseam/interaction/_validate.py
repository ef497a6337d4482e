"""The rules a request must follow, with errors that name the field (the rules of an
answer are in :mod:`._validate_answer`)."""

from __future__ import annotations

import operator
import re
from dataclasses import replace
from typing import Any, NoReturn

from .._core import AbortSignal, Agent
from ._errors import ErrorCode, UserInteractionError
from ._request import (
    MAX_QUESTIONS,
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    in_seed_form,
)

__all__ = ["validate_request", "wrong_type"]

_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
Problems = list[tuple[str, str]]


def validate_request(request: object) -> AskUserQuestionRequest:
    """Check every rule of the seam and return the request with each question's options
    as a tuple (an empty list becomes ``None``: free-form) and its id given (``"q1"``,
    ``"q2"``...).

    A request of one question with nothing but the seed's fields is named in the seed's
    vocabulary (``options[2].value``); any other in its questions' (``questions[1].id``).

    Raises:
        UserInteractionError: ``INVALID_REQUEST``, naming every broken rule, for example
            ``options[2].value duplicates options[0].value`` or
            ``questions[1].id duplicates questions[0].id``.
    """
    if not isinstance(request, AskUserQuestionRequest):
        raise UserInteractionError(
            f"invalid request: expected an AskUserQuestionRequest, got {type(request).__name__}",
            ErrorCode.INVALID_REQUEST,
        )
    problems: Problems = []
    # Callers may ignore the type hints; every field is checked as the object it really is.
    agent: object = request.agent
    signal: object = request.signal
    if agent is not None and not isinstance(agent, Agent):
        problems.append(("agent", wrong_type("an Agent", agent)))
    if signal is not None and not isinstance(signal, AbortSignal):
        problems.append(("signal", wrong_type("an AbortSignal", signal)))
    items: object = request.questions
    questions = _check_questions(problems, items)
    if problems:
        _raise(problems)
    assert questions is not None
    if all(map(operator.is_, questions, request.questions)):
        return request
    return AskUserQuestionRequest(agent=request.agent, signal=request.signal, questions=questions)


def _check_questions(problems: Problems, items: object) -> tuple[Question, ...] | None:
    """Each question's rules; the questions with their ids given, or ``None``."""
    if not isinstance(items, tuple):
        problems.append(("questions", wrong_type("a list of questions", items)))
        return None
    if not 1 <= len(items) <= MAX_QUESTIONS:
        problems.append(("questions", f"holds {len(items)} questions; give 1 to {MAX_QUESTIONS}"))
        return None
    if in_seed_form(items):
        return (_check_question(problems, "", items[0], 0, {}),)
    ids: dict[str, int] = {}
    texts: dict[str, int] = {}
    for index, item in enumerate(items):
        if isinstance(item, Question) and isinstance(item.id, str):
            ids.setdefault(item.id, index)
    checked: list[Question] = []
    for index, item in enumerate(items):
        path = f"questions[{index}]"
        if not isinstance(item, Question):
            problems.append((path, wrong_type("a Question", item)))
            continue
        checked.append(_check_question(problems, path + ".", item, index, ids))
        if _check_text([], "", item.question, required=True):
            key = " ".join(item.question.split()).casefold()
            if key in texts:
                problems.append(
                    (f"{path}.question", f"duplicates questions[{texts[key]}].question")
                )
            else:
                texts[key] = index
    return tuple(checked)


def _check_question(
    problems: Problems, path: str, item: Question, index: int, ids: dict[str, int]
) -> Question:
    """The rules of one question, its fields named ``{path}question``... (``path`` is
    ``""`` for the seed's one question); returns it with its id and options normalized."""
    seed = not path  # its other flags are False (see in_seed_form)
    flags: dict[str, object] = {"allow_custom": item.allow_custom}
    if not seed:
        flags.update(multi_select=item.multi_select, allow_skip=item.allow_skip)
    _check_text(problems, f"{path}question", item.question, required=True)
    _check_text(problems, f"{path}header", item.header, required=False)
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            problems.append((f"{path}{name}", wrong_type("a bool", flag)))
    question_id = "q1" if seed else _check_id(problems, path[:-1], item.id, index, ids)
    raw_options: object = item.options
    options: tuple[AskUserQuestionOption, ...] | None = None
    if raw_options is not None:
        if isinstance(raw_options, tuple):
            options = raw_options or None
            _check_options(problems, options or (), prefix=f"{path}options", one_recommended=seed)
        else:
            problems.append((f"{path}options", wrong_type("a list of options", raw_options)))
    if not seed:
        multi = item.multi_select is True
        if multi and raw_options is None:
            problems.append((f"{path}multi_select", "needs options to choose from"))
        _check_selections(problems, path[:-1], item, options, multi=multi)
    if question_id == item.id and options is raw_options:
        return item
    return replace(item, id=question_id, options=options)


def _check_id(problems: Problems, path: str, given: object, index: int, ids: dict[str, int]) -> str:
    if given is None:
        default = f"q{index + 1}"
        if default in ids:
            problems.append(
                (
                    f"{path}.id",
                    f"is missing, and its default {default!r} is questions[{ids[default]}].id; "
                    "give it an id",
                )
            )
        return default
    if not isinstance(given, str):
        problems.append((f"{path}.id", wrong_type("a string", given)))
        return f"q{index + 1}"
    if not _ID.fullmatch(given):
        problems.append((f"{path}.id", "must be 1-64 letters, digits, '_', '-' or '.'"))
    elif ids[given] != index:
        problems.append((f"{path}.id", f"duplicates questions[{ids[given]}].id"))
    return given


def _check_selections(
    problems: Problems,
    path: str,
    item: Question,
    options: tuple[AskUserQuestionOption, ...] | None,
    *,
    multi: bool,
) -> None:
    """min/max selections, and how many options may be recommended."""
    bounds: dict[str, object] = {
        "min_selections": item.min_selections,
        "max_selections": item.max_selections,
    }
    least_allowed = {"min_selections": 0, "max_selections": 1}
    numbers: dict[str, int] = {}
    for name, value in bounds.items():
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append((f"{path}.{name}", wrong_type("an int", value)))
        elif not multi:
            problems.append((f"{path}.{name}", "is only for a multi_select question"))
        elif value < least_allowed[name]:
            problems.append((f"{path}.{name}", f"is {value}; it must be >= {least_allowed[name]}"))
        else:
            numbers[name] = value
    if not multi:
        _one_recommended(problems, path, options or ())
        return
    if options is None:
        return
    possible = len(options) + (1 if item.allow_custom is True else 0)
    what = f"{len(options)} options" + (" and a custom answer" if item.allow_custom else "")
    least = numbers.get("min_selections")
    most = numbers.get("max_selections")
    if least is not None and most is not None and least > most:
        problems.append((f"{path}.min_selections", f"is {least}, more than max_selections {most}"))
    for name, value in (("min_selections", least), ("max_selections", most)):
        if value is not None and value > possible:
            problems.append(
                (f"{path}.{name}", f"is {value}, but at most {possible} can be chosen ({what})")
            )
    limit = possible if most is None else most
    recommended = [i for i, option in enumerate(options) if _is_true(option, "recommended")]
    if len(recommended) > limit:
        problems.append(
            (
                f"{path}.options[{recommended[limit]}].recommended",
                f"is recommended option {limit + 1}, but at most {limit} can be chosen "
                "(max_selections)",
            )
        )


def _one_recommended(problems: Problems, path: str, options: tuple[object, ...]) -> None:
    """A single-select question recommends at most one option."""
    first: int | None = None
    for index, option in enumerate(options):
        if not _is_true(option, "recommended"):
            continue
        if first is None:
            first = index
        else:
            problems.append(
                (
                    f"{path}.options[{index}].recommended",
                    f"is a second recommended option (options[{first}] already is); "
                    "mark at most one (or make the question multi_select)",
                )
            )


def _is_true(option: object, name: str) -> bool:
    return isinstance(option, AskUserQuestionOption) and getattr(option, name) is True


def _raise(problems: Problems) -> NoReturn:
    message = "; ".join(f"{field} {problem}" for field, problem in problems)
    raise UserInteractionError(
        f"invalid request: {message}",
        ErrorCode.INVALID_REQUEST,
        details={"errors": [{"field": f, "message": p} for f, p in problems]},
    )


def _check_options(
    problems: Problems,
    options: tuple[AskUserQuestionOption, ...],
    *,
    prefix: str = "options",
    one_recommended: bool = True,
) -> None:
    labels: dict[str, int] = {}
    values: dict[str, int] = {}
    recommended: int | None = None
    items: tuple[object, ...] = options
    for index, item in enumerate(items):
        where = f"{prefix}[{index}]"
        if not isinstance(item, AskUserQuestionOption):
            problems.append((where, wrong_type("an AskUserQuestionOption", item)))
            continue
        option = item
        recommended_flag: object = option.recommended
        label_ok = _check_text(problems, f"{where}.label", option.label, required=True)
        value_ok = _check_text(problems, f"{where}.value", option.value, required=False)
        _check_text(problems, f"{where}.description", option.description, required=False)
        if not isinstance(recommended_flag, bool):
            problems.append((f"{where}.recommended", wrong_type("a bool", recommended_flag)))
        elif recommended_flag and one_recommended:
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
                        f"duplicates {prefix}[{labels[key]}].label (labels are matched "
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
                        f"duplicates {prefix}[{first}].value (the model could not tell them apart)",
                    )
                )
            else:
                values[value] = index


def _check_text(problems: Problems, field: str, value: object, *, required: bool) -> bool:
    if value is None:
        if required:
            problems.append((field, "is required"))
            return False
        return True
    if not isinstance(value, str):
        problems.append((field, wrong_type("a string", value)))
        return False
    if not value.strip():
        problems.append((field, "is blank" if required else "is blank (leave it out instead)"))
        return False
    return True


def wrong_type(expected: str, value: Any) -> str:
    return f"must be {expected}, got {type(value).__name__}"

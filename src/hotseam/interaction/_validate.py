"""The rules a request and an answer must follow, with errors that name the field."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from .._core import AbortSignal, Agent
from ._answer import SKIP_REASONS, AskUserQuestionAnswer, QuestionAnswer, answer_text, where
from ._errors import INVALID_ANSWER, INVALID_REQUEST, UserInteractionError
from ._request import MAX_QUESTIONS, AskUserQuestionOption, AskUserQuestionRequest, Question

__all__ = ["check_answer", "check_partial_answer", "check_question_answer", "validate_request"]

_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
Problems = list[tuple[str, str]]


def validate_request(request: object) -> AskUserQuestionRequest:
    """Check every rule of the seam and return the request with ``options`` as a tuple
    and, for several questions, each question's id given (``"q1"``, ``"q2"``...).

    An empty options list becomes ``None`` (free-form).

    Raises:
        UserInteractionError: ``INVALID_REQUEST``, naming every broken rule, for example
            ``options[2].value duplicates options[0].value`` or
            ``questions[1].id duplicates questions[0].id``.
    """
    if not isinstance(request, AskUserQuestionRequest):
        raise UserInteractionError(
            f"invalid request: expected an AskUserQuestionRequest, got {type(request).__name__}",
            INVALID_REQUEST,
        )
    problems: Problems = []
    # Callers may ignore the type hints; every field is checked as the object it really is.
    fields: dict[str, object] = {
        "allow_custom": request.allow_custom,
        "agent": request.agent,
        "signal": request.signal,
        "options": request.options,
        "questions": request.questions,
    }
    if fields["agent"] is not None and not isinstance(fields["agent"], Agent):
        problems.append(("agent", _wrong_type("an Agent", fields["agent"])))
    if fields["signal"] is not None and not isinstance(fields["signal"], AbortSignal):
        problems.append(("signal", _wrong_type("an AbortSignal", fields["signal"])))
    items = fields["questions"]
    if _one_plain_question(items):
        options = _check_top_level(problems, request, fields)
        _raise_if(problems)
        if options == request.options:
            return request
        return replace(request, options=options)
    questions = _check_questions(problems, items)
    if questions and not any(field.startswith("questions[0]") for field, _ in problems):
        _check_mirror(problems, request, questions[0])
    _raise_if(problems)
    assert questions is not None
    return replace(request, options=questions[0].options, questions=questions)


def _one_plain_question(items: object) -> bool:
    """A request of one question made of its top-level fields (the seed's shape)."""
    return (
        isinstance(items, tuple)
        and len(items) == 1
        and isinstance(items[0], Question)
        and items[0]._derived
    )


def _check_top_level(
    problems: Problems, request: AskUserQuestionRequest, fields: dict[str, object]
) -> tuple[AskUserQuestionOption, ...] | None:
    _check_text(problems, "question", request.question, required=True)
    _check_text(problems, "header", request.header, required=False)
    if not isinstance(fields["allow_custom"], bool):
        problems.append(("allow_custom", _wrong_type("a bool", fields["allow_custom"])))
    raw_options = fields["options"]
    if raw_options is None:
        return None
    if not isinstance(raw_options, list | tuple):
        problems.append(("options", _wrong_type("a list of options", raw_options)))
        return None
    options = tuple(raw_options) or None
    _check_options(problems, options or ())
    return options


def _check_questions(problems: Problems, items: object) -> tuple[Question, ...] | None:
    """Each question's rules; the questions with their ids given, or ``None``."""
    if not isinstance(items, tuple):
        problems.append(("questions", _wrong_type("a list of questions", items)))
        return None
    if not 1 <= len(items) <= MAX_QUESTIONS:
        problems.append(("questions", f"holds {len(items)} questions; give 1 to {MAX_QUESTIONS}"))
        return None
    ids: dict[str, int] = {}
    texts: dict[str, int] = {}
    for index, item in enumerate(items):
        if isinstance(item, Question) and isinstance(item.id, str):
            ids.setdefault(item.id, index)
    checked: list[Question] = []
    for index, item in enumerate(items):
        path = f"questions[{index}]"
        if not isinstance(item, Question):
            problems.append((path, _wrong_type("a Question", item)))
            continue
        checked.append(_check_question(problems, path, item, index, ids))
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
    """The rules of one question; returns it with its id and options normalized."""
    flags: dict[str, object] = {
        "allow_custom": item.allow_custom,
        "multi_select": item.multi_select,
        "allow_skip": item.allow_skip,
    }
    _check_text(problems, f"{path}.question", item.question, required=True)
    _check_text(problems, f"{path}.header", item.header, required=False)
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            problems.append((f"{path}.{name}", _wrong_type("a bool", flag)))
    question_id = _check_id(problems, path, item.id, index, ids)
    raw_options: object = item.options
    options: tuple[AskUserQuestionOption, ...] | None = None
    if raw_options is not None:
        if isinstance(raw_options, tuple):
            options = raw_options or None
            _check_options(problems, options or (), prefix=f"{path}.options", one_recommended=False)
        else:
            problems.append((f"{path}.options", _wrong_type("a list of options", raw_options)))
    multi = flags["multi_select"] is True
    if multi and raw_options is None:
        problems.append((f"{path}.multi_select", "needs options to choose from"))
    _check_selections(problems, path, item, options, multi=multi)
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
        problems.append((f"{path}.id", _wrong_type("a string", given)))
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
            problems.append((f"{path}.{name}", _wrong_type("an int", value)))
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


def _check_mirror(problems: Problems, request: AskUserQuestionRequest, first: Question) -> None:
    """The top-level fields of a request of questions mirror its first question."""
    given: dict[str, object] = {
        "question": request.question,
        "header": request.header,
        "options": tuple(request.options) or None
        if isinstance(request.options, list | tuple)
        else request.options,
        "allow_custom": request.allow_custom,
    }
    for name, value in given.items():
        if value != getattr(first, name):
            problems.append(
                (
                    name,
                    f"differs from questions[0].{name} (the top-level fields mirror the first "
                    "question: build the request with AskUserQuestionRequest.of(questions))",
                )
            )


def _raise_if(problems: Problems) -> None:
    if problems:
        message = "; ".join(f"{field} {problem}" for field, problem in problems)
        raise UserInteractionError(
            f"invalid request: {message}",
            INVALID_REQUEST,
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
            problems.append((where, _wrong_type("an AskUserQuestionOption", item)))
            continue
        option = item
        recommended_flag: object = option.recommended
        label_ok = _check_text(problems, f"{where}.label", option.label, required=True)
        value_ok = _check_text(problems, f"{where}.value", option.value, required=False)
        _check_text(problems, f"{where}.description", option.description, required=False)
        if not isinstance(recommended_flag, bool):
            problems.append((f"{where}.recommended", _wrong_type("a bool", recommended_flag)))
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
        problems.append((field, _wrong_type("a string", value)))
        return False
    if not value.strip():
        problems.append((field, "is blank" if required else "is blank (leave it out instead)"))
        return False
    return True


def _wrong_type(expected: str, value: Any) -> str:
    return f"must be {expected}, got {type(value).__name__}"


# -- answers ------------------------------------------------------------------------------------


def check_answer(request: AskUserQuestionRequest, answer: object) -> AskUserQuestionAnswer:
    """Check a provider's answer against the request (validated) and complete it.

    For a one-question request, ``option`` is set to the request's option whose
    model-facing value equals the answer (and cleared otherwise). When options exist and
    custom answers are not allowed, an answer that is none of the option values is the
    provider breaking its contract. ``answers`` then holds one checked entry per question,
    in question order (see :func:`check_question_answer`), and for several questions
    ``answer`` is their summary.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` saying what is wrong, naming the question
            (``questions[1] (Which features?)``) and never quoting what the human typed.
    """
    if not isinstance(answer, AskUserQuestionAnswer):
        raise UserInteractionError(
            f"the provider returned {type(answer).__name__}, not an AskUserQuestionAnswer",
            INVALID_ANSWER,
        )
    items = request.questions
    entries: object = answer.answers
    text_only = isinstance(entries, tuple) and len(entries) == 1 and entries[0]._derived
    if text_only and _one_plain_question(items):
        return _check_plain(request, answer)
    if text_only:
        if len(items) > 1:
            raise UserInteractionError(
                f"the provider answered an ask of {len(items)} questions with one text; "
                "give one entry per question in answers (a provider that shows one question "
                "at a time leaves out multiple_questions and is asked them one by one)",
                INVALID_ANSWER,
            )
        entries = (_from_text(items[0], answer.answer, where(items[0], 0)),)
    checked = _check_entries(request, entries, complete=True)
    if _one_plain_question(items):
        (entry,) = checked
        option = entry.options[0] if len(entry.options) == 1 else None
        return AskUserQuestionAnswer(entry.answer or "", option)
    return AskUserQuestionAnswer.of(checked, request)


def _check_plain(
    request: AskUserQuestionRequest, answer: AskUserQuestionAnswer
) -> AskUserQuestionAnswer:
    """The seed's rules for the seed's shapes: one question, answered with text."""
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
    option = request.option_for(text)
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


def _text_of(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise UserInteractionError(
            f"{what} must be a string, got {type(text).__name__}", INVALID_ANSWER
        )
    if not text.strip():
        raise UserInteractionError(
            f"{what} is blank (a UI should re-prompt, or decline/cancel)", INVALID_ANSWER
        )
    return text


def _from_text(question: Question, text: object, named: str) -> QuestionAnswer:
    """The entry of a question answered with text, as a one-question UI answers: an
    option's model value, else (for a multi-select question) option values joined by
    ``","``, else the human's own text."""
    typed = _text_of(text, f"{named}: the answer")
    assert question.id is not None
    option = question.option_for(typed)
    if option is not None:
        return QuestionAnswer(question.id, typed, (option,))
    if question.is_multi_select:
        parts = [part.strip() for part in typed.split(",")]
        found = [question.option_for(part) for part in parts]
        if len(parts) > 1 and all(found) and len(set(parts)) == len(parts):
            chosen = tuple(o for o in question.choices if o in found)
            return QuestionAnswer(question.id, answer_text(chosen, None), chosen)
    if not question.accepts_custom:
        allowed = ", ".join(repr(o.model_value) for o in question.choices)
        raise UserInteractionError(
            f"{named}: the answer is none of the options ({allowed}) of a question that "
            f"allows no custom answer (a custom answer of {len(typed)} characters)",
            INVALID_ANSWER,
        )
    return QuestionAnswer(question.id, typed, (), typed)


def check_question_answer(
    question: Question, entry: object, *, index: int | None = None
) -> QuestionAnswer:
    """Check one question's answer (``question`` from a validated request) and return it
    normalized: its options are the question's own, in option order, and ``answer`` is
    computed from them and the custom text. ``index`` (the question's position) is used
    to name it in errors.

    The rules: skipped only when the question has ``allow_skip`` (and then with no
    selection); every option one of the question's; custom text only when the question
    accepts it, never blank; a single-select (or free-form) question has exactly one
    value; a multi-select one between ``min_selections`` and ``max_selections`` (custom
    text counts as one). An entry with only ``answer`` text is read as a one-question UI's
    text answer.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` naming the question.
    """
    named = where(question, index)
    if not isinstance(entry, QuestionAnswer):
        raise UserInteractionError(
            f"{named}: the answer must be a QuestionAnswer, got {type(entry).__name__}",
            INVALID_ANSWER,
        )
    assert question.id is not None
    fields: dict[str, object] = {
        "options": entry.options,
        "custom": entry.custom,
        "skipped": entry.skipped,
        "answer": entry.answer,
    }
    if fields["skipped"] is not None:
        return _skipped(question, named, fields)
    options = fields["options"]
    if not isinstance(options, tuple):
        raise UserInteractionError(
            f"{named}: options {_wrong_type('a tuple of options', options)}", INVALID_ANSWER
        )
    custom = fields["custom"]
    if not options and custom is None and fields["answer"]:  # text, as a one-question UI gives
        return _check_count(question, named, _from_text(question, fields["answer"], named))
    chosen: set[int] = set()
    for position, option in enumerate(options):
        value = option.model_value if isinstance(option, AskUserQuestionOption) else None
        index_of = next(
            (i for i, offered in enumerate(question.choices) if offered.model_value == value),
            None,
        )
        if index_of is None:
            raise UserInteractionError(
                f"{named}: options[{position}] is none of the question's options",
                INVALID_ANSWER,
            )
        if index_of in chosen:
            raise UserInteractionError(
                f"{named}: options[{position}] chooses an option a second time", INVALID_ANSWER
            )
        chosen.add(index_of)
    if custom is not None:
        text = _text_of(custom, f"{named}: the custom answer")
        if not question.accepts_custom:
            raise UserInteractionError(
                f"{named}: a custom answer (of {len(text)} characters) to a question that "
                "allows none",
                INVALID_ANSWER,
            )
    picked = tuple(question.choices[i] for i in sorted(chosen))
    typed = custom if isinstance(custom, str) else None
    normalized = QuestionAnswer(question.id, answer_text(picked, typed), picked, typed)
    return _check_count(question, named, normalized)


def _skipped(question: Question, named: str, fields: dict[str, object]) -> QuestionAnswer:
    assert question.id is not None
    reason = fields["skipped"]
    if reason not in SKIP_REASONS:
        raise UserInteractionError(
            f"{named}: skipped must be one of {', '.join(map(repr, SKIP_REASONS))} or None",
            INVALID_ANSWER,
        )
    if not question.allow_skip:
        raise UserInteractionError(
            f"{named}: was skipped, but the question does not allow skipping (allow_skip)",
            INVALID_ANSWER,
        )
    if fields["options"] or fields["custom"] is not None or fields["answer"] is not None:
        raise UserInteractionError(
            f"{named}: is skipped and answered at once (a skipped question has no answer, "
            "options or custom text)",
            INVALID_ANSWER,
        )
    return QuestionAnswer(question.id, None, skipped=reason)  # type: ignore[arg-type]


def _check_count(question: Question, named: str, entry: QuestionAnswer) -> QuestionAnswer:
    count = len(entry.values)
    least, most = question.selection_range
    if not question.is_multi_select:
        if count != 1:
            raise UserInteractionError(
                f"{named}: {count} selections, but the question takes exactly one",
                INVALID_ANSWER,
            )
    elif not least <= count <= most:
        bounds = f"{least}" if least == most else f"{least} to {most}"
        raise UserInteractionError(
            f"{named}: {count} selections, but the question takes {bounds}", INVALID_ANSWER
        )
    return entry


def check_partial_answer(
    request: AskUserQuestionRequest, entries: Sequence[QuestionAnswer]
) -> tuple[QuestionAnswer, ...]:
    """Check the answers given so far (any subset of the questions, each at most once)
    against the request (validated), as :func:`check_answer` checks a whole one; returns
    them normalized, in question order. For a surface that takes answers one by one.

    Raises:
        UserInteractionError: ``INVALID_ANSWER`` naming the question or the entry.
    """
    return _check_entries(request, entries, complete=False)


def _check_entries(
    request: AskUserQuestionRequest, entries: object, *, complete: bool
) -> tuple[QuestionAnswer, ...]:
    if not isinstance(entries, list | tuple):
        raise UserInteractionError(
            f"answers {_wrong_type('a list of QuestionAnswer', entries)}", INVALID_ANSWER
        )
    position = {item.id: index for index, item in enumerate(request.questions)}
    found: dict[int, QuestionAnswer] = {}
    for number, entry in enumerate(entries):
        entry_id = getattr(entry, "id", None) if isinstance(entry, QuestionAnswer) else None
        if not isinstance(entry, QuestionAnswer):
            raise UserInteractionError(
                f"answers[{number}] {_wrong_type('a QuestionAnswer', entry)}", INVALID_ANSWER
            )
        if entry_id not in position:
            known = ", ".join(repr(item.id) for item in request.questions)
            raise UserInteractionError(
                f"answers[{number}].id names no question of the ask (its ids: {known})",
                INVALID_ANSWER,
            )
        index = position[entry_id]
        item = request.questions[index]
        if index in found:
            raise UserInteractionError(
                f"answers[{number}] answers {where(item, index)} a second time", INVALID_ANSWER
            )
        found[index] = check_question_answer(item, entry, index=index)
    if complete:
        for index, item in enumerate(request.questions):
            if index not in found:
                raise UserInteractionError(
                    f"{where(item, index)} has no answer (one entry per question; a question "
                    "that allows skipping takes QuestionAnswer.skip)",
                    INVALID_ANSWER,
                )
    return tuple(found[index] for index in sorted(found))

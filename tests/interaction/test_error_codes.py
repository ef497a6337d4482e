"""Error codes: one spelling (``ErrorCode``'s members) whose values are the seed's strings,
on the error, in ``to_dict`` and on the wire."""

from __future__ import annotations

import json

import hotseam.interaction
from hotseam import HarnessError
from hotseam.interaction import ErrorCode, UserInteractionError

SEED = {
    "NO_PROVIDER",
    "ASK_ABORTED",
    "ASK_CANCELLED",
    "ASK_DECLINED",
    "ASK_TIMEOUT",
    "INVALID_REQUEST",
    "INVALID_ANSWER",
    "PROVIDER_FAILED",
}


def test_every_code_is_its_own_name_and_the_values_do_not_change() -> None:
    assert {code.value for code in ErrorCode} == SEED
    assert all(code.name == code.value for code in ErrorCode)


def test_the_codes_have_one_spelling() -> None:
    for name in SEED:
        assert not hasattr(hotseam.interaction, name), name
        assert name not in hotseam.interaction.__all__


def test_an_error_keeps_its_code_as_the_seeds_string() -> None:
    error = UserInteractionError("declined", ErrorCode.ASK_DECLINED)
    assert type(error.code) is str
    assert error.code == ErrorCode.ASK_DECLINED == "ASK_DECLINED"
    assert error.to_dict() == {
        "name": "UserInteractionError",
        "code": "ASK_DECLINED",
        "message": "declined",
    }
    assert "code='ASK_DECLINED'" in repr(error)
    assert json.loads(json.dumps(error.to_dict()))["code"] == "ASK_DECLINED"


def test_a_plain_string_code_works_as_in_the_seed() -> None:
    error = UserInteractionError("no UI", "NO_PROVIDER")
    assert isinstance(error, HarnessError)
    assert error.code is not None and ErrorCode(error.code) is ErrorCode.NO_PROVIDER
    assert UserInteractionError("boom").code == "PROVIDER_FAILED"


def test_a_journal_error_keeps_its_code_as_a_string_too() -> None:
    from hotseam.interaction.journal import JournalError, JournalErrorCode

    error = JournalError("no run r1 in the journal", JournalErrorCode.RUN_UNKNOWN)
    assert type(error.code) is str
    assert error.code == JournalErrorCode.RUN_UNKNOWN
    assert repr(error) == "JournalError('no run r1 in the journal', code='RUN_UNKNOWN')"

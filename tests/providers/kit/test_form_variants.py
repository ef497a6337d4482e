"""The form on each protocol's wire: ACP's as built, MCP's per revision (option descriptions
in the property's; ``enum`` + ``enumNames`` on 2025-06-18), each valid against that
revision's published schema (``mcp_elicitation.schema.json``: the definitions reachable from
``ElicitRequest`` in each revision's ``schema.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from hotseam.interaction import (
    AskUserQuestionOption,
    AskUserQuestionRequest,
    Question,
    validate_request,
)
from hotseam.providers._kit import build_form, mcp_variant
from hotseam.providers._kit._forms import ACP

_SCHEMAS = json.loads((Path(__file__).parent / "mcp_elicitation.schema.json").read_text())
ERAS = ("2025-06-18", "2025-11-25", "2026-07-28")

PG = AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True)
SQLITE = AskUserQuestionOption("SQLite", description="One file")
DB = AskUserQuestionRequest("Which database?", "Storage", (PG, SQLITE))
FEATURES = Question(
    "Which features?",
    options=[
        AskUserQuestionOption("Auth", description="Sign-in"),
        AskUserQuestionOption("Billing"),
    ],
    multi_select=True,
    id="features",
)
NOTES = Question("Any notes?", allow_skip=True, id="notes")
ONE_CHOICE_FORMS = [
    DB,
    AskUserQuestionRequest("Which?", options=(SQLITE,), allow_custom=False),
    AskUserQuestionRequest("What is your name?"),
    AskUserQuestionRequest.of([NOTES]),
    AskUserQuestionRequest.of(
        [Question("Which database?", "Storage", options=(PG, SQLITE)), NOTES]
    ),
]
SEVERAL_CHOICE_FORMS = [
    AskUserQuestionRequest.of([FEATURES]),
    AskUserQuestionRequest.of([Question("Which database?", options=(PG, SQLITE)), FEATURES]),
]


def mcp_schema_errors(era: str, request: AskUserQuestionRequest) -> list[str]:
    """What revision ``era``'s schema finds wrong with the ``elicitation/create`` of
    ``request`` (none: valid)."""
    published = _SCHEMAS[era]
    where = "definitions" if "definitions" in published else "$defs"
    validator_type = Draft7Validator if where == "definitions" else Draft202012Validator
    validator = validator_type({**published, "$ref": f"#/{where}/ElicitRequest"})
    form = build_form(validate_request(request))
    params: dict[str, Any] = {
        "message": form.message(),
        "requestedSchema": form.schema(mcp_variant(era)),
    }
    if era != "2025-06-18":
        params["mode"] = "form"
    message = {"jsonrpc": "2.0", "id": 1, "method": "elicitation/create", "params": params}
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(message)]


class TestPublishedSchemas:
    @pytest.mark.parametrize("era", ERAS)
    @pytest.mark.parametrize("request_", ONE_CHOICE_FORMS)
    def test_forms_of_single_choices_and_text_are_valid_on_every_revision(
        self, era: str, request_: AskUserQuestionRequest
    ) -> None:
        """One choice, free text, skipping, custom answers, one question or several."""
        assert mcp_schema_errors(era, request_) == []

    @pytest.mark.parametrize("era", ERAS[1:])
    @pytest.mark.parametrize("request_", SEVERAL_CHOICE_FORMS)
    def test_forms_of_several_choices_are_valid_from_2025_11_25(
        self, era: str, request_: AskUserQuestionRequest
    ) -> None:
        """Titled multi-select arrays came with 2025-11-25."""
        assert mcp_schema_errors(era, request_) == []

    @pytest.mark.parametrize("request_", SEVERAL_CHOICE_FORMS)
    def test_forms_of_several_choices_are_not_yet_valid_on_2025_06_18(
        self, request_: AskUserQuestionRequest
    ) -> None:
        """Known: 2025-06-18 has no array property; the form is sent as on later revisions
        (a client that takes it still works). Fails once the variant fixes it."""
        assert mcp_schema_errors("2025-06-18", request_) != []


class TestVariants:
    def test_acp_options_keep_their_descriptions(self) -> None:
        """ACP's ``oneOf`` options carry ``description``; no ``enum``."""
        answer = build_form(DB).schema(ACP)["properties"]["answer"]
        assert answer["oneOf"][0]["description"] == "Server database"
        assert "enum" not in answer and "description" not in answer

    @pytest.mark.parametrize("era", ERAS)
    def test_mcp_option_descriptions_go_into_the_property(self, era: str) -> None:
        """An MCP option has no ``description``: one ``Label: description`` line each, after
        the property's own description."""
        request = validate_request(AskUserQuestionRequest.of([FEATURES]))
        prop = build_form(request).schema(mcp_variant(era))["properties"]["answer"]
        assert prop["description"] == "Pick one or more, or type your own\nAuth: Sign-in"
        assert all("description" not in option for option in prop["items"]["anyOf"])
        single = build_form(DB).schema(mcp_variant(era))["properties"]["answer"]
        assert single["description"] == "Postgres (Recommended): Server database\nSQLite: One file"

    def test_2025_06_18_single_select_also_has_enum_and_enum_names(self) -> None:
        """``oneOf`` came with 2025-11-25; before it, titled single-select is ``enum`` +
        ``enumNames`` (both are sent: ``oneOf`` for clients that read it)."""
        answer = build_form(DB).schema(mcp_variant("2025-06-18"))["properties"]["answer"]
        assert answer["enum"] == ["pg", "SQLite", "_other"]
        assert answer["enumNames"] == ["Postgres (Recommended)", "SQLite", "Other (type it below)"]
        assert [option["const"] for option in answer["oneOf"]] == answer["enum"]
        for era in ERAS[1:]:
            later = build_form(DB).schema(mcp_variant(era))["properties"]["answer"]
            assert "enum" not in later and "enumNames" not in later

    def test_a_newer_mcp_revision_gets_the_newest_variant(self) -> None:
        """A revision this release does not know is read as the newest it does."""
        assert mcp_variant("2099-01-01") == mcp_variant("2026-07-28")

    def test_a_variant_leaves_the_form_as_built(self) -> None:
        """The variant is a copy: ACP's schema after MCP's is still ACP's."""
        form = build_form(DB)
        before = form.schema(ACP)
        form.schema(mcp_variant("2025-06-18"))
        assert form.schema(ACP) == before

    def test_the_peer_is_named_in_errors(self) -> None:
        """ACP's reading names the ACP client, MCP's the MCP client."""
        from hotseam.interaction import UserInteractionError

        for variant, peer in ((ACP, "ACP client"), (mcp_variant("2025-11-25"), "MCP client")):
            with pytest.raises(UserInteractionError) as caught:
                build_form(DB).read({"action": "decline"}, variant)
            assert f"the {peer} answered action 'decline'" in caught.value.message

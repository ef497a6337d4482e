"""A question as an ACP ``elicitation/create`` request (the kit's form on ACP's wire), and
which clients take forms: pure, no loop."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import ClientCapabilities, CreateFormSessionElicitationRequest
from acp.utils import serialize_params

from hotseam.interaction import AskUserQuestionOption, AskUserQuestionRequest
from hotseam.providers._acp._provider import form_params
from hotseam.providers._kit import build_form
from hotseam.providers.acp import AcpProvider

PG = AskUserQuestionOption("Postgres", "pg", "Server database", recommended=True)
DB = AskUserQuestionRequest("Which database?", "Storage", (PG, AskUserQuestionOption("SQLite")))


class TestParams:
    def test_params_are_scoped_to_the_session_and_tool_call(self) -> None:
        """message = question; sessionId, toolCallId and mode at the top level."""
        params = form_params(build_form(DB), "sess_1", "tc_1")
        assert {k: v for k, v in params.items() if k != "requestedSchema"} == {
            "sessionId": "sess_1",
            "toolCallId": "tc_1",
            "mode": "form",
            "message": "Which database?",
        }
        assert params["requestedSchema"]["type"] == "object"
        assert "toolCallId" not in form_params(build_form(DB), "sess_1")

    def test_params_validate_as_the_sdk_request(self) -> None:
        """What is sent is a valid ACP CreateFormSessionElicitationRequest."""
        params = form_params(build_form(DB), "sess_1", "tc_1")
        parsed = CreateFormSessionElicitationRequest.model_validate(params)
        assert parsed.requested_schema.properties is not None
        assert parsed.requested_schema.properties["answer"].default == "pg"  # type: ignore[union-attr]

    def test_the_sdk_serializer_drops_type_object(self) -> None:
        """The defect wrapped: SDK 0.12.1's serialize_params loses "type": "object".

        If this starts failing, the SDK fixed it and the raw send can be reconsidered.
        """
        params = form_params(build_form(DB), "sess_1")
        model = CreateFormSessionElicitationRequest.model_validate(params)
        assert "type" not in serialize_params(model)["requestedSchema"]


class TestCapabilities:
    @pytest.mark.parametrize(
        ("advertised", "supported"),
        [
            ({"elicitation": {"form": {}}}, True),
            ({"elicitation": {"form": {}, "url": {}}}, True),
            ({"elicitation": {"form": {"_meta": {"x": 1}}}}, True),
            ({"elicitation": {}}, False),
            ({"elicitation": {"form": None, "url": None}}, False),
            ({"elicitation": {"url": {}}}, False),
            ({"elicitation": None}, False),
            ({}, False),
        ],
    )
    def test_form_only_when_present_and_not_null(
        self, advertised: dict[str, Any], supported: bool
    ) -> None:
        """ACP v1: {} and {"form": null} advertise no mode (unlike MCP's empty capability)."""
        provider = AcpProvider()
        provider.set_client_capabilities(ClientCapabilities.model_validate(advertised))
        assert provider.supports_form is supported

    def test_nothing_before_initialize(self) -> None:
        """No capabilities known → no form elicitation."""
        assert AcpProvider().supports_form is False

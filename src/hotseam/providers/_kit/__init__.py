"""The surface kit: what every surface of the user-interaction seam shares (``from .._kit
import JsonLines`` from anywhere in :mod:`hotseam.providers`).

* ``_json_lines``: the bounded reader of JSON lines from an untrusted peer (ACP and MCP over
  stdio, the control socket);
* ``_forms``: an ask as a JSON-schema elicitation form (ACP's and each MCP revision's) and
  the result read back, and the loop that asks again after an answer that does not do;
* ``_one_at_a_time``: several questions put one after the other to a one-question UI;
* ``_last_use``: sessions in order of last use, the idle ones released.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._core import lazy_exports

if TYPE_CHECKING:  # imported when first used
    from ._forms import EMPTY_ANSWER_NOTE as EMPTY_ANSWER_NOTE
    from ._forms import RECOMMENDED_SUFFIX as RECOMMENDED_SUFFIX
    from ._forms import EmptyAnswerError as EmptyAnswerError
    from ._forms import Form as Form
    from ._forms import IncompleteAnswerError as IncompleteAnswerError
    from ._forms import ask_until_answered as ask_until_answered
    from ._forms import build_form as build_form
    from ._forms import mcp_variant as mcp_variant
    from ._forms import type_name as type_name
    from ._forms import unused_value as unused_value
    from ._json_lines import DEFAULT_MAX_DEPTH as DEFAULT_MAX_DEPTH
    from ._json_lines import DEFAULT_MAX_LINE_BYTES as DEFAULT_MAX_LINE_BYTES
    from ._json_lines import INVALID_REQUEST as INVALID_REQUEST
    from ._json_lines import PARSE_ERROR as PARSE_ERROR
    from ._json_lines import PREFIX_BYTES as PREFIX_BYTES
    from ._json_lines import Decoded as Decoded
    from ._json_lines import Envelope as Envelope
    from ._json_lines import JsonLines as JsonLines
    from ._json_lines import Refusal as Refusal
    from ._json_lines import RequestId as RequestId
    from ._json_lines import StreamReaderStream as StreamReaderStream
    from ._json_lines import decode_bytes as decode_bytes
    from ._json_lines import decode_line as decode_line
    from ._json_lines import envelope_of as envelope_of
    from ._json_lines import is_request_id as is_request_id
    from ._last_use import LastUse as LastUse
    from ._one_at_a_time import ask_one_at_a_time as ask_one_at_a_time
    from ._one_at_a_time import named_choices as named_choices

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_exports(
        globals(),
        {
            "RECOMMENDED_SUFFIX": "._forms",
            "EmptyAnswerError": "._forms",
            "Form": "._forms",
            "IncompleteAnswerError": "._forms",
            "build_form": "._forms",
            "mcp_variant": "._forms",
            "type_name": "._forms",
            "unused_value": "._forms",
            "DEFAULT_MAX_DEPTH": "._json_lines",
            "DEFAULT_MAX_LINE_BYTES": "._json_lines",
            "INVALID_REQUEST": "._json_lines",
            "PARSE_ERROR": "._json_lines",
            "PREFIX_BYTES": "._json_lines",
            "Decoded": "._json_lines",
            "Envelope": "._json_lines",
            "JsonLines": "._json_lines",
            "Refusal": "._json_lines",
            "RequestId": "._json_lines",
            "StreamReaderStream": "._json_lines",
            "decode_bytes": "._json_lines",
            "decode_line": "._json_lines",
            "envelope_of": "._json_lines",
            "is_request_id": "._json_lines",
            "LastUse": "._last_use",
            "ask_one_at_a_time": "._one_at_a_time",
            "named_choices": "._one_at_a_time",
            "EMPTY_ANSWER_NOTE": "._forms",
            "ask_until_answered": "._forms",
        },
    )

"""IR -> the client's whole Responses object (validated with the openai SDK's model)."""

from __future__ import annotations

import json

import orjson
import pytest

from corpus_loader import samples
from dragoman.ir import carry
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import Response
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import CODEC

from .helpers import DATA
from .helpers import client_ctx


def _sdk_response_model():
    return pytest.importorskip("openai.types.responses").Response


def test_encode_response_validates_with_sdk_model():
    SDKResponse = _sdk_response_model()  # noqa: N806
    ctx = client_ctx(json.loads((DATA / "cx-patch-gpt-5.5.request.json").read_text()))
    resp = Response(
        id="msg_01",
        model="claude",
        content=[
            ThinkingPart(text="hmm", signature="SIG"),
            TextPart("done"),
            ToolCallPart(id="toolu_1", name="exec_command", arguments='{"cmd":"ls"}'),
            ToolCallPart(id="toolu_2", name="apply_patch", arguments='{"input":"*** Begin Patch\\n*** End Patch\\n"}'),
        ],
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=20, output_tokens=5, cache_read_tokens=10),
        created=123,
    )
    body = CODEC.encode_response(resp, ctx)
    model = SDKResponse.model_validate(body)
    assert model.status == "completed" and model.output_text == "done"
    assert [o.type for o in model.output] == ["reasoning", "message", "function_call", "custom_tool_call"]
    assert model.output[3].input == "*** Begin Patch\n*** End Patch\n"
    assert carry.unwrap_anthropic(model.output[0].encrypted_content)["sig"] == "SIG"
    assert model.usage.total_tokens == 25 and model.usage.input_tokens_details.cached_tokens == 10
    body = CODEC.encode_response(Response(id="r", model="m", stop_reason=StopReason.MAX_TOKENS), Context())
    assert body["status"] == "incomplete" and body["incomplete_details"] == {"reason": "max_output_tokens"}


def test_whole_response_round_trip_corpus():
    SDKResponse = _sdk_response_model()  # noqa: N806
    for s in samples("openai-responses", stream=False, ok=True):
        body = orjson.loads(s.body)
        ctx = Context(request=Request(model="m"))
        out = CODEC.encode_response(CODEC.decode_response(body, ctx), ctx)
        SDKResponse.model_validate(out)
        assert [o["type"] for o in out["output"]] == [
            o["type"]
            for o in body["output"]
            if o["type"] in ("message", "reasoning", "function_call", "custom_tool_call", "web_search_call")
        ]

"""Gemini wire models: the Part union, both spellings, unknown fields kept, malformed requests named by field."""

from __future__ import annotations

import orjson
import pytest

from dragoman.errors import ClientRequestError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import ErrorKind
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.gemini import CODEC
from dragoman.protocols.gemini import models as m


def _req(parts: list, **top) -> dict:
    return {"contents": [{"role": "user", "parts": parts}], **top}


@pytest.mark.parametrize(
    ("part", "cls"),
    [
        ({"text": "hi"}, m.TextPart),
        ({"text": "why", "thought": True, "thoughtSignature": "c2ln"}, m.TextPart),
        ({"inlineData": {"mimeType": "image/png", "data": "AAAA"}}, m.InlineDataPart),
        ({"inline_data": {"mime_type": "image/png", "data": "AAAA"}}, m.InlineDataPart),
        ({"fileData": {"mimeType": "application/pdf", "fileUri": "gs://b/x.pdf"}}, m.FileDataPart),
        ({"functionCall": {"name": "f", "args": {"a": 1}}}, m.FunctionCallPart),
        ({"function_call": {"name": "f"}}, m.FunctionCallPart),
        ({"functionResponse": {"name": "f", "response": {"output": "x"}}}, m.FunctionResponsePart),
        ({"executableCode": {"language": "PYTHON", "code": "1"}}, m.ExecutableCodePart),
        ({"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}}, m.CodeExecutionResultPart),
        ({"videoMetadata": {"fps": 1}}, m.OtherPart),
        ({"thoughtSignature": "c2ln"}, m.OtherPart),
    ],
)
def test_part_union_is_keyed_by_the_data_field(part, cls):
    wire = m.REQUEST_ADAPTER.validate_python(_req([part]))
    assert type(wire.contents[0].parts[0]) is cls


def test_both_spellings_and_unknown_fields_kept():
    body = {
        "contents": {"role": "user", "parts": [{"text": "hi", "partMetadata": {"k": 1}}]},  # one Content, no list
        "system_instruction": {"parts": [{"text": "be brief"}]},
        "generation_config": {"max_output_tokens": 9, "thinking_config": {"thinking_budget": 64}, "newKnob": 1},
        "tools": [{"googleSearch": {}}, {"function_declarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}],
        "futureField": [1, 2],
    }
    wire = m.REQUEST_ADAPTER.validate_python(body)
    assert wire.model_extra == {"futureField": [1, 2]}
    assert wire.contents[0].parts[0].model_extra == {"partMetadata": {"k": 1}}
    assert wire.generation_config is not None and wire.generation_config.model_extra == {"newKnob": 1}
    assert wire.tools is not None and wire.tools[0].model_extra == {"googleSearch": {}}
    req = CODEC.decode_request(body)
    assert [p.text for p in req.system] == ["be brief"]
    assert req.max_tokens == 9 and req.reasoning is not None and req.reasoning.budget_tokens == 64
    assert [t.name for t in req.tools] == ["f"] and req.web_search is not None
    assert {"futureField", "generationConfig.newKnob"} <= set(req.dropped.fields)  # not carried: listed


def test_numbers_keep_their_type():
    """An integer temperature stays an integer (the encoders write back what the client sent)."""
    req = CODEC.decode_request(_req([{"text": "x"}], generationConfig={"temperature": 1, "topP": 0.5, "topK": 40}))
    assert type(req.temperature) is int and type(req.top_p) is float and type(req.top_k) is int


def test_parts_decoded_through_the_models():
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "a"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
            {"role": "model", "parts": [{"functionCall": {"name": "f", "args": {"q": 1}}}]},
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "name": "f",
                            "response": {"output": "done"},
                            "parts": [{"inlineData": {"mimeType": "application/pdf", "data": "UERG"}}],
                        }
                    },
                    {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://x/y.jpg"}},
                    {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
                ],
            },
        ]
    }
    req = CODEC.decode_request(body)
    u, a, r = req.messages
    assert type(u.parts[0]) is TextPart and type(u.parts[1]) is ImagePart and u.parts[1].data == "AAAA"
    call = a.parts[0]
    assert type(call) is ToolCallPart and call.id == "call_0" and orjson.loads(call.arguments) == {"q": 1}
    res = r.parts[0]
    assert type(res) is ToolResultPart and res.tool_call_id == "call_0"
    assert type(res.content[0]) is TextPart and res.content[0].text == "done" and type(res.content[1]) is FilePart
    assert type(r.parts[1]) is ImagePart and r.parts[1].url == "https://x/y.jpg"
    assert "contents[2].parts[2].executableCode" in req.dropped.fields


def test_thought_part_with_signature_is_one_thinking_part():
    req = CODEC.decode_request(_req([{"text": "mull", "thought": True, "thoughtSignature": "c2lnbmF0dXJl"}]))
    (t,) = req.messages[0].parts
    assert type(t) is ThinkingPart and t.text == "mull" and t.signature


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({}, "contents: Field required"),
        ({"contents": "hello"}, "contents: Input should be a valid list"),
        (_req([{"text": 5}]), "contents[0].parts[0].text: Input should be a valid string"),
        (_req(["hi"]), "contents[0].parts[0]: Input should be a valid dictionary"),
        (_req([{"functionCall": {"name": 3}}]), "contents[0].parts[0].functionCall.name"),
        (_req([{"functionCall": {"name": "f", "args": "[]"}}]), "contents[0].parts[0].functionCall.args"),
        (_req([{"fileData": {"mimeType": "image/png"}}]), "contents[0].parts[0].fileData.fileUri: Field required"),
        (_req([{"text": "x", "thought": "maybe"}]), "contents[0].parts[0].thought"),
        (_req([{"text": "x"}], tools=[{"functionDeclarations": [{"description": "d"}]}]), "tools[0]"),
        (_req([{"text": "x"}], generationConfig={"maxOutputTokens": "lots"}), "generationConfig.maxOutputTokens"),
        (
            _req([{"text": "x"}], generationConfig={"thinkingConfig": {"thinkingBudget": "big"}}),
            "generationConfig.thinkingConfig.thinkingBudget",
        ),
        (_req([{"text": "x"}], generationConfig={"stopSequences": "END"}), "generationConfig.stopSequences"),
        (_req([{"text": "x"}], toolConfig={"functionCallingConfig": {"mode": 1}}), "functionCallingConfig.mode"),
        ({"model": "m", "project": "p", "request": {"contents": [{"parts": 1}]}}, "contents[0].parts"),
    ],
)
def test_malformed_request_is_a_400_naming_the_field(body, named):
    with pytest.raises(ClientRequestError) as exc:
        CODEC.decode_request(body)
    assert named in str(exc.value), str(exc.value)
    assert "~" not in str(exc.value)  # the union's tags are not part of the path
    wire = CODEC.encode_error(exc.value.to_error_info())
    assert wire["error"]["code"] == 400 and wire["error"]["status"] == "INVALID_ARGUMENT"
    assert named in wire["error"]["message"]


def test_whole_response_validated():
    with pytest.raises(UpstreamProtocolError, match=r"candidates\[0\].finishReason"):
        CODEC.decode_response({"candidates": [{"finishReason": 3}]}, Context())
    with pytest.raises(UpstreamProtocolError, match="candidates: Input should be a valid list"):
        CODEC.decode_response({"candidates": {"content": {}}}, Context())


def test_whole_response_fields():
    body = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [{"text": "hi"}, {"executableCode": {"code": "1"}}]},
                "finishReason": "STOP",
                "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}],
                "citationMetadata": {"citationSources": [{"uri": "https://x"}]},
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2, "thoughtsTokenCount": 3},
        "modelVersion": "gemini-x",
        "responseId": "r1",
    }
    wire = m.RESPONSE_ADAPTER.validate_python(body)
    cand = wire.candidates[0] if wire.candidates else None
    assert cand is not None and cand.safety_ratings and cand.safety_ratings[0].probability == "NEGLIGIBLE"
    assert cand.citation_metadata is not None and cand.citation_metadata.citation_sources == [{"uri": "https://x"}]
    ctx = Context()
    resp = CODEC.decode_response(body, ctx)
    assert resp.id == "r1" and resp.model == "gemini-x"
    assert resp.usage.input_tokens == 5 and resp.usage.output_tokens == 5 and resp.usage.reasoning_tokens == 3
    assert [type(p) for p in resp.content] == [TextPart] and "executableCode" in ctx.dropped.fields


def test_usage_out_of_range_is_an_upstream_error():
    with pytest.raises(UpstreamProtocolError, match="promptTokenCount"):
        CODEC.decode_response({"candidates": [], "usageMetadata": {"promptTokenCount": -1}}, Context())


def test_error_body_through_the_model():
    body = orjson.dumps(
        {
            "error": {
                "code": 429,
                "message": "slow down",
                "status": "RESOURCE_EXHAUSTED",
                "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}],
            }
        }
    )
    info = CODEC.decode_error(429, body, {})
    assert info.kind is ErrorKind.RATE_LIMIT and info.retry_after == "3" and info.code == "RESOURCE_EXHAUSTED"
    odd = orjson.dumps({"error": {"code": 500, "message": "m", "status": ["not", "a", "name"]}})
    assert CODEC.decode_error(500, odd, {}).message == "m"  # not Gemini's shape: read as any error body


def test_stream_error_of_another_shape_keeps_its_message():
    from dragoman.protocols.gemini.errors import error_info_from_object

    info = error_info_from_object({"code": "four hundred", "message": "quota gone", "status": 7}, None)
    assert info.message == "quota gone" and info.kind is ErrorKind.API_ERROR
    assert error_info_from_object("plain", 503).message == "plain"

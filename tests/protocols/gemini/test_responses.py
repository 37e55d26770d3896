"""Whole Gemini responses, the stream encoder (SSE, JSON array, Code Assist), errors, partialArgs."""

from __future__ import annotations

import base64
import json

import pytest

from conftest import chunkings
from conftest import run_stream
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import Response
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.gemini import CODEC
from dragoman.protocols.gemini.partial_args import PartialArgs
from dragoman.protocols.gemini.partial_args import parse_path
from dragoman.protocols.gemini.request_decode import ARRAY
from dragoman.protocols.gemini.request_decode import WRAPPED
from dragoman.protocols.registry import get_codec
from dragoman.translate.stream import StreamTranslator
from protocols.gemini.helpers import body
from validators import gemini as vg

ANTHROPIC_THINKING_TOOL = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant",'
    b'"model":"claude","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Let me look."}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"CLAUDE-SIG"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: content_block_start\ndata: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_9","name":"ls","input":{}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\\"dir\\":"}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\\".\\"}"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def _to_gemini(src: bytes, extra: dict | None = None) -> dict[str, bytes]:
    out = {}
    for label, pieces in chunkings(src):
        req = Request(model="m", stream=True, extra=dict(extra or {}))
        ctx = Context(request=req)
        tr = StreamTranslator(get_codec(Protocol.ANTHROPIC_MESSAGES).stream_decoder(ctx), CODEC.stream_encoder(ctx))
        out[label] = run_stream(tr, pieces)
    return out


def test_anthropic_thinking_and_call_reach_a_gemini_client_and_come_back():
    outs = _to_gemini(ANTHROPIC_THINKING_TOOL)
    whole = outs["whole"]
    assert all(o == whole for o in outs.values())
    s = vg.validate_stream(whole)
    assert (s.thinking, s.stop_reason, s.output_tokens) == ("Let me look.", "STOP", 20)
    (call,) = s.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == ("toolu_9", "ls", {"dir": "."})
    (sig,) = s.signatures  # on the call's part, as Gemini puts it, base64 as Gemini's schema wants
    assert carry.unwrap_anthropic(base64.b64decode(sig, validate=True).decode()) == {
        "sig": "CLAUDE-SIG",
        "text": "Let me look.",
    }
    # the Gemini client sends the turn back (with or without the thought text): Claude gets its block back
    history = {
        "contents": [
            {"role": "user", "parts": [{"text": "list"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": "toolu_9", "name": "ls", "args": {"dir": "."}}, "thoughtSignature": sig}
                ],
            },
            {
                "role": "user",
                "parts": [{"functionResponse": {"id": "toolu_9", "name": "ls", "response": {"output": "a b"}}}],
            },
        ]
    }
    req = CODEC.decode_request(history)
    out = get_codec(Protocol.ANTHROPIC_MESSAGES).encode_request(req, Context(request=req))
    assert out["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "Let me look.",
        "signature": "CLAUDE-SIG",
    }
    assert out["messages"][2]["content"][0]["tool_use_id"] == "toolu_9"


def test_json_array_stream_and_code_assist_wrapping():
    arr = _to_gemini(ANTHROPIC_THINKING_TOOL, {ARRAY: True})
    assert all(o == arr["whole"] for o in arr.values())
    s = vg.validate_stream(arr["whole"], array=True)
    assert s.tool_calls[0].name == "ls"
    wrapped = _to_gemini(ANTHROPIC_THINKING_TOOL, {WRAPPED: True})["whole"]
    events = [json.loads(line[6:]) for line in wrapped.split(b"\n\n") if line.startswith(b"data: ")]
    assert all(set(e) == {"response"} for e in events)
    assert vg.validate_stream(b"".join(b"data: " + json.dumps(e["response"]).encode() + b"\n\n" for e in events))


def test_stream_error_frames():
    ctx = Context(request=Request(model="m", stream=True))
    enc = CODEC.stream_encoder(ctx)
    err = ErrorInfo(ErrorKind.RATE_LIMIT, "slow down", retry_after="7")
    frame = json.loads(enc.error(err)[6:])
    assert frame == {
        "error": {
            "code": 429,
            "message": "slow down",
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}],
        }
    }
    arr = CODEC.stream_encoder(Context(request=Request(model="m", extra={ARRAY: True})))
    assert json.loads(arr.error(err))[0]["error"]["status"] == "RESOURCE_EXHAUSTED"
    assert arr.keepalive() == b"\n"  # never an SSE comment: the Gemini SDKs parse every non-empty line


def test_whole_responses_both_ways():
    resp = CODEC.decode_response(body("google-tool-call-gemini3.json"), Context())
    sig, call = resp.content
    assert isinstance(sig, ThinkingPart) and isinstance(call, ToolCallPart)
    assert set(carry.unwrap_gemini(sig.signature)) == {call.id}
    assert resp.stop_reason is StopReason.TOOL_USE
    again = CODEC.encode_response(resp, Context())
    assert (
        again["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
        == body("google-tool-call-gemini3.json")["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    )
    vg.validate_response(again)
    out = CODEC.encode_response(
        Response(
            "r",
            "claude",
            [ThinkingPart("hm", signature="S"), TextPart("hi")],
            StopReason.MAX_TOKENS,
            usage=Usage(input_tokens=5, output_tokens=9, reasoning_tokens=4, cache_read_tokens=2),
        ),
        Context(),
    )
    s = vg.validate_response(out)
    assert (s.thinking, s.text, s.stop_reason) == ("hm", "hi", "MAX_TOKENS")
    assert out["usageMetadata"] == {
        "promptTokenCount": 5,
        "candidatesTokenCount": 5,
        "thoughtsTokenCount": 4,
        "cachedContentTokenCount": 2,
        "totalTokenCount": 14,
    }


def test_errors_both_ways():
    info = CODEC.decode_error(429, json.dumps(body("google-429-retry-info.json")).encode())
    assert (info.kind, info.status, info.retry_after, info.code) == (
        ErrorKind.RATE_LIMIT,
        429,
        "35",
        "RESOURCE_EXHAUSTED",
    )
    assert CODEC.encode_error(info)["error"]["details"][0]["retryDelay"] == "35s"
    assert CODEC.decode_error(503, b"<html><title>Unavailable</title></html>").kind is ErrorKind.OVERLOADED
    arr = b'[{"error": {"code": 400, "message": "bad", "status": "INVALID_ARGUMENT"}}]'
    assert CODEC.decode_error(400, arr).kind is ErrorKind.INVALID_REQUEST
    out = CODEC.encode_error(ErrorInfo(ErrorKind.UPSTREAM_PROTOCOL, "broke"))
    assert out == {"error": {"code": 502, "message": "broke", "status": "INTERNAL"}}
    vg.validate_error_body(out)


def test_partial_args_write_json_in_document_order():
    pa = PartialArgs()
    text = (
        "".join(
            pa.feed(e)
            for e in [
                {"jsonPath": "$.a", "stringValue": 'x"y'},
                {"jsonPath": "$.a", "stringValue": "z"},
                {"jsonPath": "$.list[0].n", "numberValue": 1},
                {"jsonPath": "$.list[0].ok", "boolValue": True},
                {"jsonPath": "$.list[1]", "nullValue": "NULL_VALUE"},
                {"jsonPath": "$['odd.key']", "stringValue": "v"},
            ]
        )
        + pa.close()
    )
    assert json.loads(text) == {"a": 'x"yz', "list": [{"n": 1, "ok": True}, None], "odd.key": "v"}
    assert parse_path("$.recipe.ingredients[2].name") == ["recipe", "ingredients", 2, "name"]
    assert PartialArgs().close() == "{}"
    back = PartialArgs()
    back.feed({"jsonPath": "$.a", "stringValue": "1"})
    back.feed({"jsonPath": "$.b", "stringValue": "2"})
    with pytest.raises(UpstreamProtocolError, match="goes back"):
        back.feed({"jsonPath": "$.a", "stringValue": "3"})

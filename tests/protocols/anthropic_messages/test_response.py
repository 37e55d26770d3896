"""Whole (non-streamed) Anthropic messages, both directions (``response``)."""

from __future__ import annotations

import json

import pytest

from corpus_loader import samples
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import Response
from dragoman.protocols.anthropic_messages import CODEC
from dragoman.protocols.base import Context

JSON_OK = samples("anthropic", stream=False, ok=True)


@pytest.mark.parametrize("sample", JSON_OK, ids=[s.name for s in JSON_OK])
def test_decode_every_corpus_response(sample):
    body = json.loads(sample.body)
    ctx = Context()
    resp = CODEC.decode_response(body, ctx)
    assert resp.id == body["id"] and resp.model == body["model"]
    u = body["usage"]
    total = u["input_tokens"] + (u.get("cache_read_input_tokens") or 0) + (u.get("cache_creation_input_tokens") or 0)
    assert resp.usage.input_tokens == total
    assert resp.usage.output_tokens == u["output_tokens"]
    modelled = [b for b in body["content"] if b["type"] in ("text", "thinking", "redacted_thinking", "tool_use")]
    # a web search (server_tool_use + web_search_tool_result) is one WebSearchPart
    searches = [b for b in body["content"] if b["type"] == "web_search_tool_result"]
    assert len(resp.content) == len(modelled) + len(searches)
    for b in body["content"]:
        if b["type"] not in ("text", "thinking", "redacted_thinking", "tool_use", "web_search_tool_result"):
            assert b["type"] == "server_tool_use" and b["name"] == "web_search" or b["type"] in ctx.dropped.fields
    assert resp.stop_reason.value == body["stop_reason"]


def test_decode_response_cache_usage_and_custom_tool():
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [
            {"type": "thinking", "thinking": "t", "signature": carry.UNSIGNED},
            {"type": "tool_use", "id": "c1", "name": "apply_patch", "input": {"input": "*** Begin Patch"}},
            {"type": "tool_use", "id": "c2", "name": "f", "input": {"x": 1}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 7,
        },
    }
    ctx = Context(request=Request(model="m", tools=[Tool(name="apply_patch", kind="custom")]))
    resp = CODEC.decode_response(body, ctx)
    assert resp.content[0] == ThinkingPart(text="t")
    assert resp.content[1] == ToolCallPart(id="c1", name="apply_patch", arguments="*** Begin Patch", kind="custom")
    assert resp.content[2] == ToolCallPart(id="c2", name="f", arguments='{"x":1}')
    assert resp.stop_reason is StopReason.TOOL_USE
    assert (resp.usage.input_tokens, resp.usage.cache_read_tokens, resp.usage.cache_creation_tokens) == (117, 100, 7)


def test_decode_response_invalid_is_upstream_error():
    with pytest.raises(UpstreamProtocolError, match="id"):
        CODEC.decode_response({"type": "message", "model": "m", "content": []}, Context())


def test_encode_response():
    resp = Response(
        id="chatcmpl-1",
        model="gpt",
        content=[
            ThinkingPart("r1", encrypted_content="ENC", item_id="rs_1"),
            ThinkingPart("r2"),
            ThinkingPart("r3", signature="native"),
            ThinkingPart(redacted_data="RD"),
            TextPart("hello"),
            RefusalPart("no"),
            ToolCallPart("call_1", "f", '{"a":1}'),
            ToolCallPart("call_2", "apply_patch", 'raw "text"', kind="custom"),
        ],
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=120, output_tokens=9, cache_read_tokens=100, cache_creation_tokens=5),
    )
    out = CODEC.encode_response(resp, Context())
    assert out["id"] == "msg_chatcmpl-1" and out["type"] == "message" and out["role"] == "assistant"
    assert out["content"] == [
        {"type": "thinking", "thinking": "r1", "signature": carry.wrap_responses("rs_1", "ENC")},
        {"type": "thinking", "thinking": "r2", "signature": carry.UNSIGNED},
        {"type": "thinking", "thinking": "r3", "signature": "native"},
        {"type": "redacted_thinking", "data": "RD"},
        {"type": "text", "text": "hello"},
        {"type": "text", "text": "no"},
        {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}},
        {"type": "tool_use", "id": "call_2", "name": "apply_patch", "input": {"input": 'raw "text"'}},
    ]
    assert out["stop_reason"] == "tool_use" and out["stop_sequence"] is None
    assert out["usage"] == {
        "input_tokens": 15,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 100,
        "output_tokens": 9,
    }
    assert CODEC.encode_response(Response(id="msg_x", model="m"), Context())["id"] == "msg_x"


@pytest.mark.parametrize("sample", samples("anthropic", stream=False, ok=True), ids=lambda s: s.name)
def test_response_round_trip(sample):
    body = json.loads(sample.body)
    ctx = Context()
    out = CODEC.encode_response(CODEC.decode_response(body, ctx), ctx)
    # web searches and their citations are carried whole (Anthropic docs, "Web search tool")
    kept = ("text", "thinking", "redacted_thinking", "tool_use", "web_search_tool_result")
    modelled = [
        b for b in body["content"] if b["type"] in kept or b["type"] == "server_tool_use" and b["name"] == "web_search"
    ]
    assert modelled == out["content"]
    assert out["id"] == body["id"] and out["stop_reason"] == body["stop_reason"]
    for k in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        assert out["usage"][k] == (body["usage"].get(k) or 0)


@pytest.mark.parametrize(
    "stop,expected", [(StopReason.END_TURN, "refusal"), (None, "refusal"), (StopReason.MAX_TOKENS, "max_tokens")]
)
def test_encode_response_refusal_part_says_refusal_in_the_stop_reason(stop, expected):
    resp = Response(id="chatcmpl-1", model="gpt", content=[RefusalPart("I can't help with that.")], stop_reason=stop)
    out = CODEC.encode_response(resp, Context())
    assert out["content"] == [{"type": "text", "text": "I can't help with that."}]
    assert out["stop_reason"] == expected
    plain = CODEC.encode_response(Response(id="x", model="m", content=[TextPart("ok")], stop_reason=stop), Context())
    assert plain["stop_reason"] == {StopReason.END_TURN: "end_turn", None: None}.get(stop, "max_tokens")

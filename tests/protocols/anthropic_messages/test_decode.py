from __future__ import annotations

import json

import orjson
import pytest

from conftest import chunkings
from corpus_loader import requests
from corpus_loader import samples
from dragoman.errors import ClientRequestError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import StreamError
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.anthropic_messages import CODEC
from dragoman.protocols.base import Context
from dragoman.sse import SSEDecoder
from dragoman.sse import SSEEvent

from .helpers import DATA
from .helpers import accumulate_ir
from .helpers import accumulate_raw
from .helpers import sse_events

CORPUS_REQUESTS = [(n, r) for n, _, r in requests("anthropic")]
CC_REQUESTS = sorted(DATA.glob("*.body.json"))
JSON_OK = samples("anthropic", stream=False, ok=True)
JSON_ERR = samples("anthropic", stream=False, ok=False)
STREAMS = samples("anthropic", stream=True)


def base(**kw):
    body = {"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    body.update(kw)
    return body


# ---------------------------------------------------------------- requests


@pytest.mark.parametrize("name,body", CORPUS_REQUESTS, ids=[n for n, _ in CORPUS_REQUESTS])
def test_decode_every_corpus_request(name, body):
    if "max_tokens" not in body:  # a count_tokens request: not a Messages request
        with pytest.raises(ClientRequestError, match="max_tokens"):
            CODEC.decode_request(body)
        return
    req = CODEC.decode_request(body)
    assert req.model == body["model"]
    assert req.max_tokens == body["max_tokens"]
    assert len(req.messages) == len(body["messages"])
    for key in ("cache_control", "context_management", "mcp_servers"):
        assert (key in req.dropped.fields) == (key in body)


@pytest.mark.parametrize("path", CC_REQUESTS, ids=[p.name for p in CC_REQUESTS])
def test_decode_claude_code_request(path):
    body = json.loads(path.read_bytes())
    req = CODEC.decode_request(body)
    assert req.stream is True
    assert req.system[0].text.startswith("x-anthropic-billing-header")
    assert len(req.system) == len(body["system"])
    roles = [m.role for m in req.messages]
    assert roles == [m["role"] for m in body["messages"]]
    if "system" in roles:
        sysmsg = req.messages[roles.index("system")]
        assert sysmsg.parts and isinstance(sysmsg.parts[0], TextPart)
        assert sysmsg.parts[0].text == body["messages"][roles.index("system")]["content"]
    th = body["thinking"]
    assert req.reasoning is not None and req.reasoning.enabled
    assert req.reasoning.adaptive == (th["type"] == "adaptive")
    assert req.reasoning.budget_tokens == th.get("budget_tokens")
    assert req.reasoning.effort == body.get("output_config", {}).get("effort")
    assert req.user == body["metadata"]["user_id"]
    assert {"cache_control", "context_management"} <= set(req.dropped.fields)
    assert len(req.tools) == len(body["tools"])
    assert all(t.kind == "function" and t.parameters == b["input_schema"] for t, b in zip(req.tools, body["tools"]))


def test_claude_code_tool_turn_with_thinking():
    req = CODEC.decode_request(json.loads((DATA / "cc-tool-reasoning--003-POST-v1_messages.body.json").read_bytes()))
    assistant = [m for m in req.messages if m.role == "assistant"][-1]
    think, text, call = assistant.parts
    assert think == ThinkingPart(
        text="The user wants a greeting. (fake thinking)", signature="fake-signature-cfab7b1422904ee0ae6d148a5c3f09bf"
    )
    assert text == TextPart("I'll run a command.")
    assert isinstance(call, ToolCallPart) and call.name == "Bash"
    assert json.loads(call.arguments) == {"command": "echo hi", "description": "Print hi"}
    result = req.messages[-1].parts[0]
    assert result == ToolResultPart(tool_call_id=call.id, content=[TextPart("hi")], is_error=False)


def test_claude_code_denied_tool_is_error():
    req = CODEC.decode_request(json.loads((DATA / "cc-tool-denied--003-POST-v1_messages.body.json").read_bytes()))
    result = req.messages[-1].parts[0]
    assert isinstance(result, ToolResultPart) and result.is_error
    assert "blocked" in result.content[0].text


def test_system_string_and_blocks():
    assert CODEC.decode_request(base(system="be nice")).system == [TextPart("be nice")]
    req = CODEC.decode_request(
        base(
            system=[
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
            ]
        )
    )
    assert req.system == [TextPart("a"), TextPart("b")]
    assert req.dropped.fields == ["cache_control"]


def test_content_blocks():
    body = base(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
                        "title": "a.pdf",
                    },
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
                    {"type": "search_result", "source": "s", "title": "t", "content": []},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": [1, 2]}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "bad"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "BBBB"}},
                        ],
                    }
                ],
            },
        ]
    )
    req = CODEC.decode_request(body)
    u, a, r = req.messages
    assert u.parts == [
        TextPart("look"),
        ImagePart(data="AAAA", media_type="image/png"),
        ImagePart(url="https://x/y.png"),
        FilePart(data="JVBE", media_type="application/pdf", filename="a.pdf"),
        FilePart(data="aGVsbG8=", media_type="text/plain"),
    ]
    assert a.parts == [
        ThinkingPart(text="hmm", signature="sig"),
        ThinkingPart(redacted_data="opaque"),
        ToolCallPart(id="t1", name="f", arguments='{"a":[1,2]}'),
    ]
    assert r.parts == [
        ToolResultPart(
            tool_call_id="t1", content=[TextPart("bad"), ImagePart(data="BBBB", media_type="image/jpeg")], is_error=True
        )
    ]
    assert "content.search_result" in req.dropped.fields


def test_thinking_signature_carry_is_unwrapped():
    wrapped = carry.wrap_responses("rs_1", "ENC")
    body = base(
        messages=[
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "a", "signature": wrapped},
                    {"type": "thinking", "thinking": "b", "signature": carry.UNSIGNED},
                    {"type": "text", "text": "ok"},
                ],
            },
        ]
    )
    parts = CODEC.decode_request(body).messages[1].parts
    assert parts[0] == ThinkingPart(text="a", encrypted_content="ENC", item_id="rs_1")
    assert parts[1] == ThinkingPart(text="b")


def test_tools_and_tool_choice():
    body = base(
        tools=[
            {
                "name": "f",
                "description": "d",
                "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
            },
            {"type": "custom", "name": "g", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {"type": "bash_20250124", "name": "bash"},
        ],
        tool_choice={"type": "tool", "name": "f", "disable_parallel_tool_use": True},
    )
    req = CODEC.decode_request(body)
    assert req.tools[0] == Tool(
        name="f", description="d", parameters={"type": "object", "properties": {"x": {"type": "string"}}}
    )
    assert req.tools[1].kind == "function"
    assert req.tools[2] == Tool(
        name="web_search", kind="builtin", raw={"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    )
    assert req.tools[3].kind == "builtin" and req.tools[3].raw == {"type": "bash_20250124", "name": "bash"}
    assert req.tool_choice.mode == "tool" and req.tool_choice.name == "f"
    assert req.parallel_tool_calls is False
    assert CODEC.decode_request(base(tool_choice={"type": "any"})).parallel_tool_calls is None


def test_sampling_and_reasoning():
    req = CODEC.decode_request(
        base(
            temperature=0.5,
            top_p=0.9,
            top_k=5,
            stop_sequences=["X"],
            stream=True,
            metadata={"user_id": "u1"},
            thinking={"type": "enabled", "budget_tokens": 2048},
            service_tier="auto",
            container="c",
        )
    )
    assert (req.temperature, req.top_p, req.top_k, req.stop, req.stream, req.user) == (0.5, 0.9, 5, ["X"], True, "u1")
    assert req.reasoning.enabled and req.reasoning.budget_tokens == 2048 and not req.reasoning.adaptive
    assert req.dropped.fields == ["service_tier", "container"]
    r = CODEC.decode_request(base(thinking={"type": "disabled"})).reasoning
    assert r.enabled is False
    req = CODEC.decode_request(base(thinking={"type": "adaptive"}, output_config={"effort": "max", "task_budget": 3}))
    assert req.reasoning.adaptive and req.reasoning.effort == "xhigh"
    assert req.dropped.fields == ["output_config.task_budget"]
    req = CODEC.decode_request(base(output_config={"format": {"type": "json_schema", "schema": {"type": "object"}}}))
    assert req.response_format.type == "json_schema" and req.response_format.schema == {"type": "object"}
    assert req.reasoning is None


@pytest.mark.parametrize(
    "body,field",
    [
        ({"max_tokens": 1, "messages": []}, "model"),
        ({"model": "m", "max_tokens": 1}, "messages"),
        ({"model": "m", "messages": []}, "max_tokens"),
        (base(messages=[{"role": "tool", "content": "x"}]), "messages.0.role"),
        (base(messages=[{"role": "user", "content": [{"type": "text"}]}]), "messages.0.content"),
        (base(max_tokens="lots"), "max_tokens"),
        (base(tool_choice={"type": "sometimes"}), "tool_choice.type"),
    ],
)
def test_invalid_requests_name_the_field(body, field):
    with pytest.raises(ClientRequestError) as e:
        CODEC.decode_request(body)
    assert field in str(e.value)
    assert e.value.status_hint == 400


# ---------------------------------------------------------------- whole responses


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
    assert len(resp.content) == len(modelled)
    for b in body["content"]:
        if b["type"] not in ("text", "thinking", "redacted_thinking", "tool_use"):
            assert b["type"] in ctx.dropped.fields
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


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("sample", JSON_ERR, ids=[s.name for s in JSON_ERR])
def test_decode_corpus_errors(sample):
    info = CODEC.decode_error(sample.status, sample.body, {})
    body = json.loads(sample.body)
    assert info.message == body["error"]["message"]
    assert info.code == body["error"]["type"]
    assert info.request_id == body["request_id"]
    assert info.status == sample.status
    assert info.kind in (ErrorKind.INVALID_REQUEST, ErrorKind.NOT_FOUND)


def test_decode_error_types_and_fallbacks():
    body = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    info = CODEC.decode_error(529, body, {"request-id": "req_1", "retry-after": "3"})
    assert (info.kind, info.status, info.request_id, info.retry_after) == (ErrorKind.OVERLOADED, 529, "req_1", "3")
    info = CODEC.decode_error(502, b"<html><title>Bad Gateway</title></html>", {})
    assert info.message == "Bad Gateway" and info.kind is ErrorKind.UPSTREAM_PROTOCOL
    info = CODEC.decode_error(429, b'{"error":{"message":"slow down","type":"requests"}}', {})
    assert info.kind is ErrorKind.RATE_LIMIT and info.message == "slow down"
    info = CODEC.decode_error(500, b"", {})
    assert info.kind is ErrorKind.API_ERROR and "500" in info.message


# ---------------------------------------------------------------- streams


def decode_stream(body_pieces, ctx=None):
    ctx = ctx or Context()
    dec = CODEC.stream_decoder(ctx)
    sse = SSEDecoder()
    out = []
    for piece in body_pieces:
        for ev in sse.feed(piece):
            out.extend(dec.feed(ev))
    for ev in sse.close():
        out.extend(dec.feed(ev))
    out.extend(dec.close())
    return out, dec, ctx


@pytest.mark.parametrize("sample", STREAMS, ids=[s.name for s in STREAMS])
def test_decode_every_corpus_stream(sample):
    expected = accumulate_raw(sample.body)
    raw_types = {o["content_block"]["type"] for _, o in sse_events(sample.body) if o["type"] == "content_block_start"}
    results = []
    for _, pieces in chunkings(sample.body):
        events, dec, ctx = decode_stream(pieces)
        assert dec.done
        assert type(events[0]) is MessageStart and type(events[-1]) is MessageStop
        assert type(events[-2]) is MessageDelta
        blocks = accumulate_ir(events)
        for b in blocks:
            if b["type"] == "thinking" and b["sig"] is None:
                b["sig"] = None
        for b in expected:
            if b["sig"] == "":
                b["sig"] = None
        assert blocks == expected
        for t in raw_types - {"text", "thinking", "redacted_thinking", "tool_use"}:
            assert t in ctx.dropped.fields
        starts = sum(1 for e in events if type(e) is BlockStart)
        stops = sum(1 for e in events if type(e) is BlockStop)
        assert starts == stops == len(expected)
        results.append(events)
    assert all(r == results[0] for r in results)


def test_stream_usage_is_merged_and_totals_include_cache():
    s = next(x for x in STREAMS if "cache-creation" in x.name)
    events, _, _ = decode_stream([s.body])
    start = events[0]
    assert start.usage.input_tokens == 2 + 3068 and start.usage.cache_creation_tokens == 3068
    delta = events[-2]
    assert delta.usage.input_tokens == 6 + 3337 + 6289
    assert (delta.usage.cache_read_tokens, delta.usage.output_tokens) == (6289, 198)
    s = next(x for x in STREAMS if "text-then-tool" in x.name)
    events, _, _ = decode_stream([s.body])
    delta = events[-2]
    assert delta.usage.input_tokens == 377 and delta.usage.output_tokens == 65
    assert delta.stop_reason is StopReason.TOOL_USE


def test_max_tokens_stream_closes_the_unfinished_tool_block():
    s = next(x for x in STREAMS if "max-tokens-mid-tool-input" in x.name)
    events, _, _ = decode_stream([s.body])
    assert type(events[-3]) is BlockStop and events[-2].stop_reason is StopReason.MAX_TOKENS


def frame(obj, event=None):
    return SSEEvent(data=json.dumps(obj), event=event or obj["type"])


MSG_START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
}


def feed_all(objs, ctx=None):
    dec = CODEC.stream_decoder(ctx or Context())
    out = []
    for o in objs:
        out.extend(dec.feed(frame(o)))
    return out, dec


def test_signature_carry_in_stream():
    objs = [
        MSG_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "signature_delta", "signature": carry.wrap_responses("rs_9", "E")},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "signature_delta", "signature": carry.UNSIGNED}},
        {"type": "content_block_stop", "index": 1},
    ]
    out, _ = feed_all(objs)
    sigs = [e for e in out if type(e) is SignatureDelta]
    assert sigs == [SignatureDelta(0, encrypted_content="E")]


def test_tool_use_input_in_start_and_custom_tool():
    ctx = Context(request=Request(model="m", tools=[Tool(name="patch", kind="custom")]))
    objs = [
        MSG_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}},
        },
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "u", "name": "patch", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"input": "line1\\nli'},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": 'ne2"}'}},
        {"type": "content_block_stop", "index": 1},
    ]
    out, _ = feed_all(objs, ctx)
    assert out[1:] == [
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="t", name="f"),
        ToolArgsDelta(0, '{"a":1}'),
        BlockStop(0),
        BlockStart(1, BlockKind.CUSTOM_TOOL_CALL, tool_call_id="u", name="patch"),
        ToolArgsDelta(1, "line1\nline2"),
        BlockStop(1),
    ]


def test_error_event_becomes_stream_error():
    out, dec = feed_all([MSG_START, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}])
    err = out[-1]
    assert type(err) is StreamError
    assert (err.error.kind, err.error.http_status, err.error.message, err.error.code) == (
        ErrorKind.OVERLOADED,
        529,
        "Overloaded",
        "overloaded_error",
    )
    assert dec.close() == []


def test_ping_and_unknown_events_are_skipped_unless_strict():
    out, _ = feed_all([{"type": "ping"}, MSG_START, {"type": "ping"}, {"type": "brand_new", "x": 1}])
    assert [type(e) for e in out] == [MessageStart]
    with pytest.raises(UpstreamProtocolError, match="brand_new"):
        feed_all([MSG_START, {"type": "brand_new"}], Context(strict=True))


@pytest.mark.parametrize(
    "objs,match",
    [
        ([{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}], "WAITING"),
        (
            [MSG_START, {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "x"}}],
            "STREAMING",
        ),
        ([MSG_START, {"type": "content_block_stop", "index": 0}], "without an open block"),
        (
            [MSG_START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}] * 1
            + [{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}],
            "duplicate",
        ),
        ([MSG_START, MSG_START], "message_start in phase STREAMING"),
        ([MSG_START, {"type": "message_stop"}], "message_stop in phase STREAMING"),
        (
            [
                MSG_START,
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}},
            ],
            "input_json_delta in a text block",
        ),
    ],
)
def test_out_of_order_events_raise(objs, match):
    with pytest.raises(UpstreamProtocolError, match=match):
        feed_all(objs)


def test_invalid_json_raises():
    dec = CODEC.stream_decoder(Context())
    with pytest.raises(UpstreamProtocolError):
        dec.feed(SSEEvent(data='{"type":"content_block_stop"}', event="content_block_stop"))


@pytest.mark.parametrize("n,phase", [(0, "WAITING"), (1, "STREAMING"), (3, "TERMINAL")])
def test_close_before_message_stop_names_the_phase(n, phase):
    objs = [
        MSG_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    ][:n]
    _, dec = feed_all(objs)
    with pytest.raises(UpstreamProtocolError, match=phase):
        dec.close()


def test_text_in_block_start_and_stop_details_dropped():
    objs = [
        MSG_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "pre"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": {}}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "refusal", "stop_details": {"type": "refusal"}},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]
    ctx = Context()
    out, dec = feed_all(objs, ctx)
    assert TextDelta(0, "pre") in out
    assert out[-2].stop_reason is StopReason.REFUSAL
    assert out[-2].usage.output_tokens == 2 and out[-2].usage.input_tokens == 3
    assert {"citations", "stop_details"} <= set(ctx.dropped.fields)
    assert dec.done


def test_orjson_is_not_needed_for_padding():
    # the real API pads data lines with spaces after the JSON
    dec = CODEC.stream_decoder(Context())
    assert (
        type(dec.feed(SSEEvent(data=orjson.dumps(MSG_START).decode() + "     ", event="message_start"))[0])
        is MessageStart
    )


def _fast_lane_decoder():
    d = CODEC.stream_decoder(Context())
    d.feed(SSEEvent('{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1}}}'))
    d.feed(SSEEvent('{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'))
    return d


def test_stream_fast_lane_matches_model_rules():
    """Deltas/stops/pings are read as dicts (issue 6); anything the models would coerce or reject
    still goes through the pydantic models, with the same result."""
    d = _fast_lane_decoder()
    assert d.feed(SSEEvent('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}')) == [
        TextDelta(0, "hi")
    ]
    # lax int "0" is coerced by the model, as before
    assert d.feed(SSEEvent('{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"x"}}')) == [
        TextDelta(0, "x")
    ]
    assert d.feed(SSEEvent('{"type":"ping"}')) == []
    with pytest.raises(UpstreamProtocolError, match="invalid Anthropic stream event"):
        d.feed(SSEEvent('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}'))
    with pytest.raises(UpstreamProtocolError, match="thinking_delta in a text block"):
        d.feed(SSEEvent('{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}}'))
    with pytest.raises(UpstreamProtocolError, match="without an open block"):
        d.feed(SSEEvent('{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}'))
    assert d.feed(SSEEvent('{"type":"content_block_stop","index":0}')) == [BlockStop(0)]
    with pytest.raises(UpstreamProtocolError, match="content_block_stop for index 0"):
        d.feed(SSEEvent('{"type":"content_block_stop","index":0}'))

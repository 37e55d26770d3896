"""Anthropic SSE -> IR stream events (``stream_decode``)."""

from __future__ import annotations

import json

import orjson
import pytest

from conftest import chunkings
from corpus_loader import samples
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.events import KEEPALIVE
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import Keepalive
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import StreamError
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.request import Request
from dragoman.ir.request import Tool
from dragoman.protocols.anthropic_messages import CODEC
from dragoman.protocols.base import Context
from dragoman.sse import SSEDecoder
from dragoman.sse import SSEEvent

from .helpers import accumulate_ir
from .helpers import accumulate_raw
from .helpers import sse_events

STREAMS = samples("anthropic", stream=True)


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
            # web searches become IR WebSearch events; only a call that never got its result is dropped
            assert t in ctx.dropped.fields or t == "web_search_tool_result" or t == "server_tool_use"
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


def test_pings_are_keepalives_and_unknown_events_are_skipped_unless_strict():
    out, _ = feed_all([{"type": "ping"}, MSG_START, {"type": "ping"}, {"type": "brand_new", "x": 1}])
    assert [type(e) for e in out] == [Keepalive, MessageStart, Keepalive]
    assert out[0] is KEEPALIVE and out[2] is KEEPALIVE
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
    assert d.feed(SSEEvent('{"type":"ping"}')) == [KEEPALIVE]
    assert d.feed(SSEEvent('{"type": "ping"}')) == [KEEPALIVE]  # through the model
    with pytest.raises(UpstreamProtocolError, match="invalid Anthropic stream event"):
        d.feed(SSEEvent('{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}'))
    with pytest.raises(UpstreamProtocolError, match="thinking_delta in a text block"):
        d.feed(SSEEvent('{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"t"}}'))
    with pytest.raises(UpstreamProtocolError, match="without an open block"):
        d.feed(SSEEvent('{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}'))
    assert d.feed(SSEEvent('{"type":"content_block_stop","index":0}')) == [BlockStop(0)]
    with pytest.raises(UpstreamProtocolError, match="content_block_stop for index 0"):
        d.feed(SSEEvent('{"type":"content_block_stop","index":0}'))

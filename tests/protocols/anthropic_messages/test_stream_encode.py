"""IR stream events -> Anthropic SSE (``stream_encode``), checked with the official SDK's accumulator."""

from __future__ import annotations

import json

import orjson
import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import KEEPALIVE
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import StreamError
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.protocols.anthropic_messages import CODEC
from dragoman.protocols.base import Context
from dragoman.sse import SSEDecoder
from dragoman.translate.stream import StreamTranslator

from .helpers import DATA
from .helpers import accumulate_raw
from .helpers import check_wire_order
from .helpers import sse_events

STREAMS = samples("anthropic", stream=True) + []


CC_REPLY = (DATA / "cc-tool-reasoning--002-reply.sse").read_bytes()


def translate(body_pieces, ctx=None):
    ctx = ctx or Context()
    tr = StreamTranslator(CODEC.stream_decoder(ctx), CODEC.stream_encoder(ctx))
    return run_stream(tr, body_pieces), tr


def _norm(blocks):
    for b in blocks:
        if b["sig"] == "":
            b["sig"] = None
    return blocks


@pytest.mark.parametrize("sample", STREAMS + [None], ids=[s.name for s in STREAMS] + ["claude-code-reply"])
def test_stream_self_round_trip(sample):
    body = sample.body if sample is not None else CC_REPLY
    expected = _norm(accumulate_raw(body))
    outputs = set()
    for _, pieces in chunkings(body):
        out, tr = translate(pieces)
        assert tr.error_info is None
        outputs.add(out)
    assert len(outputs) == 1
    out = outputs.pop()
    evs = check_wire_order(out)
    # every upstream ping is passed on as a keepalive, after the encoder's own framing ping
    pings_in = sum(1 for o in _events(body) if o["type"] == "ping")
    assert sum(1 for o in evs if o["type"] == "ping") == 1 + pings_in
    got = _norm(accumulate_raw(out))
    for b in expected:
        if b["type"] == "thinking" and b["sig"] is None:
            b["sig"] = carry.UNSIGNED
    assert got == expected
    raw = [o for o in _events(body)]
    start_in = next(o for o in raw if o["type"] == "message_start")["message"]
    start_out = evs[0]["message"]
    assert start_out["id"] == start_in["id"] and start_out["model"] == start_in["model"]
    for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        assert start_out["usage"][k] == (start_in["usage"].get(k) or 0)
    delta_in = next(o for o in raw if o["type"] == "message_delta")
    assert evs[-2]["delta"]["stop_reason"] == delta_in["delta"]["stop_reason"]
    assert evs[-2]["usage"]["output_tokens"] == delta_in["usage"]["output_tokens"]


def _events(body):
    return [o for _, o in sse_events(body)]


def encode_ir(events, ctx=None):
    e = CODEC.stream_encoder(ctx or Context())
    return b"".join(e.encode(ev) for ev in events) + e.close()


def test_interleaved_tool_calls_come_out_sequential():
    events = [
        MessageStart("chatcmpl-9", "gpt", Usage(input_tokens=50, cache_read_tokens=20)),
        BlockStart(0, BlockKind.TEXT),
        TextDelta(0, "Let me check."),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="call_a", name="weather"),
        ToolArgsDelta(1, '{"city":'),
        BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="call_b", name="time"),
        ToolArgsDelta(2, '{"tz":'),
        ToolArgsDelta(1, '"Paris"}'),
        BlockStart(3, BlockKind.TOOL_CALL, tool_call_id="call_c", name="news"),
        ToolArgsDelta(3, "{}"),
        ToolArgsDelta(2, '"CET"}'),
        BlockStop(2),
        BlockStop(3),
        BlockStop(1),
        BlockStop(0),
        MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=50, output_tokens=30, cache_read_tokens=20)),
        MessageStop(),
    ]
    out = encode_ir(events)
    evs = check_wire_order(out)
    blocks = accumulate_raw(out)
    assert [(b["type"], b.get("id"), b["args"], b["text"]) for b in blocks] == [
        ("text", None, "", "Let me check."),
        ("tool_use", "call_a", '{"city":"Paris"}', ""),
        ("tool_use", "call_b", '{"tz":"CET"}', ""),
        ("tool_use", "call_c", "{}", ""),
    ]
    assert evs[0]["message"]["id"] == "msg_chatcmpl-9"
    assert evs[0]["message"]["usage"] == {
        "input_tokens": 30,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 20,
        "output_tokens": 0,
    }
    assert evs[-2]["usage"] == {
        "input_tokens": 30,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 20,
        "output_tokens": 30,
    }
    assert evs[-2]["delta"] == {"stop_reason": "tool_use", "stop_sequence": None}


def test_text_interrupted_and_resumed_opens_a_fresh_block():
    events = [
        MessageStart("msg_1", "m"),
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "think"),
        BlockStart(1, BlockKind.TEXT),
        TextDelta(1, "a"),
        SignatureDelta(0, signature="late"),
        ThinkingDelta(0, " more"),
        BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="t", name="f"),
        TextDelta(1, "b"),
        ToolArgsDelta(2, "{}"),
        BlockStop(0),
        BlockStop(2),
        BlockStop(1),
        MessageDelta(StopReason.TOOL_USE),
        MessageStop(),
    ]
    out = encode_ir(events)
    check_wire_order(out)
    blocks = accumulate_raw(out)
    assert [(b["type"], b["text"], b["sig"]) for b in blocks] == [
        ("thinking", "think", carry.UNSIGNED),
        ("text", "a", None),
        ("thinking", " more", "late"),
        ("tool_use", "", None),
        ("text", "b", None),
    ]


def test_thinking_signatures_and_redacted_and_custom_tool():
    events = [
        MessageStart("resp_1", "m"),
        BlockStart(0, BlockKind.THINKING, item_id="rs_1"),
        ThinkingDelta(0, "summary", summary=True),
        SignatureDelta(0, encrypted_content="ENC"),
        BlockStop(0),
        BlockStart(1, BlockKind.REDACTED_THINKING, data="RD"),
        BlockStop(1),
        BlockStart(2, BlockKind.CUSTOM_TOOL_CALL, tool_call_id="call_p", name="apply_patch"),
        ToolArgsDelta(2, '*** Begin "Patch"\n'),
        ToolArgsDelta(2, "\\ é 𝄞"),
        BlockStop(2),
        BlockStart(3, BlockKind.REFUSAL),
        TextDelta(3, "I can't"),
        BlockStop(3),
        MessageDelta(StopReason.REFUSAL),
        MessageStop(),
    ]
    out = encode_ir(events)
    evs = check_wire_order(out)
    assert evs[0]["message"]["id"] == "msg_resp_1"
    blocks = accumulate_raw(out)
    assert blocks[0]["sig"] == carry.wrap_responses("rs_1", "ENC")
    assert blocks[1]["data"] == "RD"
    assert json.loads(blocks[2]["args"]) == {"input": '*** Begin "Patch"\n\\ é 𝄞'}
    assert blocks[3] == {"type": "text", "text": "I can't", "args": "", "sig": None}
    # and the signature carries back through the decoder
    dec = CODEC.stream_decoder(Context())
    sse = SSEDecoder()
    ir = [e for s in sse.feed(out) for e in dec.feed(s)]
    assert SignatureDelta(0, encrypted_content="ENC") in ir


def test_empty_message_and_missing_message_delta():
    out = encode_ir([MessageStart("x", "m"), MessageDelta(StopReason.REFUSAL, Usage(output_tokens=3)), MessageStop()])
    names = [line for line in out.split(b"\n") if line.startswith(b"event:")]
    assert names == [b"event: message_start", b"event: ping", b"event: message_delta", b"event: message_stop"]
    out = encode_ir([MessageStart("x", "m"), BlockStart(0, BlockKind.TEXT), TextDelta(0, "hi"), MessageStop()])
    evs = check_wire_order(out)
    assert evs[-2]["delta"]["stop_reason"] == "end_turn"


def test_encoder_order_errors():
    e = CODEC.stream_encoder(Context())
    e.encode(MessageStart("x", "m"))
    with pytest.raises(UpstreamProtocolError, match="duplicate MessageStart"):
        e.encode(MessageStart("x", "m"))
    with pytest.raises(UpstreamProtocolError, match="unknown block index 5"):
        e.encode(TextDelta(5, "x"))
    e.encode(BlockStart(0, BlockKind.TEXT))
    with pytest.raises(UpstreamProtocolError, match="duplicate BlockStart"):
        e.encode(BlockStart(0, BlockKind.TEXT))


def test_encoder_error_frame_and_sdk_raises():
    e = CODEC.stream_encoder(Context())
    head = e.encode(MessageStart("x", "m")) + e.encode(BlockStart(0, BlockKind.TEXT)) + e.encode(TextDelta(0, "par"))
    frame = e.encode(StreamError(ErrorInfo(ErrorKind.OVERLOADED, "Overloaded", request_id="req_1")))
    assert (
        frame
        == b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}\n\n'
    )
    assert e.encode(TextDelta(0, "more")) == b"" and e.close() == b""
    anthropic, httpx = _sdk()
    client = _client(anthropic, httpx, head + frame)
    with pytest.raises(anthropic.APIStatusError) as err:
        with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
            s.get_final_message()
    assert err.value.body["error"]["type"] == "overloaded_error"


def test_translator_turns_upstream_error_event_into_client_error_frame():
    body = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1}}}\n\n'
        b'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"slow"}}\n\n'
    )
    for _, pieces in chunkings(body):
        out, tr = translate(pieces)
        assert out.endswith(
            b'event: error\ndata: {"type":"error","error":{"type":"rate_limit_error","message":"slow"}}\n\n'
        )
        assert tr.error_info.kind is ErrorKind.RATE_LIMIT


def test_translator_reports_an_early_end():
    body = b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"m"}}\n\n'
    out, tr = translate([body])
    assert b"event: error" in out and "STREAMING" in tr.error_info.message
    assert tr.error_info.kind is ErrorKind.UPSTREAM_PROTOCOL


def _sdk():
    anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is not installed")
    try:
        import httpx2 as httpx
    except ImportError:  # older SDKs use httpx
        httpx = pytest.importorskip("httpx", reason="httpx is not installed")
    return anthropic, httpx


def _client(anthropic, httpx, body: bytes):
    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return anthropic.Anthropic(
        api_key="test",
        base_url="http://127.0.0.1:9",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def _final(body: bytes):
    anthropic, httpx = _sdk()
    client = _client(anthropic, httpx, body)
    with client.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]) as s:
        return s.get_final_message()


@pytest.mark.parametrize("sample", STREAMS + [None], ids=[s.name for s in STREAMS] + ["claude-code-reply"])
def test_sdk_accumulates_our_output(sample):
    body = sample.body if sample is not None else CC_REPLY
    out, _ = translate([body])
    msg = _final(out)
    expected = _norm(accumulate_raw(body))
    content = [b for b in msg.content if b.type not in ("server_tool_use", "web_search_tool_result")]
    assert len(content) == len(expected)
    for block, exp in zip(content, expected):
        assert block.type == exp["type"]
        if exp["type"] == "text":
            assert block.text == exp["text"]
        elif exp["type"] == "thinking":
            assert block.thinking == exp["text"]
            assert block.signature == (exp["sig"] or carry.UNSIGNED)
        elif exp["type"] == "redacted_thinking":
            assert block.data == exp["data"]
        else:
            assert block.id == exp["id"] and block.name == exp["name"]
            if exp["args"]:
                try:
                    args = orjson.loads(exp["args"])
                except orjson.JSONDecodeError:  # the max_tokens sample ends mid-JSON
                    continue
                assert block.input == args
            else:
                assert block.input == {}
    raw = _events(body)
    assert msg.stop_reason == next(o for o in raw if o["type"] == "message_delta")["delta"]["stop_reason"]
    assert msg.id == next(o for o in raw if o["type"] == "message_start")["message"]["id"]


def test_sdk_accumulates_interleaved_tool_calls():
    events = [
        MessageStart("chatcmpl-1", "gpt"),
        BlockStart(0, BlockKind.THINKING),
        ThinkingDelta(0, "plan"),
        BlockStop(0),
        BlockStart(1, BlockKind.TOOL_CALL, tool_call_id="call_a", name="a"),
        BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="call_b", name="b"),
        ToolArgsDelta(2, '{"y": [1, '),
        ToolArgsDelta(1, '{"x": "é'),
        ToolArgsDelta(2, "2]}"),
        ToolArgsDelta(1, '"}'),
        BlockStart(3, BlockKind.CUSTOM_TOOL_CALL, tool_call_id="call_c", name="apply_patch"),
        ToolArgsDelta(3, 'line "1"\n'),
        BlockStop(1),
        BlockStop(2),
        BlockStop(3),
        MessageDelta(StopReason.TOOL_USE, Usage(input_tokens=10, output_tokens=4)),
        MessageStop(),
    ]
    msg = _final(encode_ir(events))
    assert [b.type for b in msg.content] == ["thinking", "tool_use", "tool_use", "tool_use"]
    assert msg.content[0].thinking == "plan" and msg.content[0].signature == carry.UNSIGNED
    assert msg.content[1].id == "call_a" and msg.content[1].input == {"x": "é"}
    assert msg.content[2].id == "call_b" and msg.content[2].input == {"y": [1, 2]}
    assert msg.content[3].input == {"input": 'line "1"\n'}
    assert msg.stop_reason == "tool_use" and msg.usage.output_tokens == 4 and msg.usage.input_tokens == 10


def test_delta_fast_path_bytes_match_encode_json():
    """The prebuilt delta prefix produces exactly what encode_json of the event dict produces."""
    from dragoman.sse import encode_json

    e = CODEC.stream_encoder(Context())
    e.encode(MessageStart("m1", "claude"))
    e.encode(BlockStart(0, BlockKind.THINKING))
    got = e.encode(ThinkingDelta(0, 'q"\\\n€'))
    want = encode_json(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": 'q"\\\n€'}},
    )
    assert got == want
    e.encode(BlockStart(1, BlockKind.TEXT))  # closes the thinking block; text opens at wire index 1
    got = e.encode(TextDelta(1, "hé"))
    assert got == encode_json(
        "content_block_delta",
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "hé"}},
    )


def _usage_of(out: bytes, event: str) -> dict:
    obj = next(o for name, o in sse_events(out) if name == event)
    return obj["message"]["usage"] if event == "message_start" else obj["usage"]


def test_message_start_shows_the_input_estimate_when_the_upstream_reports_usage_at_the_end():
    """Issue 11 item 6: a Chat/Responses upstream's MessageStart has no usage; the client's message_start
    shows the request's estimate (``ctx.input_tokens_estimate``), message_delta the upstream's figures."""
    ctx = Context(input_tokens_estimate=8234)
    final = Usage(input_tokens=12, output_tokens=7, cache_read_tokens=4)
    out = encode_ir(
        [MessageStart("chatcmpl-1", "gpt"), BlockStart(0, BlockKind.TEXT), TextDelta(0, "hi"), BlockStop(0)]
        + [MessageDelta(StopReason.END_TURN, final), MessageStop()],
        ctx,
    )
    check_wire_order(out)
    assert _usage_of(out, "message_start") == {
        "input_tokens": 8234,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 0,
    }
    assert _usage_of(out, "message_delta") == {
        "input_tokens": 8,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 4,
        "output_tokens": 7,
    }
    # the official SDK's accumulated message ends with the upstream's figures, not the estimate
    u = _final(out).usage
    assert (u.input_tokens, u.cache_read_input_tokens, u.output_tokens) == (8, 4, 7)
    # a message_start the encoder opens itself (the upstream's first event is a block) carries it too
    out = encode_ir([BlockStart(0, BlockKind.TEXT), TextDelta(0, "hi"), BlockStop(0), MessageStop()], ctx)
    assert _usage_of(out, "message_start")["input_tokens"] == 8234
    # output tokens reported early are kept beside the estimate
    out = encode_ir([MessageStart("r", "m", Usage(output_tokens=1)), MessageStop()], ctx)
    assert _usage_of(out, "message_start")["input_tokens"] == 8234
    assert _usage_of(out, "message_start")["output_tokens"] == 1


def test_message_start_keeps_the_upstreams_own_input_figure():
    ctx = Context(input_tokens_estimate=8234)
    out = encode_ir([MessageStart("m", "c", Usage(input_tokens=30, cache_read_tokens=20)), MessageStop()], ctx)
    assert _usage_of(out, "message_start")["input_tokens"] == 10
    assert _usage_of(out, "message_start")["cache_read_input_tokens"] == 20
    # no estimate on the context (a non-Anthropic client's request, a whole response): 0 as the API has it
    out = encode_ir([MessageStart("m", "c"), MessageStop()], Context())
    assert _usage_of(out, "message_start")["input_tokens"] == 0


@pytest.mark.parametrize(
    "stop,expected",
    [(StopReason.END_TURN, "refusal"), (None, "refusal"), (StopReason.MAX_TOKENS, "max_tokens"), ("none", "refusal")],
)
def test_refusal_block_says_refusal_in_the_stop_reason(stop, expected):
    # a Chat refusal (finish_reason "stop") or a Responses refusal part: Anthropic says it with stop_reason;
    # "none": no MessageDelta at all (the encoder writes the message_delta itself)
    end = [MessageStop()] if stop == "none" else [MessageDelta(stop, Usage(output_tokens=2)), MessageStop()]
    refusal = [MessageStart("x", "m"), BlockStart(0, BlockKind.REFUSAL), TextDelta(0, "I can't"), BlockStop(0)]
    evs = check_wire_order(encode_ir(refusal + end))
    assert evs[1]["content_block"] == {"type": "text", "text": ""}
    assert [e["delta"]["text"] for e in evs if e["type"] == "content_block_delta"] == ["I can't"]
    assert [e["delta"]["stop_reason"] for e in evs if e["type"] == "message_delta"] == [expected]
    text = [MessageStart("x", "m"), BlockStart(0, BlockKind.TEXT), TextDelta(0, "ok"), BlockStop(0)]
    evs = check_wire_order(encode_ir(text + end))
    assert [e["delta"]["stop_reason"] for e in evs if e["type"] == "message_delta"] == [
        "max_tokens" if stop is StopReason.MAX_TOKENS else "end_turn"
    ]


def test_keepalive_per_phase():
    """A comment before message_start (the SDK's stream helper rejects any event before it), a ping after,
    nothing once the stream ended; ``encode(KEEPALIVE)`` is the same."""
    enc = CODEC.stream_encoder(Context())
    assert enc.keepalive() == b": keepalive\n\n" == enc.encode(KEEPALIVE)
    enc.encode(MessageStart(id="msg_1", model="m"))
    ping = b'event: ping\ndata: {"type":"ping"}\n\n'
    assert enc.keepalive() == ping == enc.encode(KEEPALIVE)
    enc.encode(BlockStart(0, BlockKind.TEXT))
    enc.encode(TextDelta(0, "x"))
    assert enc.keepalive() == ping
    enc.encode(BlockStop(0))
    enc.encode(MessageDelta(StopReason.END_TURN))
    assert enc.keepalive() == ping
    enc.encode(MessageStop())
    assert enc.keepalive() == b""
    failed = CODEC.stream_encoder(Context())
    failed.error(ErrorInfo(kind=ErrorKind.API_ERROR, message="x", status=500))
    assert failed.keepalive() == b""

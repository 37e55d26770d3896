"""Chat SSE -> IR: synthesized blocks, interleaved tool calls, held MessageDelta (corpus over chunkings)."""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
from corpus_loader import samples
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import StopReason
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import StreamError
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.mapping import chat_stop
from dragoman.ir.request import Request
from dragoman.ir.request import Tool
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.sse import SSEEvent

from .helpers import accumulate_ir
from .helpers import accumulate_raw
from .helpers import decode_stream

STREAMS = samples("openai-chat", stream=True)


@pytest.mark.parametrize("s", STREAMS, ids=[s.name for s in STREAMS])
def test_corpus_streams_decode_over_chunkings(s):
    ref = None
    for label, pieces in chunkings(s.body, seeds=2):
        events = decode_stream(pieces)
        if ref is None:
            ref = events
        assert events == ref, label


@pytest.mark.parametrize("s", STREAMS, ids=[s.name for s in STREAMS])
def test_corpus_streams_match_raw_accumulation(s):
    events = decode_stream([s.body])
    raw = accumulate_raw(s.body)
    ir = accumulate_ir(events)
    assert ir["text"] == raw["text"]
    assert ir["reasoning"] == raw["reasoning"]
    assert ir["refusal"] == raw["refusal"]
    assert [(t["id"], t["name"], t["arguments"]) for t in ir["tools"]] == [
        (t["id"], t["name"], t["arguments"]) for _, t in sorted(raw["tools"].items())
    ]
    if raw["error"] is not None:
        assert type(events[-1]) is StreamError
        assert events[-1].error.message == raw["error"]["message"]
        return
    assert type(events[-1]) is MessageStop
    assert ir["stop"] == chat_stop(raw["finish"])
    if raw["usage"] is not None:
        assert ir["usage"].input_tokens == raw["usage"]["prompt_tokens"]
        assert ir["usage"].output_tokens == raw["usage"]["completion_tokens"]


def test_midstream_errors_yield_stream_error():
    names = [s for s in STREAMS if "midstream" in s.name]
    errors = [decode_stream([s.body])[-1] for s in names]
    assert any(type(e) is StreamError for e in errors)
    groq = decode_stream([next(s for s in names if "groq" in s.name and s.name.endswith("#0")).body])[-1]
    assert type(groq) is StreamError and groq.error.code == "tool_use_failed"
    orr = decode_stream([next(s for s in names if "openrouter" in s.name).body])[-1]
    assert type(orr) is StreamError and orr.error.status == 400 and orr.error.message == "Token limit reached"


def _chunk(delta=None, finish=None, usage=None, choices=True):
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 5, "model": "m"}
    obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _tc(index, id=None, name=None, args=None):
    fn = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    tc = {"index": index, "function": fn}
    if id is not None:
        tc["id"] = id
        tc["type"] = "function"
    return {"tool_calls": [tc]}


INTERLEAVED = b"".join(
    [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Checking"}),
        _chunk(_tc(0, "call_a", "weather", "")),
        _chunk(_tc(1, "call_b", "time", "")),
        _chunk(_tc(0, args='{"city":')),
        _chunk(_tc(1, args='{"tz":')),
        _chunk(_tc(0, args='"Paris"}')),
        _chunk(_tc(1, args='"CET"}')),
        _chunk(finish="tool_calls"),
        _chunk(usage={"prompt_tokens": 9, "completion_tokens": 3}, choices=False),
        b"data: [DONE]\n\n",
    ]
)


def test_interleaved_tool_calls():
    for label, pieces in chunkings(INTERLEAVED):
        events = decode_stream(pieces)
        assert events[0] == MessageStart(id="chatcmpl-1", model="m", usage=None, created=5), label
        starts = [e for e in events if type(e) is BlockStart]
        assert [(s.kind, s.tool_call_id, s.name) for s in starts] == [
            (BlockKind.TEXT, None, None),
            (BlockKind.TOOL_CALL, "call_a", "weather"),
            (BlockKind.TOOL_CALL, "call_b", "time"),
        ]
        args = {
            s.index: "".join(e.fragment for e in events if type(e) is ToolArgsDelta and e.index == s.index)
            for s in starts[1:]
        }
        assert list(args.values()) == ['{"city":"Paris"}', '{"tz":"CET"}']
        # the text block closes when the first tool call starts; tool blocks stay open until finish_reason
        text_stop = events.index(BlockStop(starts[0].index))
        assert text_stop < events.index(starts[1])
        md = next(e for e in events if type(e) is MessageDelta)
        assert md.stop_reason is StopReason.TOOL_USE
        assert md.usage.input_tokens == 9 and md.usage.output_tokens == 3
        assert type(events[-1]) is MessageStop


def test_tool_index_starting_at_one_and_repeated_names():
    body = b"".join(
        [
            _chunk({"role": "assistant"}),
            _chunk(_tc(1, "t1", "read", "")),
            _chunk(_tc(1, "t1", "read", '{"a":')),
            _chunk(_tc(1, "t1", "read", "1}")),
            _chunk(finish="tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )
    events = decode_stream([body])
    assert [type(e).__name__ for e in events] == [
        "MessageStart",
        "BlockStart",
        "ToolArgsDelta",
        "ToolArgsDelta",
        "BlockStop",
        "MessageDelta",
        "MessageStop",
    ]
    assert events[1].tool_call_id == "t1"
    assert "".join(e.fragment for e in events if type(e) is ToolArgsDelta) == '{"a":1}'


def test_reasoning_then_text_blocks_and_held_message_delta():
    body = b"".join(
        [
            _chunk({"role": "assistant", "reasoning_content": "th"}),
            _chunk({"reasoning_content": "ink"}),
            _chunk({"content": "answer"}),
            _chunk({"refusal": "no"}),
            _chunk(finish="stop", usage={"prompt_tokens": 2, "completion_tokens": 1}),
        ]
    )
    events = decode_stream([body])  # no [DONE]: close() finishes after finish_reason
    kinds = [e.kind for e in events if type(e) is BlockStart]
    assert kinds == [BlockKind.THINKING, BlockKind.TEXT, BlockKind.REFUSAL]
    assert "".join(e.text for e in events if type(e) is ThinkingDelta) == "think"
    assert [e.text for e in events if type(e) is TextDelta] == ["answer", "no"]
    assert events[-2] == MessageDelta(StopReason.END_TURN, events[-2].usage)
    assert events[-2].usage.input_tokens == 2


def test_custom_tool_call_stream_unwrapped():
    ctx = Context(request=Request(model="m", tools=[Tool(name="patch", kind="custom")]))
    body = b"".join(
        [
            _chunk(_tc(0, "c", "patch", '{"input":"a\\n')),
            _chunk(_tc(0, args='b"}')),
            _chunk(finish="tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )
    events = decode_stream([body], ctx)
    assert events[1].kind is BlockKind.CUSTOM_TOOL_CALL
    assert [e.fragment for e in events if type(e) is ToolArgsDelta] == ["a\nb"]


def test_stream_ended_before_finish_reason():
    with pytest.raises(UpstreamProtocolError, match="finish_reason"):
        decode_stream([_chunk({"content": "partial"})])


def test_done_without_finish_reason_is_inferred():
    events = decode_stream([_chunk(_tc(0, "c", "f", "{}")) + b"data: [DONE]\n\n"])
    assert events[-2].stop_reason is StopReason.TOOL_USE


def test_out_of_order_and_bad_chunks():
    dec = CODEC.stream_decoder(Context())
    with pytest.raises(UpstreamProtocolError):
        dec.feed(SSEEvent(data="[DONE]"))
    dec = CODEC.stream_decoder(Context())
    with pytest.raises(UpstreamProtocolError, match="not valid JSON"):
        dec.feed(SSEEvent(data="{nope"))
    dec = CODEC.stream_decoder(Context())
    with pytest.raises(UpstreamProtocolError, match="function.name"):
        dec.feed(SSEEvent(data=json.dumps({"id": "x", "choices": [{"delta": _tc(0, args="{}")}]})))


def test_groq_error_event_without_error_key():
    dec = CODEC.stream_decoder(Context())
    evs = dec.feed(SSEEvent(data='{"message":"boom"}', event="error"))
    assert type(evs[0]) is StreamError and evs[0].error.message == "boom"
    assert dec.done and dec.feed(SSEEvent(data="[DONE]")) == [] and dec.close() == []


# ---------------------------------------------------------------- several choices (n > 1)


def _choices(*choices, usage=None):
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 5, "model": "m", "choices": list(choices)}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _c(index, delta=None, finish=None):
    return {"index": index, "delta": delta or {}, "finish_reason": finish}


def _essence(events):
    acc = accumulate_ir(events)
    return acc["text"], acc["reasoning"], [(t["id"], t["name"], t["arguments"]) for t in acc["tools"]], acc["stop"]


N3 = next(s for s in STREAMS if s.name == "chat/openai-python__stream-n3-choices.sse")


def test_real_n3_stream_gives_choice_0_only_and_reports_the_rest():
    want = '{"city":"San Francisco","temperature":65,"units":"f"}'  # choice 0 of the live recording
    for label, pieces in chunkings(N3.body):
        ctx = Context()
        events = decode_stream(pieces, ctx)
        assert _essence(events) == (want, "", [], StopReason.END_TURN), label
        assert [e.kind for e in events if type(e) is BlockStart] == [BlockKind.TEXT], label
        assert events[-2].usage.output_tokens == 42  # the upstream's figure (all choices)
        assert ctx.dropped.fields == ["choices[1:]"], label


def test_several_choices_in_one_chunk_and_choices_after_choice_0_finished():
    body = b"".join(
        [
            _choices(_c(0, {"role": "assistant", "content": ""}), _c(1, {"role": "assistant", "content": ""})),
            _choices(_c(1, {"content": "B1 "}), _c(0, {"content": "A1 "})),  # choice 0 second in the list
            _choices(_c(0, {"reasoning_content": "hm"})),
            _choices(_c(1, {"content": "B2"})),
            _choices(_c(0, {"content": "A2"}), _c(1, _tc(0, "call_b", "f", "{}"))),
            _choices(_c(0, finish="stop")),
            _choices(_c(1, {"content": "B3"})),  # choice 1 goes on after choice 0 finished
            _choices(_c(1, finish="length")),
            _choices(usage={"prompt_tokens": 4, "completion_tokens": 9}),
            b"data: [DONE]\n\n",
        ]
    )
    for label, pieces in chunkings(body):
        ctx = Context()
        events = decode_stream(pieces, ctx)
        assert _essence(events) == ("A1 A2", "hm", [], StopReason.END_TURN), label
        assert events[-2].usage.input_tokens == 4 and ctx.dropped.fields == ["choices[1:]"], label


def test_choice_without_index_is_choice_0_and_one_choice_drops_nothing():
    body = (
        _choices({"delta": {"content": "hi"}}) + _choices({"delta": {}, "finish_reason": "stop"}) + b"data: [DONE]\n\n"
    )
    ctx = Context()
    assert _essence(decode_stream([body], ctx))[0] == "hi" and ctx.dropped.fields == []
    ctx = Context()
    decode_stream([INTERLEAVED], ctx)
    assert ctx.dropped.fields == []


def test_tool_calls_of_another_choice_never_reach_choice_0():
    body = b"".join(
        [
            _choices(_c(0, _tc(0, "call_a", "weather", '{"city":"Paris"}'))),
            _choices(_c(1, _tc(0, "call_b", "time", '{"tz":'))),
            _choices(_c(1, _tc(0, args='"CET"}'))),
            _choices(_c(0, finish="tool_calls"), _c(1, finish="tool_calls")),
            b"data: [DONE]\n\n",
        ]
    )
    for label, pieces in chunkings(body):
        ctx = Context()
        events = decode_stream(pieces, ctx)
        assert _essence(events) == ("", "", [("call_a", "weather", '{"city":"Paris"}')], StopReason.TOOL_USE), label
        assert ctx.dropped.fields == ["choices[1:]"]


# ---------------------------------------------------------------- refusals


REFUSAL = next(s for s in STREAMS if s.name == "chat/openai-python__stream-refusal.sse")


def test_real_refusal_stream_is_one_refusal_block():
    for label, pieces in chunkings(REFUSAL.body):
        events = decode_stream(pieces)
        assert [e.kind for e in events if type(e) is BlockStart] == [BlockKind.REFUSAL], label
        acc = accumulate_ir(events)
        assert acc["refusal"] == "I'm sorry, I can't assist with that request." and acc["text"] == ""
        # OpenAI ends a refusal with "stop": the IR keeps it; a client protocol without refusal content
        # (Anthropic) turns it into its own refusal stop reason (ir.mapping.refused_stop)
        assert acc["stop"] is StopReason.END_TURN


def _stop_after_tool_calls_stream(finish: str) -> bytes:
    def chunk(delta: dict, fr: str | None = None) -> str:
        c = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        return "data: " + json.dumps({**c, "choices": [{"index": 0, "delta": delta, "finish_reason": fr}]}) + "\n\n"

    tc = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
    return (chunk({"role": "assistant", "tool_calls": [tc]}) + chunk({}, finish) + "data: [DONE]\n\n").encode()


@pytest.mark.parametrize(
    "finish,want",
    [("stop", StopReason.TOOL_USE), ("tool_calls", StopReason.TOOL_USE), ("length", StopReason.MAX_TOKENS)],
)
def test_stop_after_tool_calls_is_a_tool_use_stop(finish, want):
    """Gemini's compat layer and some local servers end a tool-call turn with ``stop``: the calls are the
    answer (an Anthropic client would otherwise see ``end_turn`` with tool_use blocks and not run them)."""
    body = _stop_after_tool_calls_stream(finish)
    for label, pieces in chunkings(body):
        events = decode_stream(pieces)
        [md] = [e for e in events if type(e) is MessageDelta]
        assert md.stop_reason is want, label
    whole = {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "call_1", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
                    ],
                },
            }
        ],
    }
    assert CODEC.decode_response(whole, Context()).stop_reason is want
    text_only = {**whole, "choices": [{**whole["choices"][0], "message": {"role": "assistant", "content": "hi"}}]}
    if finish == "stop":
        assert CODEC.decode_response(text_only, Context()).stop_reason is StopReason.END_TURN

"""Gemini stream events -> IR events, over every chunking, on real recordings and edge cases."""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
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
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.request import Request
from dragoman.ir.request import Tool
from dragoman.protocols.base import Context
from protocols.gemini.helpers import chunks
from protocols.gemini.helpers import decode_stream
from validators import gemini as vg


def _calls(events) -> list[tuple[str, str, dict]]:
    starts = {e.index: e for e in events if type(e) is BlockStart and e.kind is BlockKind.TOOL_CALL}
    args: dict[int, str] = {}
    for e in events:
        if type(e) is ToolArgsDelta:
            args[e.index] = args.get(e.index, "") + e.fragment
    return [(s.tool_call_id, s.name, json.loads(args.get(i, "{}"))) for i, s in starts.items()]


def _every_chunking(body: bytes):
    outs = [decode_stream(pieces) for _, pieces in chunkings(body)]
    assert all(o == outs[0] for o in outs)
    return outs[0]


@pytest.mark.parametrize(
    "name",
    [
        "google-stream-tool-call-arguments",
        "google-vertex-stream-tool-call-arguments-nested.1",
        "google-stream-tool-call-array-arguments-missing-terminal-function-call",
        "google-stream-no-args-tool-call",
        "google-tool-call-gemini3",
        "google-tool-call",
    ],
)
def test_calls_match_an_independent_assembly(name):
    body = chunks(name)
    events = _every_chunking(body)
    want = [(t.name, json.loads(t.arguments)) for t in vg.validate_stream(body, strict=False).tool_calls]
    got = _calls(events)
    assert [(n, a) for _, n, a in got] == want
    assert len({cid for cid, _, _ in got}) == len(got)  # one id per call, made up when Gemini gives none
    assert events[-2] == MessageDelta(StopReason.TOOL_USE, events[-2].usage)  # STOP after calls: tool use
    assert type(events[-1]) is MessageStop


def test_streamed_arguments_stream_as_they_arrive():
    events = decode_stream([chunks("google-stream-tool-call-arguments")])
    first = [e.fragment for e in events if type(e) is ToolArgsDelta][:3]
    assert first == ['{"location":"Boston', '"}', '{"location":"San Francisco']  # empty fragments send nothing


def test_signature_rides_on_a_thinking_block_before_its_call():
    events = decode_stream([chunks("google-tool-call-gemini3")])
    sig = next(e for e in events if type(e) is SignatureDelta)
    call = next(e for e in events if type(e) is BlockStart and e.kind is BlockKind.TOOL_CALL)
    assert events.index(sig) < events.index(call)
    native = json.loads((chunks("google-tool-call-gemini3").split(b"\n\n")[0])[6:])
    want = native["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    assert carry.unwrap_gemini(sig.signature) == {call.tool_call_id: want}


def test_thought_summaries_are_thinking_and_usage_counts_thoughts():
    events = decode_stream([chunks("google-stream-no-args-tool-call")])
    assert any(type(e) is ThinkingDelta and e.summary for e in events)
    text = decode_stream([chunks("google-reasoning-gemini3")])
    assert "".join(e.text for e in text if type(e) is TextDelta).startswith("There are **3**")
    usage = text[-2].usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (9, 23 + 302, 302)
    # the signature on the last, empty text part: a thinking block of its own after the text
    assert type(text[-4]) is SignatureDelta and type(text[-3]) is BlockStop


def _sse(*objs) -> bytes:
    return b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in objs)


def test_in_band_error_and_blocked_prompt():
    err = decode_stream([_sse({"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}})])
    assert type(err[-1]) is StreamError and err[-1].error.kind is ErrorKind.RATE_LIMIT
    blocked = decode_stream([_sse({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "responseId": "r"})])
    assert [type(e) for e in blocked] == [MessageStart, BlockStart, TextDelta, BlockStop, MessageDelta, MessageStop]
    assert blocked[1].kind is BlockKind.REFUSAL and "PROHIBITED_CONTENT" in blocked[2].text
    assert blocked[4].stop_reason is StopReason.REFUSAL


def test_a_stream_without_finish_reason_ended_early():
    with pytest.raises(UpstreamProtocolError, match="without a finishReason"):
        decode_stream([_sse({"candidates": [{"content": {"role": "model", "parts": [{"text": "a"}]}}]})])


def test_custom_tool_input_is_unwrapped():
    ctx = Context(request=Request(model="m", tools=[Tool(name="apply_patch", kind="custom")]))
    fc = {"functionCall": {"name": "apply_patch", "args": {"input": "*** Begin Patch"}}}
    ev = {"candidates": [{"content": {"role": "model", "parts": [fc]}, "finishReason": "STOP"}]}
    events = decode_stream([_sse(ev)], ctx)
    start = next(e for e in events if type(e) is BlockStart)
    assert start.kind is BlockKind.CUSTOM_TOOL_CALL
    assert [e.fragment for e in events if type(e) is ToolArgsDelta] == ["*** Begin Patch"]


def test_code_assist_wrapped_events_are_read():
    inner = {"candidates": [{"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}]}
    events = decode_stream([_sse({"response": inner, "traceId": "t"})])
    assert [e.text for e in events if type(e) is TextDelta] == ["hi"]

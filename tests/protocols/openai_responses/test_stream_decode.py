"""Upstream Responses SSE -> IR events (corpus and Codex streams over chunkings, hand-made cases)."""

from __future__ import annotations

import orjson
import pytest

from conftest import chunkings
from corpus_loader import samples
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import StreamError
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import WebSearch
from dragoman.protocols.base import Context

from .helpers import DATA
from .helpers import accumulate_ir
from .helpers import accumulate_raw
from .helpers import decode_stream

STREAMS = samples("openai-responses", stream=True)

CODEX_STREAMS = sorted(DATA.glob("*.sse"))


@pytest.mark.parametrize("s", STREAMS, ids=[s.name for s in STREAMS])
def test_corpus_streams_decode_over_chunkings(s):
    results = []
    for _, pieces in chunkings(s.body, seeds=2):
        results.append(decode_stream(pieces))
    assert all(r == results[0] for r in results)
    events = results[0]
    assert isinstance(events[0], MessageStart)
    if any(isinstance(e, StreamError) for e in events):
        assert sum(isinstance(e, StreamError) for e in events) == 1
        assert isinstance(events[-1], StreamError)
        assert events[-1].error.code == "insufficient_quota" and "quota" in events[-1].error.message
        return
    assert isinstance(events[-1], MessageStop) and isinstance(events[-2], MessageDelta)
    blocks = accumulate_ir(events)
    raw = accumulate_raw(s.body)
    assert [b["text"] for b in blocks.values() if b["kind"] == "text"] == raw["texts"]
    assert [
        (b["id"], b["name"], b["text"]) for b in blocks.values() if b["kind"] in ("tool_call", "custom_tool_call")
    ] == raw["args"]
    assert [b["enc"] for b in blocks.values() if b["kind"] == "thinking"] == raw["reasoning"]
    stop = events[-2].stop_reason
    assert stop is (StopReason.TOOL_USE if raw["args"] else StopReason.END_TURN)
    assert events[-2].usage is not None and events[-2].usage.output_tokens > 0


@pytest.mark.parametrize("path", CODEX_STREAMS, ids=[p.name for p in CODEX_STREAMS])
def test_codex_fake_streams_decode(path):
    body = path.read_bytes()
    events = decode_stream([body])
    blocks = accumulate_ir(events)
    raw = accumulate_raw(body)
    assert [
        (b["id"], b["name"], b["text"]) for b in blocks.values() if b["kind"] in ("tool_call", "custom_tool_call")
    ] == raw["args"]
    assert [b["text"] for b in blocks.values() if b["kind"] == "text"] == raw["texts"]


def _sse(*objs) -> bytes:
    return b"".join(b"event: " + o["type"].encode() + b"\ndata: " + orjson.dumps(o) + b"\n\n" for o in objs)


CREATED = {"type": "response.created", "response": {"id": "resp_1", "model": "m", "created_at": 5, "output": []}}

COMPLETED = {
    "type": "response.completed",
    "response": {"id": "resp_1", "model": "m", "status": "completed", "usage": {"input_tokens": 3, "output_tokens": 2}},
}


def test_done_without_deltas_emits_text_and_closes_open_blocks():
    body = _sse(
        CREATED,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "message", "id": "m1", "content": []},
        },
        {"type": "response.output_text.done", "item_id": "m1", "output_index": 0, "content_index": 0, "text": "Hello"},
        {
            "type": "response.output_item.added",
            "output_index": 1,
            "item": {"type": "function_call", "id": "fc1", "call_id": "c1", "name": "f"},
        },
        {"type": "response.function_call_arguments.delta", "item_id": "fc1", "output_index": 1, "delta": '{"a"'},
        {"type": "response.function_call_arguments.done", "item_id": "fc1", "output_index": 1, "arguments": '{"a":1}'},
        COMPLETED,
    )
    events = decode_stream([body])
    blocks = accumulate_ir(events)
    assert [b["text"] for b in blocks.values()] == ["Hello", '{"a":1}']
    assert events[-2].stop_reason is StopReason.TOOL_USE and events[-2].usage.input_tokens == 3
    assert events[0] == MessageStart(id="resp_1", model="m", created=5)


def test_item_done_only_and_summary_parts_separated():
    body = _sse(
        CREATED,
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"type": "reasoning", "id": "rs1", "summary": []},
        },
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs1",
            "output_index": 0,
            "summary_index": 0,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs1",
            "output_index": 0,
            "summary_index": 0,
            "delta": "one",
        },
        {
            "type": "response.reasoning_summary_part.added",
            "item_id": "rs1",
            "output_index": 0,
            "summary_index": 1,
            "part": {"type": "summary_text", "text": ""},
        },
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs1",
            "output_index": 0,
            "summary_index": 1,
            "delta": "two",
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {
                "type": "reasoning",
                "id": "rs1",
                "summary": [{"type": "summary_text", "text": "one"}, {"type": "summary_text", "text": "two"}],
                "encrypted_content": "ENC",
            },
        },
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {"type": "message", "id": "m1", "content": [{"type": "output_text", "text": "hi"}]},
        },
        {"type": "response.output_item.done", "output_index": 2, "item": {"type": "web_search_call", "id": "ws1"}},
        {"type": "response.web_search_call.completed", "item_id": "ws1", "output_index": 2},
        COMPLETED,
        {"type": "response.something_after"},
    )
    ctx = Context()
    events = decode_stream([body, b"data: [DONE]\n\n"], ctx)
    blocks = list(accumulate_ir(events).values())
    assert blocks[0]["text"] == "one\n\ntwo" and blocks[0]["enc"] == "ENC"
    assert blocks[1]["text"] == "hi"
    assert all(isinstance(e, ThinkingDelta) and e.summary for e in events if isinstance(e, ThinkingDelta))
    searches = [e for e in events if isinstance(e, WebSearch)]  # a search item is one IR WebSearch
    assert [(w.search.id, w.search.query) for w in searches] == [("ws1", "")]
    assert events[-2].stop_reason is StopReason.END_TURN


def test_incomplete_maps_reason():
    inc = {
        "type": "response.incomplete",
        "response": {
            "id": "resp_1",
            "model": "m",
            "status": "incomplete",
            "incomplete_details": {"reason": "max_output_tokens"},
        },
    }
    events = decode_stream([_sse(CREATED, inc)])
    assert events[-2].stop_reason is StopReason.MAX_TOKENS
    inc["response"]["incomplete_details"]["reason"] = "content_filter"
    assert decode_stream([_sse(CREATED, inc)])[-2].stop_reason is StopReason.REFUSAL


def test_error_then_failed_gives_one_stream_error():
    body = _sse(
        CREATED,
        {"type": "error", "code": "server_error", "message": "boom", "param": None},
        {
            "type": "response.failed",
            "response": {
                "id": "resp_1",
                "model": "m",
                "status": "failed",
                "error": {"code": "server_error", "message": "boom"},
            },
        },
    )
    events = decode_stream([body])
    errs = [e for e in events if isinstance(e, StreamError)]
    assert len(errs) == 1 and errs[0].error.code == "server_error" and errs[0].error.message == "boom"
    failed_only = decode_stream(
        [
            _sse(
                CREATED,
                {
                    "type": "response.failed",
                    "response": {
                        "id": "r",
                        "status": "failed",
                        "error": {"code": "rate_limit_exceeded", "message": "slow"},
                    },
                },
            )
        ]
    )
    assert failed_only[-1].error.kind is ErrorKind.RATE_LIMIT


def test_protocol_violations():
    with pytest.raises(UpstreamProtocolError, match="ended before"):
        decode_stream([_sse(CREATED)])
    with pytest.raises(UpstreamProtocolError, match="unknown output item"):
        decode_stream(
            [
                _sse(
                    CREATED,
                    {
                        "type": "response.output_text.delta",
                        "item_id": "nope",
                        "output_index": 7,
                        "content_index": 0,
                        "delta": "x",
                    },
                )
            ]
        )
    dup = {
        "type": "response.output_item.added",
        "output_index": 0,
        "item": {"type": "message", "id": "m1", "content": []},
    }
    with pytest.raises(UpstreamProtocolError, match="duplicate"):
        decode_stream([_sse(CREATED, dup, dup)])
    with pytest.raises(UpstreamProtocolError, match="malformed"):
        decode_stream([_sse(CREATED, {"type": "response.output_text.delta", "item_id": "m1"})])
    with pytest.raises(UpstreamProtocolError, match="unknown Responses event"):
        decode_stream([_sse(CREATED, {"type": "response.brand_new"})], Context(strict=True))

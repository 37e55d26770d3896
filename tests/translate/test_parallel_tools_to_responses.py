"""Issue 14: parallel tool calls from a Chat or Anthropic stream reach a Responses client as output items
one after another, never overlapping, under every chunking.

Cases: every Chat and Anthropic corpus stream with two or more tool calls, plus the fake upstream's
``tools`` scenario in both protocols (Chat interleaves the two calls' argument deltas). The check of the
order is independent of the project's validator (which also enforces it, strictly, below).
"""

from __future__ import annotations

import json
import time

import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman import demo as fu
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.request import Request
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.sse import SSEDecoder
from dragoman.translate.stream import StreamTranslator
from validators import responses as vr

SOURCES = {"openai-chat": Protocol.OPENAI_CHAT, "anthropic": Protocol.ANTHROPIC_MESSAGES}
TOOL_KINDS = (BlockKind.TOOL_CALL, BlockKind.CUSTOM_TOOL_CALL)


def _ir(proto: Protocol, body: bytes) -> list:
    dec = get_codec(proto).stream_decoder(Context(request=Request(model="m")))
    sse = SSEDecoder()
    out: list = []
    for ev in sse.feed(body) + sse.close():
        out.extend(dec.feed(ev))
    return out


def _overlaps(events: list) -> bool:
    """True when the source opens a block while another is open (what the encoder must serialize)."""
    open_: set[int] = set()
    for e in events:
        if type(e) is BlockStart:
            if open_:
                return True
            open_.add(e.index)
        elif type(e) is BlockStop:
            open_.discard(e.index)
    return False


def _cases() -> list[tuple[str, Protocol, bytes, dict | None]]:
    out = []
    for name, proto in SOURCES.items():
        for s in samples(name, stream=True, ok=True):
            ir = _ir(proto, s.body)
            if sum(1 for e in ir if type(e) is BlockStart and e.kind in TOOL_KINDS) >= 2:
                out.append((s.name, proto, s.body, s.request if isinstance(s.request, dict) else None))
    out.append(
        ("fake-chat-tools", Protocol.OPENAI_CHAT, b"".join(fu.chat_reply("tools", "m", True, True).events), None)
    )
    out.append(
        (
            "fake-anthropic-tools",
            Protocol.ANTHROPIC_MESSAGES,
            b"".join(fu.anthropic_reply("tools", "m", True).events),
            None,
        )
    )
    return out


CASES = _cases()


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


def test_cases_exercise_parallel_and_interleaved_calls():
    """Not vacuous: a real Chat recording and the fake Chat stream both open the second call while the first
    is open (the Chat decoder keeps tool calls open until finish_reason); Anthropic is covered too."""
    corpus = [c for c in CASES if not c[0].startswith("fake-")]
    assert any(proto is Protocol.OPENAI_CHAT for _, proto, _, _ in corpus)
    overlapping = {name for name, proto, body, _ in CASES if _overlaps(_ir(proto, body))}
    assert "fake-chat-tools" in overlapping and overlapping & {c[0] for c in corpus}
    assert any(proto is Protocol.ANTHROPIC_MESSAGES for _, proto, _, _ in CASES)


def _items_in_order(data: bytes) -> list[dict]:
    """The output items, checking each one's events are contiguous: added, its own events, done."""
    sse = SSEDecoder()
    current, done = None, []
    for ev in sse.feed(data) + sse.close():
        obj = json.loads(ev.data)
        oi = obj.get("output_index")
        if oi is None:
            continue
        if obj["type"] == "response.output_item.added":
            assert current is None, f"item {oi} added while item {current} is open"
            assert oi == len(done), f"output_index {oi}, expected {len(done)}"
            current = oi
        assert oi == current, f"{obj['type']} for item {oi} while item {current} is open"
        if obj["type"] == "response.output_item.done":
            done.append(obj["item"])
            current = None
    assert current is None
    return done


@pytest.mark.parametrize("name,proto,body,request_body", CASES, ids=[c[0] for c in CASES])
def test_parallel_tool_calls_to_responses_never_overlap(name, proto, body, request_body):
    src = get_codec(proto)
    dst = get_codec(Protocol.OPENAI_RESPONSES)
    want = [(e.tool_call_id, e.name) for e in _ir(proto, body) if type(e) is BlockStart and e.kind in TOOL_KINDS]
    outputs = {}
    for label, pieces in chunkings(body):
        req = src.decode_request(request_body) if request_body else Request(model="m")
        ctx = Context(request=req)
        outputs[label] = run_stream(StreamTranslator(src.stream_decoder(ctx), dst.stream_encoder(ctx)), pieces)
    whole = outputs["whole"]
    for label, got in outputs.items():
        assert got == whole, f"chunking {label!r} changes the output"
    items = _items_in_order(whole)
    calls = [(it["call_id"], it["name"]) for it in items if it["type"] == "function_call"]
    assert calls == want
    summary = vr.validate_stream(whole)
    assert [(t.id, t.name) for t in summary.tool_calls] == want
    assert all(isinstance(t.parsed(), dict) for t in summary.tool_calls)

"""``StreamTranslator(max_event=...)``: real corpus streams translate to the same bytes with the default cap
as without one, for every chunking; an upstream event beyond the cap ends the client's stream with one error
event in the client's protocol, the same bytes whatever the chunking."""

from __future__ import annotations

import json
import time

import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.stream import Phase
from dragoman.translate.stream import StreamTranslator

DEFAULT_CAP = 8 << 20
P = {
    "anthropic": Protocol.ANTHROPIC_MESSAGES,
    "openai-chat": Protocol.OPENAI_CHAT,
    "openai-responses": Protocol.OPENAI_RESPONSES,
}


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


def translator(up: Protocol, client: Protocol, cap: int) -> StreamTranslator:
    ctx = Context()
    return StreamTranslator(get_codec(up).stream_decoder(ctx), get_codec(client).stream_encoder(ctx), cap)


def cases() -> list:
    out = []
    for s in samples(stream=True, ok=True):
        if s.protocol in P and s.body and len(s.body) < 200_000:
            up = P[s.protocol]
            out += [pytest.param(s.body, up, q, id=f"{s.name}->{q.value}") for q in Protocol if q is not up]
    return out[:30]


@pytest.mark.parametrize("body,up,client", cases())
def test_default_cap_changes_nothing(body, up, client):
    expected = run_stream(translator(up, client, 0), [body])
    for label, pieces in chunkings(body, seeds=3):
        if label == "bytewise":
            continue
        assert run_stream(translator(up, client, DEFAULT_CAP), pieces) == expected, label


def chat_stream(big: int) -> bytes:
    def ev(delta: dict, finish: str | None = None) -> bytes:
        obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
        obj["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    return (
        ev({"role": "assistant", "content": "Hi"}) + ev({"content": "x" * big}) + ev({}, "stop") + b"data: [DONE]\n\n"
    )


@pytest.mark.parametrize("client", [Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_RESPONSES])
def test_event_beyond_the_cap_ends_with_one_error_event(client):
    body = chat_stream(50_000)
    outputs = set()
    for label, pieces in chunkings(body, seeds=4):
        if label == "bytewise":
            continue
        tr = translator(Protocol.OPENAI_CHAT, client, 10_000)
        out = run_stream(tr, pieces)
        assert tr.phase is Phase.CLOSED and tr.error_info is not None, label
        assert "dragoman_max_sse_event" in tr.error_info.message
        assert b"x" * 100 not in out
        outputs.add(out)
    assert len(outputs) == 1, "the error output depends on the chunking"
    (out,) = outputs
    text = out.decode()
    assert "Hi" in text  # the event before the long one reached the client
    if client is Protocol.ANTHROPIC_MESSAGES:
        assert "event: error" in text and "message_stop" not in text
    else:
        assert "event: error" in text and "response.completed" not in text


def test_event_within_the_cap_passes():
    body = chat_stream(5_000)
    whole = run_stream(translator(Protocol.OPENAI_CHAT, Protocol.ANTHROPIC_MESSAGES, 0), [body])
    for _label, pieces in chunkings(body, seeds=3):
        assert run_stream(translator(Protocol.OPENAI_CHAT, Protocol.ANTHROPIC_MESSAGES, 10_000), pieces) == whole

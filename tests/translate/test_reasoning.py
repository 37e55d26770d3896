"""Reasoning across protocols.

* A Responses reasoning summary of several parts becomes one thinking text, the parts joined by a blank
  line as the official SDKs show them, identical streamed (every chunking) and whole; going back, the
  text is one summary part (nothing is split that could not be restored).
* OpenRouter ``reasoning_details`` from a Chat upstream reach an Anthropic or Responses client as thinking
  text plus an opaque signature / ``encrypted_content``; the client's next request, translated to Chat,
  carries the identical entries back; no reasoning entry ever becomes answer text, and an Anthropic
  upstream never sees the carried value.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman.ir import carry
from dragoman.ir.request import Request
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request
from dragoman.translate.response import translate_response
from dragoman.translate.stream import StreamTranslator
from protocols.openai_chat.test_reasoning_details import CASES
from protocols.openai_chat.test_reasoning_details import ENC
from protocols.openai_chat.test_reasoning_details import SIG
from protocols.openai_chat.test_reasoning_details import stream as chat_stream
from protocols.openai_chat.test_reasoning_details import whole as chat_whole
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
STREAM_VALIDATOR = {A: va.validate_stream, C: vc.validate_stream, R: vr.validate_stream}
BODY_VALIDATOR = {A: va.validate_message, C: vc.validate_completion, R: vr.validate_response}


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


def translate_stream(body: bytes, upstream: Protocol, client: Protocol) -> bytes:
    """The client's bytes, the same for every chunking (asserted)."""
    ref = None
    for label, pieces in chunkings(body):
        ctx = Context(request=Request(model="m", stream=True, include_usage=True))
        tr = StreamTranslator(get_codec(upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))
        out = run_stream(tr, pieces)
        assert ref is None or out == ref, f"chunking {label} differs"
        ref = out
    assert ref is not None
    return ref


def translate_whole(body: dict[str, Any], upstream: Protocol, client: Protocol) -> bytes:
    ctx = Context(request=Request(model="m"))
    return translate_response(json.dumps(body).encode(), Plan(client=client, upstream=upstream), ctx)


# ---------------------------------------------------------------- multi-part Responses summaries


def _summary_parts() -> list[str]:
    """The summary parts of a recorded Responses stream (o-series reasoning summary in four parts)."""
    s = next(x for x in samples("openai-responses") if x.name.endswith("stream-reasoning-summary-deltas.yaml#0"))
    done = [e for e in _events(s.body) if e["type"] == "response.completed"][0]
    items = [i for i in done["response"]["output"] if i["type"] == "reasoning"]
    return [p["text"] for p in items[0]["summary"]]


def _events(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: {")]


def responses_stream(parts: list[str]) -> tuple[bytes, dict[str, Any]]:
    """A Responses stream with a reasoning item whose summary has ``parts`` (each in two deltas), then a
    message; and the equivalent whole response (the stream's ``response.completed`` object)."""
    rs = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAA-enc"}
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed", "content": []}
    text = {"type": "output_text", "text": "Look both ways.", "annotations": []}
    base = {"id": "resp_1", "object": "response", "created_at": 1, "model": "o3", "output": []}
    evs: list[dict[str, Any]] = [{"type": "response.created", "response": {**base, "status": "in_progress"}}]
    evs.append({"type": "response.output_item.added", "output_index": 0, "item": rs})
    for i, p in enumerate(parts):
        ids = {"item_id": "rs_1", "output_index": 0, "summary_index": i}
        evs.append(
            {"type": "response.reasoning_summary_part.added", **ids, "part": {"type": "summary_text", "text": ""}}
        )
        for d in (p[: len(p) // 2], p[len(p) // 2 :]):
            evs.append({"type": "response.reasoning_summary_text.delta", **ids, "delta": d})
        evs.append({"type": "response.reasoning_summary_text.done", **ids, "text": p})
        evs.append({"type": "response.reasoning_summary_part.done", **ids, "part": {"type": "summary_text", "text": p}})
    done_rs = {**rs, "summary": [{"type": "summary_text", "text": p} for p in parts]}
    evs.append({"type": "response.output_item.done", "output_index": 0, "item": done_rs})
    evs.append({"type": "response.output_item.added", "output_index": 1, "item": msg})
    ids = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    evs.append({"type": "response.content_part.added", **ids, "part": {**text, "text": ""}})
    evs.append({"type": "response.output_text.delta", **ids, "delta": text["text"]})
    evs.append({"type": "response.output_text.done", **ids, "text": text["text"]})
    evs.append({"type": "response.content_part.done", **ids, "part": text})
    done_msg = {**msg, "content": [text]}
    evs.append({"type": "response.output_item.done", "output_index": 1, "item": done_msg})
    usage = {"input_tokens": 5, "output_tokens": 40, "total_tokens": 45}
    final = {**base, "status": "completed", "output": [done_rs, done_msg], "usage": usage}
    evs.append({"type": "response.completed", "response": final})
    body = "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n" for n, e in enumerate(evs)
    )
    return body.encode(), final


SUMMARIES = {"2-part": 2, "3-part": 3, "recorded-4-part": 4}


@pytest.mark.parametrize("client", [A, C], ids=["anthropic", "chat"])
@pytest.mark.parametrize("case", SUMMARIES)
def test_multi_part_summary_is_one_thinking_text_streamed_and_whole(case, client):
    parts = _summary_parts()[: SUMMARIES[case]]
    assert len(parts) == SUMMARIES[case] and all(parts)
    body, final = responses_stream(parts)
    streamed = STREAM_VALIDATOR[client](translate_stream(body, R, client))
    whole = BODY_VALIDATOR[client](translate_whole(final, R, client))
    assert streamed.thinking == whole.thinking == "\n\n".join(parts)
    assert streamed.text == whole.text == "Look both ways."


def test_recorded_multi_part_summary_stream_matches_its_completed_response():
    s = next(x for x in samples("openai-responses") if x.name.endswith("stream-reasoning-summary-deltas.yaml#0"))
    final = [e for e in _events(s.body) if e["type"] == "response.completed"][0]["response"]
    parts = _summary_parts()
    for client in (A, C):
        streamed = STREAM_VALIDATOR[client](translate_stream(s.body, R, client))
        whole = BODY_VALIDATOR[client](translate_whole(final, R, client))
        assert streamed.thinking == whole.thinking == "\n\n".join(parts)


def test_thinking_with_blank_lines_is_not_split_going_back():
    """An Anthropic client returns the joined text: the Responses upstream gets one summary part (not parts
    it never had), with the item's id and encrypted_content restored; a Responses client shown an Anthropic
    thinking text with blank lines gets one summary part too."""
    parts = _summary_parts()[:3]
    body, final = responses_stream(parts)
    out = json.loads(translate_whole(final, R, A))
    thinking = out["content"][0]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "\n\n".join(parts)
    nxt = {
        "model": "o3",
        "max_tokens": 100,
        "messages": [
            {"role": "user", "content": "How do I cross the street?"},
            {"role": "assistant", "content": [thinking, {"type": "text", "text": "Look both ways."}]},
            {"role": "user", "content": "Thanks"},
        ],
    }
    up = json.loads(translate_request(json.dumps(nxt).encode(), Plan(client=A, upstream=R), Context()).body)
    items = [i for i in up["input"] if i.get("type") == "reasoning"]
    assert items == [
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "\n\n".join(parts)}],
            "encrypted_content": "gAAAA-enc",
        }
    ]
    anthropic_msg = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "thinking", "thinking": "A\n\nB", "signature": "sig"}, {"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
    resp = json.loads(translate_whole(anthropic_msg, A, R))
    assert [i["summary"] for i in resp["output"] if i["type"] == "reasoning"] == [
        [{"type": "summary_text", "text": "A\n\nB"}]
    ]


# ---------------------------------------------------------------- OpenRouter reasoning_details round trip


def _anthropic_next_turn(content: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {
            "model": "m",
            "max_tokens": 100,
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": content},
                {"role": "user", "content": "and?"},
            ],
        }
    ).encode()


def _anthropic_content(body: bytes, streamed: bool) -> list[dict[str, Any]]:
    """The assistant content an Anthropic client keeps (what the SDK accumulates)."""
    if not streamed:
        return json.loads(body)["content"]
    blocks: dict[int, dict[str, Any]] = {}
    for e in _events(body):
        if e["type"] == "content_block_start":
            blocks[e["index"]] = dict(e["content_block"])
        elif e["type"] == "content_block_delta":
            d, b = e["delta"], blocks[e["index"]]
            key = {"thinking_delta": "thinking", "signature_delta": "signature", "text_delta": "text"}[d["type"]]
            b[key] = (b.get(key) or "") + d[key] if key != "signature" else d[key]
    return [blocks[i] for i in sorted(blocks)]


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("name", CASES)
def test_openrouter_details_round_trip_through_an_anthropic_client(name, streamed):
    deltas, entries, thinking, model = CASES[name]
    if streamed:
        out = translate_stream(chat_stream(deltas, model), C, A)
        summary = va.validate_stream(out)
    else:
        out = translate_whole(chat_whole(entries, thinking, model), C, A)
        summary = va.validate_message(out)
    assert summary.thinking == thinking and summary.text == "Hello there."
    assert ENC not in summary.text and len(summary.signatures) == 1
    content = _anthropic_content(out, streamed)
    assert [b["type"] for b in content] == ["thinking", "text"]
    ctx = Context()
    up = json.loads(translate_request(_anthropic_next_turn(content), Plan(client=A, upstream=C), ctx).body)
    assistant = up["messages"][1]
    assert assistant["reasoning_details"] == entries
    assert assistant["content"] == "Hello there." and assistant["reasoning_content"] == thinking
    assert ENC not in json.dumps([m for m in up["messages"] if m is not assistant])
    assert ctx.dropped.fields == []
    # an Anthropic upstream never gets the carried value as a signature: entries in Anthropic's format are
    # Claude's own blocks again (signature and redacted data as OpenRouter gave them), others are dropped
    ctx = Context()
    nxt = _anthropic_next_turn(content)
    cr = get_codec(A).decode_request(json.loads(nxt))
    enc = get_codec(A).encode_request(cr, ctx)
    assert carry.OPENROUTER_TAG not in json.dumps(enc)
    if name == "anthropic-model":
        assert enc["messages"][1]["content"] == [
            {"type": "thinking", "thinking": thinking, "signature": SIG},
            {"type": "redacted_thinking", "data": ENC},
            {"type": "text", "text": "Hello there."},
        ]
        assert ctx.dropped.fields == []
    else:
        assert enc["messages"][1]["content"] == [{"type": "text", "text": "Hello there."}]
        assert "messages[1].thinking_without_signature" in ctx.dropped.fields


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("name", CASES)
def test_openrouter_details_round_trip_through_a_responses_client(name, streamed):
    deltas, entries, thinking, model = CASES[name]
    if streamed:
        out = translate_stream(chat_stream(deltas, model), C, R)
        final = [e for e in _events(out) if e["type"] == "response.completed"][0]["response"]
        assert vr.validate_stream(out).thinking == thinking
    else:
        final = json.loads(translate_whole(chat_whole(entries, thinking, model), C, R))
        assert vr.validate_response(final).thinking == thinking
    output = final["output"]
    assert [i["type"] for i in output] == ["reasoning", "message"]
    assert ENC not in json.dumps(output[1])
    nxt = {"model": "m", "input": [{"role": "user", "content": "hi"}, *output, {"role": "user", "content": "and?"}]}
    ctx = Context()
    up = json.loads(translate_request(json.dumps(nxt).encode(), Plan(client=R, upstream=C), ctx).body)
    assistant = [m for m in up["messages"] if m["role"] == "assistant"]
    assert [m.get("reasoning_details") for m in assistant if m.get("reasoning_details")] == [entries]
    assert "".join(m["content"] or "" for m in assistant) == "Hello there."
    assert ctx.dropped.fields == []

"""OpenRouter ``reasoning_details`` on Chat: decoded (stream over every chunking, and whole) to thinking text
plus a carried signature, and restored as identical entries on the next request's assistant message.

Real recordings: o3 and grok-4 via OpenRouter (one ``reasoning.encrypted`` entry each), minimax via
OpenRouter (``reasoning.text`` pieces). The Anthropic-model stream (text pieces, then the signature, then a
``reasoning.encrypted`` entry) and the OpenAI-model stream with a two-part summary are hand-written in the
shapes OpenRouter documents (openrouter.ai/docs, "Reasoning Tokens": reasoning_details array structure).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import chunkings
from corpus_loader import samples
from dragoman.ir import carry
from dragoman.ir.common import Dropped
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.request import Message
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.openai_chat import reasoning_details as rd

from .helpers import accumulate_raw
from .helpers import decode_stream

SIG = "EqQBCkgIAhABGAIiQHe3p7yPjU1y2h9qJcO6b4o0Z6PpC7+z9z1nFf2vQ0m0"
ENC = "RW5jcnlwdGVkIHJlYXNvbmluZyBibG9i/+=="


def chunk(delta: dict[str, Any], finish: str | None = None, model: str = "anthropic/claude-sonnet-4") -> str:
    c = {"id": "gen-1", "object": "chat.completion.chunk", "created": 1, "model": model}
    c["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(c, ensure_ascii=False)}\n\n"


def stream(deltas: list[dict[str, Any]], model: str) -> bytes:
    body = "".join(chunk({"role": "assistant", "content": "", **d}, model=model) for d in deltas)
    body += chunk({"content": " there."}, model=model) + chunk({}, "stop", model)
    usage = {"prompt_tokens": 9, "completion_tokens": 20, "total_tokens": 29}
    body += f"data: {json.dumps({'id': 'gen-1', 'model': model, 'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n"
    return body.encode()


def whole(entries: list[dict[str, Any]], reasoning: str | None, model: str) -> dict[str, Any]:
    msg = {"role": "assistant", "content": "Hello there.", "reasoning": reasoning, "reasoning_details": entries}
    return {
        "id": "gen-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 20, "total_tokens": 29},
    }


def _text(text: str, i: int, **kw: Any) -> dict[str, Any]:
    return {"type": "reasoning.text", "text": text, "format": "anthropic-claude-v1", "index": i, **kw}


def _summary(text: str, i: int) -> dict[str, Any]:
    return {"type": "reasoning.summary", "summary": text, "format": "openai-responses-v1", "index": i}


def _enc(i: int, fmt: str) -> dict[str, Any]:
    return {"type": "reasoning.encrypted", "data": ENC, "id": "rs_01", "format": fmt, "index": i}


#: Anthropic model via OpenRouter: text pieces, the signature on the same entry, then a redacted block
ANTHROPIC_DELTAS = [
    {"reasoning": "Let me think", "reasoning_details": [_text("Let me think", 0)]},
    {"reasoning": " about ✓ this.", "reasoning_details": [_text(" about ✓ this.", 0)]},
    {"reasoning": None, "reasoning_details": [{"type": "reasoning.text", "signature": SIG, "index": 0}]},
    {"reasoning": None, "reasoning_details": [_enc(1, "anthropic-claude-v1")]},
    {"content": "Hello"},
]
ANTHROPIC_ENTRIES = [_text("Let me think about ✓ this.", 0, signature=SIG), _enc(1, "anthropic-claude-v1")]
ANTHROPIC_THINKING = "Let me think about ✓ this."

#: OpenAI model via OpenRouter: a summary in two parts (two entries), then the encrypted reasoning
OPENAI_DELTAS = [
    {"reasoning": "**Plan**", "reasoning_details": [_summary("**Plan**", 0)]},
    {"reasoning": "\n\nCheck it.", "reasoning_details": [_summary("\n\nCheck it.", 0)]},
    {"reasoning": "**Answer**", "reasoning_details": [_summary("**Answer**", 1)]},
    {"reasoning": None, "reasoning_details": [_enc(2, "openai-responses-v1")]},
    {"content": "Hello"},
]
OPENAI_ENTRIES = [_summary("**Plan**\n\nCheck it.", 0), _summary("**Answer**", 1), _enc(2, "openai-responses-v1")]
OPENAI_THINKING = "**Plan**\n\nCheck it.\n\n**Answer**"

CASES = {
    "anthropic-model": (ANTHROPIC_DELTAS, ANTHROPIC_ENTRIES, ANTHROPIC_THINKING, "anthropic/claude-sonnet-4"),
    "openai-model": (OPENAI_DELTAS, OPENAI_ENTRIES, OPENAI_THINKING, "openai/o3"),
}


def _thinking_of(events: list[Any]) -> tuple[str, list[str | None]]:
    """The thinking text and the signature of each thinking block; asserts no reasoning reaches text."""
    thinking = {e.index for e in events if type(e) is BlockStart and e.kind is BlockKind.THINKING}
    text = "".join(e.text for e in events if type(e) is ThinkingDelta)
    sigs = [e.signature for e in events if type(e) is SignatureDelta]
    assert {e.index for e in events if type(e) is SignatureDelta} <= thinking
    answer = "".join(e.text for e in events if type(e) is TextDelta)
    assert ENC not in answer and SIG not in answer and "reasoning" not in answer
    return text, sigs


@pytest.mark.parametrize("name", CASES)
def test_stream_and_whole_decode_alike_and_restore(name):
    deltas, entries, thinking, model = CASES[name]
    body = stream(deltas, model)
    ref = None
    for label, pieces in chunkings(body):
        events = decode_stream(pieces)
        assert ref is None or events == ref, label
        ref = events
    text, sigs = _thinking_of(ref)
    assert text == thinking and len(sigs) == 1
    assert "".join(e.text for e in ref if type(e) is TextDelta) == "Hello there."
    resp = CODEC.decode_response(whole(entries, thinking, model), Context())
    part = resp.content[0]
    assert isinstance(part, ThinkingPart) and (part.text, part.signature) == (thinking, sigs[0])
    assert [p.text for p in resp.content[1:]] == ["Hello there."]
    # the signature carries every entry, but no text: the thinking text travels once
    assert carry.is_carried(sigs[0]) and carry.is_openrouter(sigs[0])
    assert "Let me think" not in json.dumps(carry.unwrap_openrouter(sigs[0]))
    assert rd.restore(sigs[0], thinking, Dropped()) == (entries, True)


@pytest.mark.parametrize("name", ["o3", "grok"])
def test_recorded_encrypted_entry_becomes_the_signature(name):
    file = {"o3": "reasoning", "grok": "cached-tokens"}[name]
    s = next(x for x in samples("openai-chat") if x.name == f"chat/pydantic-ai__stream-openrouter-{file}.yaml#0")
    raw = [json.loads(line[6:]) for line in s.body.decode().splitlines() if line.startswith("data: {")]
    entries = [d for c in raw for ch in c["choices"] for d in ch["delta"].get("reasoning_details") or []]
    assert [e["type"] for e in entries] == ["reasoning.encrypted"]
    ref, ctx = None, Context()
    for label, pieces in chunkings(s.body, seeds=2):
        ctx = Context()
        events = decode_stream(pieces, ctx)
        assert ref is None or events == ref, label
        ref = events
    text, sigs = _thinking_of(ref)
    assert text == "" and len(sigs) == 1
    assert "".join(e.text for e in ref if type(e) is TextDelta) == accumulate_raw(s.body)["text"]
    assert entries[0]["data"] not in "".join(e.text for e in ref if type(e) is TextDelta)
    assert rd.restore(sigs[0], "", Dropped()) == (entries, True)
    assert "reasoning_details.encrypted" not in ctx.dropped.fields  # carried now, not dropped


def _history(part: ThinkingPart) -> Request:
    return Request(
        model="m",
        messages=[
            Message("user", [TextPart("hi")]),
            Message("assistant", [part, TextPart("Hello there.")]),
            Message("user", [TextPart("and?")]),
        ],
    )


@pytest.mark.parametrize("field", ["reasoning_content", "drop"])
@pytest.mark.parametrize("name", CASES)
def test_request_encoder_restores_the_entries(name, field):
    _, entries, thinking, model = CASES[name]
    part = CODEC.decode_response(whole(entries, thinking, model), Context()).content[0]
    assert isinstance(part, ThinkingPart)
    ctx = Context(chat_reasoning_field=field)
    msg = CODEC.encode_request(_history(part), ctx)["messages"][1]
    assert msg["reasoning_details"] == entries
    assert msg["content"] == "Hello there."
    assert msg.get("reasoning_content") == (thinking if field == "reasoning_content" else None)
    assert ctx.dropped.fields == []  # nothing lost: not the signature, not the text


def test_edited_thinking_text_leaves_the_text_entries_out():
    part = CODEC.decode_response(whole(ANTHROPIC_ENTRIES, None, "m"), Context()).content[0]
    assert isinstance(part, ThinkingPart)
    part.text = part.text.replace("think", "thinks")
    ctx = Context(chat_reasoning_field="drop")
    msg = CODEC.encode_request(_history(part), ctx)["messages"][1]
    assert msg["reasoning_details"] == [ANTHROPIC_ENTRIES[1]]  # the encrypted entry still goes back
    assert ctx.dropped.fields == [rd.DROPPED_TEXT, "thinking"]


def test_text_from_reasoning_with_an_encrypted_entry_only():
    """Entries without a text field: the thinking text is ``reasoning``; the entries still round trip."""
    body = whole([_enc(0, "google-gemini-v1")], "Thought about it.", "google/gemini-2.5-pro")
    part = CODEC.decode_response(body, Context()).content[0]
    assert isinstance(part, ThinkingPart) and part.text == "Thought about it."
    ctx = Context()
    msg = CODEC.encode_request(_history(part), ctx)["messages"][1]
    assert msg["reasoning_details"] == [_enc(0, "google-gemini-v1")]
    assert msg["reasoning_content"] == "Thought about it." and ctx.dropped.fields == []
    ctx = Context(chat_reasoning_field="drop")
    assert CODEC.encode_request(_history(part), ctx)["messages"][1]["reasoning_details"] == [
        _enc(0, "google-gemini-v1")
    ]
    assert ctx.dropped.fields == ["thinking"]  # the text was in no entry: it is not sent


def test_chat_client_history_with_reasoning_details_round_trips():
    entries = OPENAI_ENTRIES
    body = {
        "model": "openai/o3",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello there.", "reasoning_details": entries},
            {"role": "user", "content": "and?"},
        ],
    }
    req = CODEC.decode_request(body)
    part = req.messages[1].parts[0]
    assert isinstance(part, ThinkingPart) and part.text == OPENAI_THINKING and part.summary
    assert CODEC.encode_request(req, Context())["messages"][1]["reasoning_details"] == entries


@pytest.mark.parametrize(
    "signature",
    [
        None,
        "native-anthropic-signature",
        carry.wrap_responses("rs_1", "gAAA"),
        carry.OPENROUTER_TAG + "!!!",
        carry.wrap_openrouter({"e": "not a list", "s": []}),
    ],
)
def test_restore_ignores_what_is_not_ours(signature):
    assert rd.restore(signature, "t", Dropped()) is None


@pytest.mark.parametrize(
    "segments", [[[0, 99]], [[0, 1]], [[5, 2]], [[0, 1], [0, 1]], [["0", 2]], [[0, -1], [0, 3]]], ids=str
)
def test_restore_rejects_segments_that_do_not_match(segments):
    """Segments that do not cut "ab" exactly: the encrypted entry goes back, no text is made up."""
    sig = carry.wrap_openrouter({"e": [_text("", 0), _enc(1, "f")], "s": segments})
    dropped = Dropped()
    restored = rd.restore(sig, "ab", dropped)
    assert restored is not None
    entries, complete = restored
    assert not complete and _enc(1, "f") in entries
    assert all(e.get("text") == "" for e in entries if e["type"] == "reasoning.text")
    assert dropped.fields == [rd.DROPPED_TEXT]


def test_interleaved_entries_restore_exactly():
    acc = rd.Details()
    pieces = [_text("a", 0), _text("b", 1), _text("c", 0), {"type": "reasoning.text", "text": "", "index": 1}]
    text = "".join(t for t, _ in acc.feed(pieces))
    assert text == "a\n\nb\n\nc"
    assert rd.restore(acc.signature(), text, Dropped()) == ([_text("ac", 0), _text("b", 1)], True)

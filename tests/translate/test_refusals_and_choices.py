"""Issue 11 items 1 and 2 across the codecs: refusals arrive as refusals, several choices as choice 0.

Sources (streamed and whole): the live OpenAI Chat refusal and ``n=3`` recordings (openai-python's snapshot
tests, tests/corpus), a Chat reply cut by ``content_filter``, and Responses replies with a ``refusal``
content part or ``incomplete_details.reason: content_filter`` (hand-written in the shape of the corpus'
real Responses streams, checked by the strict validator). Every stream runs over every chunking of
``tests/conftest.py``: the client's bytes must not change. What each client sees is read with the strict
validator of its protocol, plus the raw fields the validators do not keep (Chat ``refusal``, the
Responses refusal part, Anthropic's content blocks).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import samples
from dragoman.ir.request import Request
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.plan import Plan
from dragoman.translate.response import translate_response
from dragoman.translate.stream import StreamTranslator
from validators import anthropic as va
from validators import chat as vc
from validators import responses as vr
from validators.sse import parse_sse

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES
SHORT = {A: "anthropic", C: "chat", R: "responses"}
STREAM_VALIDATOR = {A: va.validate_stream, C: vc.validate_stream, R: vr.validate_stream}
BODY_VALIDATOR = {A: va.validate_message, C: vc.validate_completion, R: vr.validate_response}


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)


def _corpus(name: str) -> bytes:
    return next(s.body for s in samples("openai-chat") if s.name == name)


# ---------------------------------------------------------------- sources


def _chat_chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {
        "id": "chatcmpl-cf1",
        "object": "chat.completion.chunk",
        "created": 1727346172,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


CHAT_FILTERED_STREAM = b"".join(
    [
        _chat_chunk({"role": "assistant", "content": "", "refusal": None}),
        _chat_chunk({"content": "Here is how"}),
        _chat_chunk({"content": " you"}),
        _chat_chunk({}, "content_filter"),
        b'data: {"id":"chatcmpl-cf1","object":"chat.completion.chunk","created":1727346172,"model":"gpt-4o-2024-08-06",'
        b'"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}\n\n',
        b"data: [DONE]\n\n",
    ]
)
CHAT_FILTERED_BODY = json.dumps(
    {
        "id": "chatcmpl-cf1",
        "object": "chat.completion",
        "created": 1727346172,
        "model": "gpt-4o-2024-08-06",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Here is how you", "refusal": None},
                "logprobs": None,
                "finish_reason": "content_filter",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
).encode()

RESP_ID = "resp_0ecff685e411ca7b0069e063569c7c819b"
MSG_ID = "msg_0ecff685e411ca7b0069e063580128819b"


def _response(status: str, output: list[dict[str, Any]], reason: str | None) -> dict[str, Any]:
    done = status != "in_progress"
    return {
        "id": RESP_ID,
        "object": "response",
        "created_at": 1776313174,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": reason} if reason else None,
        "model": "gpt-4o-2024-08-06",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15} if done else None,
    }


def _responses_stream(kind: str, text: str, status: str, reason: str | None) -> bytes:
    """A Responses stream of one message item with one ``kind`` part ("refusal" or "output_text")."""
    key, delta_t = ("refusal", "response.refusal") if kind == "refusal" else ("text", "response.output_text")
    empty = {"type": kind, key: ""} if kind == "refusal" else {"type": kind, "annotations": [], "text": ""}
    full = {**empty, key: text}
    item = {"id": MSG_ID, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    done_item = {**item, "status": "completed" if status == "completed" else "incomplete", "content": [full]}
    where = {"item_id": MSG_ID, "output_index": 0, "content_index": 0}
    half = len(text) // 2
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": _response("in_progress", [], None)},
        {"type": "response.in_progress", "response": _response("in_progress", [], None)},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", **where, "part": empty},
        {"type": f"{delta_t}.delta", **where, "delta": text[:half]},
        {"type": f"{delta_t}.delta", **where, "delta": text[half:]},
        {"type": f"{delta_t}.done", **where, key: text},
        {"type": "response.content_part.done", **where, "part": full},
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {"type": f"response.{status}", "response": _response(status, [done_item], reason)},
    ]
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
        for n, e in enumerate(events)
    )


def _responses_body(kind: str, text: str, status: str, reason: str | None) -> bytes:
    key = "refusal" if kind == "refusal" else "text"
    part = {"type": kind, key: text} if kind == "refusal" else {"type": kind, "annotations": [], "text": text}
    item = {"id": MSG_ID, "type": "message", "status": "completed", "content": [part], "role": "assistant"}
    return json.dumps(_response(status, [item], reason)).encode()


REFUSAL_TEXT = "I'm sorry, but I can't help with that."


@dataclass(frozen=True)
class Source:
    name: str
    upstream: Protocol
    stream: bytes
    body: bytes
    #: what the client must see: the refusal text (None: no refusal content), the text, and whether the
    #: upstream's own reason was a content filter (else it ended normally)
    refusal: str | None
    text: str
    filtered: bool


SOURCES = [
    Source(
        "chat-refusal",
        C,
        _corpus("chat/openai-python__stream-refusal.sse"),
        _corpus("chat/openai-python__json-refusal.json"),
        "I'm sorry, I can't assist with that request.",  # the streamed recording; the whole one differs
        "",
        False,
    ),
    Source("chat-content-filter", C, CHAT_FILTERED_STREAM, CHAT_FILTERED_BODY, None, "Here is how you", True),
    Source(
        "responses-refusal",
        R,
        _responses_stream("refusal", REFUSAL_TEXT, "completed", None),
        _responses_body("refusal", REFUSAL_TEXT, "completed", None),
        REFUSAL_TEXT,
        "",
        False,
    ),
    Source(
        "responses-content-filter",
        R,
        _responses_stream("output_text", "Here is how you", "incomplete", "content_filter"),
        _responses_body("output_text", "Here is how you", "incomplete", "content_filter"),
        None,
        "Here is how you",
        True,
    ),
]
WHOLE_REFUSAL = {"chat-refusal": "I'm very sorry, but I can't assist with that."}


def test_hand_written_responses_sources_are_valid_responses():
    for src in SOURCES:
        if src.upstream is R:
            s = vr.validate_stream(src.stream)  # strict
            assert (s.refusal, s.text) == (src.refusal or "", src.text)
            assert (s.refusal, s.text) == (
                (b := vr.validate_response(src.body)).refusal,
                b.text,
            )
        else:
            vc.validate_stream(src.stream, strict=src.name != "chat-refusal")  # the live one has usage chunks


# ---------------------------------------------------------------- what the client sees


def _translate_stream(src: Source, client: Protocol, pieces: list[bytes]) -> tuple[bytes, Context]:
    ctx = Context(request=Request(model="m", stream=True, include_usage=True))
    tr = StreamTranslator(get_codec(src.upstream).stream_decoder(ctx), get_codec(client).stream_encoder(ctx))
    return run_stream(tr, pieces), ctx


def _seen_in_stream(client: Protocol, out: bytes) -> dict[str, Any]:
    """What a client of ``client`` reads from the stream: stop, text, refusal (raw wire fields)."""
    s = STREAM_VALIDATOR[client](out)  # strict: a well-formed stream of the client's protocol
    frames, _ = parse_sse(out, strict=True)
    objs = [f.json() for f in frames if f.data != "[DONE]"]
    if client is A:
        starts = [o["content_block"]["type"] for o in objs if o["type"] == "content_block_start"]
        return {"stop": s.stop_reason, "text": s.text, "refusal": None, "blocks": starts}
    if client is C:
        refusal = "".join(ch["delta"].get("refusal") or "" for o in objs for ch in o.get("choices") or [])
        return {"stop": s.stop_reason, "text": s.text, "refusal": refusal or None}
    final = objs[-1]["response"]
    parts = [p for it in final["output"] if it["type"] == "message" for p in it["content"]]
    refusal = "".join(p["refusal"] for p in parts if p["type"] == "refusal")
    return {"stop": s.stop_reason, "text": s.text, "refusal": refusal or None, "parts": [p["type"] for p in parts]}


def _seen_in_body(client: Protocol, out: bytes) -> dict[str, Any]:
    s = BODY_VALIDATOR[client](out)
    obj = json.loads(out)
    if client is A:
        return {"stop": s.stop_reason, "text": s.text, "refusal": None, "blocks": [b["type"] for b in obj["content"]]}
    if client is C:
        return {"stop": s.stop_reason, "text": s.text, "refusal": obj["choices"][0]["message"]["refusal"]}
    parts = [p for it in obj["output"] if it["type"] == "message" for p in it["content"]]
    refusal = "".join(p["refusal"] for p in parts if p["type"] == "refusal")
    return {"stop": s.stop_reason, "text": s.text, "refusal": refusal or None, "parts": [p["type"] for p in parts]}


def _expected(src: Source, client: Protocol, refusal: str | None) -> dict[str, Any]:
    if client is A:
        # Anthropic has no refusal content: the refusal text is the text block, stop_reason says "refusal"
        text = refusal if refusal is not None else src.text
        return {"stop": "refusal", "text": text, "refusal": None, "blocks": ["text"] if text else []}
    if client is C:
        # the refusal field, and the finish reason the upstream gave (OpenAI ends a refusal with "stop")
        return {"stop": "content_filter" if src.filtered else "stop", "text": src.text, "refusal": refusal}
    stop = "incomplete:content_filter" if src.filtered else "completed"
    parts = ["refusal"] if refusal is not None else ["output_text"]
    return {"stop": stop, "text": src.text, "refusal": refusal, "parts": parts}


CASES = [(src, q) for src in SOURCES for q in Protocol if q is not src.upstream]
IDS = [f"{src.name}->{SHORT[q]}" for src, q in CASES]


@pytest.mark.parametrize("src,client", CASES, ids=IDS)
def test_refusal_streamed_over_every_chunking(src: Source, client: Protocol):
    whole, ctx = _translate_stream(src, client, [src.stream])
    assert _seen_in_stream(client, whole) == _expected(src, client, src.refusal)
    assert ctx.dropped.fields == []
    for label, pieces in chunkings(src.stream):
        assert _translate_stream(src, client, pieces)[0] == whole, label


@pytest.mark.parametrize("src,client", CASES, ids=IDS)
def test_refusal_whole(src: Source, client: Protocol):
    ctx = Context(request=Request(model="m"))
    out = translate_response(src.body, Plan(client, src.upstream), ctx)
    refusal = WHOLE_REFUSAL.get(src.name, src.refusal)
    assert _seen_in_body(client, out) == _expected(src, client, refusal)


# ---------------------------------------------------------------- several choices (n > 1)

N3_STREAM = _corpus("chat/openai-python__stream-n3-choices.sse")
N3_BODY = _corpus("chat/openai-python__json-n3-choices.json")
#: choice 0 of each live recording (choices 1 and 2 say 61/59 and 65/63.0 degrees)
N3_STREAM_CHOICE_0 = '{"city":"San Francisco","temperature":65,"units":"f"}'
N3_BODY_CHOICE_0 = '{"city":"San Francisco","temperature":64,"units":"f"}'


@pytest.mark.parametrize("client", [A, R, C], ids=["anthropic", "responses", "chat-translated"])
def test_n3_stream_gives_choice_0_over_every_chunking(client: Protocol):
    src = Source("n3", C, N3_STREAM, N3_BODY, None, N3_STREAM_CHOICE_0, False)
    whole, ctx = _translate_stream(src, client, [N3_STREAM])
    seen = _seen_in_stream(client, whole)
    assert (seen["text"], seen["refusal"]) == (N3_STREAM_CHOICE_0, None)
    assert seen["stop"] == {A: "end_turn", C: "stop", R: "completed"}[client]
    assert ctx.dropped.fields == ["choices[1:]"]
    for label, pieces in chunkings(N3_STREAM):
        assert _translate_stream(src, client, pieces)[0] == whole, label


@pytest.mark.parametrize("client", [A, R])
def test_n3_whole_gives_choice_0(client: Protocol):
    ctx = Context(request=Request(model="m"))
    out = translate_response(N3_BODY, Plan(client, C), ctx)
    assert BODY_VALIDATOR[client](out).text == N3_BODY_CHOICE_0
    assert ctx.dropped.fields == ["choices[1:]"]

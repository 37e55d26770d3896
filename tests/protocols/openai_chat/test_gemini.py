"""Gemini's thought signatures on Chat tool calls: decoded (stream over every chunking, and whole) into a thinking
block whose signature carries them by tool call id, before the call; restored as ``extra_content`` on the
same calls when the next request goes to a Chat upstream, and nothing added where nothing was carried.

No recording of Gemini's OpenAI-compatible endpoint is in the corpus: the shapes are hand-written from
ai.google.dev/gemini-api/docs/thought-signatures ("OpenAI compatibility": ``tool_calls[i].extra_content =
{"google": {"thought_signature": ...}}``; of parallel calls only the first is signed) and the compat layer's
stream as reported by clients that handle it (each call whole in one delta, ``index`` omitted).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import chunkings
from dragoman.ir import carry
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.request import Message
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.openai_chat import gemini

from .helpers import decode_stream

MODEL = "gemini-3-pro-preview"
#: opaque base64 values in the shape the docs show (``"<Signature A>"``): never parsed, only carried
SIG_A = "CiQB0e2Kb3wQxJ1Yk2kFz0m9Vb1n8f3xR7Lq4ZpN2sT5aUeW6yHcKpgBAdHtim9/+A=="
SIG_B = "CiQB0e2Kb9Q2cL5Xv8Rk1Hn3Gm7Jt0Pz4Ws6Ye2Ua5Ic9Ob3Nd1Qf8Sh4Tg=="
WEATHER = {"location": "Paris"}
TIME = {"timezone": "Europe/Paris"}


def call(cid: str, name: str, args: dict[str, Any], sig: str | None = None) -> dict[str, Any]:
    """A tool call as Gemini's compat layer sends it (no ``index``); signed when ``sig`` is given."""
    tc: dict[str, Any] = {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    if sig is not None:
        tc["extra_content"] = {"google": {"thought_signature": sig}}
    return tc


def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    c = {"id": "gem-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL}
    c["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return f"data: {json.dumps(c)}\n\n"


def stream(deltas: list[dict[str, Any]]) -> bytes:
    body = "".join(chunk({"role": "assistant", **d}) for d in deltas) + chunk({}, "tool_calls")
    usage = {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42}
    body += f"data: {json.dumps({'id': 'gem-1', 'model': MODEL, 'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n"
    return body.encode()


def whole(calls: list[dict[str, Any]], content: str | None = None, reasoning: str | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content, "tool_calls": calls}
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    return {
        "id": "gem-1",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 30, "completion_tokens": 12, "total_tokens": 42},
    }


#: name -> (stream deltas, the whole message's tool calls, reasoning, text, expected blocks in order)
#: blocks: ("thinking", text, {call id: signature}) or ("tool", call id)
CASES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str | None, str | None, list[tuple[Any, ...]]]] = {
    "single": (
        [{"tool_calls": [call("fc-1", "get_weather", WEATHER, SIG_A)]}],
        [call("fc-1", "get_weather", WEATHER, SIG_A)],
        None,
        None,
        [("thinking", "", {"fc-1": SIG_A}), ("tool", "fc-1")],
    ),
    "parallel": (  # only the first of parallel calls is signed, both in one delta
        [{"tool_calls": [call("fc-1", "get_weather", WEATHER, SIG_A), call("fc-2", "get_time", TIME)]}],
        [call("fc-1", "get_weather", WEATHER, SIG_A), call("fc-2", "get_time", TIME)],
        None,
        None,
        [("thinking", "", {"fc-1": SIG_A}), ("tool", "fc-1"), ("tool", "fc-2")],
    ),
    "reasoning-then-call": (  # the reasoning block right before the call carries its signature
        [{"reasoning_content": "Need the weather."}, {"tool_calls": [call("fc-1", "get_weather", WEATHER, SIG_A)]}],
        [call("fc-1", "get_weather", WEATHER, SIG_A)],
        "Need the weather.",
        None,
        [("thinking", "Need the weather.", {"fc-1": SIG_A}), ("tool", "fc-1")],
    ),
    "text-then-two-signed": (
        [
            {"content": "Checking."},
            {"tool_calls": [call("fc-1", "get_weather", WEATHER, SIG_A)]},
            {"tool_calls": [{**call("fc-2", "get_time", TIME, SIG_B), "index": 1}]},
        ],
        [call("fc-1", "get_weather", WEATHER, SIG_A), call("fc-2", "get_time", TIME, SIG_B)],
        None,
        "Checking.",
        [("thinking", "", {"fc-1": SIG_A}), ("tool", "fc-1"), ("thinking", "", {"fc-2": SIG_B}), ("tool", "fc-2")],
    ),
    "unsigned": (
        [{"tool_calls": [call("fc-1", "get_weather", WEATHER)]}],
        [call("fc-1", "get_weather", WEATHER)],
        None,
        None,
        [("tool", "fc-1")],
    ),
}


def stream_blocks(events: list[Any]) -> list[tuple[Any, ...]]:
    """The thinking/tool blocks of IR events, in start order; text blocks left out."""
    kinds: dict[int, BlockKind] = {}
    text: dict[int, str] = {}
    sig: dict[int, dict[str, str] | None] = {}
    tool: dict[int, str] = {}
    for ev in events:
        if type(ev) is BlockStart:
            kinds[ev.index] = ev.kind
            if ev.kind is BlockKind.TOOL_CALL:
                tool[ev.index] = ev.tool_call_id
        elif type(ev) is SignatureDelta:
            assert ev.index not in sig, "one signature per block"
            sig[ev.index] = carry.unwrap_gemini(ev.signature)
        elif hasattr(ev, "text") and ev.index in kinds and kinds[ev.index] is BlockKind.THINKING:
            text[ev.index] = text.get(ev.index, "") + ev.text
    out: list[tuple[Any, ...]] = []
    for i, k in kinds.items():
        if k is BlockKind.THINKING:
            out.append(("thinking", text.get(i, ""), sig.get(i)))
        elif k is BlockKind.TOOL_CALL:
            out.append(("tool", tool[i]))
    return out


def whole_blocks(parts: list[Any]) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for p in parts:
        if isinstance(p, ThinkingPart):
            out.append(("thinking", p.text, carry.unwrap_gemini(p.signature)))
        elif isinstance(p, ToolCallPart):
            out.append(("tool", p.id))
    return out


@pytest.mark.parametrize("name", CASES)
def test_stream_carries_the_signature_in_a_thinking_block_before_the_call(name):
    deltas, _, _, _, expected = CASES[name]
    body = stream(deltas)
    ref = None
    for label, pieces in chunkings(body):
        events = decode_stream(pieces)
        blocks = stream_blocks(events)
        assert ref is None or blocks == ref, f"chunking {label} differs"
        ref = blocks
        # every block is closed, each thinking block before the next block starts (no thinking left open)
        stops = [ev.index for ev in events if type(ev) is BlockStop]
        assert sorted(stops) == sorted(ev.index for ev in events if type(ev) is BlockStart)
    assert ref == expected


@pytest.mark.parametrize("name", CASES)
def test_whole_response_gives_the_same_blocks(name):
    _, calls, reasoning, text, expected = CASES[name]
    resp = CODEC.decode_response(whole(calls, text, reasoning), Context())
    assert whole_blocks(resp.content) == expected
    if text:
        assert [p.text for p in resp.content if type(p) is TextPart] == [text]


def test_signature_on_a_later_delta_of_the_call_is_kept_once():
    """A signature arriving on a metadata-only delta after the call started gets its block then; the same
    signature repeated on further deltas of that call adds nothing."""
    first = call("fc-1", "get_weather", {}, None)
    first["function"]["arguments"] = '{"location":'
    later = {
        "index": 0,
        "function": {"arguments": ' "Paris"}'},
        "extra_content": {"google": {"thought_signature": SIG_A}},
    }
    again = {"index": 0, "extra_content": {"google": {"thought_signature": SIG_A}}}
    body = stream([{"tool_calls": [{**first, "index": 0}]}, {"tool_calls": [later]}, {"tool_calls": [again]}])
    for _, pieces in chunkings(body):
        events = decode_stream(pieces)
        assert stream_blocks(events) == [("tool", "fc-1"), ("thinking", "", {"fc-1": SIG_A})]
        args = "".join(ev.fragment for ev in events if hasattr(ev, "fragment"))
        assert json.loads(args) == WEATHER


def test_other_extra_content_is_ignored():
    tc = call("fc-1", "get_weather", WEATHER)
    tc["extra_content"] = {"google": {}, "vendor": {"x": 1}}
    for _, pieces in chunkings(stream([{"tool_calls": [tc]}])):
        assert stream_blocks(decode_stream(pieces)) == [("tool", "fc-1")]
    assert gemini.thought_signature({"extra_content": {"google": {"thought_signature": ""}}}) is None
    assert gemini.thought_signature({"extra_content": "x"}) is None


# ---------------------------------------------------------------- back toward a Chat upstream


def _request(parts: list[Any], results: list[str]) -> Request:
    return Request(
        model=MODEL,
        messages=[
            Message(role="user", parts=[TextPart("Weather and time in Paris?")]),
            Message(role="assistant", parts=parts),
            Message(role="user", parts=[ToolResultPart(tool_call_id=r, content=[TextPart("ok")]) for r in results]),
        ],
    )


def _assistant(body: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in body["messages"] if m["role"] == "assistant")


def test_request_puts_each_signature_back_on_its_call():
    sig = carry.wrap_gemini({"fc-1": SIG_A})
    parts = [
        ThinkingPart(text="", signature=sig),
        ToolCallPart(id="fc-1", name="get_weather", arguments=json.dumps(WEATHER)),
        ToolCallPart(id="fc-2", name="get_time", arguments=json.dumps(TIME)),
    ]
    ctx = Context()
    body = CODEC.encode_request(_request(parts, ["fc-1", "fc-2"]), ctx)
    calls = _assistant(body)["tool_calls"]
    assert calls[0]["extra_content"] == {"google": {"thought_signature": SIG_A}}
    assert "extra_content" not in calls[1]
    assert carry.GEMINI_TAG not in json.dumps(body)
    assert ctx.dropped.fields == []


def test_request_without_a_carried_signature_sends_no_extra_content():
    parts = [
        ThinkingPart(text="why", signature=carry.UNSIGNED),
        ToolCallPart(id="fc-1", name="get_weather", arguments=json.dumps(WEATHER)),
    ]
    body = CODEC.encode_request(_request(parts, ["fc-1"]), Context())
    assert "extra_content" not in json.dumps(body)


def test_signature_whose_call_is_gone_is_named_dropped():
    parts = [ThinkingPart(text="", signature=carry.wrap_gemini({"fc-9": SIG_A})), TextPart("done")]
    ctx = Context()
    body = CODEC.encode_request(_request(parts, []), ctx)
    assert "extra_content" not in json.dumps(body) and SIG_A not in json.dumps(body)
    assert gemini.DROPPED in ctx.dropped.fields


# ---------------------------------------------------------------- thought summaries (gemini profile)


def gemini_ctx() -> Context:
    from dragoman.protocols import profiles

    return Context(profile=profiles.get("gemini"))


def thought_stream(answer_split: bool) -> bytes:
    """Thought deltas flagged ``extra_content.google.thought`` (``<thought>`` opens the first), then ``</thought>``
    on the first unflagged content, as a Gemini log quoted in a public client's test shows."""
    flag = {"extra_content": {"google": {"thought": True}}}
    deltas = [
        {"content": "<thought>Okay, I", **flag},
        {"content": " will check.", **flag},
    ]
    if answer_split:
        deltas += [{"content": "</thought>Sunny"}, {"content": " today."}]
    else:
        deltas += [{"content": "</thought>", "tool_calls": [call("fc-1", "get_weather", WEATHER, SIG_A)]}]
    body = "".join(chunk({"role": "assistant", **d}) for d in deltas) + chunk({}, "stop")
    return (body + "data: [DONE]\n\n").encode()


def test_thought_summaries_become_thinking_and_their_tags_vanish():
    for label, pieces in chunkings(thought_stream(answer_split=True)):
        events = decode_stream(pieces, gemini_ctx())
        thinking = "".join(ev.text for ev in events if type(ev).__name__ == "ThinkingDelta")
        text = "".join(ev.text for ev in events if type(ev).__name__ == "TextDelta")
        assert (thinking, text) == ("Okay, I will check.", "Sunny today."), label


def test_the_call_after_a_thought_is_signed_by_the_thought_block():
    for label, pieces in chunkings(thought_stream(answer_split=False)):
        events = decode_stream(pieces, gemini_ctx())
        assert stream_blocks(events) == [("thinking", "Okay, I will check.", {"fc-1": SIG_A}), ("tool", "fc-1")], label
        assert not any(type(ev).__name__ == "TextDelta" for ev in events)


def test_without_the_profile_thought_tags_stay_text():
    events = decode_stream([thought_stream(answer_split=True)])
    text = "".join(ev.text for ev in events if type(ev).__name__ == "TextDelta")
    assert text.startswith("<thought>Okay")


def test_a_whole_reply_splits_its_thought_from_the_answer():
    body = whole([], "<thought>Let me see.</thought>Sunny.")
    body["choices"][0]["message"]["tool_calls"] = None
    resp = CODEC.decode_response(body, gemini_ctx())
    assert [(type(p).__name__, getattr(p, "text", None)) for p in resp.content] == [
        ("ThinkingPart", "Let me see."),
        ("TextPart", "Sunny."),
    ]
    plain = CODEC.decode_response(body, Context())
    assert [p.text for p in plain.content] == ["<thought>Let me see.</thought>Sunny."]

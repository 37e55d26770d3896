"""Gemini's thought signatures toward a Chat CLIENT and back, in Google's OpenAI-compatible shape.

A signature the IR carries for a tool call (``carry.wrap_gemini({call id: signature})`` on a thinking
signature, as both Gemini decoders and the Chat decoder make it) reaches a Chat client as
``extra_content.google.thought_signature`` on that call: in the whole message, and on the call's first
stream delta (on a delta of its own when it arrives after the call started). The official SDK's stream
accumulator assembles the same tool calls the whole response has. The client's next request carries it on
the assistant message's call (decoding it: test_gemini_history.py). Signatures that are not Gemini's keep
today's rules (Claude's in ``reasoning_details``, others named dropped).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import chunkings
from conftest import run_stream
from dragoman.ir import carry
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.request import Request
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import Response
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.sse import SSEDecoder
from dragoman.translate.stream import StreamTranslator

from .test_gemini import CASES
from .test_gemini import SIG_A
from .test_gemini import SIG_B
from .test_gemini import TIME
from .test_gemini import WEATHER
from .test_gemini import call
from .test_gemini import stream
from .test_gemini import whole

SIGNED_A = {"google": {"thought_signature": SIG_A}}
SIGNED_B = {"google": {"thought_signature": SIG_B}}
#: a signature Gemini put on a text part (``protocols.gemini.thoughts.PART_KEY``): Chat has no place for it
PART_SIG = carry.wrap_gemini({"@part": SIG_B})


def _ctx() -> Context:
    return Context(request=Request(model="m", include_usage=True))


def _encode(events: list[Any], ctx: Context | None = None) -> bytes:
    enc = CODEC.stream_encoder(ctx or _ctx())
    return b"".join(enc.encode(e) for e in events) + enc.close()


def _deltas(data: bytes) -> list[dict[str, Any]]:
    """The ``delta`` of every chunk (choice 0), read without Dragoman's code but the SSE framing."""
    out = []
    for ev in SSEDecoder().feed(data):
        if ev.data != "[DONE]":
            out += [c["delta"] for c in json.loads(ev.data).get("choices") or () if c.get("index") == 0]
    return out


def _raw_signatures(data: bytes) -> dict[int, list[Any]]:
    """Chat index -> the ``extra_content`` values its deltas carried, in order (an independent reading)."""
    out: dict[int, list[Any]] = {}
    for d in _deltas(data):
        for tc in d.get("tool_calls") or ():
            out.setdefault(tc["index"], [])
            if "extra_content" in tc:
                out[tc["index"]].append(tc["extra_content"])
    return out


def _raw_tool_calls(data: bytes) -> list[dict[str, Any]]:
    """The tool calls the chunks add up to, accumulated independently (strings appended, the rest kept)."""
    calls: dict[int, dict[str, Any]] = {}
    for d in _deltas(data):
        for tc in d.get("tool_calls") or ():
            slot = calls.setdefault(tc["index"], {"function": {"arguments": ""}})
            for k, v in tc.items():
                if k == "function":
                    slot["function"]["arguments"] += v.get("arguments") or ""
                    if v.get("name"):
                        slot["function"]["name"] = v["name"]
                elif k != "index":
                    slot[k] = v
    return [calls[i] for i in sorted(calls)]


def _sdk_tool_calls(data: bytes) -> list[dict[str, Any]]:
    """The tool calls as an app hands them back: the official SDK's stream accumulator's (when the SDK is
    installed, and then the same as the independent accumulation), else the independent accumulation."""
    raw = _raw_tool_calls(data)
    try:
        from openai.lib.streaming.chat import ChatCompletionStreamState
        from openai.types.chat import ChatCompletionChunk
    except ImportError:  # the Python 3.11 environment has no SDK in-process
        return raw
    state = ChatCompletionStreamState()
    for ev in SSEDecoder().feed(data):
        if ev.data != "[DONE]":
            state.handle_chunk(ChatCompletionChunk.model_validate_json(ev.data))
    msg = state.get_final_completion().choices[0].message
    sdk = msg.model_dump(exclude_none=True)["tool_calls"]
    assert [{k: v for k, v in c.items() if k not in ("type", "index")} for c in sdk] == [
        {k: v for k, v in c.items() if k != "type"} for c in raw
    ]
    return sdk


def _calls_events(first_sig: str | None, second_sig: str | None = None) -> list[Any]:
    """IR events as the Gemini stream decoder makes them: a thinking block carrying a call's signature right
    before the call; two parallel calls."""
    evs: list[Any] = [MessageStart(id="resp_1", model="gemini-3-pro", created=5)]
    n = 0
    for cid, name, args, sig in (("fc-1", "get_weather", WEATHER, first_sig), ("fc-2", "get_time", TIME, second_sig)):
        if sig is not None:
            evs += [BlockStart(n, BlockKind.THINKING), SignatureDelta(n, signature=sig), BlockStop(n)]
            n += 1
        evs += [BlockStart(n, BlockKind.TOOL_CALL, tool_call_id=cid, name=name)]
        evs += [ToolArgsDelta(n, json.dumps(args)), BlockStop(n)]
        n += 1
    return evs + [MessageDelta(StopReason.TOOL_USE, Usage(output_tokens=4)), MessageStop()]


# ---------------------------------------------------------------- toward a Chat client: streamed


def test_signature_goes_on_the_calls_first_delta():
    ctx = _ctx()
    data = _encode(_calls_events(carry.wrap_gemini({"fc-1": SIG_A})), ctx)
    first = [tc for d in _deltas(data) for tc in d.get("tool_calls") or () if "id" in tc]
    assert first[0] == {
        "index": 0,
        "id": "fc-1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": ""},
        "extra_content": SIGNED_A,
    }
    assert "extra_content" not in first[1]
    assert _raw_signatures(data) == {0: [SIGNED_A], 1: []}  # once, on the first delta only
    calls = _sdk_tool_calls(data)
    assert [(c["id"], c.get("extra_content")) for c in calls] == [("fc-1", SIGNED_A), ("fc-2", None)]
    assert json.loads(calls[0]["function"]["arguments"]) == WEATHER
    assert carry.GEMINI_TAG not in data.decode()
    assert ctx.dropped.fields == []


def test_each_signed_call_gets_its_own_signature():
    data = _encode(_calls_events(carry.wrap_gemini({"fc-1": SIG_A}), carry.wrap_gemini({"fc-2": SIG_B})))
    assert _raw_signatures(data) == {0: [SIGNED_A], 1: [SIGNED_B]}
    assert [c.get("extra_content") for c in _sdk_tool_calls(data)] == [SIGNED_A, SIGNED_B]


def test_a_signature_after_its_call_started_gets_a_delta_of_its_own():
    """The Chat decoder gives a signature arriving on a later delta of a call its block then (after the call's
    start); the client still gets it on that call, which the SDK's accumulator merges."""
    evs: list[Any] = [
        MessageStart(id="x", model="m"),
        BlockStart(0, BlockKind.TOOL_CALL, tool_call_id="fc-1", name="get_weather"),
        ToolArgsDelta(0, '{"location":'),
        BlockStop(0),
        BlockStart(1, BlockKind.THINKING),
        SignatureDelta(1, signature=carry.wrap_gemini({"fc-1": SIG_A})),
        BlockStop(1),
        MessageDelta(StopReason.TOOL_USE, None),
        MessageStop(),
    ]
    data = _encode(evs)
    assert {"tool_calls": [{"index": 0, "function": {"arguments": ""}, "extra_content": SIGNED_A}]} in _deltas(data)
    (call,) = _sdk_tool_calls(data)
    assert (call["id"], call["extra_content"], call["function"]["name"]) == ("fc-1", SIGNED_A, "get_weather")


def test_thinking_text_with_the_signature_still_streams_as_reasoning():
    evs = _calls_events(None)
    evs[1:1] = [
        BlockStart(9, BlockKind.THINKING),
        ThinkingDelta(9, "Need the weather."),
        SignatureDelta(9, signature=carry.wrap_gemini({"fc-1": SIG_A})),
        BlockStop(9),
    ]
    ctx = _ctx()
    data = _encode(evs, ctx)
    assert "".join(d.get("reasoning_content") or "" for d in _deltas(data)) == "Need the weather."
    assert _raw_signatures(data) == {0: [SIGNED_A], 1: []}
    assert ctx.dropped.fields == []


def test_a_text_part_signature_or_an_unknown_call_is_named_dropped_not_sent():
    for sig in (PART_SIG, carry.wrap_gemini({"fc-9": SIG_A})):
        ctx = _ctx()
        data = _encode(_calls_events(sig), ctx)
        assert _raw_signatures(data) == {0: [], 1: []}
        assert SIG_A not in data.decode() and SIG_B not in data.decode()
        assert ctx.dropped.fields == ["thinking_signature"]


def test_other_signatures_keep_their_rules():
    """Claude's signature still goes out as a ``reasoning_details`` entry, a Responses one is dropped (named),
    and neither puts anything on a call."""
    claude = _calls_events(None)
    claude[1:1] = [
        BlockStart(9, BlockKind.THINKING),
        ThinkingDelta(9, "hm"),
        SignatureDelta(9, "EqQBClaude"),
        BlockStop(9),
    ]
    ctx = _ctx()
    data = _encode(claude, ctx)
    assert _raw_signatures(data) == {0: [], 1: []}
    details = [e for d in _deltas(data) for e in d.get("reasoning_details") or ()]
    assert details[-1]["signature"] == "EqQBClaude"
    assert ctx.dropped.fields == []
    responses = _calls_events(carry.wrap_responses("rs_1", "gAAAA"))
    ctx = _ctx()
    assert _raw_signatures(_encode(responses, ctx)) == {0: [], 1: []}
    assert ctx.dropped.fields == ["thinking_signature"]


# ---------------------------------------------------------------- toward a Chat client: whole


def _answer(parts: list[Any]) -> dict[str, Any]:
    return CODEC.encode_response(Response(id="r", model="m", content=parts, stop_reason=StopReason.TOOL_USE), _ctx())


def _parts(sig: str | None) -> list[Any]:
    parts: list[Any] = [ThinkingPart(signature=sig)] if sig is not None else []
    return parts + [
        ToolCallPart(id="fc-1", name="get_weather", arguments=json.dumps(WEATHER)),
        ToolCallPart(id="fc-2", name="get_time", arguments=json.dumps(TIME)),
    ]


def test_whole_message_signs_the_call():
    ctx = _ctx()
    resp = Response(id="r", model="m", content=_parts(carry.wrap_gemini({"fc-1": SIG_A})))
    calls = CODEC.encode_response(resp, ctx)["choices"][0]["message"]["tool_calls"]
    assert [c.get("extra_content") for c in calls] == [SIGNED_A, None]
    assert ctx.dropped.fields == []
    assert "reasoning_details" not in _answer(_parts(carry.wrap_gemini({"fc-1": SIG_A})))["choices"][0]["message"]


def test_whole_message_without_a_place_for_the_signature_names_it():
    for sig in (PART_SIG, carry.wrap_gemini({"fc-9": SIG_A})):
        ctx = _ctx()
        resp = Response(id="r", model="m", content=_parts(sig))
        body = CODEC.encode_response(resp, ctx)
        assert "extra_content" not in json.dumps(body)
        assert ctx.dropped.fields == ["thinking_signature"]


def test_whole_message_keeps_claude_in_reasoning_details():
    body = _answer([ThinkingPart(text="hm", signature="EqQBClaude"), *_parts(None)])
    msg = body["choices"][0]["message"]
    assert msg["reasoning_details"][0]["signature"] == "EqQBClaude"
    assert "extra_content" not in json.dumps(msg)


# ---------------------------------------------------------------- Chat upstream -> Chat client, every chunking


def _chat_to_chat(pieces: list[bytes]) -> tuple[bytes, Context]:
    ctx = _ctx()
    tr = StreamTranslator(CODEC.stream_decoder(ctx), CODEC.stream_encoder(ctx))
    return run_stream(tr, pieces), ctx


def _wire_signatures(calls: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [(c["id"], c.get("extra_content")) for c in calls]


@pytest.mark.parametrize("name", CASES)
def test_signed_calls_pass_a_chat_client_as_google_sent_them(name):
    """Google's compat-layer stream through the Chat decoder and encoder: each call reaches the client with the
    signature it had (the same over every chunking); the whole response likewise."""
    deltas, calls, reasoning, text, _ = CASES[name]
    expected = _wire_signatures(calls)
    ref = None
    for label, pieces in chunkings(stream(deltas)):
        out, ctx = _chat_to_chat(pieces)
        assert ref is None or out == ref, f"chunking {label} differs"
        ref = out
        assert ctx.dropped.fields == []
    assert ref is not None
    assert _wire_signatures(_sdk_tool_calls(ref)) == expected
    assert all(len(v) <= 1 for v in _raw_signatures(ref).values())  # each signature sent once
    ctx = _ctx()
    body = CODEC.encode_response(CODEC.decode_response(whole(calls, text, reasoning), ctx), ctx)
    assert _wire_signatures(body["choices"][0]["message"]["tool_calls"]) == expected


def test_a_late_upstream_signature_reaches_the_client_on_its_call_over_every_chunking():
    first = call("fc-1", "get_weather", {})
    first["function"]["arguments"] = '{"location":'
    later = {"index": 0, "function": {"arguments": ' "Paris"}'}, "extra_content": SIGNED_A}
    body = stream([{"tool_calls": [{**first, "index": 0}]}, {"tool_calls": [later]}])
    ref = None
    for label, pieces in chunkings(body):
        out, _ = _chat_to_chat(pieces)
        assert ref is None or out == ref, f"chunking {label} differs"
        ref = out
    assert ref is not None
    (got,) = _sdk_tool_calls(ref)
    assert (got["extra_content"], json.loads(got["function"]["arguments"])) == (SIGNED_A, WEATHER)

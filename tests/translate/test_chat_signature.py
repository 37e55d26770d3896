"""Claude's thinking signature through a Chat client and back (OpenRouter ``reasoning_details``).

A Chat client of an Anthropic upstream with reasoning and tools gets each thinking block as a
``reasoning_details`` entry (the signature on a ``reasoning.text``, ``redacted_thinking`` as a
``reasoning.encrypted``) beside ``reasoning_content``; streamed (every chunking, accumulated by the official
SDK) and whole agree. Handing the assistant message back, the next request to Anthropic starts that
assistant turn with the identical signed blocks, before its tool_use blocks; a turn without entries, or
whose thinking text was edited, carries no signature.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from corpus_loader import samples
from dragoman.protocols.base import Context
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request
from translate.test_reasoning import A
from translate.test_reasoning import C
from translate.test_reasoning import frozen_clock  # noqa: F401  (autouse fixture)
from translate.test_reasoning import translate_stream
from translate.test_reasoning import translate_whole
from validators import anthropic as va
from validators import chat as vc

FORMAT = "anthropic-claude-v1"


def _sample(name: str) -> Any:
    return next(s for s in samples("anthropic", ok=True) if s.name == f"anthropic/{name}")


def anthropic_sse(msg: dict[str, Any]) -> bytes:
    """A recorded whole Anthropic message streamed in the Messages event grammar (every text in two deltas)."""

    def ev(obj: dict[str, Any]) -> str:
        return f"event: {obj['type']}\ndata: {json.dumps(obj)}\n\n"

    def halves(s: str) -> list[str]:
        return [s[: len(s) // 2], s[len(s) // 2 :]]

    start = {**msg, "content": [], "stop_reason": None, "usage": {**msg["usage"], "output_tokens": 1}}
    out = [ev({"type": "message_start", "message": start})]
    for i, b in enumerate(msg["content"]):
        t = b["type"]
        empty = {"thinking": {"thinking": "", "signature": ""}, "text": {"text": ""}, "tool_use": {"input": {}}}
        out.append(ev({"type": "content_block_start", "index": i, "content_block": {**b, **empty.get(t, {})}}))
        deltas: list[dict[str, Any]] = []
        if t == "thinking":
            deltas = [{"type": "thinking_delta", "thinking": h} for h in halves(b["thinking"])]
            deltas.append({"type": "signature_delta", "signature": b["signature"]})
        elif t == "text":
            deltas = [{"type": "text_delta", "text": h} for h in halves(b["text"])]
        elif t == "tool_use":
            deltas = [{"type": "input_json_delta", "partial_json": h} for h in halves(json.dumps(b["input"]))]
        out += [ev({"type": "content_block_delta", "index": i, "delta": d}) for d in deltas]
        out.append(ev({"type": "content_block_stop", "index": i}))
        usage = {"output_tokens": msg["usage"]["output_tokens"]}
    out.append(ev({"type": "message_delta", "delta": {"stop_reason": msg["stop_reason"]}, "usage": usage}))
    out.append(ev({"type": "message_stop"}))
    return "".join(out).encode()


def sdk_message(body: bytes) -> dict[str, Any]:
    """The assistant message the official openai SDK's stream accumulator assembles from our chunks."""
    streaming = pytest.importorskip("openai.lib.streaming.chat")
    chunk_type = pytest.importorskip("openai.types.chat").ChatCompletionChunk
    state = streaming.ChatCompletionStreamState()
    for frame in body.split(b"\n\n"):
        if frame.startswith(b"data: {"):
            state.handle_chunk(chunk_type.model_validate_json(frame[6:]))
    return state.get_final_completion().choices[0].message.model_dump(exclude_none=True)


def chat_turn(body: bytes, streamed: bool) -> dict[str, Any]:
    """Our answer to the Chat client, validated strictly; its assistant message as the client keeps it."""
    if streamed:
        vc.validate_stream(body)
        msg = sdk_message(body)
        for tc in msg.get("tool_calls") or []:
            del tc["index"]  # the accumulator's own bookkeeping
    else:
        vc.validate_completion(body)
        msg = json.loads(body)["choices"][0]["message"]
    keep = ("role", "content", "reasoning_content", "reasoning_details", "tool_calls")
    return {k: msg[k] for k in keep if msg.get(k) is not None}


def next_request(assistant: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The Chat client's next turn (its assistant message handed back, tool results) translated to Anthropic."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "What is the capital of France?"}, assistant]
    for tc in assistant.get("tool_calls") or []:
        messages.append({"role": "tool", "tool_call_id": tc["id"], "content": "Paris"})
    tool = {"type": "function", "function": {"name": "get_capital", "parameters": {"type": "object"}}}
    body = {"model": "claude-sonnet-4-5", "reasoning_effort": "low", "messages": messages, "tools": [tool]}
    return json.loads(translate_request(json.dumps(body).encode(), Plan(client=C, upstream=A), ctx).body)


def _assistant_content(req: dict[str, Any]) -> list[dict[str, Any]]:
    return next(m for m in req["messages"] if m["role"] == "assistant")["content"]


# ---------------------------------------------------------------- signed thinking + tool call


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
def test_signed_thinking_and_tool_call_round_trip(streamed):
    recorded = json.loads(_sample("pydantic-ai__json-thinking-tool-call.yaml#0").body)
    blocks = recorded["content"]
    assert [b["type"] for b in blocks] == ["thinking", "text", "tool_use"]
    thinking, sig = blocks[0]["thinking"], blocks[0]["signature"]
    assert thinking and sig
    out = translate_stream(anthropic_sse(recorded), A, C) if streamed else translate_whole(recorded, A, C)
    msg = chat_turn(out, streamed)
    assert msg["reasoning_content"] == thinking
    assert msg["reasoning_details"] == [
        {"type": "reasoning.text", "text": thinking, "index": 0, "signature": sig, "format": FORMAT}
    ]
    assert msg["content"] == blocks[1]["text"]
    assert [(t["id"], t["function"]["name"]) for t in msg["tool_calls"]] == [(blocks[2]["id"], blocks[2]["name"])]

    ctx = Context()
    req = next_request(msg, ctx)
    content = _assistant_content(req)
    assert req["thinking"]["type"] != "disabled"  # thinking stays on: the turn is signed, as the API requires
    assert content == [
        {"type": "thinking", "thinking": thinking, "signature": sig},
        {"type": "text", "text": blocks[1]["text"]},
        {"type": "tool_use", "id": blocks[2]["id"], "name": blocks[2]["name"], "input": blocks[2]["input"]},
    ]
    assert "thinking_without_signature" not in ctx.dropped.fields


def test_streamed_and_whole_answers_agree():
    recorded = json.loads(_sample("pydantic-ai__json-thinking-tool-call.yaml#0").body)
    streamed = chat_turn(translate_stream(anthropic_sse(recorded), A, C), True)
    whole = chat_turn(translate_whole(recorded, A, C), False)
    assert streamed == whole


def test_recorded_stream_signature_reaches_the_chat_client():
    s = _sample("pydantic-ai__stream-thinking-signature.yaml#0")
    ref = va.validate_stream(s.body)
    assert len(ref.signatures) == 1 and ref.thinking
    msg = chat_turn(translate_stream(s.body, A, C), True)
    assert msg["reasoning_content"] == ref.thinking and msg["content"] == ref.text
    assert msg["reasoning_details"] == [
        {"type": "reasoning.text", "text": ref.thinking, "index": 0, "signature": ref.signatures[0], "format": FORMAT}
    ]
    content = _assistant_content(next_request(msg, Context()))
    assert content[0] == {"type": "thinking", "thinking": ref.thinking, "signature": ref.signatures[0]}


# ---------------------------------------------------------------- redacted thinking


def test_recorded_redacted_stream_round_trip():
    s = _sample("pydantic-ai__stream-redacted-thinking.yaml#0")
    events = [json.loads(line[6:]) for line in s.body.decode().splitlines() if line.startswith("data: {")]
    data = [e["content_block"].get("data") for e in events if e["type"] == "content_block_start"][:2]
    assert len(data) == 2 and all(data)
    ctx = Context()
    msg = chat_turn(translate_stream(s.body, A, C), True)
    assert msg["reasoning_details"] == [
        {"type": "reasoning.encrypted", "data": d, "format": FORMAT, "index": i} for i, d in enumerate(data)
    ]
    content = _assistant_content(next_request(msg, ctx))
    assert content[:2] == [{"type": "redacted_thinking", "data": d} for d in data]
    assert [b["type"] for b in content[2:]] == ["text"] and ctx.dropped.fields == []


def test_recorded_redacted_whole_round_trip():
    recorded = json.loads(_sample("pydantic-ai__json-redacted-thinking.yaml#0").body)
    data = recorded["content"][0]["data"]
    msg = chat_turn(translate_whole(recorded, A, C), False)
    assert msg["reasoning_details"] == [{"type": "reasoning.encrypted", "data": data, "format": FORMAT, "index": 0}]
    assert _assistant_content(next_request(msg, Context()))[0] == {"type": "redacted_thinking", "data": data}


# ---------------------------------------------------------------- turns that carry no signature


def test_plain_chat_turn_is_unchanged():
    """No reasoning_details: the reasoning text has no signature to go with it, as before."""
    call = {"id": "toolu_1", "type": "function", "function": {"name": "get_capital", "arguments": '{"c": "FR"}'}}
    assistant = {"role": "assistant", "content": None, "reasoning_content": "Look it up.", "tool_calls": [call]}
    ctx = Context()
    req = next_request(assistant, ctx)
    assert _assistant_content(req) == [
        {"type": "tool_use", "id": "toolu_1", "name": "get_capital", "input": {"c": "FR"}}
    ]
    assert "messages[1].thinking_without_signature" in ctx.dropped.fields
    assert (
        "thinking" not in req and "thinking.tool_loop_without_signature" in ctx.dropped.fields
    )  # goes without thinking rather than a 400
    assert req["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "Paris"}]}],
    }


def test_another_providers_signature_is_not_sent_to_anthropic():
    """An entry another model signed (OpenRouter's Gemini format) never reaches Anthropic as a signature."""
    call = {"id": "toolu_1", "type": "function", "function": {"name": "get_capital", "arguments": "{}"}}
    entry = {
        "type": "reasoning.text",
        "text": "Hmm.",
        "signature": "gemini-sig",
        "format": "google-gemini-v1",
        "index": 0,
    }
    assistant = {"role": "assistant", "content": None, "reasoning_details": [entry], "tool_calls": [call]}
    ctx = Context()
    req = next_request(assistant, ctx)
    assert [b["type"] for b in _assistant_content(req)] == ["tool_use"]
    assert "gemini-sig" not in json.dumps(req) and "messages[1].thinking_without_signature" in ctx.dropped.fields

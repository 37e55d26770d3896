"""Whole Chat responses both ways (real corpus bodies, checked with the SDK's types) and usage."""

from __future__ import annotations

import json

import pytest

from corpus_loader import samples
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.mapping import chat_stop
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.response import Response
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.openai_chat.response import decode_usage

BODIES = samples("openai-chat", stream=False, ok=True)


@pytest.mark.parametrize("s", BODIES, ids=[s.name for s in BODIES])
def test_corpus_responses_decode(s):
    body = json.loads(s.body)
    resp = CODEC.decode_response(body, Context())
    msg = body["choices"][0]["message"]
    text = "".join(p.text for p in resp.content if isinstance(p, TextPart))
    assert text == (msg.get("content") or "")
    thinking = "".join(p.text for p in resp.content if isinstance(p, ThinkingPart))
    assert thinking == (msg.get("reasoning_content") or msg.get("reasoning") or "")
    calls = [p for p in resp.content if isinstance(p, ToolCallPart)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        (t["id"], t["function"]["name"], t["function"]["arguments"]) for t in msg.get("tool_calls") or []
    ]
    assert resp.stop_reason == chat_stop(body["choices"][0]["finish_reason"])
    assert resp.usage.input_tokens == body["usage"]["prompt_tokens"]
    assert resp.usage.output_tokens == body["usage"]["completion_tokens"]
    if thinking:  # thinking comes before text
        assert isinstance(resp.content[0], ThinkingPart)


def test_response_mistral_content_array_and_custom():
    ctx = Context(request=Request(model="m", tools=[Tool(name="patch", kind="custom")]))
    resp = CODEC.decode_response(
        {
            "id": "x",
            "model": "m",
            "choices": [
                {
                    "message": {
                        "content": [
                            {"type": "thinking", "thinking": [{"type": "text", "text": "hm"}]},
                            {"type": "text", "text": "ok"},
                        ],
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "patch", "arguments": '{"input":"RAW"}'},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "prompt_cache_hit_tokens": 3},
        },
        ctx,
    )
    assert resp.content[0] == ThinkingPart(text="hm")
    assert resp.content[1] == TextPart("ok")
    assert resp.content[2] == ToolCallPart(id="c", name="patch", arguments="RAW", kind="custom")
    assert resp.stop_reason is StopReason.TOOL_USE
    assert resp.usage.cache_read_tokens == 3


def test_response_without_choices_is_protocol_error():
    with pytest.raises(UpstreamProtocolError):
        CODEC.decode_response({"id": "x", "model": "m", "choices": []}, Context())


def test_usage_decode():
    u = decode_usage(
        {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 6},
            "completion_tokens_details": {"reasoning_tokens": 2},
        }
    )
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens) == (10, 4, 6, 2)
    assert decode_usage(None) is None


def test_response_encode():
    resp = Response(
        id="msg_1",
        model="m",
        content=[
            ThinkingPart(text="hm", signature="s"),
            TextPart("a"),
            TextPart("b"),
            ToolCallPart(id="t", name="f", arguments='{"x":1}'),
        ],
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=10, output_tokens=3, cache_read_tokens=4, reasoning_tokens=1),
        created=7,
    )
    ctx = Context()
    out = CODEC.encode_response(resp, ctx)
    types = pytest.importorskip("openai.types.chat")
    parsed = types.ChatCompletion.model_validate(out)
    assert parsed.id == "chatcmpl-msg_1" and parsed.created == 7
    msg = parsed.choices[0].message
    assert msg.content == "ab" and msg.tool_calls[0].function.arguments == '{"x":1}'
    assert out["choices"][0]["message"]["reasoning_content"] == "hm"
    assert parsed.choices[0].finish_reason == "tool_calls"
    assert parsed.usage.total_tokens == 13 and parsed.usage.prompt_tokens_details.cached_tokens == 4
    # Claude's signature goes out in OpenRouter's reasoning_details, so a Chat client can hand it back
    assert out["choices"][0]["message"]["reasoning_details"] == [
        {"type": "reasoning.text", "text": "hm", "index": 0, "signature": "s", "format": "anthropic-claude-v1"}
    ]
    assert "thinking_signature" not in ctx.dropped.fields
    # round trip through the decoder
    back = CODEC.decode_response(out, Context())
    assert back.content[1:] == [TextPart("ab"), ToolCallPart(id="t", name="f", arguments='{"x":1}')]
    assert CODEC.encode_response(Response(id="chatcmpl-x", model="m"), Context())["id"] == "chatcmpl-x"


def _body(name: str) -> dict:
    return json.loads(next(s for s in BODIES if s.name == name).body)


def test_real_n3_body_gives_choice_0_and_reports_the_rest():
    ctx = Context()
    resp = CODEC.decode_response(_body("chat/openai-python__json-n3-choices.json"), ctx)
    assert resp.content == [TextPart('{"city":"San Francisco","temperature":64,"units":"f"}')]  # choice 0
    assert ctx.dropped.fields == ["choices[1:]"]
    ctx = Context()
    CODEC.decode_response(_body("chat/openai-python__json-refusal.json"), ctx)
    assert ctx.dropped.fields == []


def test_real_refusal_body_round_trips_as_refusal():
    resp = CODEC.decode_response(_body("chat/openai-python__json-refusal.json"), Context())
    assert resp.content == [RefusalPart("I'm very sorry, but I can't assist with that.")]
    assert resp.stop_reason is StopReason.END_TURN  # OpenAI ends a refusal with "stop"
    out = CODEC.encode_response(resp, Context())
    msg = out["choices"][0]["message"]
    assert (msg["content"], msg["refusal"], out["choices"][0]["finish_reason"]) == (
        None,
        "I'm very sorry, but I can't assist with that.",
        "stop",
    )

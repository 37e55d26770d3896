"""Gemini's thought signatures from a Chat client's history (Google's OpenAI-compatible shape) back into the IR.

An assistant message's tool call with ``extra_content: {"google": {"thought_signature": ...}}`` (as Dragoman, or
Google's compat layer, gave it) is decoded into the carrier the response decoders make: a thinking part before
the call whose signature is ``carry.wrap_gemini({call id: signature})`` (the reasoning right before the first
call carries it when it has none). Toward a Chat upstream with the ``gemini`` profile each call gets its own
signature back and no skip placeholder; a history without any still gets it. The Gemini-native upstream side is
in tests/translate/test_gemini_chat_client.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dragoman.ir import carry
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.protocols import profiles
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC

from .test_gemini import SIG_A
from .test_gemini import SIG_B
from .test_gemini import TIME
from .test_gemini import WEATHER

SIGNED_A = {"google": {"thought_signature": SIG_A}}
SIGNED_B = {"google": {"thought_signature": SIG_B}}


def _history(assistant: dict[str, Any]) -> dict[str, Any]:
    ids = [tc["id"] for tc in assistant.get("tool_calls") or ()]
    return {
        "model": "gemini-3-pro",
        "messages": [
            {"role": "user", "content": "Weather and time in Paris?"},
            assistant,
            *({"role": "tool", "tool_call_id": i, "content": "ok"} for i in ids),
        ],
    }


def _call(cid: str, name: str, args: dict[str, Any], signed: dict[str, Any] | None = None) -> dict[str, Any]:
    tc: dict[str, Any] = {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    if signed is not None:
        tc["extra_content"] = signed
    return tc


def _blocks(req: Request) -> list[tuple[Any, ...]]:
    (msg,) = [m for m in req.messages if m.role == "assistant"]
    out: list[tuple[Any, ...]] = []
    for p in msg.parts:
        if isinstance(p, ThinkingPart):
            out.append(("thinking", p.text, carry.unwrap_gemini(p.signature)))
        elif isinstance(p, ToolCallPart):
            out.append(("tool", p.id))
        elif isinstance(p, TextPart):
            out.append(("text", p.text))
    return out


HISTORY: dict[str, tuple[dict[str, Any], list[tuple[Any, ...]]]] = {
    "parallel": (
        {
            "role": "assistant",
            "tool_calls": [_call("fc-1", "get_weather", WEATHER, SIGNED_A), _call("fc-2", "get_time", TIME)],
        },
        [("thinking", "", {"fc-1": SIG_A}), ("tool", "fc-1"), ("tool", "fc-2")],
    ),
    "reasoning-carries-it": (
        {
            "role": "assistant",
            "reasoning_content": "Need the weather.",
            "tool_calls": [_call("fc-1", "get_weather", WEATHER, SIGNED_A)],
        },
        [("thinking", "Need the weather.", {"fc-1": SIG_A}), ("tool", "fc-1")],
    ),
    "text-then-two-signed": (
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [_call("fc-1", "get_weather", WEATHER, SIGNED_A), _call("fc-2", "get_time", TIME, SIGNED_B)],
        },
        [
            ("text", "Checking."),
            ("thinking", "", {"fc-1": SIG_A}),
            ("tool", "fc-1"),
            ("thinking", "", {"fc-2": SIG_B}),
            ("tool", "fc-2"),
        ],
    ),
    "unsigned": (
        {"role": "assistant", "tool_calls": [_call("fc-1", "get_weather", WEATHER)]},
        [("tool", "fc-1")],
    ),
}


@pytest.mark.parametrize("name", HISTORY)
def test_request_decoder_carries_the_clients_signature(name):
    assistant, expected = HISTORY[name]
    req = CODEC.decode_request(_history(assistant))
    assert _blocks(req) == expected
    assert req.dropped.fields == []


@pytest.mark.parametrize("name", HISTORY)
def test_the_signature_goes_back_on_its_call_toward_a_gemini_chat_upstream(name):
    """Decoded from the client and encoded for a Chat upstream with the Gemini profile: each call has the
    signature it came with; only a history without any gets Google's skip value."""
    assistant, _ = HISTORY[name]
    ctx = Context(profile=profiles.get("gemini"))
    body = CODEC.encode_request(CODEC.decode_request(_history(assistant)), ctx)
    (msg,) = [m for m in body["messages"] if m["role"] == "assistant"]
    sent = [tc.get("extra_content") for tc in msg["tool_calls"]]
    signed = [tc.get("extra_content") for tc in assistant["tool_calls"]]
    if any(signed):
        assert sent == signed
        assert "thought_signature" not in ctx.placeholders
    else:
        assert sent[0] == {"google": {"thought_signature": profiles.GEMINI_SKIP_SIGNATURE}}
        assert "thought_signature" in ctx.placeholders
    assert carry.GEMINI_TAG not in json.dumps(body)


def test_legacy_function_call_and_custom_calls_keep_their_places():
    assistant = {
        "role": "assistant",
        "tool_calls": [_call("fc-1", "apply_patch", {"input": "*** Begin"}, SIGNED_A)],
        "function_call": {"name": "get_time", "arguments": "{}"},
    }
    body = _history(assistant)
    body["tools"] = [{"type": "custom", "custom": {"name": "apply_patch"}}]
    req = CODEC.decode_request(body)
    (msg,) = [m for m in req.messages if m.role == "assistant"]
    assert [type(p).__name__ for p in msg.parts] == ["ThinkingPart", "ToolCallPart", "ToolCallPart"]
    assert carry.unwrap_gemini(msg.parts[0].signature) == {"fc-1": SIG_A}
    assert (msg.parts[1].kind, msg.parts[1].arguments) == ("custom", "*** Begin")
    assert msg.parts[2].id == "call_legacy_1"

"""Gemini's thought signatures through a Chat Completions client and back to a Gemini-native upstream.

Real Gemini recordings (tests/corpus/gemini, vercel/ai fixtures: Gemini 3 signs a step's first
``functionCall`` part) translated for a Chat client, streamed (every chunking, byte by byte included; the
official SDK's accumulator) and whole: each signed call reaches the client as Google's OpenAI-compatible layer
gives it, ``extra_content: {"google": {"thought_signature": ...}}``, with the recorded value; unsigned calls get
nothing. The client's next request (the assistant message as the SDK assembled it, plus the tool results)
reaches Gemini with the identical ``thoughtSignature`` on the same ``functionCall`` part and no
``skip_thought_signature_validator``; only a recording without signatures still gets that placeholder.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from corpus_loader import samples
from dragoman.ir.request import Request
from dragoman.protocols import Protocol
from dragoman.protocols import profiles
from dragoman.protocols.base import Context
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request
from dragoman.translate.response import translate_response
from protocols.openai_chat.test_gemini_client import _sdk_tool_calls
from translate.test_reasoning import C
from translate.test_reasoning import frozen_clock  # noqa: F401  (autouse fixture)
from translate.test_reasoning import translate_stream
from validators import chat as vc

G = Protocol.GEMINI
SKIP = profiles.GEMINI_SKIP_SIGNATURE


def _recorded_calls(s: Any) -> list[tuple[str, str | None]]:
    """(name, thoughtSignature or None) of each function call a recording starts, in order."""
    if s.stream:
        events = [json.loads(line[6:]) for line in s.body.decode().splitlines() if line.startswith("data: {")]
    else:
        events = [json.loads(s.body)]
    out = []
    for e in events:
        for cand in e.get("candidates") or ():
            for p in (cand.get("content") or {}).get("parts") or ():
                fc = p.get("functionCall")
                if isinstance(fc, dict) and fc.get("name"):
                    out.append((fc["name"], p.get("thoughtSignature")))
    return out


def _unsigned(s: Any) -> SimpleNamespace:
    """The recording with its thought signatures taken out (a history Gemini 2.x or another model made)."""

    def strip(e: dict[str, Any]) -> dict[str, Any]:
        for cand in e.get("candidates") or ():
            for p in (cand.get("content") or {}).get("parts") or ():
                p.pop("thoughtSignature", None)
        return e

    if not s.stream:
        return SimpleNamespace(name=s.name, stream=False, body=json.dumps(strip(json.loads(s.body))).encode())
    lines = [
        "data: " + json.dumps(strip(json.loads(line[6:]))) if line.startswith("data: {") else line
        for line in s.body.decode().split("\n")
    ]
    return SimpleNamespace(name=s.name, stream=True, body="\n".join(lines).encode())


SIGNED_SAMPLES = [s for s in samples("gemini", ok=True) if any(sig for _, sig in _recorded_calls(s))]
TOOL_SAMPLES = [*SIGNED_SAMPLES, *(_unsigned(s) for s in SIGNED_SAMPLES)]
TOOL_IDS = [s.name for s in SIGNED_SAMPLES] + [s.name + "-unsigned" for s in SIGNED_SAMPLES]


def test_the_corpus_has_signed_calls_streamed_and_whole():
    assert {s.stream for s in SIGNED_SAMPLES} == {True, False}
    assert all(not any(sig for _, sig in _recorded_calls(s)) for s in TOOL_SAMPLES[len(SIGNED_SAMPLES) :])


def _client_calls(s: Any) -> list[dict[str, Any]]:
    """The assistant tool calls a Chat client keeps from the translated answer."""
    if s.stream:
        out = translate_stream(s.body, G, C)  # the same bytes for every chunking (asserted)
        vc.validate_stream(out)
        return _sdk_tool_calls(out)
    ctx = Context(request=Request(model="m"))
    body = translate_response(s.body, Plan(client=C, upstream=G), ctx)
    vc.validate_completion(body)
    assert "thinking_signature" not in ctx.dropped.fields
    return json.loads(body)["choices"][0]["message"]["tool_calls"]


@pytest.mark.parametrize("s", TOOL_SAMPLES, ids=TOOL_IDS)
def test_chat_client_keeps_gemini_signatures_and_hands_them_back(s):
    recorded = _recorded_calls(s)
    calls = _client_calls(s)
    assert [c["function"]["name"] for c in calls] == [name for name, _ in recorded]
    assert [c.get("extra_content") for c in calls] == [
        {"google": {"thought_signature": sig}} if sig else None for _, sig in recorded
    ]
    nxt = {
        "model": "gemini-3-pro-preview",
        "tools": [
            {"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
            for n in dict.fromkeys(name for name, _ in recorded)
        ],
        "messages": [
            {"role": "user", "content": "Go."},
            {"role": "assistant", "content": None, "tool_calls": calls},
            *({"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls),
        ],
    }
    ctx = Context()
    up = json.loads(translate_request(json.dumps(nxt).encode(), Plan(client=C, upstream=G), ctx).body)
    (model,) = [c for c in up["contents"] if c["role"] == "model"]
    sent = [p.get("thoughtSignature") for p in model["parts"] if "functionCall" in p]
    if any(sig for _, sig in recorded):
        assert sent == [sig for _, sig in recorded]  # the identical values, each on its own call
        assert SKIP not in json.dumps(up) and "thought_signature" not in ctx.placeholders
    else:  # nothing was signed: Google's documented placeholder on the step's first call, as before
        assert sent == [SKIP] + [None] * (len(recorded) - 1)
        assert "thought_signature" in ctx.placeholders
    assert "dragoman.v1." not in json.dumps(up)

"""Gemini's thought signatures through an Anthropic (Claude Code) or Responses (Codex) client and back.

Gemini's OpenAI-compatible endpoint signs a thinking model's tool calls (``extra_content.google.
thought_signature``) and Gemini 3 answers 400 when the current turn's calls come back without it. The
client gets the signature in a thinking block / reasoning item before the call (the Anthropic stream valid
over every chunking); its next request (assistant turn handed back plus tool results) reaches the Chat
upstream with the identical value on the same call, and nothing where nothing was signed. An Anthropic
upstream never gets the carried value. No recording exists in the corpus: the upstream shapes are the
documented ones (ai.google.dev/gemini-api/docs/thought-signatures, see tests/protocols/openai_chat/test_gemini.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dragoman.ir import carry
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request
from protocols.openai_chat.test_gemini import SIG_A
from protocols.openai_chat.test_gemini import TIME
from protocols.openai_chat.test_gemini import WEATHER
from protocols.openai_chat.test_gemini import call
from protocols.openai_chat.test_gemini import stream as gemini_stream
from protocols.openai_chat.test_gemini import whole as gemini_whole
from translate.test_reasoning import A
from translate.test_reasoning import C
from translate.test_reasoning import R
from translate.test_reasoning import _events
from translate.test_reasoning import frozen_clock  # noqa: F401  (autouse fixture)
from translate.test_reasoning import translate_stream
from translate.test_reasoning import translate_whole
from validators import anthropic as va
from validators import responses as vr

SIGNED = {"google": {"thought_signature": SIG_A}}
#: name -> (stream deltas, whole tool calls, reasoning, the signed call ids, all call ids)
CASES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str | None, list[str], list[str]]] = {
    "single": (
        [{"tool_calls": [call("fc-1", "get_weather", WEATHER, SIG_A)]}],
        [call("fc-1", "get_weather", WEATHER, SIG_A)],
        None,
        ["fc-1"],
        ["fc-1"],
    ),
    "parallel": (
        [{"tool_calls": [call("fc-1", "get_weather", WEATHER, SIG_A), call("fc-2", "get_time", TIME)]}],
        [call("fc-1", "get_weather", WEATHER, SIG_A), call("fc-2", "get_time", TIME)],
        None,
        ["fc-1"],
        ["fc-1", "fc-2"],
    ),
    "reasoning": (
        [{"reasoning_content": "Need the weather."}, {"tool_calls": [call("fc-1", "get_weather", WEATHER, SIG_A)]}],
        [call("fc-1", "get_weather", WEATHER, SIG_A)],
        "Need the weather.",
        ["fc-1"],
        ["fc-1"],
    ),
    "unsigned": (
        [{"tool_calls": [call("fc-1", "get_weather", WEATHER)]}],
        [call("fc-1", "get_weather", WEATHER)],
        None,
        [],
        ["fc-1"],
    ),
}


def _anthropic_content(body: bytes, streamed: bool) -> list[dict[str, Any]]:
    """The assistant content an Anthropic client keeps (what the SDK accumulates)."""
    if not streamed:
        return json.loads(body)["content"]
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for e in _events(body):
        if e["type"] == "content_block_start":
            blocks[e["index"]] = dict(e["content_block"])
        elif e["type"] == "content_block_delta":
            d, b = e["delta"], blocks[e["index"]]
            if d["type"] == "input_json_delta":
                partial[e["index"]] = partial.get(e["index"], "") + d["partial_json"]
            elif d["type"] == "signature_delta":
                b["signature"] = d["signature"]
            else:
                key = {"thinking_delta": "thinking", "text_delta": "text"}[d["type"]]
                b[key] += d[key]
    for i, raw in partial.items():
        blocks[i]["input"] = json.loads(raw)
    return [blocks[i] for i in sorted(blocks)]


def _tools() -> list[dict[str, Any]]:
    return [{"name": n, "description": n, "input_schema": {"type": "object"}} for n in ("get_weather", "get_time")]


def _upstream_calls(up: dict[str, Any]) -> list[dict[str, Any]]:
    return [tc for m in up["messages"] if m["role"] == "assistant" for tc in m.get("tool_calls") or ()]


def _check_upstream(up: dict[str, Any], signed: list[str], ids: list[str]) -> None:
    calls = _upstream_calls(up)
    assert [tc["id"] for tc in calls] == ids
    for tc in calls:
        if tc["id"] in signed:
            assert tc["extra_content"] == SIGNED  # the identical value, on the call Gemini signed
        else:
            assert "extra_content" not in tc
    assert carry.GEMINI_TAG not in json.dumps(up)
    assert [m["tool_call_id"] for m in up["messages"] if m["role"] == "tool"] == ids


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("name", CASES)
def test_anthropic_client_round_trip(name, streamed):
    deltas, calls, reasoning, signed, ids = CASES[name]
    if streamed:
        out = translate_stream(gemini_stream(deltas), C, A)  # every chunking, byte by byte included
        summary = va.validate_stream(out)
    else:
        out = translate_whole(gemini_whole(calls, None, reasoning), C, A)
        summary = va.validate_message(out)
    content = _anthropic_content(out, streamed)
    types = [b["type"] for b in content]
    assert types == (["thinking"] if signed or reasoning else []) + ["tool_use"] * len(ids)
    if signed:
        assert content[0]["signature"].startswith(carry.GEMINI_TAG)
        assert carry.unwrap_gemini(content[0]["signature"]) == {"fc-1": SIG_A}
        assert summary.signatures == [content[0]["signature"]]
    assert [b["input"] for b in content if b["type"] == "tool_use"] == [WEATHER, TIME][: len(ids)]
    if reasoning:
        assert content[0]["thinking"] == reasoning
    assert SIG_A not in json.dumps([b for b in content if b["type"] != "thinking"])
    nxt = {
        "model": "gemini-3-pro-preview",
        "max_tokens": 1000,
        "tools": _tools(),
        "messages": [
            {"role": "user", "content": "Weather and time in Paris?"},
            {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids]},
        ],
    }
    ctx = Context()
    up = json.loads(translate_request(json.dumps(nxt).encode(), Plan(client=A, upstream=C), ctx).body)
    _check_upstream(up, signed, ids)
    assert "tool_calls.extra_content.google.thought_signature" not in ctx.dropped.fields
    # an Anthropic upstream never sees the carried value: the block has no Anthropic signature
    ctx = Context()
    enc = get_codec(A).encode_request(get_codec(A).decode_request(nxt), ctx)
    assert carry.GEMINI_TAG not in json.dumps(enc) and SIG_A not in json.dumps(enc)
    if signed:
        assert "messages[1].thinking_without_signature" in ctx.dropped.fields


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("name", CASES)
def test_responses_client_round_trip(name, streamed):
    deltas, calls, reasoning, signed, ids = CASES[name]
    if streamed:
        out = translate_stream(gemini_stream(deltas), C, R)
        vr.validate_stream(out)
        final = [e for e in _events(out) if e["type"] == "response.completed"][0]["response"]
    else:
        final = json.loads(translate_whole(gemini_whole(calls, None, reasoning), C, R))
        vr.validate_response(final)
    output = final["output"]
    kinds = [i["type"] for i in output]
    assert kinds == (["reasoning"] if signed or reasoning else []) + ["function_call"] * len(ids)
    assert SIG_A not in json.dumps([i for i in output if i["type"] != "reasoning"])
    results = [{"type": "function_call_output", "call_id": i, "output": "ok"} for i in ids]
    nxt = {"model": "gemini-3-pro-preview", "input": [{"role": "user", "content": "Weather?"}, *output, *results]}
    ctx = Context()
    up = json.loads(translate_request(json.dumps(nxt).encode(), Plan(client=R, upstream=C), ctx).body)
    _check_upstream(up, signed, ids)

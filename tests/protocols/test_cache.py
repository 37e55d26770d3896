"""Prompt caching across protocols (issue 36, item 1): what each encoder adds for the upstream's cache."""

from __future__ import annotations

import json

import orjson
import pytest

from dragoman.protocols import Protocol
from dragoman.protocols import profiles
from dragoman.protocols._cache import MAX_BREAKPOINTS
from dragoman.protocols._cache import count_breakpoints
from dragoman.protocols._cache import mark_anthropic
from dragoman.protocols._cache import session_cache_key
from dragoman.protocols.base import Context
from dragoman.translate.plan import Plan
from dragoman.translate.request import translate_request

A, C, R = Protocol.ANTHROPIC_MESSAGES, Protocol.OPENAI_CHAT, Protocol.OPENAI_RESPONSES

TOOLS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object", "properties": {}}}]


def codex_body(turns: int, **extra):
    """A Codex-style Responses request after ``turns`` tool round trips."""
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix the bug"}]}]
    for i in range(turns):
        items.append({"type": "function_call", "call_id": f"call_{i}", "name": "exec_command", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"call_{i}", "output": f"output {i}"})
    body = {
        "model": "claude-sonnet-4-5",
        "instructions": "You are Codex.",
        "input": items,
        "tools": TOOLS,
        "stream": True,
    }
    body.update(extra)
    return body


def to_anthropic(body, client=R, mode="breakpoints"):
    out = translate_request(orjson.dumps(body), Plan(client, A), Context(anthropic_cache=mode))
    return orjson.loads(out.body)


def marked(sent):
    """(where, block) of every cache_control in an Anthropic request."""
    out = [("tools", t) for t in sent.get("tools", []) if "cache_control" in t]
    out += [("system", b) for b in sent.get("system", []) if "cache_control" in b]
    for i, m in enumerate(sent["messages"]):
        out += [(f"messages[{i}]", b) for b in m["content"] if "cache_control" in b]
    return out


def test_off_marks_nothing():
    sent = to_anthropic(codex_body(3), mode="off")
    assert "cache_control" not in sent and marked(sent) == []


def test_auto_is_the_request_level_marker():
    sent = to_anthropic(codex_body(3), mode="auto")
    assert sent["cache_control"] == {"type": "ephemeral"}
    assert marked(sent) == []


def test_breakpoints_on_system_previous_user_turn_and_final_turn():
    sent = to_anthropic(codex_body(3))
    where = [w for w, _b in marked(sent)]
    last = len(sent["messages"]) - 1
    # system, the user turn before the last assistant turn (what the previous request ended with), the final turn
    assert where == ["system", f"messages[{last - 2}]", f"messages[{last}]"]
    assert sent["messages"][last]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert len(where) <= MAX_BREAKPOINTS


def test_breakpoint_on_the_last_tool_without_a_system_prompt():
    body = codex_body(0)
    del body["instructions"]
    sent = to_anthropic(body)
    assert [w for w, _ in marked(sent)] == ["tools", "messages[0]"]
    assert "cache_control" in sent["tools"][-1]


def test_thinking_blocks_are_never_marked():
    out = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "a"}, {"type": "thinking", "thinking": "t", "signature": "s"}],
            },
        ]
    }
    mark_anthropic(out, "breakpoints", None)
    assert "cache_control" not in out["messages"][1]["content"][1]
    assert out["messages"][1]["content"][0]["cache_control"] == {"type": "ephemeral"}


def test_never_more_than_four_breakpoints_counting_those_present():
    blocks = [{"type": "text", "text": str(i), "cache_control": {"type": "ephemeral"}} for i in range(3)]
    out = {
        "system": blocks,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "q"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": [{"type": "text", "text": "q2"}]},
        ],
    }
    assert mark_anthropic(out, "breakpoints", None) == 1
    assert count_breakpoints(out) == MAX_BREAKPOINTS
    assert mark_anthropic(out, "breakpoints", None) == 0
    assert mark_anthropic(out, "auto", None) == 0 and "cache_control" not in out


@pytest.mark.parametrize("retention,ttl", [("24h", "1h"), ("in_memory", None), (None, None)])
def test_the_clients_retention_maps_to_a_ttl(retention, ttl):
    body = codex_body(1, prompt_cache_retention=retention) if retention else codex_body(1)
    for mode in ("auto", "breakpoints"):
        sent = to_anthropic(body, mode=mode)
        markers = [sent["cache_control"]] if mode == "auto" else [b["cache_control"] for _w, b in marked(sent)]
        assert markers and all(
            m == ({"type": "ephemeral", "ttl": ttl} if ttl else {"type": "ephemeral"}) for m in markers
        )


def test_a_chat_client_is_marked_too_and_its_key_listed_as_not_carried():
    body = {
        "model": "m",
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
        "prompt_cache_key": "k1",
    }
    ctx = Context(anthropic_cache="breakpoints")
    out = translate_request(orjson.dumps(body), Plan(C, A), ctx)
    sent = json.loads(out.body)
    assert [w for w, _ in marked(sent)] == ["system", "messages[0]"]
    assert "prompt_cache_key" in ctx.dropped.fields  # Anthropic has no key: listed, never silently lost


def test_responses_upstream_gets_codex_key_as_sent():
    out = translate_request(
        orjson.dumps(
            {
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "prompt_cache_key": "k-1",
                "prompt_cache_retention": "24h",
            }
        ),
        Plan(C, R),
        Context(),
    )
    sent = json.loads(out.body)
    assert sent["prompt_cache_key"] == "k-1" and sent["prompt_cache_retention"] == "24h"


ANTHROPIC_BODY = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 100,
    "metadata": {"user_id": "user_abc_account__session_1234"},
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        }
    ],
}


def test_anthropic_client_session_becomes_a_stable_cache_key_where_the_profile_takes_it():
    key = session_cache_key("user_abc_account__session_1234")
    assert key and key.startswith("dragoman-") and "abc" not in key and len(key) <= 64
    sent = json.loads(
        translate_request(orjson.dumps(ANTHROPIC_BODY), Plan(A, C), Context(profile=profiles.get("openai"))).body
    )
    assert sent["prompt_cache_key"] == key
    again = json.loads(
        translate_request(orjson.dumps(ANTHROPIC_BODY), Plan(A, C), Context(profile=profiles.get("openai"))).body
    )
    assert again["prompt_cache_key"] == key  # stable across the session's requests
    sent = json.loads(translate_request(orjson.dumps(ANTHROPIC_BODY), Plan(A, R), Context()).body)
    assert sent["prompt_cache_key"] == key


@pytest.mark.parametrize("name", ["generic", "deepseek", "vllm", "ollama"])
def test_profiles_without_the_key_get_none(name):
    sent = json.loads(
        translate_request(orjson.dumps(ANTHROPIC_BODY), Plan(A, C), Context(profile=profiles.get(name))).body
    )
    assert "prompt_cache_key" not in sent


def test_an_anthropic_clients_own_breakpoints_reach_an_anthropic_upstream_as_sent():
    raw = orjson.dumps(ANTHROPIC_BODY)
    out = translate_request(raw, Plan(A, A), Context(anthropic_cache="breakpoints"))
    assert out.body == raw
    out = translate_request(raw, Plan(A, A), Context(anthropic_cache="auto"), model_map=None)
    assert out.body == raw

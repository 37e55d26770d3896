"""Request keys: volatile fields ignored, key order irrelevant; conversation keys match across protocols."""

from __future__ import annotations

from dragoman.record.keys import DEFAULT_IGNORE
from dragoman.record.keys import canonical
from dragoman.record.keys import conversation_key
from dragoman.record.keys import request_key

A = {
    "model": "claude-x",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Say hello."}],
    "metadata": {"user_id": "u1"},
}


def test_request_key_ignores_volatile_fields_and_key_order():
    other = {"metadata": {"user_id": "u2"}, "messages": A["messages"], "max_tokens": 64, "model": "claude-x"}
    assert request_key("anthropic", A) == request_key("anthropic", other)
    assert request_key("anthropic", A) != request_key("anthropic", dict(A, max_tokens=65))
    assert request_key("anthropic", A) != request_key("openai-chat", A)
    # with an empty ignore list the volatile field counts
    assert request_key("anthropic", A, ignore=[]) != request_key("anthropic", other, ignore=[])
    assert "metadata.user_id" in DEFAULT_IGNORE and "prompt_cache_key" in DEFAULT_IGNORE


def test_canonical_removes_only_the_named_path():
    assert canonical({"a": {"b": 1, "c": 2}, "b": 3}, ["a.b"]) == b'{"a":{"c":2},"b":3}'
    assert canonical({"a": 1}, ["a.b", "x", ""]) == b'{"a":1}'
    assert canonical(None, ["a"]) == b"null"


def test_conversation_key_matches_the_same_conversation_in_every_protocol():
    chat = {"model": "gpt-x", "max_tokens": 10, "messages": [{"role": "user", "content": "Say hello."}]}
    responses = {"model": "gpt-y", "input": "Say hello.", "max_output_tokens": 5}
    keys = {
        conversation_key("anthropic", A),
        conversation_key("openai-chat", chat),
        conversation_key("openai-responses", responses),
    }
    assert len(keys) == 1 and None not in keys
    assert conversation_key("openai-chat", dict(chat, stream=True)) not in keys  # stream or not matters
    assert conversation_key("openai-chat", dict(chat, messages=[{"role": "user", "content": "Bye."}])) not in keys
    assert conversation_key("openai-chat", dict(chat, reasoning_effort="low")) not in keys


def test_conversation_key_with_tools_and_a_tool_loop():
    tools = [{"name": "get_weather", "description": "w", "input_schema": {"type": "object"}}]
    loop = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "sunny"}]},
    ]
    a = {"model": "m", "max_tokens": 9, "system": "Be brief.", "tools": tools, "messages": loop}
    chat = {
        "model": "m",
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c9",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c9", "content": "sunny"},
        ],
    }
    assert conversation_key("anthropic", a) == conversation_key("openai-chat", chat)
    assert conversation_key("anthropic", dict(a, tools=[])) != conversation_key("anthropic", a)


def test_conversation_key_is_none_for_undecodable_bodies():
    assert conversation_key("anthropic", {"nonsense": True}) is None
    assert conversation_key("anthropic", "text") is None
    assert conversation_key(None, A) is None

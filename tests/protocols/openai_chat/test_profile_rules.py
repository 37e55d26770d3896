"""What each profile sends back on later turns: the reasoning field (or nothing), the placeholders for a history
another model produced (named in ``ctx.placeholders``), and tool schemas without the keywords Gemini refuses."""

from __future__ import annotations

from dragoman.ir import carry
from dragoman.ir.request import Message
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols import profiles
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.profiles import GEMINI_SKIP_SIGNATURE


def history(thinking: bool, signed: bool = False) -> Request:
    """user -> assistant (thinking?, tool call) -> tool result -> assistant text -> user."""
    parts: list = []
    if thinking:
        sig = carry.wrap_gemini({"c1": "SIG-1"}) if signed else None
        parts.append(ThinkingPart(text="I should call the tool.", signature=sig))
    parts.append(ToolCallPart(id="c1", name="get_weather", arguments='{"city":"Paris"}'))
    return Request(
        model="m",
        messages=[
            Message(role="user", parts=[TextPart("weather?")]),
            Message(role="assistant", parts=parts),
            Message(role="user", parts=[ToolResultPart(tool_call_id="c1", content=[TextPart("sunny")])]),
            Message(role="assistant", parts=[TextPart("It is sunny.")]),
            Message(role="user", parts=[TextPart("thanks")]),
        ],
    )


def assistants(profile: str, req: Request) -> tuple[list[dict], Context]:
    ctx = Context(profile=profiles.get(profile))
    body = CODEC.encode_request(req, ctx)
    return [m for m in body["messages"] if m["role"] == "assistant"], ctx


def test_deepseek_gets_its_reasoning_back_and_empty_reasoning_where_there_was_none():
    (call, text), ctx = assistants("deepseek", history(thinking=True))
    assert call["reasoning_content"] == "I should call the tool." and text["reasoning_content"] == ""
    assert ctx.placeholders == set()  # the tool-call turn had its reasoning
    (call, text), ctx = assistants("deepseek", history(thinking=False))
    assert call["reasoning_content"] == "" and text["reasoning_content"] == ""
    assert ctx.placeholders == {"reasoning_content"}


def test_kimi_follows_the_same_rule_and_glm_gets_reasoning_without_placeholders():
    (call, _), ctx = assistants("kimi", history(thinking=False))
    assert call["reasoning_content"] == "" and ctx.placeholders == {"reasoning_content"}
    (call, text), ctx = assistants("glm", history(thinking=True))
    assert call["reasoning_content"] == "I should call the tool." and "reasoning_content" not in text
    assert not ctx.placeholders


def test_r1_openai_qwen_and_ollama_never_get_reasoning_back():
    for name in ("deepseek-r1", "openai", "qwen", "ollama"):
        msgs, ctx = assistants(name, history(thinking=True))
        assert not any("reasoning_content" in m for m in msgs), name
        assert "thinking" in ctx.dropped.fields  # dropped on purpose, and listed


def test_generic_keeps_the_behaviour_from_before_profiles():
    (call, text), _ = assistants("generic", history(thinking=True))
    assert call["reasoning_content"] == "I should call the tool." and "reasoning_content" not in text
    (call, _), _ = assistants("generic", history(thinking=False))
    assert "reasoning_content" not in call  # nothing invented for a conversation without it


def test_gemini_signature_round_trips_and_the_skip_signature_stands_in_for_a_missing_one():
    (call, _), ctx = assistants("gemini", history(thinking=True, signed=True))
    assert call["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": "SIG-1"}}
    assert not ctx.placeholders and "reasoning_content" not in call
    (call, _), ctx = assistants("gemini", history(thinking=False))
    assert call["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": GEMINI_SKIP_SIGNATURE}}
    assert ctx.placeholders == {"thought_signature"}
    (call, _), ctx = assistants("generic", history(thinking=False))
    assert "extra_content" not in call["tool_calls"][0]  # only Gemini gets it


def test_gemini_tool_schemas_lose_the_keywords_gemini_refuses_but_not_properties_of_that_name():
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "$schema": {"type": "string"},  # a property named like a keyword stays
            "n": {"type": "number", "exclusiveMinimum": 0, "maximum": 9},
            "tags": {"type": "array", "items": {"type": "string", "$comment": "x"}},
        },
        "additionalProperties": False,
    }
    req = Request(
        model="m", messages=[Message(role="user", parts=[TextPart("hi")])], tools=[Tool(name="t", parameters=schema)]
    )
    ctx = Context(profile=profiles.get("gemini"))
    params = CODEC.encode_request(req, ctx)["tools"][0]["function"]["parameters"]
    assert params == {
        "type": "object",
        "properties": {
            "$schema": {"type": "string"},
            "n": {"type": "number", "maximum": 9},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    }
    assert {"tools.parameters.$schema", "tools.parameters.exclusiveMinimum"} <= set(ctx.dropped.fields)
    assert schema["$schema"]  # the client's request is not changed
    assert CODEC.encode_request(req, Context())["tools"][0]["function"]["parameters"] is schema

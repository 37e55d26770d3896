"""Chat -> IR requests: messages, tools, options (real corpus requests and client captures)."""

from __future__ import annotations

import json

import pytest

from corpus_loader import requests
from dragoman.errors import ClientRequestError
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.openai_chat import CODEC

from .helpers import DATA

CHAT_REQUESTS = requests("openai-chat")

CAPTURES = sorted(DATA.glob("*.json"))


@pytest.mark.parametrize("name,proto,body", CHAT_REQUESTS, ids=[r[0] for r in CHAT_REQUESTS])
def test_corpus_requests_decode(name, proto, body):
    req = CODEC.decode_request(body)
    assert req.model == body["model"]
    assert req.stream == bool(body.get("stream"))
    n_msgs = len(body["messages"])
    assert len(req.messages) + (1 if req.system else 0) <= n_msgs
    for key in body:
        if key in ("prompt_cache_options", "models", "provider", "transforms"):
            assert key in req.dropped.fields
    # the cache key crosses (issue 36): carried in the IR, never listed as dropped
    assert req.prompt_cache_key == body.get("prompt_cache_key")
    assert "prompt_cache_key" not in req.dropped.fields


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_captures_decode(path):
    body = json.loads(path.read_bytes())
    req = CODEC.decode_request(body)
    assert req.system and "Claude" in "".join(p.text for p in req.system)
    assert len(req.tools) == len(body["tools"])
    assert all(t.kind == "function" and t.parameters for t in req.tools)
    if path.name.endswith("-002.json"):  # second turn: assistant tool call + tool result
        call = next(p for m in req.messages if m.role == "assistant" for p in m.parts if isinstance(p, ToolCallPart))
        result = req.messages[-1].parts[0]
        assert isinstance(result, ToolResultPart) and result.tool_call_id == call.id
        assert result.content == [TextPart("hi")]
    if "claudish" in path.name:
        assert req.include_usage is True
        assert req.reasoning is not None and req.reasoning.effort == "high"
        assert req.max_tokens == body["max_completion_tokens"]
    else:
        assert req.reasoning is not None and req.reasoning.effort == "high"  # OpenRouter-style "reasoning"


def test_system_and_developer_roles():
    req = CODEC.decode_request(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "one"},
                {"role": "developer", "content": [{"type": "text", "text": "two"}]},
                {"role": "user", "content": "hi"},
                {"role": "developer", "content": "mid"},
                {"role": "system", "content": "mid2"},
            ],
        }
    )
    assert [p.text for p in req.system] == ["one", "two"]
    assert req.messages[1].role == "system" and req.messages[1].source_role == "developer"
    assert req.messages[1].parts == [TextPart("mid")]
    assert req.messages[2].source_role == "system"


def test_user_parts():
    req = CODEC.decode_request(
        {
            "model": "m",
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
                        {"type": "image_url", "image_url": {"url": "https://x/y.jpg"}},
                        {
                            "type": "file",
                            "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "a.pdf"},
                        },
                        {"type": "input_audio", "input_audio": {"data": "x", "format": "wav"}},
                    ],
                }
            ],
            "logprobs": True,
            "seed": 3,
        }
    )
    parts = req.messages[0].parts
    assert parts[0] == TextPart("look")
    assert parts[1] == ImagePart(data="AAAA", media_type="image/png", detail="low")
    assert parts[2] == ImagePart(url="https://x/y.jpg")
    assert parts[3] == FilePart(data="JVBE", media_type="application/pdf", filename="a.pdf")
    assert len(parts) == 4
    assert set(req.dropped.fields) == {"messages[0].content[4].input_audio", "logprobs", "seed"}


def test_assistant_and_tool_messages():
    req = CODEC.decode_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "content": "calling",
                    "reasoning_content": "think",
                    "tool_calls": [
                        {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}},
                        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
                    ],
                },
                {"role": "tool", "tool_call_id": "a", "content": "ra"},
                {"role": "tool", "tool_call_id": "b", "content": [{"type": "text", "text": "rb"}]},
                {"role": "user", "content": "next"},
            ],
            "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": True}}
            ],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "stop": "END",
            "max_tokens": 10,
            "stream": True,
            "stream_options": {"include_usage": True},
            "reasoning_effort": "low",
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "s", "schema": {"type": "object"}, "strict": True},
            },
        }
    )
    a = req.messages[1]
    assert isinstance(a.parts[0], ThinkingPart) and a.parts[0].text == "think"
    assert a.parts[1] == TextPart("calling")
    assert a.parts[2] == ToolCallPart(id="a", name="f", arguments='{"x":1}')
    tool_msg = req.messages[2]
    assert tool_msg.role == "user" and [p.tool_call_id for p in tool_msg.parts] == ["a", "b"]
    assert req.messages[3].parts == [TextPart("next")]
    assert req.tools == [Tool(name="f", parameters={"type": "object"}, strict=True)]
    assert req.tool_choice.mode == "tool" and req.tool_choice.name == "f"
    assert req.stop == ["END"] and req.max_tokens == 10 and req.include_usage is True
    assert req.reasoning.effort == "low"
    assert req.response_format.type == "json_schema" and req.response_format.schema == {"type": "object"}


def test_legacy_function_call_converted():
    req = CODEC.decode_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}},
                {"role": "function", "name": "f", "content": "r"},
            ],
            "functions": [{"name": "f", "parameters": {"type": "object"}}],
            "function_call": "auto",
        }
    )
    call = req.messages[1].parts[0]
    assert isinstance(call, ToolCallPart)
    assert req.messages[2].parts[0].tool_call_id == call.id
    assert req.tools[0].name == "f" and req.tool_choice.mode == "auto"


def test_custom_tools():
    req = CODEC.decode_request(
        {
            "model": "m",
            "messages": [
                {"role": "user", "content": "q"},
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "type": "custom", "custom": {"name": "patch", "input": "RAW"}}],
                },
                {"role": "tool", "tool_call_id": "c", "content": "ok"},
            ],
            "tools": [{"type": "custom", "custom": {"name": "patch", "format": {"type": "text"}}}],
        }
    )
    assert req.tools[0].kind == "custom"
    assert req.messages[1].parts[0] == ToolCallPart(id="c", name="patch", arguments="RAW", kind="custom")
    assert req.messages[2].parts[0].kind == "custom"


@pytest.mark.parametrize(
    "body,fragment",
    [
        ({"messages": []}, "model"),
        ({"model": "m"}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages.0"),
        ({"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
        ({"model": "m", "messages": [{"role": "user", "content": [{"type": "video"}]}]}, "messages[0].content[0]"),
        ({"model": "m", "messages": [], "tool_choice": "sometimes"}, "tool_choice"),
        ({"model": "m", "messages": [], "temperature": "hot"}, "temperature"),
        ({"model": "m", "messages": [], "response_format": {"type": "yaml"}}, "response_format"),
    ],
)
def test_invalid_requests(body, fragment):
    with pytest.raises(ClientRequestError) as ei:
        CODEC.decode_request(body)
    assert fragment in str(ei.value)


def test_n_is_kept_for_the_upstream_to_decide():
    # only a Chat upstream can answer n > 1 (translate.request decides, once the upstream is known)
    req = CODEC.decode_request({"model": "m", "messages": [], "n": 3})
    assert req.n == 3 and "n" not in req.dropped.fields
    assert CODEC.decode_request({"model": "m", "messages": [], "n": 1}).n == 1
    assert CODEC.decode_request({"model": "m", "messages": []}).n is None


def test_reasoning_effort_none_disables():
    req = CODEC.decode_request({"model": "m", "messages": [], "reasoning_effort": "none"})
    assert req.reasoning.enabled is False

"""Anthropic Messages client requests -> IR (``request_decode``)."""

from __future__ import annotations

import json
import re

import pytest

from corpus_loader import requests
from dragoman.errors import ClientRequestError
from dragoman.ir import carry
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.anthropic_messages import CODEC

from .helpers import DATA

CORPUS_REQUESTS = [(n, r) for n, _, r in requests("anthropic")]


CC_REQUESTS = sorted(DATA.glob("*.body.json"))


def base(**kw):
    body = {"model": "claude-x", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    body.update(kw)
    return body


@pytest.mark.parametrize("name,body", CORPUS_REQUESTS, ids=[n for n, _ in CORPUS_REQUESTS])
def test_decode_every_corpus_request(name, body):
    if "max_tokens" not in body:  # a count_tokens request: not a Messages request
        with pytest.raises(ClientRequestError, match="max_tokens"):
            CODEC.decode_request(body)
        return
    req = CODEC.decode_request(body)
    assert req.model == body["model"]
    assert req.max_tokens == body["max_tokens"]
    assert len(req.messages) == len(body["messages"])
    for key in ("cache_control", "context_management", "mcp_servers"):
        assert (key in req.dropped.fields) == (key in body)


@pytest.mark.parametrize("path", CC_REQUESTS, ids=[p.name for p in CC_REQUESTS])
def test_decode_claude_code_request(path):
    body = json.loads(path.read_bytes())
    req = CODEC.decode_request(body)
    assert req.stream is True
    assert req.system[0].text.startswith("x-anthropic-billing-header")
    assert len(req.system) == len(body["system"])
    roles = [m.role for m in req.messages]
    assert roles == [m["role"] for m in body["messages"]]
    if "system" in roles:
        sysmsg = req.messages[roles.index("system")]
        assert sysmsg.parts and isinstance(sysmsg.parts[0], TextPart)
        assert sysmsg.parts[0].text == body["messages"][roles.index("system")]["content"]
    th = body["thinking"]
    assert req.reasoning is not None and req.reasoning.enabled
    assert req.reasoning.adaptive == (th["type"] == "adaptive")
    assert req.reasoning.budget_tokens == th.get("budget_tokens")
    assert req.reasoning.effort == body.get("output_config", {}).get("effort")
    assert req.user == body["metadata"]["user_id"]
    assert "context_management" in req.dropped.fields
    # each cache hint named where it is: system[i], messages[i].content[j] or tools[i]
    hints = [p for p in req.dropped.fields if p.endswith("cache_control")]
    assert hints and all(
        re.fullmatch(r"(system\[\d+\]|messages\[\d+\]\.content\[\d+\]|tools\[\d+\])\.cache_control", p) for p in hints
    )
    for p in hints:
        where = body
        for key, i in re.findall(r"(\w+)\[(\d+)\]", p):
            where = where[key][int(i)]
        assert "cache_control" in where, p
    assert len(req.tools) == len(body["tools"])
    assert all(t.kind == "function" and t.parameters == b["input_schema"] for t, b in zip(req.tools, body["tools"]))


def test_claude_code_tool_turn_with_thinking():
    req = CODEC.decode_request(json.loads((DATA / "cc-tool-reasoning--003-POST-v1_messages.body.json").read_bytes()))
    assistant = [m for m in req.messages if m.role == "assistant"][-1]
    think, text, call = assistant.parts
    assert think == ThinkingPart(
        text="The user wants a greeting. (fake thinking)", signature="fake-signature-cfab7b1422904ee0ae6d148a5c3f09bf"
    )
    assert text == TextPart("I'll run a command.")
    assert isinstance(call, ToolCallPart) and call.name == "Bash"
    assert json.loads(call.arguments) == {"command": "echo hi", "description": "Print hi"}
    result = req.messages[-1].parts[0]
    assert result == ToolResultPart(tool_call_id=call.id, content=[TextPart("hi")], is_error=False)


def test_claude_code_denied_tool_is_error():
    req = CODEC.decode_request(json.loads((DATA / "cc-tool-denied--003-POST-v1_messages.body.json").read_bytes()))
    result = req.messages[-1].parts[0]
    assert isinstance(result, ToolResultPart) and result.is_error
    assert "blocked" in result.content[0].text


def test_system_string_and_blocks():
    assert CODEC.decode_request(base(system="be nice")).system == [TextPart("be nice")]
    req = CODEC.decode_request(
        base(
            system=[
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
            ]
        )
    )
    assert req.system == [TextPart("a"), TextPart("b")]
    assert req.dropped.fields == ["system[1].cache_control"]


def test_content_blocks():
    body = base(
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    {
                        "type": "document",
                        "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
                        "title": "a.pdf",
                    },
                    {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
                    {"type": "search_result", "source": "s", "title": "t", "content": []},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                    {"type": "redacted_thinking", "data": "opaque"},
                    {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": [1, 2]}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "is_error": True,
                        "content": [
                            {"type": "text", "text": "bad"},
                            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "BBBB"}},
                        ],
                    }
                ],
            },
        ]
    )
    req = CODEC.decode_request(body)
    u, a, r = req.messages
    assert u.parts == [
        TextPart("look"),
        ImagePart(data="AAAA", media_type="image/png"),
        ImagePart(url="https://x/y.png"),
        FilePart(data="JVBE", media_type="application/pdf", filename="a.pdf"),
        FilePart(data="aGVsbG8=", media_type="text/plain"),
    ]
    assert a.parts == [
        ThinkingPart(text="hmm", signature="sig"),
        ThinkingPart(redacted_data="opaque"),
        ToolCallPart(id="t1", name="f", arguments='{"a":[1,2]}'),
    ]
    assert r.parts == [
        ToolResultPart(
            tool_call_id="t1", content=[TextPart("bad"), ImagePart(data="BBBB", media_type="image/jpeg")], is_error=True
        )
    ]
    assert "messages[0].content[5].search_result" in req.dropped.fields


def test_thinking_signature_carry_is_unwrapped():
    wrapped = carry.wrap_responses("rs_1", "ENC")
    body = base(
        messages=[
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "a", "signature": wrapped},
                    {"type": "thinking", "thinking": "b", "signature": carry.UNSIGNED},
                    {"type": "text", "text": "ok"},
                ],
            },
        ]
    )
    parts = CODEC.decode_request(body).messages[1].parts
    assert parts[0] == ThinkingPart(text="a", encrypted_content="ENC", item_id="rs_1")
    assert parts[1] == ThinkingPart(text="b")


def test_tools_and_tool_choice():
    body = base(
        tools=[
            {
                "name": "f",
                "description": "d",
                "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
            },
            {"type": "custom", "name": "g", "input_schema": {"type": "object"}},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3},
            {"type": "bash_20250124", "name": "bash"},
        ],
        tool_choice={"type": "tool", "name": "f", "disable_parallel_tool_use": True},
    )
    req = CODEC.decode_request(body)
    assert req.tools[0] == Tool(
        name="f", description="d", parameters={"type": "object", "properties": {"x": {"type": "string"}}}
    )
    assert req.tools[1].kind == "function"
    # the hosted web search is the request's search spec (dragoman.ir.search), not a builtin tool
    assert req.web_search is not None and req.web_search.max_uses == 3 and req.web_search.origin == "anthropic"
    assert len(req.tools) == 3
    assert req.tools[2].kind == "builtin" and req.tools[2].raw == {"type": "bash_20250124", "name": "bash"}
    assert req.tool_choice.mode == "tool" and req.tool_choice.name == "f"
    assert req.parallel_tool_calls is False
    assert CODEC.decode_request(base(tool_choice={"type": "any"})).parallel_tool_calls is None


def test_sampling_and_reasoning():
    req = CODEC.decode_request(
        base(
            temperature=0.5,
            top_p=0.9,
            top_k=5,
            stop_sequences=["X"],
            stream=True,
            metadata={"user_id": "u1"},
            thinking={"type": "enabled", "budget_tokens": 2048},
            service_tier="auto",
            container="c",
        )
    )
    assert (req.temperature, req.top_p, req.top_k, req.stop, req.stream, req.user) == (0.5, 0.9, 5, ["X"], True, "u1")
    assert req.reasoning.enabled and req.reasoning.budget_tokens == 2048 and not req.reasoning.adaptive
    assert req.dropped.fields == ["service_tier", "container"]
    r = CODEC.decode_request(base(thinking={"type": "disabled"})).reasoning
    assert r.enabled is False
    req = CODEC.decode_request(base(thinking={"type": "adaptive"}, output_config={"effort": "max", "task_budget": 3}))
    assert req.reasoning.adaptive and req.reasoning.effort == "xhigh"
    assert req.dropped.fields == ["output_config.task_budget"]
    req = CODEC.decode_request(base(output_config={"format": {"type": "json_schema", "schema": {"type": "object"}}}))
    assert req.response_format.type == "json_schema" and req.response_format.schema == {"type": "object"}
    assert req.reasoning is None


@pytest.mark.parametrize(
    "body,field",
    [
        ({"max_tokens": 1, "messages": []}, "model"),
        ({"model": "m", "max_tokens": 1}, "messages"),
        ({"model": "m", "messages": []}, "max_tokens"),
        (base(messages=[{"role": "tool", "content": "x"}]), "messages.0.role"),
        (base(messages=[{"role": "user", "content": [{"type": "text"}]}]), "messages.0.content"),
        (base(max_tokens="lots"), "max_tokens"),
        (base(tool_choice={"type": "sometimes"}), "tool_choice.type"),
    ],
)
def test_invalid_requests_name_the_field(body, field):
    with pytest.raises(ClientRequestError) as e:
        CODEC.decode_request(body)
    assert field in str(e.value)
    assert e.value.status_hint == 400

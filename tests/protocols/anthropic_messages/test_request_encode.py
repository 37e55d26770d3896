"""IR requests -> Anthropic Messages upstream requests (``request_encode``)."""

from __future__ import annotations

import json

import pytest

from corpus_loader import requests
from dragoman.ir.request import Message
from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.ir.request import ResponseFormat
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolChoice
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.anthropic_messages import CODEC
from dragoman.protocols.anthropic_messages.request_encode import DEFAULT_MAX_TOKENS
from dragoman.protocols.anthropic_messages.request_encode import UNANSWERED_TOOL_CALL
from dragoman.protocols.base import Context

from .helpers import DATA
from .helpers import enc

CORPUS_REQUESTS = [(n, r) for n, _, r in requests("anthropic") if "max_tokens" in r]


CC_REQUESTS = sorted(DATA.glob("*.body.json"))


@pytest.mark.parametrize("name,body", CORPUS_REQUESTS, ids=[n for n, _ in CORPUS_REQUESTS])
def test_request_round_trip_through_ir(name, body):
    req = CODEC.decode_request(body)
    wire, ctx = enc(req)
    again = CODEC.decode_request(wire)
    assert again.messages == req.messages
    assert again.system == req.system
    assert [t for t in again.tools] == req.tools
    assert again.tool_choice == req.tool_choice
    assert (again.max_tokens, again.stream, again.temperature) == (req.max_tokens, req.stream, req.temperature)
    if "thinking" in body:
        assert again.reasoning == req.reasoning
    else:  # an effort alone means "think this hard" to the encoder (OpenAI semantics): a budget
        assert again.reasoning is None or again.reasoning.budget_tokens is not None
    assert ctx.dropped.fields == []


@pytest.mark.parametrize("path", CC_REQUESTS, ids=[p.name for p in CC_REQUESTS])
def test_claude_code_request_encodes_to_valid_anthropic(path):
    body = json.loads(path.read_bytes())
    req = CODEC.decode_request(body)
    wire, ctx = enc(req)
    assert [b["text"] for b in wire["system"]] == [b["text"] for b in body["system"]]
    roles = [m["role"] for m in wire["messages"]]
    assert "system" not in roles
    assert all(a != b for a, b in zip(roles, roles[1:])), roles
    sys_texts = [m["content"] for m in body["messages"] if m["role"] == "system"]
    n_sys = len(sys_texts)
    texts = [b.get("text") for m in wire["messages"] for b in m["content"]]
    for t in sys_texts:
        assert f"<system-reminder>\n{t}\n</system-reminder>" in texts
    if n_sys:
        moved = [p for p in ctx.dropped.fields if p.endswith(".system_message_moved")]
        # named by the client's message: messages[i] is a system message of the Chat request
        assert moved and all(body["messages"][int(p[9 : p.index("]")])]["role"] == "system" for p in moved)
    assert wire["thinking"] == body["thinking"]
    assert wire.get("output_config") == body.get("output_config")
    assert wire["metadata"] == {"user_id": body["metadata"]["user_id"]}
    assert wire["tools"] == [{k: v for k, v in t.items() if k != "cache_control"} for t in body["tools"]]
    # the tool_use/tool_result pairing survives
    for i, m in enumerate(wire["messages"]):
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        if uses:
            nxt = wire["messages"][i + 1]
            assert [b["tool_use_id"] for b in nxt["content"][: len(uses)]] == uses

    def results(r):
        return [p for m in r.messages for p in m.parts if isinstance(p, (ToolResultPart, ToolCallPart, ThinkingPart))]

    assert results(CODEC.decode_request(wire)) == results(req)


def test_system_placement_and_merging():
    req = Request(
        model="m",
        system=[TextPart("top")],
        messages=[
            Message("system", [TextPart("dev1")]),
            Message("user", [TextPart("u1")]),
            Message("user", [TextPart("u2")]),
            Message("assistant", [TextPart("a1")]),
            Message("system", [TextPart("later")]),
            Message("user", [TextPart("u3")]),
        ],
    )
    wire, ctx = enc(req)
    assert wire["system"] == [{"type": "text", "text": "top"}, {"type": "text", "text": "dev1"}]
    assert wire["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "u1"}, {"type": "text", "text": "u2"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "a1"}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>\nlater\n</system-reminder>"},
                {"type": "text", "text": "u3"},
            ],
        },
    ]
    assert ctx.dropped.fields == ["system_message_moved"]
    assert wire["max_tokens"] == DEFAULT_MAX_TOKENS == 8192


def test_default_max_tokens_leaves_room_for_thinking():
    """A client without a limit (Codex never sends one) must not have its answer squeezed by thinking."""
    req = Request(
        model="m", messages=[Message(role="user", parts=[TextPart("hi")])], reasoning=Reasoning(effort="medium")
    )
    wire = CODEC.encode_request(req, Context())
    assert wire["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert wire["max_tokens"] == 8192 + DEFAULT_MAX_TOKENS
    # an explicit limit is kept, and the budget is clamped under it
    req.max_tokens = 4000
    wire = CODEC.encode_request(req, Context())
    assert wire["max_tokens"] == 4000
    assert wire["thinking"]["budget_tokens"] == 3999


def test_tool_results_grouped_first_and_orphans_fixed():
    req = Request(
        model="m",
        messages=[
            Message("user", [TextPart("go")]),
            Message(
                "assistant",
                [
                    TextPart("calling"),
                    ToolCallPart("a", "f", '{"x":1}'),
                    ToolCallPart("b", "f", "{}"),
                    ToolCallPart("c", "f", "{}"),
                ],
            ),
            Message("user", [TextPart("note")]),
            Message("user", [ToolResultPart("b", [TextPart("rb")])]),
            Message(
                "user", [ToolResultPart("a", [TextPart("ra")], is_error=True), ToolResultPart("zz", [TextPart("lost")])]
            ),
            Message("assistant", [ToolCallPart("d", "g", "{}")]),
            Message("assistant", [TextPart("more")]),
        ],
    )
    wire, ctx = enc(req)
    msgs = wire["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    user = msgs[2]["content"]
    assert user[:3] == [
        {"type": "tool_result", "tool_use_id": "b", "content": [{"type": "text", "text": "rb"}]},
        {"type": "tool_result", "tool_use_id": "a", "content": [{"type": "text", "text": "ra"}], "is_error": True},
        {"type": "tool_result", "tool_use_id": "c", "content": UNANSWERED_TOOL_CALL, "is_error": True},
    ]
    assert user[3] == {"type": "text", "text": "[result of tool call zz]\nlost"}
    assert user[4] == {"type": "text", "text": "note"}
    assert msgs[1]["content"][1] == {"type": "tool_use", "id": "a", "name": "f", "input": {"x": 1}}
    assert msgs[3]["content"] == [
        {"type": "tool_use", "id": "d", "name": "g", "input": {}},
        {"type": "text", "text": "more"},
    ]
    assert msgs[4]["content"] == [
        {"type": "tool_result", "tool_use_id": "d", "content": UNANSWERED_TOOL_CALL, "is_error": True}
    ]
    assert {"orphaned_tool_result", "unanswered_tool_use"} <= set(ctx.dropped.fields)


def test_custom_and_builtin_tools():
    req = Request(
        model="m",
        messages=[
            Message("user", [TextPart("q")]),
            Message("assistant", [ToolCallPart("c1", "apply_patch", "*** Begin Patch\n", kind="custom")]),
            Message("user", [ToolResultPart("c1", [TextPart("done")], kind="custom")]),
        ],
        tools=[
            Tool(
                "apply_patch",
                "Apply a patch",
                kind="custom",
                format={"type": "grammar", "syntax": "lark", "definition": "start: x"},
            ),
            Tool(
                "web_search", kind="builtin", raw={"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
            ),
            Tool("web_search", kind="builtin", raw={"type": "web_search"}),
            Tool("f", parameters=None, strict=True),
        ],
        tool_choice=ToolChoice("any"),
        parallel_tool_calls=False,
    )
    wire, ctx = enc(req)
    custom, server, f = wire["tools"]
    assert custom["name"] == "apply_patch" and custom["description"] == "Apply a patch"
    schema = custom["input_schema"]
    assert schema["required"] == ["input"] and schema["properties"]["input"]["type"] == "string"
    assert "lark" in schema["properties"]["input"]["description"]
    assert server == {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    assert f == {"name": "f", "input_schema": {"type": "object", "properties": {}}}
    assert wire["messages"][1]["content"][0]["input"] == {"input": "*** Begin Patch\n"}
    assert wire["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert {"tools.builtin.web_search", "tools.strict"} <= set(ctx.dropped.fields)


def test_sampling_user_stop_and_format():
    req = Request(
        model="m",
        messages=[Message("user", [TextPart("q")])],
        max_tokens=321,
        temperature=0.3,
        top_p=0.8,
        top_k=4,
        stop=["END"],
        stream=True,
        user="u9",
        response_format=ResponseFormat(type="json_schema", name="x", schema={"type": "object"}),
    )
    wire, ctx = enc(req)
    assert (wire["max_tokens"], wire["temperature"], wire["top_p"], wire["top_k"]) == (321, 0.3, 0.8, 4)
    assert wire["stop_sequences"] == ["END"] and wire["stream"] is True
    assert wire["metadata"] == {"user_id": "u9"}
    assert wire["output_config"] == {"format": {"type": "json_schema", "schema": {"type": "object"}}}
    assert ctx.dropped.fields == []
    _, ctx = enc(Request(model="m", response_format=ResponseFormat(type="json_object")))
    assert ctx.dropped.fields == ["response_format.json_object"]


@pytest.mark.parametrize(
    "reasoning,max_tokens,thinking,effort",
    [
        (Reasoning(effort="high"), 64000, {"type": "enabled", "budget_tokens": 16384}, None),
        (Reasoning(effort="minimal"), None, {"type": "enabled", "budget_tokens": 1024}, None),
        (Reasoning(effort="xhigh"), 20000, {"type": "enabled", "budget_tokens": 19999}, None),
        (Reasoning(effort="medium"), 1000, None, None),
        (Reasoning(enabled=True, budget_tokens=5000), 8000, {"type": "enabled", "budget_tokens": 5000}, None),
        (Reasoning(enabled=True, adaptive=True, effort="high"), 8000, {"type": "adaptive"}, "high"),
        (Reasoning(enabled=False), 8000, {"type": "disabled"}, None),
        (Reasoning(effort="none"), 8000, {"type": "disabled"}, None),
    ],
)
def test_reasoning_mapping(reasoning, max_tokens, thinking, effort):
    req = Request(
        model="m",
        messages=[Message("user", [TextPart("q")])],
        reasoning=reasoning,
        max_tokens=max_tokens,
        temperature=0.2,
    )
    wire, ctx = enc(req)
    assert wire.get("thinking") == thinking
    assert wire.get("output_config", {}).get("effort") == effort
    on = thinking is not None and thinking["type"] != "disabled"
    assert ("temperature" in wire) == (not on)
    assert ("temperature" in ctx.dropped.fields) == on


def _tool_loop(first: list) -> Request:
    """A Chat-style tool loop: user, assistant (``first`` + a tool call), the tool's result."""
    return Request(
        model="m",
        max_tokens=8000,
        reasoning=Reasoning(effort="medium"),
        temperature=0.2,
        tools=[Tool(name="get_time", parameters={"type": "object"})],
        messages=[
            Message("user", [TextPart("what time is it?")]),
            Message("assistant", [*first, ToolCallPart(id="toolu_1", name="get_time", arguments="{}")]),
            Message("user", [ToolResultPart("toolu_1", [TextPart("12:00")])]),
        ],
    )


@pytest.mark.parametrize(
    "first",
    [
        [],  # a Chat client: no thinking in its history at all
        [ThinkingPart(text="let me look")],  # reasoning_content without a signature (dropped as unsigned)
        [TextPart("checking"), ThinkingPart(text="t", signature="sig-1")],  # signed, but not first
    ],
    ids=["no-thinking", "unsigned", "signed-not-first"],
)
def test_tool_loop_without_a_signed_thinking_block_goes_without_thinking(first):
    """The API answers 400 ("a final assistant message must start with a thinking block") to such a
    request with thinking on: it goes without thinking (recorded) instead, temperature kept."""
    wire, ctx = enc(_tool_loop(first))
    assert wire["messages"][-1]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "12:00"}]}
    ]
    assert "thinking" not in wire
    assert "thinking.tool_loop_without_signature" in ctx.dropped.fields
    assert wire["temperature"] == 0.2 and "temperature" not in ctx.dropped.fields


@pytest.mark.parametrize(
    "first",
    [[ThinkingPart(text="let me look", signature="sig-1")], [ThinkingPart(redacted_data="opaque")]],
    ids=["signed", "redacted"],
)
def test_tool_loop_with_a_signed_thinking_block_keeps_thinking(first):
    wire, ctx = enc(_tool_loop(first))
    assert wire["messages"][1]["content"][0]["type"] in ("thinking", "redacted_thinking")
    assert wire["thinking"] == {"type": "enabled", "budget_tokens": 7999}
    assert "thinking.tool_loop_without_signature" not in ctx.dropped.fields


def test_a_fresh_user_turn_after_a_finished_tool_loop_keeps_thinking():
    req = _tool_loop([])
    req.messages += [
        Message("assistant", [TextPart("It is noon.")]),
        Message("user", [TextPart("thanks, and tomorrow?")]),
    ]
    wire, ctx = enc(req)
    assert wire["thinking"]["type"] == "enabled"
    assert "thinking.tool_loop_without_signature" not in ctx.dropped.fields


def test_tool_ids_from_other_providers_are_made_valid_and_stay_paired():
    """Kimi's ``functions.get_weather:0`` and MCP-style ids break the API's ``^[a-zA-Z0-9_-]+$`` rule: each
    becomes valid, the same on its tool_use and tool_result, two look-alike ids stay distinct, valid ids
    pass untouched."""
    import re

    from dragoman.protocols.anthropic_messages.content_encode import tool_id

    ids = ["functions.get_weather:0", "functions_get_weather_0", "mcp/github.issue@1", "call_abc-123"]
    req = Request(
        model="m",
        max_tokens=100,
        messages=[
            Message("user", [TextPart("go")]),
            Message("assistant", [ToolCallPart(i, "f", "{}") for i in ids]),
            Message("user", [ToolResultPart(i, [TextPart(f"r{n}")]) for n, i in enumerate(ids)]),
        ],
    )
    wire, ctx = enc(req)
    uses = [b["id"] for b in wire["messages"][1]["content"]]
    results = [b["tool_use_id"] for b in wire["messages"][2]["content"]]
    assert uses == results == [tool_id(i) for i in ids]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", u) for u in uses)
    assert len(set(uses)) == len(ids)  # "functions.get_weather:0" does not collide with "..._weather_0"
    assert uses[1] == "functions_get_weather_0" and uses[3] == "call_abc-123"  # valid ids untouched
    assert uses[0].startswith("functions_get_weather_0_")
    assert [b["content"] for b in wire["messages"][2]["content"]] == [
        [{"type": "text", "text": f"r{n}"}] for n in range(4)
    ]
    assert ctx.dropped.fields == []

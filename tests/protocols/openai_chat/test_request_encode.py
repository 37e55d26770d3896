"""IR -> Chat upstream requests: message order, tool results, tools, options."""

from __future__ import annotations

import json

import pytest

from corpus_loader import requests
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Reasoning
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolChoice
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.openai_chat.reasoning_ask import effort_from_budget
from dragoman.protocols.openai_chat.request_encode import UNANSWERED_TOOL_CALL

from .helpers import DATA

CHAT_REQUESTS = requests("openai-chat")

CAPTURES = sorted(DATA.glob("*.json"))


def _semantic(messages: list[dict]) -> list[tuple]:
    """A comparable view of Chat messages: role, text, tool calls, tool results, image URLs."""
    out = []
    for m in messages:
        c = m.get("content")
        if isinstance(c, list):
            text = "\n".join(p["text"] for p in c if p.get("type") == "text")
            images = [p["image_url"]["url"] for p in c if p.get("type") == "image_url"]
        else:
            text, images = c or "", []
        calls = [(t["id"], t["function"]["name"], t["function"]["arguments"]) for t in m.get("tool_calls") or []]
        out.append((m["role"], text, tuple(images), tuple(calls), m.get("tool_call_id")))
    return out


@pytest.mark.parametrize("name,proto,body", CHAT_REQUESTS, ids=[r[0] for r in CHAT_REQUESTS])
def test_corpus_requests_reencode(name, proto, body):
    req = CODEC.decode_request(body)
    ctx = Context(request=req)
    out = CODEC.encode_request(req, ctx)
    assert out["model"] == body["model"]
    orig = body["messages"]
    lead = 0  # leading system messages collapse into one
    while lead < len(orig) and orig[lead]["role"] in ("system", "developer"):
        lead += 1
    got = _semantic(out["messages"])
    want = _semantic(orig)
    if lead:
        assert got[0][0] == "system" and got[0][1] == "\n".join(w[1] for w in want[:lead])
        got, want = got[1:], want[lead:]
    assert got == want
    fn_tools = [t for t in body.get("tools") or [] if t["type"] == "function"]
    assert [t["function"] for t in out.get("tools", [])] == [t["function"] for t in fn_tools]
    if len(fn_tools) < len(body.get("tools") or []):
        # OpenRouter's web search tool on a generic upstream (no profile that searches): unavailable, named
        searching = any(t["type"] == "openrouter:web_search" for t in body["tools"])
        assert ("web_search(unavailable)" if searching else "tools.builtin") in ctx.dropped.fields
    if body.get("stream"):
        assert out["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("path", CAPTURES, ids=[p.name for p in CAPTURES])
def test_captures_reencode(path):
    body = json.loads(path.read_bytes())
    req = CODEC.decode_request(body)
    out = CODEC.encode_request(req, Context(request=req))
    assert out["messages"][0]["role"] == "system" and isinstance(out["messages"][0]["content"], str)
    assert [m["role"] for m in out["messages"]] == [m["role"] for m in body["messages"]]
    assert [t["function"] for t in out["tools"]] == [
        {k: v for k, v in t["function"].items() if k in ("name", "description", "parameters", "strict")}
        for t in body["tools"]
    ]
    assert out["reasoning_effort"] == "high"
    tool_msgs = [m for m in out["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == [m["content"] for m in body["messages"] if m["role"] == "tool"]


def _req(**kw) -> Request:
    return Request(model="m", **kw)


def test_mid_conversation_system_and_tool_results_order():
    req = _req(
        system=[TextPart("sys1"), TextPart("sys2")],
        messages=[
            Message("user", [TextPart("q")]),
            Message("system", [TextPart("skills list")]),
            Message(
                "assistant",
                [
                    ThinkingPart(text="t", signature="sig"),
                    TextPart("ok"),
                    ToolCallPart(id="a", name="f", arguments="{}"),
                    ToolCallPart(id="b", name="g", arguments='{"y":2}'),
                ],
            ),
            Message(
                "user",
                [
                    TextPart("and also"),
                    ToolResultPart("b", [TextPart("rb"), ImagePart(data="AAA", media_type="image/png")]),
                    ToolResultPart("zzz", [TextPart("orphan")]),
                ],
            ),
            Message("assistant", [RefusalPart("cannot")]),
        ],
    )
    ctx = Context(request=req)
    out = CODEC.encode_request(req, ctx)
    msgs = out["messages"]
    assert msgs[0] == {"role": "system", "content": "sys1\nsys2"}
    assert msgs[1] == {"role": "user", "content": "q"}
    assert msgs[2] == {"role": "system", "content": "skills list"}
    assert msgs[3]["content"] == "ok" and msgs[3]["reasoning_content"] == "t"
    assert [t["id"] for t in msgs[3]["tool_calls"]] == ["a", "b"]
    # answered result first, then the synthetic answer for the unanswered call, then the user content
    assert msgs[4] == {"role": "tool", "tool_call_id": "b", "content": "rb"}
    assert msgs[5] == {"role": "tool", "tool_call_id": "a", "content": UNANSWERED_TOOL_CALL}
    assert msgs[6]["role"] == "user"
    parts = msgs[6]["content"]
    assert parts[0] == {"type": "text", "text": "and also"}
    assert parts[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}
    assert "orphan" in parts[2]["text"]
    assert msgs[7] == {"role": "assistant", "content": "cannot"}
    assert "thinking.signature" in ctx.dropped.fields


def test_thinking_dropped_when_configured_and_tool_only_content_null():
    req = _req(
        messages=[
            Message("user", [TextPart("q")]),
            Message("assistant", [ThinkingPart(text="t"), ToolCallPart(id="a", name="f")]),
        ]
    )
    ctx = Context(request=req, chat_reasoning_field="drop")
    out = CODEC.encode_request(req, ctx)
    a = out["messages"][1]
    assert a["content"] is None and "reasoning_content" not in a
    assert "thinking" in ctx.dropped.fields
    assert out["messages"][2] == {"role": "tool", "tool_call_id": "a", "content": UNANSWERED_TOOL_CALL}


def test_tools_choice_and_params():
    req = _req(
        messages=[
            Message("user", [TextPart("q")]),
            Message("assistant", [ToolCallPart(id="c", name="patch", arguments='raw "x"', kind="custom")]),
            Message("user", [ToolResultPart("c", [TextPart("done")], kind="custom")]),
        ],
        tools=[
            Tool(name="f", description="d", parameters={"type": "object"}, strict=True),
            Tool(name="patch", kind="custom", format={"type": "grammar"}),
            Tool(name="web_search", kind="builtin", raw={"type": "web_search"}),
        ],
        tool_choice=ToolChoice("any"),
        parallel_tool_calls=False,
        max_tokens=100,
        temperature=0.5,
        top_p=0.9,
        top_k=5,
        stop=["X"],
        user="u",
        stream=True,
        reasoning=Reasoning(enabled=True, budget_tokens=5000),
    )
    ctx = Context(request=req, chat_max_tokens_field="max_completion_tokens")
    out = CODEC.encode_request(req, ctx)
    assert out["tools"][0] == {
        "type": "function",
        "function": {"name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True},
    }
    assert out["tools"][1]["function"]["parameters"]["required"] == ["input"]
    assert len(out["tools"]) == 2
    assert out["tool_choice"] == "required" and out["parallel_tool_calls"] is False
    assert out["max_completion_tokens"] == 100 and "max_tokens" not in out
    assert out["temperature"] == 0.5 and out["top_p"] == 0.9 and out["stop"] == ["X"] and out["user"] == "u"
    assert out["reasoning_effort"] == "medium"
    assert out["stream"] is True and out["stream_options"] == {"include_usage": True}
    assert json.loads(out["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {"input": 'raw "x"'}
    assert {"top_k", "tools.builtin"} <= set(ctx.dropped.fields)
    out2 = CODEC.encode_request(_req(tools=[Tool(name="f")], tool_choice=ToolChoice("tool", "f")), Context())
    assert out2["tool_choice"] == {"type": "function", "function": {"name": "f"}}


@pytest.mark.parametrize(
    "reasoning,expected",
    [
        (Reasoning(enabled=False, effort="high"), None),
        (Reasoning(enabled=True, adaptive=True), "medium"),
        (Reasoning(effort="low"), "low"),
        (Reasoning(enabled=True, budget_tokens=1024), "low"),
        (Reasoning(enabled=True, budget_tokens=32000), "high"),
    ],
)
def test_reasoning_effort_mapping(reasoning, expected):
    out = CODEC.encode_request(_req(reasoning=reasoning), Context())
    assert out.get("reasoning_effort") == expected
    assert (
        effort_from_budget(2048) == "low"
        and effort_from_budget(8192) == "medium"
        and effort_from_budget(8193) == "high"
    )


def _deepseek_loop(first_turn_thinking: list) -> Request:
    """Two tool-loop turns: the first per ``first_turn_thinking`` (e.g. answered by another provider, or with
    no thinking), the second with DeepSeek's reasoning."""
    return _req(
        messages=[
            Message("user", [TextPart("plan and run")]),
            Message("assistant", [*first_turn_thinking, ToolCallPart(id="c1", name="f", arguments="{}")]),
            Message("user", [ToolResultPart("c1", [TextPart("r1")])]),
            Message("assistant", [ThinkingPart(text="next step"), ToolCallPart(id="c2", name="f", arguments="{}")]),
            Message("user", [ToolResultPart("c2", [TextPart("r2")])]),
        ]
    )


@pytest.mark.parametrize(
    "first", [[], [ThinkingPart(text="")], [TextPart("let me check")]], ids=["no-thinking", "empty", "text-only"]
)
def test_every_tool_call_message_carries_reasoning_content_once_the_conversation_has_it(first):
    """DeepSeek's thinking mode: "Missing reasoning_content field in the assistant message at message index N"
    (400) for a tool-call message without the field, even an empty one."""
    req = _deepseek_loop(first)
    out = CODEC.encode_request(req, Context(request=req))
    calls = [m for m in out["messages"] if m["role"] == "assistant"]
    assert [m["reasoning_content"] for m in calls] == ["", "next step"]
    assert all("tool_calls" in m for m in calls)


def test_no_reasoning_content_is_invented_where_the_conversation_has_none_or_it_is_dropped():
    """An upstream that never returned reasoning (OpenAI) gets no such field; ``dragoman_chat_reasoning=drop``
    sends none at all."""
    req = _req(
        messages=[
            Message("user", [TextPart("q")]),
            Message("assistant", [ToolCallPart(id="c1", name="f", arguments="{}")]),
            Message("user", [ToolResultPart("c1", [TextPart("r1")])]),
        ]
    )
    out = CODEC.encode_request(req, Context(request=req))
    assert all("reasoning_content" not in m for m in out["messages"])
    req = _deepseek_loop([])
    out = CODEC.encode_request(req, Context(request=req, chat_reasoning_field="drop"))
    assert all("reasoning_content" not in m for m in out["messages"])

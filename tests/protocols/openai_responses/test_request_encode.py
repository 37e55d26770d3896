"""IR -> upstream Responses requests."""

from __future__ import annotations

from dragoman.ir.request import Message
from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import CODEC


def test_encode_request_from_anthropic_shaped_ir():
    req = Request(
        model="gpt-5",
        system=[TextPart("sys a"), TextPart("sys b")],
        messages=[
            Message("user", [TextPart("q")]),
            Message(
                "assistant",
                [
                    ThinkingPart(text="t", signature="anthropic-sig"),
                    ThinkingPart(text="s", encrypted_content="gAAA", item_id="rs_1", summary=True),
                    TextPart("a"),
                    ToolCallPart(id="toolu_1", name="f", arguments='{"a":1}'),
                ],
            ),
            Message(
                "user", [ToolResultPart("toolu_1", [TextPart("r1"), TextPart("r2")], is_error=True), TextPart("next")]
            ),
            Message("system", [TextPart("late")]),
        ],
        tools=[
            Tool("f", "desc", {"type": "object"}),
            Tool("web", kind="builtin", raw={"type": "web_search_20250305", "name": "web"}),
        ],
        reasoning=Reasoning(enabled=True, budget_tokens=5000),
        max_tokens=300,
        stop=["END"],
        top_k=5,
        stream=True,
    )
    ctx = Context(request=req)
    body = CODEC.encode_request(req, ctx)
    assert body["instructions"] == "sys a\n\nsys b"
    assert [it["type"] for it in body["input"]] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert body["input"][1] == {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "s"}],
        "encrypted_content": "gAAA",
    }
    assert body["input"][2]["content"] == [{"type": "output_text", "text": "a", "annotations": []}]
    assert body["input"][4] == {"type": "function_call_output", "call_id": "toolu_1", "output": "r1r2"}
    assert body["input"][6]["role"] == "developer"
    assert body["tools"] == [
        {"type": "function", "name": "f", "parameters": {"type": "object"}, "strict": False, "description": "desc"}
    ]
    assert body["reasoning"] == {"effort": "medium", "summary": "auto"} and body["include"] == [
        "reasoning.encrypted_content"
    ]
    assert body["store"] is False and body["max_output_tokens"] == 300 and body["stream"] is True
    assert {"thinking", "tools.web", "stop_sequences", "top_k", "tool_result.is_error"} <= set(ctx.dropped.fields)

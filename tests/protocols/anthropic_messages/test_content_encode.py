"""IR parts -> Anthropic content blocks (``content_encode``)."""

from __future__ import annotations

from dragoman.ir import carry
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart

from .helpers import enc


def test_thinking_history_variants():
    anth = carry.wrap_anthropic("SIG", "carried text")
    red = carry.wrap_anthropic(None, "", redacted_data="RED")
    req = Request(
        model="m",
        messages=[
            Message("user", [TextPart("q")]),
            Message(
                "assistant",
                [
                    ThinkingPart("native", signature="nsig"),
                    ThinkingPart(redacted_data="opaque"),
                    ThinkingPart(encrypted_content=anth, summary=True),
                    ThinkingPart(encrypted_content=red),
                    ThinkingPart("from chat"),
                    ThinkingPart("resp", encrypted_content="gAAA", item_id="rs_1"),
                    ThinkingPart("bad", signature=carry.UNSIGNED),
                    TextPart("answer"),
                ],
            ),
        ],
    )
    wire, ctx = enc(req)
    assert wire["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "native", "signature": "nsig"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "carried text", "signature": "SIG"},
        {"type": "redacted_thinking", "data": "RED"},
        {"type": "text", "text": "answer"},
    ]
    assert ctx.dropped.fields == ["thinking_without_signature"]


def test_images_and_files():
    req = Request(
        model="m",
        messages=[
            Message(
                "user",
                [
                    ImagePart(data="AAAA", media_type="image/jpeg"),
                    ImagePart(url="https://x/i.png"),
                    ImagePart(url="data:image/gif;base64,R0lG"),
                    FilePart(data="JVBE", media_type="application/pdf", filename="f.pdf"),
                    FilePart(data="aGVsbG8=", media_type="text/plain"),
                    FilePart(url="https://x/doc.pdf"),
                ],
            )
        ],
    )
    wire, ctx = enc(req)
    assert wire["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/i.png"}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": "R0lG"}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
            "title": "f.pdf",
        },
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hello"}},
        {"type": "document", "source": {"type": "url", "url": "https://x/doc.pdf"}},
    ]
    assert ctx.dropped.fields == []


def test_file_ids_data_urls_and_what_cannot_be_sent():
    parts = [
        ImagePart(file_id="file_img"),
        FilePart(file_id="file_doc", filename="d.pdf"),
        FilePart(url="data:application/pdf;base64,JVBE"),
        ImagePart(url="data:;base64,AAAA"),  # no media type: the generic one
        ImagePart(url="data:image/png,not-base64"),  # not a base64 data URL: sent as a URL
        ImagePart(),
        FilePart(),
        FilePart(data="//79", media_type="text/plain"),  # not UTF-8
        RefusalPart("I can't"),
        TextPart(""),
    ]
    wire, ctx = enc(Request(model="m", messages=[Message("user", parts)]))
    assert wire["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "file", "file_id": "file_img"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_doc"}, "title": "d.pdf"},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"}},
        {"type": "image", "source": {"type": "base64", "media_type": "application/octet-stream", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "data:image/png,not-base64"}},
        {"type": "text", "text": "I can't"},
    ]
    assert ctx.dropped.fields == ["image(empty)", "document(empty)", "document(undecodable)"]


def test_tool_calls_and_results():
    req = Request(
        model="m",
        messages=[
            Message(
                "assistant",
                [
                    ToolCallPart("c1", "f", '{"a": [1]}'),
                    ToolCallPart("c2", "g", "not json"),
                    ToolCallPart("c3", "h", "[1]"),
                    ToolCallPart("c4", "i", ""),
                ],
            ),
            Message(
                "user",
                [
                    ToolResultPart("c1", [TextPart("out"), ImagePart(data="AAAA", media_type="image/png")]),
                    ToolResultPart("c2", [], is_error=True),
                    ToolResultPart("c3", [TextPart("")]),
                    ToolResultPart("c4", [TextPart("ok")]),
                ],
            ),
        ],
    )
    wire, ctx = enc(req)
    assert [b["input"] for b in wire["messages"][0]["content"]] == [{"a": [1]}, {}, {}, {}]
    assert wire["messages"][1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "c1",
            "content": [
                {"type": "text", "text": "out"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            ],
        },
        {"type": "tool_result", "tool_use_id": "c2", "is_error": True},
        {"type": "tool_result", "tool_use_id": "c3"},
        {"type": "tool_result", "tool_use_id": "c4", "content": [{"type": "text", "text": "ok"}]},
    ]
    assert ctx.dropped.fields == ["tool_use.input(invalid_json)", "tool_use.input(not_an_object)"]

"""IR -> Chat: upstream requests, client responses, errors and the stream encoder (checked with the SDK)."""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
from conftest import run_stream
from corpus_loader import requests
from corpus_loader import samples
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
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
from dragoman.ir.response import Response
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.openai_chat.encode import UNANSWERED_TOOL_CALL
from dragoman.protocols.openai_chat.encode import effort_from_budget
from dragoman.translate.stream import StreamTranslator

from .helpers import DATA
from .helpers import accumulate_raw

CHAT_REQUESTS = requests("openai-chat")
CAPTURES = sorted(DATA.glob("*.json"))
STREAMS = samples("openai-chat", stream=True)


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
        assert "tools.builtin" in ctx.dropped.fields
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


# ---------------------------------------------------------------- whole responses


def test_response_encode():
    resp = Response(
        id="msg_1",
        model="m",
        content=[
            ThinkingPart(text="hm", signature="s"),
            TextPart("a"),
            TextPart("b"),
            ToolCallPart(id="t", name="f", arguments='{"x":1}'),
        ],
        stop_reason=StopReason.TOOL_USE,
        usage=Usage(input_tokens=10, output_tokens=3, cache_read_tokens=4, reasoning_tokens=1),
        created=7,
    )
    ctx = Context()
    out = CODEC.encode_response(resp, ctx)
    types = pytest.importorskip("openai.types.chat")
    parsed = types.ChatCompletion.model_validate(out)
    assert parsed.id == "chatcmpl-msg_1" and parsed.created == 7
    msg = parsed.choices[0].message
    assert msg.content == "ab" and msg.tool_calls[0].function.arguments == '{"x":1}'
    assert out["choices"][0]["message"]["reasoning_content"] == "hm"
    assert parsed.choices[0].finish_reason == "tool_calls"
    assert parsed.usage.total_tokens == 13 and parsed.usage.prompt_tokens_details.cached_tokens == 4
    assert "thinking_signature" in ctx.dropped.fields
    # round trip through the decoder
    back = CODEC.decode_response(out, Context())
    assert back.content[1:] == [TextPart("ab"), ToolCallPart(id="t", name="f", arguments='{"x":1}')]
    assert CODEC.encode_response(Response(id="chatcmpl-x", model="m"), Context())["id"] == "chatcmpl-x"


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kind,etype,code",
    [
        (ErrorKind.INVALID_REQUEST, "invalid_request_error", None),
        (ErrorKind.AUTHENTICATION, "authentication_error", None),
        (ErrorKind.PERMISSION, "permission_error", None),
        (ErrorKind.NOT_FOUND, "not_found_error", None),
        (ErrorKind.REQUEST_TOO_LARGE, "invalid_request_error", "request_too_large"),
        (ErrorKind.RATE_LIMIT, "rate_limit_error", "rate_limit_exceeded"),
        (ErrorKind.API_ERROR, "server_error", None),
        (ErrorKind.OVERLOADED, "server_error", "overloaded"),
    ],
)
def test_error_encode(kind, etype, code):
    body = CODEC.encode_error(ErrorInfo(kind=kind, message="msg"))
    assert body == {"error": {"message": "msg", "type": etype, "param": None, "code": code}}
    kept = CODEC.encode_error(ErrorInfo(kind=kind, message="m", code="insufficient_quota"))
    assert kept["error"]["code"] == "insufficient_quota"
    info = CODEC.decode_error(ErrorInfo(kind=kind, message="x").http_status, json.dumps(body).encode())
    assert (
        info.kind is kind
        or kind is ErrorKind.REQUEST_TOO_LARGE
        or info.http_status == ErrorInfo(kind=kind, message="x").http_status
    )


# ---------------------------------------------------------------- streams


def _encode_all(events, include_usage=True) -> bytes:
    enc = CODEC.stream_encoder(Context(request=Request(model="m", include_usage=include_usage)))
    return b"".join(enc.encode(e) for e in events) + enc.close()


def _sdk_accumulate(data: bytes, final: bool = True):
    """Accumulate our chunks with the official SDK (skips on an interpreter without it)."""
    streaming = pytest.importorskip("openai.lib.streaming.chat")
    ChatCompletionChunk = pytest.importorskip("openai.types.chat").ChatCompletionChunk
    state = streaming.ChatCompletionStreamState()
    chunks = []
    for frame in data.split(b"\n\n"):
        if not frame:
            continue
        assert frame.startswith(b"data: ")
        payload = frame[6:]
        if payload == b"[DONE]":
            break
        chunk = ChatCompletionChunk.model_validate_json(payload)
        chunks.append(chunk)
        state.handle_chunk(chunk)
    return (state.get_final_completion() if final else state.current_completion_snapshot), chunks


IR_EVENTS = [
    MessageStart(id="msg_abc", model="claude", usage=Usage(input_tokens=20, cache_read_tokens=5), created=11),
    BlockStart(0, BlockKind.THINKING),
    ThinkingDelta(0, "let me "),
    ThinkingDelta(0, "think"),
    SignatureDelta(0, signature="sig"),
    BlockStop(0),
    BlockStart(1, BlockKind.TEXT),
    TextDelta(1, "Hello "),
    TextDelta(1, "wörld"),
    BlockStop(1),
    BlockStart(2, BlockKind.TOOL_CALL, tool_call_id="toolu_1", name="read"),
    BlockStart(3, BlockKind.CUSTOM_TOOL_CALL, tool_call_id="toolu_2", name="patch"),
    ToolArgsDelta(2, '{"path":'),
    ToolArgsDelta(3, '*** Begin "Patch"\n'),
    ToolArgsDelta(2, '"a.txt"}'),
    ToolArgsDelta(3, "*** End"),
    BlockStop(3),
    BlockStop(2),
    BlockStart(4, BlockKind.REDACTED_THINKING, data="xx"),
    BlockStop(4),
    MessageDelta(StopReason.TOOL_USE, Usage(output_tokens=7)),
    MessageStop(),
]


def test_stream_encoder_accumulated_by_sdk():
    ctx = Context(request=Request(model="m", include_usage=True))
    enc = CODEC.stream_encoder(ctx)
    data = b"".join(enc.encode(e) for e in IR_EVENTS) + enc.close()
    assert data.endswith(b"data: [DONE]\n\n")
    completion, chunks = _sdk_accumulate(data)
    assert {c.id for c in chunks} == {"chatcmpl-msg_abc"} and {c.created for c in chunks} == {11}
    assert chunks[0].choices[0].delta.role == "assistant"
    msg = completion.choices[0].message
    assert msg.content == "Hello wörld"
    assert [(t.id, t.function.name) for t in msg.tool_calls] == [("toolu_1", "read"), ("toolu_2", "patch")]
    assert msg.tool_calls[0].function.arguments == '{"path":"a.txt"}'
    assert json.loads(msg.tool_calls[1].function.arguments) == {"input": '*** Begin "Patch"\n*** End'}
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.prompt_tokens == 20 and completion.usage.completion_tokens == 7
    assert completion.usage.prompt_tokens_details.cached_tokens == 5
    reasoning = "".join(getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices)
    assert reasoning == "let me think"
    assert {"thinking_signature", "redacted_thinking"} <= set(ctx.dropped.fields)
    assert json.loads(data.split(b"\n\n")[-3][6:])["choices"] == []  # the usage chunk


def test_stream_encoder_without_usage_and_refusal():
    events = [
        MessageStart(id="chatcmpl-x", model="m"),
        BlockStart(0, BlockKind.REFUSAL),
        TextDelta(0, "no"),
        BlockStop(0),
        MessageDelta(StopReason.REFUSAL, None),
        MessageStop(),
    ]
    data = _encode_all(events, include_usage=False)
    completion, chunks = _sdk_accumulate(data, final=False)  # the final parse raises on content_filter
    assert completion.choices[0].message.refusal == "no"
    assert completion.choices[0].finish_reason == "content_filter"
    assert all(c.usage is None for c in chunks)


def test_stream_encoder_error_frame_is_sdk_api_error():
    enc = CODEC.stream_encoder(Context())
    data = enc.encode(MessageStart(id="x", model="m")) + enc.error(
        ErrorInfo(kind=ErrorKind.OVERLOADED, message="busy", code="overloaded_error")
    )
    assert b"[DONE]" not in data
    openai = pytest.importorskip("openai")
    base = pytest.importorskip("openai._base_client")
    httpx = getattr(base, "httpx", None) or getattr(base, "httpx2", None)  # the SDK's HTTP package (httpx or a fork)
    ChatCompletionChunk = pytest.importorskip("openai.types.chat").ChatCompletionChunk
    client = openai.OpenAI(api_key="k", base_url="http://127.0.0.1:9/v1")
    resp = httpx.Response(
        200,
        content=data,
        headers={"content-type": "text/event-stream"},
        request=httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions"),
    )
    stream = openai.Stream(cast_to=ChatCompletionChunk, response=resp, client=client)
    with pytest.raises(openai.APIError, match="busy"):
        list(stream)


def test_stream_encoder_rejects_out_of_order():
    enc = CODEC.stream_encoder(Context())
    with pytest.raises(Exception, match="TextDelta"):
        enc.encode(TextDelta(0, "x"))
    enc.encode(MessageStart(id="x", model="m"))
    with pytest.raises(Exception, match="TextDelta"):
        enc.encode(TextDelta(5, "x"))


def _translate(pieces, include_usage=True) -> bytes:
    ctx = Context(request=Request(model="m", include_usage=include_usage))
    tr = StreamTranslator(CODEC.stream_decoder(ctx), CODEC.stream_encoder(ctx))
    return run_stream(tr, pieces)


@pytest.mark.parametrize("s", STREAMS, ids=[s.name for s in STREAMS])
def test_chat_to_chat_stable_over_chunkings(s):
    ref = _translate([s.body])
    for label, pieces in chunkings(s.body, seeds=2):
        assert _translate(pieces) == ref, label
    frames = [f for f in ref.split(b"\n\n") if f]
    if frames[-1].startswith(b'data: {"error"'):
        assert b"[DONE]" not in ref  # an error frame ends the stream
        return
    assert frames[-1] == b"data: [DONE]"
    raw = accumulate_raw(s.body)
    ours = accumulate_raw(ref)
    assert (ours["text"], ours["reasoning"], ours["finish"]) == (raw["text"], raw["reasoning"], raw["finish"])
    assert [(t["id"], t["name"], t["arguments"]) for t in ours["tools"].values()] == [
        (t["id"], t["name"], t["arguments"]) for _, t in sorted(raw["tools"].items())
    ]
    if raw["usage"] is not None:
        assert ours["usage"]["prompt_tokens"] == raw["usage"]["prompt_tokens"]
        assert ours["usage"]["completion_tokens"] == raw["usage"]["completion_tokens"]

"""Chat -> IR: requests, whole responses, errors, the stream decoder (real corpus + captures)."""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
from corpus_loader import requests
from corpus_loader import samples
from dragoman.errors import ClientRequestError
from dragoman.errors import UnsupportedFeatureError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import StreamError
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.mapping import chat_stop
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.protocols.openai_chat.decode import decode_usage
from dragoman.sse import SSEEvent

from .helpers import DATA
from .helpers import accumulate_ir
from .helpers import accumulate_raw
from .helpers import decode_stream

CHAT_REQUESTS = requests("openai-chat")
CAPTURES = sorted(p for p in DATA.glob("*.json"))
STREAMS = samples("openai-chat", stream=True)
BODIES = samples("openai-chat", stream=False, ok=True)
ERRORS = samples("openai-chat", stream=False, ok=False)


# ---------------------------------------------------------------- requests


@pytest.mark.parametrize("name,proto,body", CHAT_REQUESTS, ids=[r[0] for r in CHAT_REQUESTS])
def test_corpus_requests_decode(name, proto, body):
    req = CODEC.decode_request(body)
    assert req.model == body["model"]
    assert req.stream == bool(body.get("stream"))
    n_msgs = len(body["messages"])
    assert len(req.messages) + (1 if req.system else 0) <= n_msgs
    for key in body:
        if key in ("prompt_cache_key", "prompt_cache_options", "models", "provider", "transforms"):
            assert key in req.dropped.fields


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
    assert set(req.dropped.fields) == {"messages.content.input_audio", "logprobs", "seed"}


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


def test_n_greater_than_one_unsupported():
    with pytest.raises(UnsupportedFeatureError):
        CODEC.decode_request({"model": "m", "messages": [], "n": 2})
    assert CODEC.decode_request({"model": "m", "messages": [], "n": 1}).model == "m"


def test_reasoning_effort_none_disables():
    req = CODEC.decode_request({"model": "m", "messages": [], "reasoning_effort": "none"})
    assert req.reasoning.enabled is False


# ---------------------------------------------------------------- whole responses


@pytest.mark.parametrize("s", BODIES, ids=[s.name for s in BODIES])
def test_corpus_responses_decode(s):
    body = json.loads(s.body)
    resp = CODEC.decode_response(body, Context())
    msg = body["choices"][0]["message"]
    text = "".join(p.text for p in resp.content if isinstance(p, TextPart))
    assert text == (msg.get("content") or "")
    thinking = "".join(p.text for p in resp.content if isinstance(p, ThinkingPart))
    assert thinking == (msg.get("reasoning_content") or msg.get("reasoning") or "")
    calls = [p for p in resp.content if isinstance(p, ToolCallPart)]
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        (t["id"], t["function"]["name"], t["function"]["arguments"]) for t in msg.get("tool_calls") or []
    ]
    assert resp.stop_reason == chat_stop(body["choices"][0]["finish_reason"])
    assert resp.usage.input_tokens == body["usage"]["prompt_tokens"]
    assert resp.usage.output_tokens == body["usage"]["completion_tokens"]
    if thinking:  # thinking comes before text
        assert isinstance(resp.content[0], ThinkingPart)


def test_response_mistral_content_array_and_custom():
    ctx = Context(request=Request(model="m", tools=[Tool(name="patch", kind="custom")]))
    resp = CODEC.decode_response(
        {
            "id": "x",
            "model": "m",
            "choices": [
                {
                    "message": {
                        "content": [
                            {"type": "thinking", "thinking": [{"type": "text", "text": "hm"}]},
                            {"type": "text", "text": "ok"},
                        ],
                        "tool_calls": [
                            {
                                "id": "c",
                                "type": "function",
                                "function": {"name": "patch", "arguments": '{"input":"RAW"}'},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "prompt_cache_hit_tokens": 3},
        },
        ctx,
    )
    assert resp.content[0] == ThinkingPart(text="hm")
    assert resp.content[1] == TextPart("ok")
    assert resp.content[2] == ToolCallPart(id="c", name="patch", arguments="RAW", kind="custom")
    assert resp.stop_reason is StopReason.TOOL_USE
    assert resp.usage.cache_read_tokens == 3


def test_response_without_choices_is_protocol_error():
    with pytest.raises(UpstreamProtocolError):
        CODEC.decode_response({"id": "x", "model": "m", "choices": []}, Context())


def test_usage_decode():
    u = decode_usage(
        {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 6},
            "completion_tokens_details": {"reasoning_tokens": 2},
        }
    )
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens) == (10, 4, 6, 2)
    assert decode_usage(None) is None


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("s", ERRORS, ids=[s.name for s in ERRORS])
def test_corpus_errors_decode(s):
    info = CODEC.decode_error(s.status, s.body, {"retry-after": "7"})
    body = json.loads(s.body)
    assert info.message == body["error"]["message"]
    assert info.http_status == s.status
    assert info.retry_after == "7"


def test_openrouter_numeric_code_and_fallbacks():
    info = CODEC.decode_error(429, b'{"error":{"message":"Rate limit exceeded","code":429}}')
    assert info.kind is ErrorKind.RATE_LIMIT and info.message == "Rate limit exceeded" and info.code is None
    info = CODEC.decode_error(
        401, b'{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}'
    )
    assert info.kind is ErrorKind.AUTHENTICATION and info.code == "invalid_api_key"
    info = CODEC.decode_error(502, b"<html><title>Bad Gateway</title></html>")
    assert info.message == "Bad Gateway" and info.kind is ErrorKind.UPSTREAM_PROTOCOL
    info = CODEC.decode_error(500, b"")
    assert info.kind is ErrorKind.API_ERROR


# ---------------------------------------------------------------- streams


@pytest.mark.parametrize("s", STREAMS, ids=[s.name for s in STREAMS])
def test_corpus_streams_decode_over_chunkings(s):
    ref = None
    for label, pieces in chunkings(s.body, seeds=2):
        events = decode_stream(pieces)
        if ref is None:
            ref = events
        assert events == ref, label


@pytest.mark.parametrize("s", STREAMS, ids=[s.name for s in STREAMS])
def test_corpus_streams_match_raw_accumulation(s):
    events = decode_stream([s.body])
    raw = accumulate_raw(s.body)
    ir = accumulate_ir(events)
    assert ir["text"] == raw["text"]
    assert ir["reasoning"] == raw["reasoning"]
    assert ir["refusal"] == raw["refusal"]
    assert [(t["id"], t["name"], t["arguments"]) for t in ir["tools"]] == [
        (t["id"], t["name"], t["arguments"]) for _, t in sorted(raw["tools"].items())
    ]
    if raw["error"] is not None:
        assert type(events[-1]) is StreamError
        assert events[-1].error.message == raw["error"]["message"]
        return
    assert type(events[-1]) is MessageStop
    assert ir["stop"] == chat_stop(raw["finish"])
    if raw["usage"] is not None:
        assert ir["usage"].input_tokens == raw["usage"]["prompt_tokens"]
        assert ir["usage"].output_tokens == raw["usage"]["completion_tokens"]


def test_midstream_errors_yield_stream_error():
    names = [s for s in STREAMS if "midstream" in s.name]
    errors = [decode_stream([s.body])[-1] for s in names]
    assert any(type(e) is StreamError for e in errors)
    groq = decode_stream([next(s for s in names if "groq" in s.name and s.name.endswith("#0")).body])[-1]
    assert type(groq) is StreamError and groq.error.code == "tool_use_failed"
    orr = decode_stream([next(s for s in names if "openrouter" in s.name).body])[-1]
    assert type(orr) is StreamError and orr.error.status == 400 and orr.error.message == "Token limit reached"


def _chunk(delta=None, finish=None, usage=None, choices=True):
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 5, "model": "m"}
    obj["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _tc(index, id=None, name=None, args=None):
    fn = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    tc = {"index": index, "function": fn}
    if id is not None:
        tc["id"] = id
        tc["type"] = "function"
    return {"tool_calls": [tc]}


INTERLEAVED = b"".join(
    [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"content": "Checking"}),
        _chunk(_tc(0, "call_a", "weather", "")),
        _chunk(_tc(1, "call_b", "time", "")),
        _chunk(_tc(0, args='{"city":')),
        _chunk(_tc(1, args='{"tz":')),
        _chunk(_tc(0, args='"Paris"}')),
        _chunk(_tc(1, args='"CET"}')),
        _chunk(finish="tool_calls"),
        _chunk(usage={"prompt_tokens": 9, "completion_tokens": 3}, choices=False),
        b"data: [DONE]\n\n",
    ]
)


def test_interleaved_tool_calls():
    for label, pieces in chunkings(INTERLEAVED):
        events = decode_stream(pieces)
        assert events[0] == MessageStart(id="chatcmpl-1", model="m", usage=None, created=5), label
        starts = [e for e in events if type(e) is BlockStart]
        assert [(s.kind, s.tool_call_id, s.name) for s in starts] == [
            (BlockKind.TEXT, None, None),
            (BlockKind.TOOL_CALL, "call_a", "weather"),
            (BlockKind.TOOL_CALL, "call_b", "time"),
        ]
        args = {
            s.index: "".join(e.fragment for e in events if type(e) is ToolArgsDelta and e.index == s.index)
            for s in starts[1:]
        }
        assert list(args.values()) == ['{"city":"Paris"}', '{"tz":"CET"}']
        # the text block closes when the first tool call starts; tool blocks stay open until finish_reason
        text_stop = events.index(BlockStop(starts[0].index))
        assert text_stop < events.index(starts[1])
        md = next(e for e in events if type(e) is MessageDelta)
        assert md.stop_reason is StopReason.TOOL_USE
        assert md.usage.input_tokens == 9 and md.usage.output_tokens == 3
        assert type(events[-1]) is MessageStop


def test_tool_index_starting_at_one_and_repeated_names():
    body = b"".join(
        [
            _chunk({"role": "assistant"}),
            _chunk(_tc(1, "t1", "read", "")),
            _chunk(_tc(1, "t1", "read", '{"a":')),
            _chunk(_tc(1, "t1", "read", "1}")),
            _chunk(finish="tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )
    events = decode_stream([body])
    assert [type(e).__name__ for e in events] == [
        "MessageStart",
        "BlockStart",
        "ToolArgsDelta",
        "ToolArgsDelta",
        "BlockStop",
        "MessageDelta",
        "MessageStop",
    ]
    assert events[1].tool_call_id == "t1"
    assert "".join(e.fragment for e in events if type(e) is ToolArgsDelta) == '{"a":1}'


def test_reasoning_then_text_blocks_and_held_message_delta():
    body = b"".join(
        [
            _chunk({"role": "assistant", "reasoning_content": "th"}),
            _chunk({"reasoning_content": "ink"}),
            _chunk({"content": "answer"}),
            _chunk({"refusal": "no"}),
            _chunk(finish="stop", usage={"prompt_tokens": 2, "completion_tokens": 1}),
        ]
    )
    events = decode_stream([body])  # no [DONE]: close() finishes after finish_reason
    kinds = [e.kind for e in events if type(e) is BlockStart]
    assert kinds == [BlockKind.THINKING, BlockKind.TEXT, BlockKind.REFUSAL]
    assert "".join(e.text for e in events if type(e) is ThinkingDelta) == "think"
    assert [e.text for e in events if type(e) is TextDelta] == ["answer", "no"]
    assert events[-2] == MessageDelta(StopReason.END_TURN, events[-2].usage)
    assert events[-2].usage.input_tokens == 2


def test_custom_tool_call_stream_unwrapped():
    ctx = Context(request=Request(model="m", tools=[Tool(name="patch", kind="custom")]))
    body = b"".join(
        [
            _chunk(_tc(0, "c", "patch", '{"input":"a\\n')),
            _chunk(_tc(0, args='b"}')),
            _chunk(finish="tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )
    events = decode_stream([body], ctx)
    assert events[1].kind is BlockKind.CUSTOM_TOOL_CALL
    assert [e.fragment for e in events if type(e) is ToolArgsDelta] == ["a\nb"]


def test_stream_ended_before_finish_reason():
    with pytest.raises(UpstreamProtocolError, match="finish_reason"):
        decode_stream([_chunk({"content": "partial"})])


def test_done_without_finish_reason_is_inferred():
    events = decode_stream([_chunk(_tc(0, "c", "f", "{}")) + b"data: [DONE]\n\n"])
    assert events[-2].stop_reason is StopReason.TOOL_USE


def test_out_of_order_and_bad_chunks():
    dec = CODEC.stream_decoder(Context())
    with pytest.raises(UpstreamProtocolError):
        dec.feed(SSEEvent(data="[DONE]"))
    dec = CODEC.stream_decoder(Context())
    with pytest.raises(UpstreamProtocolError, match="not valid JSON"):
        dec.feed(SSEEvent(data="{nope"))
    dec = CODEC.stream_decoder(Context())
    with pytest.raises(UpstreamProtocolError, match="function.name"):
        dec.feed(SSEEvent(data=json.dumps({"id": "x", "choices": [{"delta": _tc(0, args="{}")}]})))


def test_groq_error_event_without_error_key():
    dec = CODEC.stream_decoder(Context())
    evs = dec.feed(SSEEvent(data='{"message":"boom"}', event="error"))
    assert type(evs[0]) is StreamError and evs[0].error.message == "boom"
    assert dec.done and dec.feed(SSEEvent(data="[DONE]")) == [] and dec.close() == []

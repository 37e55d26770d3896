"""IR -> Chat SSE: chunks accumulated by the official SDK, error frames, Chat -> Chat over chunkings."""

from __future__ import annotations

import json

import pytest

from conftest import chunkings
from conftest import run_stream
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
from dragoman.ir.request import Request
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.translate.stream import StreamTranslator

from .helpers import accumulate_raw

STREAMS = samples("openai-chat", stream=True)

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
    # the signature and the redacted block go out as OpenRouter reasoning_details, which the SDK's accumulator
    # assembles into exactly the entries a whole response carries
    assert getattr(msg, "reasoning_details", None) == [
        {
            "type": "reasoning.text",
            "text": "let me think",
            "index": 0,
            "signature": "sig",
            "format": "anthropic-claude-v1",
        },
        {"type": "reasoning.encrypted", "data": "xx", "format": "anthropic-claude-v1", "index": 1},
    ]
    assert ctx.dropped.fields == []
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

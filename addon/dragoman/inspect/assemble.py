"""One side of an exchange, assembled: the answer's bytes (a stream or a whole body, in one protocol) read
through that protocol's decoder into text, thinking, tool calls with parsed arguments, stop reason, usage
and error. Sans-I/O: fed bytes, returns a value. Used by ``dragoman inspect`` and the mitmweb view."""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from dragoman.errors import TranslationError
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import StreamError
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.registry import get_codec
from dragoman.sse.decoder import SSEDecoder
from dragoman.sse.events import SSEEvent


@dataclass(slots=True)
class Call:
    """A tool call: its arguments as sent, and parsed when they are JSON."""

    id: str
    name: str
    arguments: str = ""
    parsed: Any = None
    #: why ``arguments`` did not parse (None: parsed, or a custom tool's free text)
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.parsed if self.problem is None else self.arguments}


@dataclass(slots=True)
class Assembled:
    """What one side of an exchange said."""

    protocol: str
    text: str = ""
    thinking: str = ""
    calls: list[Call] = field(default_factory=list)
    stop: str | None = None
    usage: Usage | None = None
    #: an error answer or an in-stream error event: its message
    error: str | None = None
    #: the body could not be read in its protocol: what is wrong
    problem: str | None = None
    events: int = 0

    def as_dict(self) -> dict[str, Any]:
        u = self.usage
        return {
            "protocol": self.protocol,
            "text": self.text,
            "thinking": self.thinking,
            "tool_calls": [c.as_dict() for c in self.calls],
            "stop": self.stop,
            "usage": None
            if u is None
            else {
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "cache_read_tokens": u.cache_read_tokens,
                "cache_creation_tokens": u.cache_creation_tokens,
                "reasoning_tokens": u.reasoning_tokens,
            },
            "error": self.error,
            "problem": self.problem,
            "events": self.events,
        }


def looks_like_sse(body: bytes, content_type: str | None = None) -> bool:
    if content_type is not None and content_type.lower().startswith("text/event-stream"):
        return True
    head = body.lstrip()[:16]
    return head.startswith((b"event:", b"data:", b":"))


def assemble(body: bytes, protocol: Protocol, status: int = 200, content_type: str | None = None) -> Assembled:
    """``body`` (a whole answer or an SSE stream of ``protocol``) as text, thinking, calls, stop and usage."""
    out = Assembled(protocol.value)
    if not body:
        return out
    codec = get_codec(protocol)
    if not 200 <= status < 300:
        out.error = codec.decode_error(status, body).message
        return out
    ctx = Context()
    try:
        if looks_like_sse(body, content_type):
            _stream(body, protocol, ctx, out)
        else:
            _whole(body, protocol, ctx, out)
    except (TranslationError, ValueError, TypeError, KeyError, AttributeError) as e:
        out.problem = f"{type(e).__name__}: {e}"
    for c in out.calls:
        _parse_args(c)
    return out


def _whole(body: bytes, protocol: Protocol, ctx: Context, out: Assembled) -> None:
    obj = json.loads(body)
    if not isinstance(obj, dict):
        raise ValueError("the body is not a JSON object")
    resp = get_codec(protocol).decode_response(obj, ctx)
    for p in resp.content:
        if isinstance(p, (TextPart, RefusalPart)):
            out.text += p.text
        elif isinstance(p, ThinkingPart):
            out.thinking += p.text
        elif isinstance(p, ToolCallPart):
            out.calls.append(Call(p.id, p.name, p.arguments))
    out.stop = resp.stop_reason.value if resp.stop_reason is not None else None
    out.usage = resp.usage


def _stream(body: bytes, protocol: Protocol, ctx: Context, out: Assembled) -> None:
    dec = get_codec(protocol).stream_decoder(ctx)
    sse = SSEDecoder()
    acc = Accumulator(out)
    for ev in [*sse.feed(body), *sse.close()]:
        out.events += 1
        for ir in dec.feed(ev):
            acc.add(ir)
    for ir in dec.close():
        acc.add(ir)


class Accumulator:
    """IR stream events -> ``Assembled``, one event at a time (grows with the answer's text and arguments)."""

    __slots__ = ("out", "_calls")

    def __init__(self, out: Assembled) -> None:
        self.out = out
        self._calls: dict[int, Call] = {}

    def add(self, ir: StreamEvent) -> None:
        out = self.out
        if isinstance(ir, TextDelta):
            out.text += ir.text
        elif isinstance(ir, ThinkingDelta):
            out.thinking += ir.text
        elif isinstance(ir, ToolArgsDelta):
            call = self._calls.get(ir.index)
            if call is not None:
                call.arguments += ir.fragment
        elif isinstance(ir, BlockStart):
            if ir.kind in (BlockKind.TOOL_CALL, BlockKind.CUSTOM_TOOL_CALL):
                self._calls[ir.index] = call = Call(ir.tool_call_id or "", ir.name or "")
                out.calls.append(call)
        elif isinstance(ir, MessageStart):
            if ir.usage is not None:
                out.usage = ir.usage if out.usage is None else out.usage.merged(ir.usage)
        elif isinstance(ir, MessageDelta):
            if ir.stop_reason is not None:
                out.stop = ir.stop_reason.value
            if ir.usage is not None:
                out.usage = ir.usage if out.usage is None else out.usage.merged(ir.usage)
        elif isinstance(ir, StreamError):
            out.error = ir.error.message

    def result(self) -> Assembled:
        for c in self.out.calls:
            if c.parsed is None and c.problem is None:
                _parse_args(c)
        return self.out


class AnswerTap(StreamDecoder):
    """Wraps a stream decoder and assembles what it decodes (the mitmweb view's answer of a streamed flow)."""

    def __init__(self, inner: StreamDecoder, protocol: str) -> None:
        self._inner = inner
        self.acc = Accumulator(Assembled(protocol))

    def feed(self, ev: SSEEvent) -> list[StreamEvent]:
        events = self._inner.feed(ev)
        self.acc.out.events += 1
        for ir in events:
            self.acc.add(ir)
        self.done = self._inner.done
        return events

    def close(self) -> list[StreamEvent]:
        events = self._inner.close()
        for ir in events:
            self.acc.add(ir)
        self.done = self._inner.done
        return events


def _parse_args(c: Call) -> None:
    if not c.arguments:
        c.parsed = {}
        return
    try:
        c.parsed = json.loads(c.arguments)
    except ValueError as e:
        c.problem = f"not JSON: {e}"

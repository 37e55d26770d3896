"""One side of an exchange, assembled: the answer's bytes (a stream or a whole body, in one protocol) read
through that protocol's decoder into text, thinking, tool calls with parsed arguments, stop reason, usage
and error. Sans-I/O: fed bytes, returns a value. Used by ``dragoman inspect`` and the mitmweb view."""

from __future__ import annotations

import codecs
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
    #: a kept streamed answer outgrew ``KEEP_LIMIT``: text, thinking or arguments were cut there
    truncated: bool = False

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
            "truncated": self.truncated,
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


#: characters of text, of thinking and of each tool call's arguments a kept streamed answer holds
#: (``dragoman_keep_answer``, each side); past it the value is cut and ``truncated`` set
KEEP_LIMIT = 100_000
#: tool calls a kept answer lists
KEEP_CALLS = 128


class Accumulator:
    """IR stream events -> ``Assembled``, one event at a time. ``limit`` (characters, None: none) caps
    the text, the thinking and each call's arguments, so a kept answer's memory is bounded."""

    __slots__ = ("out", "_calls", "_limit")

    def __init__(self, out: Assembled, limit: int | None = None) -> None:
        self.out = out
        self._calls: dict[int, Call] = {}
        self._limit = limit

    def _room(self, have: str, more: str) -> str:
        if self._limit is None or len(have) + len(more) <= self._limit:
            return more
        self.out.truncated = True
        return more[: max(0, self._limit - len(have))]

    def add(self, ir: StreamEvent) -> None:
        out = self.out
        if isinstance(ir, TextDelta):
            out.text += self._room(out.text, ir.text)
        elif isinstance(ir, ThinkingDelta):
            out.thinking += self._room(out.thinking, ir.text)
        elif isinstance(ir, ToolArgsDelta):
            call = self._calls.get(ir.index)
            if call is not None:
                call.arguments += self._room(call.arguments, ir.fragment)
        elif isinstance(ir, BlockStart):
            if ir.kind in (BlockKind.TOOL_CALL, BlockKind.CUSTOM_TOOL_CALL):
                call = Call(ir.tool_call_id or "", ir.name or "")
                if self._limit is not None and len(out.calls) >= KEEP_CALLS:
                    out.truncated = True
                    return
                self._calls[ir.index] = call
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
        self.acc = Accumulator(Assembled(protocol), KEEP_LIMIT)

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


class BytesTap:
    """Assembles a stream of ``protocol`` from its bytes as they pass (the client-bound side of a streamed
    flow, ``dragoman_keep_answer``): an SSE stream, or a Gemini stream written as one JSON array (``array``).
    Holds at most one event's bytes and the capped ``Accumulator``; its decoder has a ``Context`` of its own
    (nothing it reads reaches the exchange's lossiness report). Never raises: a stream it cannot read stops
    the tap and says why in ``problem``."""

    __slots__ = ("acc", "_dec", "_sse", "_array", "_closed")

    def __init__(self, protocol: Protocol, array: bool = False) -> None:
        self.acc = Accumulator(Assembled(protocol.value), KEEP_LIMIT)
        self._dec = get_codec(protocol).stream_decoder(Context())
        self._sse = None if array else SSEDecoder()
        self._array = ArraySplitter() if array else None
        self._closed = False

    def feed(self, data: bytes) -> None:
        if self.acc.out.problem is None and data and not self._closed:
            self._run(data, final=False)

    def close(self) -> Assembled:
        """The end of the stream (again: the same result)."""
        if self.acc.out.problem is None and not self._closed:
            self._run(b"", final=True)
        self._closed = True
        return self.acc.result()

    def _events(self, data: bytes, final: bool) -> list[SSEEvent]:
        if self._sse is not None:
            return self._sse.close() if final else self._sse.feed(data)
        assert self._array is not None
        return [] if final else self._array.feed(data)

    def _run(self, data: bytes, final: bool) -> None:
        try:
            for ev in self._events(data, final):
                self.acc.out.events += 1
                for ir in self._dec.feed(ev):
                    self.acc.add(ir)
            if final:
                for ir in self._dec.close():
                    self.acc.add(ir)
        except Exception as e:  # noqa: BLE001 - a debugging copy never breaks the stream it watches
            self.acc.out.problem = f"{type(e).__name__}: {e}"[:300]


class ArraySplitter:
    """The elements of a JSON array arriving in pieces (``[{..},\r\n{..}]``), each as an ``SSEEvent`` whose
    data is the element's JSON. Holds the bytes of one unfinished element (at most ``limit``)."""

    __slots__ = ("_buf", "_limit", "_utf8")

    def __init__(self, limit: int = 4 * KEEP_LIMIT) -> None:
        self._buf = ""
        self._limit = limit
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> list[SSEEvent]:
        self._buf += self._utf8.decode(data)
        out: list[SSEEvent] = []
        dec = json.JSONDecoder()
        while True:
            buf = self._buf.lstrip(" \t\r\n[,]")
            if not buf:
                self._buf = ""
                return out
            try:
                obj, end = dec.raw_decode(buf)
            except ValueError:
                if len(buf) > self._limit:
                    raise ValueError(f"an array element over {self._limit} characters") from None
                self._buf = buf
                return out
            out.append(SSEEvent(json.dumps(obj)))
            self._buf = buf[end:]


def _parse_args(c: Call) -> None:
    if not c.arguments:
        c.parsed = {}
        return
    try:
        c.parsed = json.loads(c.arguments)
    except ValueError as e:
        c.problem = f"not JSON: {e}"

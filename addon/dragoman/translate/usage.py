"""What an answer cost: the usage the upstream reported, seen on its way through (for the usage ledger).

``UsageTap`` wraps a stream decoder and keeps the last usage of ``MessageStart``/``MessageDelta`` (fields
set later win); ``PassThroughUsage`` runs a decoder beside a byte pass-through (same protocol on both
sides) only to read usage; ``usage_of_body`` reads a whole answer's usage. ``estimate_usage`` is the
fallback when the upstream reported none.
"""

from __future__ import annotations

from typing import Any

from dragoman.errors import TranslationError
from dragoman.ir.common import Usage
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import StreamEvent
from dragoman.ir.request import Request
from dragoman.protocols import Protocol
from dragoman.protocols._wire import parse_upstream_json
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.registry import get_codec
from dragoman.sse.capped import CappedSSEDecoder
from dragoman.sse.decoder import SSEDecoder
from dragoman.sse.events import SSEEvent
from dragoman.translate.tokens import estimate_input_tokens


class UsageTap(StreamDecoder):
    """A stream decoder that remembers the usage its events carried."""

    __slots__ = ("_inner", "usage", "done")

    def __init__(self, inner: StreamDecoder) -> None:
        self._inner = inner
        self.usage: Usage | None = None
        self.done = False

    def feed(self, ev: SSEEvent) -> list[StreamEvent]:
        events = self._inner.feed(ev)
        self.done = self._inner.done
        for e in events:
            t = type(e)
            if (t is MessageDelta or t is MessageStart) and e.usage is not None:  # type: ignore[union-attr]
                self.usage = e.usage if self.usage is None else self.usage.merged(e.usage)  # type: ignore[union-attr]
        return events

    def close(self) -> list[StreamEvent]:
        events = self._inner.close()
        self.done = self._inner.done
        return events


class PassThroughUsage:
    """Reads usage from bytes that pass through untouched; never raises, never changes the bytes."""

    __slots__ = ("_sse", "_tap", "broken")

    def __init__(self, protocol: Protocol, ctx: Context, max_event: int = 0) -> None:
        self._sse = CappedSSEDecoder(max_event) if max_event > 0 else SSEDecoder()
        self._tap = UsageTap(get_codec(protocol).stream_decoder(ctx))
        self.broken = False

    @property
    def usage(self) -> Usage | None:
        return self._tap.usage

    def feed(self, data: bytes) -> None:
        if self.broken:
            return
        try:
            for ev in self._sse.feed(data):
                self._tap.feed(ev)
        except (TranslationError, ValueError):  # ValueError: SSELimitError too (a line or event beyond the cap)
            self.broken = True  # the client gets the bytes anyway; the ledger falls back to an estimate
            self._sse = SSEDecoder()  # what was buffered goes


def usage_of_body(body: bytes, protocol: Protocol, ctx: Context) -> Usage | None:
    """The usage a whole 2xx answer reports, or None."""
    try:
        obj = parse_upstream_json(body)
        return get_codec(protocol).decode_response(obj, ctx).usage
    except (TranslationError, ValueError, TypeError, KeyError, AttributeError):
        return None


def estimate_usage(req: Request | None) -> Usage:
    """Input tokens estimated from the request (the count_tokens estimator); output unknown (0)."""
    if req is None:
        return Usage(input_tokens=0, output_tokens=0)
    body: dict[str, Any] = get_codec(Protocol.ANTHROPIC_MESSAGES).encode_request(req, Context(request=req))
    return Usage(input_tokens=estimate_input_tokens(body), output_tokens=0)

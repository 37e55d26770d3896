"""``StreamTranslator``: upstream SSE bytes in, client SSE bytes out, one event at a time.

It composes ``SSEDecoder`` -> the upstream protocol's ``StreamDecoder`` -> the client protocol's
``StreamEncoder`` and holds the phase in an explicit state machine::

    WAITING --first event--> STREAMING --terminal event--> DONE --close()--> CLOSED
       |                        |                          |
       +------ any error -------+--------------------------+--> ERROR --close()--> CLOSED

Every failure (an upstream in-band error, a protocol violation, a stream that ends early, an
unexpected exception, an external fault reported through ``fail``) becomes exactly ONE error frame in
the client's protocol; after it the rest of the upstream bytes are drained (``feed`` returns ``b""``).
No exception escapes ``feed``/``close``/``fail`` except ``TranslatorStateError`` for a feed after close.

The usage the upstream's events carry (``MessageStart``, ``MessageDelta``) is kept in ``usage``, merged, for the
usage ledger: those events never take the one-event hot path, so reading it costs nothing per delta.

The shortcut (``StreamDecoder.shortcut`` -> ``StreamEncoder.literal``) writes a delta frame the decoder learnt
without a parse; when taking it changed nothing on either side but a call's fragment kept (the decoder's
``repeat``, the encoder's ``pieces``) and it took the same shape twice in a row, the frames of that shape that
follow are written here as their token between the client's pieces, neither side asked (the repeat), until
any other frame comes: that one goes the usual way, and the next run may start a repeat again.

Keepalives cross over as they arrive: an upstream SSE comment (``: keepalive``, ``: OPENROUTER PROCESSING``)
or a decoder's ``KEEPALIVE`` (an Anthropic ``ping``, a Responses ``keepalive``) becomes the client protocol's
keepalive (``StreamEncoder.keepalive``) in the same output chunk. None is ever made up.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from collections.abc import Sequence
from enum import Enum
from typing import Any

from dragoman.errors import TranslationError
from dragoman.errors import TranslatorStateError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import Usage
from dragoman.ir.events import KEEPALIVE
from dragoman.ir.events import Keepalive
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import StreamError
from dragoman.ir.events import StreamEvent
from dragoman.ir.lossy import LossReport
from dragoman.logsafe import logsafe
from dragoman.protocols._checks import keeper
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.base import StreamEncoder
from dragoman.sse.capped import CappedSSEDecoder
from dragoman.sse.capped import SSELimitError
from dragoman.sse.decoder import SSEDecoder
from dragoman.sse.events import COMMENT
from dragoman.sse.events import SSEEvent
from dragoman.translate.overflow import recognise

logger = logging.getLogger(__name__)


#: ``StreamTranslator._repeat``
_Repeat = tuple[
    bytes,
    int,
    "re.Pattern[bytes] | None",
    list[bytes],
    int,
    "Callable[[bytes], None] | None",
    "Callable[[bytes], bytes] | None",
    "Callable[[bytes], bytes | None]",
]


def _utf8(tok: bytes) -> bool:
    """A token with non-ASCII bytes is valid UTF-8 (else the usual way decodes the frame with replacements)."""
    try:
        tok.decode()
    except UnicodeDecodeError:
        return False
    return True


class Phase(Enum):
    WAITING = "waiting"
    STREAMING = "streaming"
    DONE = "done"
    ERROR = "error"
    CLOSED = "closed"


_ERROR = Phase.ERROR
_DONE = Phase.DONE
_STREAMING = Phase.STREAMING
#: IR events the one-event hot path of ``feed`` leaves to the general loop: an error, a keepalive, and the
#: events that carry usage (read there, see ``_take_usage``)
_NOT_HOT = frozenset((StreamError, Keepalive, MessageStart, MessageDelta))


class StreamTranslator:
    __slots__ = (
        "phase",
        "_sse",
        "_dec",
        "_enc",
        "_seen",
        "repeated",
        "error_info",
        "report",
        "usage",
        "_short",
        "_literal",
        "_repeat",
        "repeats",
        "_last",
    )

    def __init__(
        self, decoder: StreamDecoder, encoder: StreamEncoder, max_event: int = 0, report: LossReport | None = None
    ) -> None:
        """``max_event``: the longest upstream SSE line or event buffered (bytes, 0: no cap); beyond it the
        client's stream ends with one error event (``SSELimitError``). ``report``: the exchange's lossiness
        report (the codecs' ``Context.dropped``), which grows as events pass."""
        self.phase = Phase.WAITING
        self._sse = CappedSSEDecoder(max_event, comments=True) if max_event > 0 else SSEDecoder(comments=True)
        self._dec = decoder
        self._enc = encoder
        #: upstream SSE events seen the usual way or through the shortcut, and written as a repeat
        self._seen = 0
        self.repeated = 0
        #: the error sent to the client, if any
        self.error_info: ErrorInfo | None = None
        self.report = report if report is not None else LossReport()
        #: the usage the upstream's events reported so far (``MessageStart``, ``MessageDelta``), merged
        self.usage: Usage | None = None
        #: the decoder's ``shortcut`` when both sides have one (a codec's default is the base class's)
        self._short = (
            decoder.shortcut
            if type(decoder).shortcut is not StreamDecoder.shortcut
            and type(encoder).literal is not StreamEncoder.literal
            else None
        )
        self._literal = encoder.literal
        #: the repeat: (head, where the text starts, its pattern (None: the shape's own match), the client's
        #: pieces, the SSE decoder's room, what the decoder does with the token, the client encoder's writer
        #: where it keeps something per delta, the shape's match) of the delta the shortcut took last, while
        #: taking it again changes nothing else on either side
        self._repeat: _Repeat | None = None
        #: ``feed`` writes such a delta without asking either side; off (False) only to compare with (tests)
        self.repeats = True
        #: the shape of the last delta the shortcut took
        self._last: Any = None

    @property
    def encoder(self) -> StreamEncoder:
        return self._enc

    @property
    def events_in(self) -> int:
        """Upstream SSE events seen (diagnostics)."""
        return self._seen + self.repeated

    def feed(self, data: bytes) -> bytes:
        if self.phase is not _STREAMING:
            return self._feed_other(data)
        # the hot path (one call per upstream HTTP chunk). The delta the shortcut took last, again, while
        # that changes nothing on either side: its token between the client's pieces (the repeat); a learnt
        # delta frame goes from the decoder's ``shortcut`` to the encoder's ``literal`` as bytes (no parse, no
        # IR event); one upstream event giving one IR event goes straight from the decoder to the encoder (no
        # output list, no join); anything else: ``_events``
        try:
            rep = self._repeat
            if rep is not None:
                head, at, kept, pieces, room, keep, write, match = rep
                tok: bytes | None = None
                if len(data) <= room:
                    if kept is None:  # a shape with a slot before the text (``Shape.plain``): its own match
                        tok = match(data)
                    elif data.startswith(head):
                        m = kept.fullmatch(data, at)
                        if m is not None:
                            tok = m.group(1)
                            if not (tok.isascii() or _utf8(tok)):
                                tok = None
                if tok is not None:
                    if keep is not None:  # what the decoder does with the token (a call's fragment, a count)
                        keep(tok)
                    self.repeated += 1
                    return tok.join(pieces) if write is None else write(tok)
                self._repeat = None  # any other frame: the usual way (which may change what the repeat assumed)
            sc = self._short
            framer = self._sse
            # nothing pending in the SSE decoder and the chunk within its cap: the frame can be read alone
            # (the decoder's ``shortcut`` checks the frame's own bytes: LF-only lines of a learnt shape)
            if sc is not None and framer._clean and len(data) <= framer._room:
                out = sc(data, self._literal)
                if out is not None:
                    self._seen += 1
                    again = self._dec.repeat
                    if again is not None and self.repeats:
                        # the same shape twice in a row: a run (frames of parallel calls that alternate
                        # would end each other's repeat at every frame)
                        shape = again[0]
                        if shape is self._last:
                            self._repeat = self._plan_repeat(again, framer._room)
                        else:
                            self._last = shape
                    return out
            sse = self._sse.one(data)
            if sse is None:
                return self._events(self._sse.feed(data), None, ())
            self._seen += 1
            dec = self._dec
            irs = dec.feed(sse)
            if len(irs) == 1:
                ev = irs[0]
                if type(ev) not in _NOT_HOT:
                    chunk = self._enc.encode(ev)
                    if dec.done:
                        self.phase = _DONE
                    return chunk
            return self._events((), None, irs)  # the SSE event is consumed: its IR events go the general way
        except SSELimitError as e:  # the events before the line or event beyond the cap, then the error
            return self._events(e.events, e, ())
        except Exception as e:  # noqa: BLE001 - nothing may escape into mitmproxy's stream callable
            return self._to_error(self._describe(e))

    def _feed_other(self, data: bytes) -> bytes:
        """``feed`` in any phase but STREAMING."""
        phase = self.phase
        if phase is Phase.CLOSED:
            raise TranslatorStateError("feed() after close()")
        if phase is _ERROR or phase is _DONE:
            return b""  # after the terminal event (or an error) the rest of the upstream bytes are drained
        try:  # WAITING: the first events
            return self._events(self._sse.feed(data), None, ())
        except SSELimitError as e:
            return self._events(e.events, e, ())
        except Exception as e:  # noqa: BLE001 - nothing may escape into mitmproxy's stream callable
            return self._to_error(self._describe(e))

    def _events(self, events: Sequence[SSEEvent], over: SSELimitError | None, irs: Sequence[StreamEvent]) -> bytes:
        """The general loop: ``irs`` (the IR events of an SSE event already decoded), then ``events``;
        ``over``: the SSE decoder's cap was exceeded after ``events``."""
        if not events and over is None and not irs:
            return b""
        out: list[bytes] = []
        try:
            if irs:
                self._take_usage(irs)
            append = out.append
            encode = self._enc.encode
            dec = self._dec
            keepalive = KEEPALIVE
            for ev in irs:
                if type(ev) is StreamError:
                    append(self._to_error(ev.error))
                    return b"".join(out)
                append(encode(ev) if ev is not keepalive else self._enc.keepalive())
            dec_feed = dec.feed
            comment = COMMENT
            for sse in events:
                if sse is comment:
                    append(self._enc.keepalive())
                    continue
                self._seen += 1
                evs = dec_feed(sse)
                self._take_usage(evs)
                for ev in evs:
                    if type(ev) is StreamError:
                        append(self._to_error(ev.error))
                        return b"".join(out)
                    append(encode(ev) if ev is not keepalive else self._enc.keepalive())
                if dec.done:  # nothing may follow the terminal event on the client side
                    break
            if over is not None and not dec.done:
                return b"".join(out) + self._to_error(self._describe(over))
            # phase after the events: STREAMING once any event was seen, DONE once the decoder is done
            self.phase = _DONE if dec.done else _STREAMING
            return b"".join(out)
        except Exception as e:  # noqa: BLE001 - nothing may escape into mitmproxy's stream callable
            return b"".join(out) + self._to_error(self._describe(e))

    def close(self) -> bytes:
        """End of upstream bytes. Idempotent (HTTP/2 may signal the end twice)."""
        phase = self.phase
        if phase is Phase.CLOSED:
            return b""
        if phase is Phase.ERROR:
            self.phase = Phase.CLOSED
            return b""
        out = bytearray()
        try:
            for sse in self._sse.close() if phase is not Phase.DONE else ():
                if sse is COMMENT:
                    continue  # the end of the stream: no keepalive owed
                self._seen += 1
                evs = self._dec.feed(sse)
                self._take_usage(evs)
                for ev in evs:
                    if type(ev) is StreamError:
                        out += self._to_error(ev.error)
                        self.phase = Phase.CLOSED
                        return bytes(out)
                    if ev is not KEEPALIVE:
                        out += self._enc.encode(ev)
            evs = self._dec.close()
            self._take_usage(evs)
            for ev in evs:
                if type(ev) is StreamError:
                    out += self._to_error(ev.error)
                    self.phase = Phase.CLOSED
                    return bytes(out)
                out += self._enc.encode(ev)
            out += self._enc.close()
        except Exception as e:  # noqa: BLE001
            out += self._to_error(self._describe(e))
        self.phase = Phase.CLOSED
        return bytes(out)

    def fail(self, err: ErrorInfo) -> bytes:
        """An external fault (connection reset, idle timeout): emit the error frame unless one was sent."""
        if self.phase in (Phase.ERROR, Phase.CLOSED):
            self.phase = Phase.CLOSED
            return b""
        if self.phase is Phase.DONE:  # the answer was complete: finish it normally, no error after the end
            return self.close()
        out = self._to_error(err)
        self.phase = Phase.CLOSED
        return out

    # -- internals

    def _plan_repeat(self, again: Any, room: int) -> _Repeat | None:
        """The repeat of the delta the shortcut just took (the decoder's ``repeat``), when the client's encoder
        writes it as pieces around the token (``StreamEncoder.pieces``) or with a writer (``writer``)."""
        shape, kind, index, frags = again
        enc = self._enc
        pieces = enc.pieces(kind, index)
        write = enc.writer(kind, index) if pieces is None else None
        if pieces is None and write is None:
            return None
        keep = keeper(frags) if type(frags) is list else frags  # a call's fragment list, a function or None
        plain = shape.plain  # matched inline; else by the shape's own ``match``
        head, at, kept = plain if plain is not None else (b"", 0, None)
        return head, at, kept, pieces or [], room, keep, write, shape.match

    def _take_usage(self, events: Sequence[StreamEvent]) -> None:
        """Merge the usage of the ``MessageStart``/``MessageDelta`` among ``events`` (all the decoder gave)."""
        for ev in events:
            t = type(ev)
            if (t is MessageDelta or t is MessageStart) and ev.usage is not None:  # type: ignore[union-attr]
                self.usage = ev.usage if self.usage is None else self.usage.merged(ev.usage)  # type: ignore[union-attr]

    def _to_error(self, err: ErrorInfo) -> bytes:
        self.phase = Phase.ERROR
        overflow = recognise(err)
        if overflow is not None:  # an in-stream context overflow: the client's own overflow terms
            logger.warning("context overflow in the stream: the upstream said %s", logsafe(err.message, 500))
            err = overflow
        self.error_info = err
        try:
            return self._enc.error(err)
        except Exception:  # noqa: BLE001 - the encoder itself failed; log and give up on framing
            logger.exception("stream encoder failed to encode an error frame")
            return b""

    def _describe(self, e: Exception) -> ErrorInfo:
        if isinstance(e, SSELimitError):
            logger.warning("stream translation error: %s; the client's stream ends with an error event", e)
            return ErrorInfo(
                kind=ErrorKind.UPSTREAM_PROTOCOL,
                message=f"{e} (dragoman_max_sse_event): Dragoman ended the stream",
                status=502,
            )
        if isinstance(e, TranslationError):
            info = e.to_error_info()
            logger.warning("stream translation error: %s", logsafe(e))
            return info
        logger.exception("unexpected error in the stream translator")
        return ErrorInfo(
            kind=ErrorKind.API_ERROR,
            message=f"Dragoman failed to translate the upstream stream: {type(e).__name__}: {e}",
            status=500,
        )


class PassThrough:
    """Same protocol on both sides: bytes pass through untouched (``feed`` returns its input)."""

    __slots__ = ("phase", "report")

    def __init__(self) -> None:
        self.phase = Phase.STREAMING
        self.report = LossReport()  # nothing is translated, nothing is lost

    def feed(self, data: bytes) -> bytes:
        return data

    def close(self) -> bytes:
        self.phase = Phase.CLOSED
        return b""

    def fail(self, err: ErrorInfo) -> bytes:  # the client's own protocol; nothing to synthesize
        self.phase = Phase.CLOSED
        return b""


def ended_early(phase_name: str) -> UpstreamProtocolError:
    return UpstreamProtocolError(f"upstream stream ended before its terminal event (in phase {phase_name})")

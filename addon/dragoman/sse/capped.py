"""``CappedSSEDecoder``: the SSE decoder with a bound on what one line or event may make it hold.

An upstream that sends one endless line (or an event of endless ``data:`` lines) would otherwise be
buffered whole. With ``max_event`` the stream fails instead, as ``SSELimitError``, on a rule that does not
depend on how the bytes were chunked:

- a line (any field, a comment too) longer than ``max_event`` bytes, line end excluded, fails;
- an event whose data lines measure more than ``max_event`` fails; a data line measures its characters
  plus one (its line end), so an event of many tiny lines counts against the cap too.

The events completed before the failing line or event travel on the error (``SSELimitError.events``), so
the output before the error is the same whatever the chunking. Nothing beyond ``max_event`` plus one
chunk is ever buffered.

Cost: nothing on the whole-event fast paths (a chunk of whole events up to ``max_event`` bytes, the usual
case); a comparison and, while an event is pending across chunks, a sum over its data lines on the general
path; the careful path runs only when the pending bytes plus the chunk exceed ``max_event``.
"""

from __future__ import annotations

import re

from dragoman.sse.decoder import SSEDecoder
from dragoman.sse.events import COMMENT
from dragoman.sse.events import SSEEvent

_EOL = re.compile(rb"\r\n|\r|\n")
_base_general = SSEDecoder._general


class SSELimitError(ValueError):
    """A line or event is longer than the decoder's ``max_event``; ``events``: those completed before it."""

    def __init__(self, limit: int, events: list[SSEEvent]) -> None:
        super().__init__(f"an upstream SSE line or event exceeds {limit} bytes")
        self.limit = limit
        self.events = events


class CappedSSEDecoder(SSEDecoder):
    __slots__ = ("_max", "_pend")

    def __init__(self, max_event: int, comments: bool = False) -> None:
        super().__init__(comments=comments)
        if max_event <= 0:
            raise ValueError("max_event must be > 0")
        self._max = max_event
        self._room = max_event
        #: the measure of the pending event's data lines (0 when none is pending)
        self._pend = 0

    def _general(self, chunk: bytes) -> list[SSEEvent]:
        # the whole-event fast paths of ``feed`` only take chunks up to the cap (``_room``): the rest comes here
        if len(chunk) + len(self._buf) + self._pend <= self._max:
            # nothing in reach can exceed the cap: a line is at most the buffered part plus the chunk, an
            # event's measure at most what is pending plus the chunk (a character takes at least one byte)
            out = _base_general(self, chunk)
            if self._has_data:
                self._pend = self._measure()
            elif self._pend:
                self._pend = 0
            return out
        return self._feed_careful(chunk)

    def _measure(self) -> int:
        data = self._data
        return sum(map(len, data)) + len(data)

    def _feed_careful(self, chunk: bytes) -> list[SSEEvent]:
        cut = self._long_line_at(chunk)
        part = chunk if cut is None else chunk[:cut]
        out = _base_general(self, part) if part else []
        limit = self._max
        for i, ev in enumerate(out):
            if ev is not COMMENT and len(ev.data) + 1 > limit:
                self._fail(out[:i])
        if self._has_data:
            self._pend = self._measure()
            if self._pend > limit:
                self._fail(out)
        else:
            self._pend = 0
        if cut is not None:
            self._fail(out)
        return out

    def _long_line_at(self, chunk: bytes) -> int | None:
        """Where in ``chunk`` the first line longer than the cap starts (0 for a line begun in an earlier
        chunk), or None."""
        limit = self._max
        start = 1 if self._skip_lf and chunk[:1] == b"\n" else 0
        carried = len(self._buf)
        for m in _EOL.finditer(chunk, start):
            if carried + m.start() - start > limit:
                return start
            start, carried = m.end(), 0
        if carried + len(chunk) - start > limit:
            return start
        return None

    def _fail(self, before: list[SSEEvent]) -> None:
        """Drop what is buffered and raise; the decoder takes no more input."""
        self._buf = bytearray()
        self._data.clear()
        self._has_data = False
        self._pend = 0
        self._closed = True
        self._clean = False
        raise SSELimitError(self._max, before)

"""Incremental SSE decoder.

Lines are split on bytes first (CR, LF and CRLF, with a CRLF split across two chunks handled) and
decoded to UTF-8 one line at a time, so a multi-byte character split across chunks is safe: CR and
LF never occur inside a UTF-8 sequence. Invalid UTF-8 is replaced (U+FFFD) rather than raised, so a
broken byte cannot kill a stream; the JSON layer above reports what it cannot parse.
"""

from __future__ import annotations

from dragoman.sse.events import COMMENT
from dragoman.sse.events import SSEEvent

_CR = 13
_LF = 10
#: ``tuple.__new__`` builds an ``SSEEvent`` without the generated ``__new__``'s Python frame
_new_event = tuple.__new__
#: the raw ``event: NAME`` line -> NAME, for the whole-event fast path (a handful of names per protocol)
_NAMES: dict[bytes, str] = {}


def _name(line: bytes) -> str | None:
    """The event name of a raw ``event: NAME`` line, remembered (bounded: names are protocol constants);
    None when ``line`` is not an ``event: `` line."""
    if line[:7] != b"event: ":
        return None
    name = line[7:].decode("utf-8", "replace")
    if len(_NAMES) < 256:
        _NAMES[line] = name
    return name


class SSEDecoder:
    """``feed(bytes) -> list[SSEEvent]``; ``close() -> list[SSEEvent]`` flushes an unterminated last event.

    Memory is bounded by the longest single event: completed lines are handed on immediately.
    ``comments=True``: every comment line (``: keepalive``) is also returned, as the ``COMMENT`` sentinel in
    its place among the events, so a keepalive can be passed on when it arrives.
    """

    __slots__ = (
        "_buf",
        "_skip_lf",
        "_data",
        "_event",
        "_id",
        "_retry",
        "_has_data",
        "_closed",
        "_clean",
        "_comment",
        "_room",
        "comments",
    )

    def __init__(self, comments: bool = False) -> None:
        self._buf = bytearray()
        self._skip_lf = False
        self._data: list[str] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._has_data = False
        self._closed = False
        #: nothing pending (no buffered bytes, no CR to skip, no partial event, no retry), not closed:
        #: the only state in which the whole-event fast paths apply
        self._clean = True
        #: number of comment lines seen (``: keepalive``); exposed for diagnostics
        self.comments = 0
        #: what a comment line yields: the ``COMMENT`` sentinel, or nothing
        self._comment = COMMENT if comments else None
        #: the longest chunk the whole-event fast paths take (``CappedSSEDecoder`` lowers it to its cap)
        self._room = 1 << 62

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        ev = self.one(chunk)
        if ev is not None:
            return [ev]
        if self._clean and chunk[-2:] == b"\n\n" and 13 not in chunk and len(chunk) <= self._room:
            return self._whole_events(chunk)  # whole LF-only events, nothing pending
        return self._general(chunk)

    def one(self, chunk: bytes) -> SSEEvent | None:
        """The event ``chunk`` holds when it is exactly one whole event of the usual shape and nothing is
        pending (what an upstream sends per HTTP chunk: an optional ``event: E`` line, one ``data: X`` line,
        a blank line, LF only); otherwise None, and nothing was consumed: ``feed`` the chunk. The
        translator's hot path (no list); found with ONE bounded split (it stops at the second LF, however
        long the chunk)."""
        if self._clean and 13 not in chunk and len(chunk) <= self._room:
            p = chunk.split(b"\n", 2)
            if len(p) == 3:
                a, b, c = p
                if c == b"\n":  # ``a\nb\n\n``: ``event: E`` then ``data: X``
                    name = _NAMES.get(a)  # a known ``event: NAME`` line, or None
                    if name is None:
                        name = _name(a)
                    if name is not None and b[:6] == b"data: ":
                        try:  # strict decode (cheaper than "replace"); invalid UTF-8 takes the general path
                            return _new_event(SSEEvent, (b[6:].decode(), name, self._id, None))
                        except UnicodeDecodeError:
                            pass
                elif not c and not b and a[:6] == b"data: ":  # ``data: X\n\n``
                    try:
                        return _new_event(SSEEvent, (a[6:].decode(), None, self._id, None))
                    except UnicodeDecodeError:
                        pass
        return None

    def _general(self, chunk: bytes) -> list[SSEEvent]:
        """``_feed_lines``, then whether the whole-event fast paths apply to the next chunk."""
        out = self._feed_lines(chunk)
        self._clean = (
            not self._buf
            and not self._skip_lf
            and not self._has_data
            and self._event is None
            and self._retry is None
            and not self._closed
        )
        return out

    def _feed_lines(self, chunk: bytes) -> list[SSEEvent]:
        """The general line-by-line rules (any line ends, partial lines and events across chunks)."""
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() after close()")
        out: list[SSEEvent] = []
        if not chunk:
            return out
        if not self._skip_lf and 13 not in chunk:
            # fast path (LF-only input, the common case): split once, keep the unterminated tail
            lines = chunk.split(b"\n")
            tail = lines.pop()
            if self._buf:
                self._buf += lines[0] if lines else tail
                if lines:
                    lines[0] = bytes(self._buf)
                    self._buf.clear()
                else:
                    return out
            line_fn = self._line
            data = self._data
            for line in lines:
                if line[:6] == b"data: ":
                    data.append(line[6:].decode("utf-8", "replace"))
                    self._has_data = True
                elif line:
                    if line_fn(line) is not None:  # a comment (nothing else dispatches on a non-blank line)
                        out.append(COMMENT)
                elif self._has_data:
                    out.append(
                        SSEEvent(data[0] if len(data) == 1 else "\n".join(data), self._event, self._id, self._retry)
                    )
                    data.clear()
                    self._event = None
                    self._retry = None
                    self._has_data = False
                else:
                    self._event = None
            if tail:
                self._buf += tail
            return out
        start = 0
        n = len(chunk)
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == _LF:
                start = 1
        while start < n:
            # find the next CR or LF
            lf = chunk.find(b"\n", start)
            cr = chunk.find(b"\r", start, lf if lf != -1 else n)
            if cr != -1:
                end = cr
            elif lf != -1:
                end = lf
            else:
                self._buf += chunk[start:]
                break
            if self._buf:
                self._buf += chunk[start:end]
                line = bytes(self._buf)
                self._buf.clear()
            else:
                line = chunk[start:end]
            if chunk[end] == _CR:
                if end + 1 < n:
                    start = end + 2 if chunk[end + 1] == _LF else end + 1
                else:
                    self._skip_lf = True
                    start = n
            else:
                start = end + 1
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        return out

    def _whole_events(self, chunk: bytes) -> list[SSEEvent]:
        """``chunk`` is whole LF-only events (it ends with a blank line) and nothing is pending. Each
        ``\n\n``-separated block is one event: ``data: X`` and ``event: E\ndata: X`` are built
        directly, any other block goes line by line."""
        out: list[SSEEvent] = []
        append = out.append
        ident = self._id
        clean = True  # no retry value pending (the only state a dispatched block can leave behind)
        for block in chunk[:-2].split(b"\n\n"):
            if clean:
                if block[:6] == b"data: ":
                    if b"\n" not in block:
                        append(_new_event(SSEEvent, (block[6:].decode("utf-8", "replace"), None, ident, None)))
                        continue
                elif block[:7] == b"event: ":
                    nl = block.find(b"\n", 7)
                    if nl != -1 and block[nl + 1 : nl + 7] == b"data: " and block.find(b"\n", nl + 1) == -1:
                        data = block[nl + 7 :].decode("utf-8", "replace")
                        append(_new_event(SSEEvent, (data, block[7:nl].decode("utf-8", "replace"), ident, None)))
                        continue
            # anything else (comments, id/retry, multi-line data, blank runs): the general line rules;
            # the block is followed by an empty line, which dispatches
            line_fn = self._line
            for line in block.split(b"\n"):
                ev = line_fn(line)
                if ev is not None:  # a blank line inside the block (``\n\n\n`` runs)
                    append(ev)
            ev = line_fn(b"")
            if ev is not None:
                append(ev)
            ident = self._id
            clean = self._retry is None
        self._clean = clean
        return out

    def close(self) -> list[SSEEvent]:
        """End of input: a pending line is processed, and a pending event is dispatched."""
        if self._closed:
            return []
        self._clean = False
        out: list[SSEEvent] = []
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            ev = self._line(line)
            if ev is not None:
                out.append(ev)
        ev = self._line(b"")
        if ev is not None:
            out.append(ev)
        self._closed = True
        return out

    @property
    def pending(self) -> bool:
        """True when bytes of an incomplete event are buffered."""
        return bool(self._buf) or self._has_data or self._event is not None

    def _line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            if not self._has_data:
                # WHATWG: an event with no data is not dispatched; reset the event name
                self._event = None
                return None
            d = self._data
            ev = SSEEvent(d[0] if len(d) == 1 else "\n".join(d), self._event, self._id, self._retry)
            d.clear()
            self._event = None
            self._retry = None
            self._has_data = False
            return ev
        if raw[:6] == b"data: ":
            self._data.append(raw[6:].decode("utf-8", "replace"))
            self._has_data = True
            return None
        if raw[0] == 58:  # ':' comment
            self.comments += 1
            return self._comment
        line = raw.decode("utf-8", "replace")
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry":
            if value.isdigit():
                self._retry = int(value)
        # other field names are ignored, as the spec says
        return None

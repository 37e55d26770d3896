"""Live conformance linting: the strict protocol grammars run over a stream as its chunks pass.

``StreamLint(protocol)`` is sans-I/O: ``feed(chunk)`` and ``close()`` split the raw SSE bytes into frames
(WHATWG line rules, incremental UTF-8, only the current frame buffered) and send each frame to the
protocol's incremental checker (``<protocol>.stream_checker``). The first violation is kept as a
``Violation`` (event index and message) and checking stops there: each stream reports once.
``check_body`` does the same for a whole JSON body. ``strict=False`` applies the tolerant grammar
meant for real provider output (upstream streams).

The cheap path (``lint.replay``): complete frames are cut at their blank lines as bytes, or taken as the
chunks they came in (``feed_chunks``: a translator's output and most upstreams' reads hold one whole event
each); a run of frames that are a fully checked delta again with new values (its ``Template``) is accepted
in a few C-level calls for the whole run, without a parse per frame; any other frame goes through the full
check (the usual ``event:``/``data:`` shape read directly, anything else, or any stream with CR line ends,
through the line-by-line framing).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from typing import Any

from dragoman.lint import Checker
from dragoman.lint import EventError
from dragoman.lint import Summary
from dragoman.lint import anthropic
from dragoman.lint import chat
from dragoman.lint import gemini
from dragoman.lint import responses
from dragoman.lint.jsonarray import ArraySplitter
from dragoman.lint.replay import Template
from dragoman.lint.replay import learn
from dragoman.lint.sse import Frame

_LINES = re.compile(r"\r\n|\r|\n")
#: the longest incomplete frame held as bytes before the line-by-line framing takes over
_HOLD = 1 << 16
#: how many delta templates are tried (parallel tool calls interleave their argument deltas)
_TEMPLATES = 4
_CHECKERS = {
    "anthropic": anthropic.stream_checker,
    "chat": chat.stream_checker,
    "responses": responses.stream_checker,
    "gemini": gemini.stream_checker,
}
_BODIES: dict[str, Any] = {
    "anthropic": (anthropic.validate_message, anthropic.validate_error_body),
    "chat": (chat.validate_completion, chat.validate_error_body),
    "responses": (responses.validate_response, responses.validate_error_body),
    "gemini": (gemini.validate_response, gemini.validate_error_body),
}
PROTOCOLS = tuple(_CHECKERS)


@dataclass(frozen=True)
class Violation:
    #: 0-based index of the offending event (-1: framing or end of stream / whole body)
    index: int
    message: str

    def __str__(self) -> str:
        where = f"event #{self.index}" if self.index >= 0 else "stream"
        return f"{where}: {self.message}"


class StreamLint:
    """One stream's grammar check, fed bytes as they pass."""

    def __init__(self, protocol: str, *, strict: bool = True, array: bool = False, wrapped: bool | None = None) -> None:
        """``array``: a Gemini stream written as one JSON array (no ``alt=sse``), not SSE; ``wrapped``: its
        events are Code Assist's ``{"response": ...}`` (True), plain (False), either (None)."""
        self.protocol = protocol
        self.strict = strict
        self.violation: Violation | None = None
        summary = _FlatSummary()
        self._checker: Checker | None = (
            gemini.stream_checker(summary, strict, wrapped)
            if protocol == "gemini"
            else _CHECKERS[protocol](summary, strict)
        )
        next(self._checker)
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._pending = ""  # an incomplete line (or a lone CR that may start a CRLF)
        self._event: str | None = None
        self._data: list[str] = []
        self._has_data = False
        self._frames = 0
        self._buf = b""  # the incomplete frame after the last blank line (the cheap path)
        self._hot: Any = None  # what the checker said of the frame just sent (``replay.Hot``)
        #: the templates of the last deltas checked (``replay``), most recent first; any other event clears them
        self._tpls: list[Template] = []
        self._array = ArraySplitter() if array else None
        self._mixed = False  # bytes went to the line-by-line framing outside frame boundaries

    def feed(self, chunk: bytes) -> Violation | None:
        """Raw SSE bytes -> the first violation (returned once; later calls check nothing)."""
        if self._checker is None:
            return None
        if self._array is not None:
            return self._feed_array(chunk)
        if self._buf:
            chunk, self._buf = self._buf + chunk, b""
        if self._mixed:  # the line-by-line framing holds part of a line, a frame or a character
            if self._pending or self._has_data or self._event is not None or self._decoder.getstate()[0]:
                return self._feed_lines(chunk)
            self._mixed = False
        if b"\r" in chunk:
            self._mixed = True
            return self._feed_lines(chunk)
        cut = chunk.rfind(b"\n\n")
        if cut < 0:
            if len(chunk) > _HOLD:
                self._mixed = True
                return self._feed_lines(chunk)
            self._buf = chunk
            return None
        if cut + 2 < len(chunk):
            self._buf = chunk[cut + 2 :]
        return self._frames_of(chunk[:cut].split(b"\n\n"))

    def feed_chunks(self, chunks: list[bytes]) -> Violation | None:
        """``feed`` of each chunk in turn; a run of chunks that each hold one whole frame of a template is
        taken at once (what a translator's output and most upstreams' reads are: one event per chunk)."""
        if self._checker is None:
            return None
        if self._array is not None:
            return self._feed_array(b"".join(chunks))
        i, n = 0, len(chunks)
        while i < n:
            if self._tpls and not self._buf and not self._mixed:
                got = self._replay(chunks, i, True)
                if got:
                    i += got
                    continue
            v = self.feed(chunks[i])
            i += 1
            if self._checker is None:
                return v
        return None

    def _frames_of(self, frames: list[bytes]) -> Violation | None:
        """Complete frames (without their blank line), through the templates or the full check."""
        i, n = 0, len(frames)
        while i < n:
            if self._tpls:
                got = self._replay(frames, i, False)
                if got:
                    i += got
                    continue
            raw = frames[i]
            i += 1
            frames_before, self._hot = self._frames, None
            frame = self._frame(raw)
            if frame is not None:
                self._frames += 1
                v = self.violation if self._send(frame) else None
            else:
                v = self._feed_lines(raw + b"\n\n")
            if self._checker is None:  # a violation, or the checker's end ([DONE])
                return v
            if self._frames != frames_before:  # a frame was checked (not a comment)
                self._learn(raw)
        return None

    def _frame(self, raw: bytes) -> Frame | None:
        """A whole frame of the usual shape (``data: X``, or ``event: E`` then ``data: X``; LF only, valid
        UTF-8) read without the line-by-line framing (same result), or None: anything else takes it."""
        if self._pending or self._decoder.getstate()[0]:
            return None
        nl = raw.find(b"\n")
        try:
            if nl < 0:
                if raw[:6] == b"data: ":
                    return Frame(None, raw[6:].decode(), self._frames)
            elif raw[:7] == b"event: " and raw[nl + 1 : nl + 7] == b"data: " and raw.find(b"\n", nl + 1) < 0:
                return Frame(raw[7:nl].decode(), raw[nl + 7 :].decode(), self._frames)
        except UnicodeDecodeError:
            pass
        return None

    def _replay(self, units: list[bytes], i: int, whole: bool) -> int:
        """How many frames from ``units[i]`` a template takes (0: none)."""
        tpls = self._tpls
        first = units[i]
        for k, tpl in enumerate(tpls):
            if first.startswith(tpl.head):
                count = tpl.run(units, i, whole)
                if count:
                    if k:
                        tpls.insert(0, tpls.pop(k))
                    self._frames += count
                    return count
        return 0

    def _learn(self, raw: bytes) -> None:
        """After a full check: a delta adds its template (the grammar state is as it was, plus its string),
        or its key to the template of the same shape; any other event changes the state the templates were
        cut in, and clears them."""
        hot = self._hot
        tpl = learn(raw, hot) if hot else None
        if tpl is None:
            self._tpls = []
            return
        tpls = self._tpls
        if tpl.src is not None:  # the event extends an open call: the same event for another call is one template
            paths = [path for path, _, _ in tpl.src[1]]
            for k, old in enumerate(tpls):
                if old.is_keyed:
                    keyed: Template | None = old
                elif old.src is not None and [path for path, _, _ in old.src[1]] == paths:
                    keyed = old.keyed()
                else:
                    continue
                new = tpl.keyed()
                if keyed is not None and new is not None and keyed.merge(new):
                    tpls.pop(k)
                    tpls.insert(0, keyed)
                    return
        self._tpls = [tpl, *tpls[: _TEMPLATES - 1]]

    def _feed_array(self, chunk: bytes) -> Violation | None:
        assert self._array is not None
        try:
            elements = self._array.feed(chunk)
        except AssertionError as e:
            return self._fail(str(e))
        for elem in elements:
            frame = Frame(None, elem, self._frames)
            self._frames += 1
            if self._send(frame):
                return self.violation
        return None

    def _feed_lines(self, chunk: bytes) -> Violation | None:
        """The line-by-line framing (any line ends, any chunking)."""
        try:
            text = self._pending + self._decoder.decode(chunk)
        except UnicodeDecodeError as e:
            return self._fail(f"not valid UTF-8: {e}")
        hold = ""
        if text.endswith("\r"):  # maybe the first half of a CRLF
            text, hold = text[:-1], "\r"
        parts = _LINES.split(text)
        self._pending = parts.pop() + hold
        return self._lines(parts)

    def close(self) -> Violation | None:
        """The end of the stream -> a new violation (None: none, or it was already returned)."""
        if self._checker is None:
            return None
        if self._array is not None:
            try:
                self._array.close()
            except AssertionError as e:
                return self._fail(str(e), -1)
            return self._end()
        if self._buf:
            chunk, self._buf = self._buf, b""
            if self._feed_lines(chunk) is not None:
                return self.violation
        try:
            tail = self._pending + self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            return self._fail(f"not valid UTF-8 at the end: {e}")
        if tail.strip("\r\n") or self._has_data:
            if self.strict:
                return self._fail("the stream does not end with a blank line (unterminated last event)")
            if self._lines([*_LINES.split(tail.rstrip("\r\n")), ""]) is not None:
                return self.violation
        return self._end()

    def _end(self) -> Violation | None:
        assert self._checker is not None
        try:
            self._checker.send(None)
        except StopIteration:
            pass
        except AssertionError as e:
            return self._fail(str(e), e.index if isinstance(e, EventError) else -1)
        self._checker = None
        return None

    def _lines(self, lines: list[str]) -> Violation | None:
        for line in lines:
            if line == "":
                if self._has_data:
                    frame = Frame(self._event, "\n".join(self._data), self._frames)
                    self._frames += 1
                    self._event, self._data, self._has_data = None, [], False
                    if self._send(frame):
                        return self.violation
                elif self.strict and self._event is not None:
                    return self._fail(f"event {self._event!r} has no data line")
                self._event = None
                continue
            if line.startswith(":"):
                if self.strict and (line != ": keepalive" or self._has_data or self._event is not None):
                    return self._fail(f"comment line {line[:60]!r} (only ': keepalive', between events)")
                continue
            name, sep, value = line.partition(":")
            if self.strict and (not sep or not value.startswith(" ")):
                return self._fail(f"malformed field line {line[:80]!r}")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                self._data.append(value)
                self._has_data = True
            elif name == "event":
                if self.strict and self._event is not None:
                    return self._fail("two event: lines in one frame")
                self._event = value
            elif self.strict and name not in ("id", "retry"):
                return self._fail(f"unknown SSE field {name!r}")
        return None

    def _send(self, frame: Frame) -> bool:
        assert self._checker is not None
        try:
            self._hot = self._checker.send(frame)
        except StopIteration:
            self._checker = None
            if frame.data != "[DONE]":
                self._fail("event after the end of the stream", frame.n)
            return True
        except AssertionError as e:
            self._fail(str(e), e.index if isinstance(e, EventError) else frame.n)
            return True
        return False

    def _fail(self, message: str, index: int | None = None) -> Violation:
        self.violation = Violation(self._frames if index is None else index, message)
        self._checker = None
        return self.violation


class _FlatSummary(Summary):
    """A Summary that keeps no text: live linting holds only the grammar state, not the content. The
    thinking text is kept (Chat's strict grammar compares it with ``reasoning_details``), as pieces."""

    def __init__(self) -> None:
        self._thinking: list[str] = []
        super().__init__()

    @property
    def text(self) -> str:
        return ""

    @text.setter
    def text(self, value: str) -> None:
        pass

    @property
    def thinking(self) -> str:
        if len(self._thinking) > 1:
            self._thinking[:] = ["".join(self._thinking)]
        return self._thinking[0] if self._thinking else ""

    @thinking.setter
    def thinking(self, value: str) -> None:
        self._thinking[:] = [value]

    def add_thinking(self, pieces: list[str]) -> None:
        self._thinking.extend(pieces)


def check_body(protocol: str, body: bytes, *, error: bool = False, strict: bool = True) -> Violation | None:
    """A whole JSON body (``error``: an HTTP error body) -> its first violation, or None."""
    ok, err = _BODIES[protocol]
    try:
        (err if error else ok)(body, strict=strict)
    except (AssertionError, ValueError, TypeError, KeyError) as e:
        return Violation(-1, str(e))
    return None

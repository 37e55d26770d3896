"""Live conformance linting: the strict protocol grammars run over a stream as its chunks pass.

``StreamLint(protocol)`` is sans-I/O: ``feed(chunk)`` and ``close()`` split the raw SSE bytes into frames
(WHATWG line rules, incremental UTF-8, only the current frame buffered) and send each frame to the
protocol's incremental checker (``<protocol>.stream_checker``). The first violation is kept as a
``Violation`` (event index and message) and checking stops there: each stream reports once.
``check_body`` does the same for a whole JSON body. ``strict=False`` applies the tolerant grammar
meant for real provider output (upstream streams).
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
from dragoman.lint.sse import Frame

_LINES = re.compile(r"\r\n|\r|\n")
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

    def __init__(self, protocol: str, *, strict: bool = True) -> None:
        self.protocol = protocol
        self.strict = strict
        self.violation: Violation | None = None
        self._checker: Checker | None = _CHECKERS[protocol](_FlatSummary(), strict)
        next(self._checker)
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._pending = ""  # an incomplete line (or a lone CR that may start a CRLF)
        self._event: str | None = None
        self._data: list[str] = []
        self._has_data = False
        self._frames = 0

    def feed(self, chunk: bytes) -> Violation | None:
        """Raw SSE bytes -> the first violation (returned once; later calls check nothing)."""
        if self._checker is None:
            return None
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
        try:
            tail = self._pending + self._decoder.decode(b"", final=True)
        except UnicodeDecodeError as e:
            return self._fail(f"not valid UTF-8 at the end: {e}")
        if tail.strip("\r\n") or self._has_data:
            if self.strict:
                return self._fail("the stream does not end with a blank line (unterminated last event)")
            if self._lines([*_LINES.split(tail.rstrip("\r\n")), ""]) is not None:
                return self.violation
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
            self._checker.send(frame)
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
    """A Summary that keeps no text: live linting holds only the grammar state, not the content."""

    @property
    def text(self) -> str:
        return ""

    @text.setter
    def text(self, value: str) -> None:
        pass


def check_body(protocol: str, body: bytes, *, error: bool = False, strict: bool = True) -> Violation | None:
    """A whole JSON body (``error``: an HTTP error body) -> its first violation, or None."""
    ok, err = _BODIES[protocol]
    try:
        (err if error else ok)(body, strict=strict)
    except (AssertionError, ValueError, TypeError, KeyError) as e:
        return Violation(-1, str(e))
    return None

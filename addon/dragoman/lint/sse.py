"""An independent, strict SSE frame parser for the validators (deliberately NOT dragoman.sse).

``parse_sse(data)`` splits raw bytes into ``Frame``s following the WHATWG rules (LF, CRLF or CR line
ends; ``:`` comments; ``data`` lines joined by ``\\n``). In strict mode (what our encoders must produce)
it also rejects: invalid UTF-8, unknown field names, comments other than a ``: keepalive`` between events, a field line without a space after the
colon, and a stream that does not end with a blank line (an unterminated last event).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Frame:
    event: str | None
    data: str
    #: ordinal of the frame in the stream (0-based), for messages
    n: int

    def json(self) -> Any:
        try:
            return orjson.loads(self.data)
        except ValueError as e:
            raise AssertionError(
                f"frame #{self.n} ({self.event or 'no event'}): data is not JSON: {e}: {self.data[:200]!r}"
            ) from e


def parse_sse(data: bytes, *, strict: bool = True) -> tuple[list[Frame], int]:
    """-> (frames, number of comment lines). Raises AssertionError on a framing violation."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AssertionError(f"SSE body is not valid UTF-8: {e}") from e
    if strict and text and not (text.endswith("\n\n") or text.endswith("\r\n\r\n") or text.endswith("\r\r")):
        raise AssertionError(f"SSE body does not end with a blank line (unterminated last event): ...{text[-80:]!r}")
    lines = _LINE_END.split(text)
    frames: list[Frame] = []
    comments = 0
    event: str | None = None
    buf: list[str] = []
    has_data = False
    for lineno, line in enumerate(lines, 1):
        if line == "":
            if has_data:
                frames.append(Frame(event, "\n".join(buf), len(frames)))
            elif strict and event is not None:
                raise AssertionError(f"line {lineno}: event {event!r} has no data line")
            event, buf, has_data = None, [], False
            continue
        if line.startswith(":"):
            # our encoders emit one comment only, the keepalive of Chat/Responses clients, between events
            if strict and (line != ": keepalive" or has_data or event is not None):
                raise AssertionError(
                    f"line {lineno}: comment line {line[:60]!r} (our encoders emit only ': keepalive', between events)"
                )
            comments += 1
            continue
        name, sep, value = line.partition(":")
        if strict and not sep:
            raise AssertionError(f"line {lineno}: field line without a colon: {line[:80]!r}")
        if strict and not value.startswith(" "):
            raise AssertionError(f"line {lineno}: no space after {name!r}: (the SDKs tolerate it, we always emit it)")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            buf.append(value)
            has_data = True
        elif name == "event":
            if strict and event is not None:
                raise AssertionError(f"line {lineno}: two event: lines in one frame")
            event = value
        elif name in ("id", "retry"):
            pass
        elif strict:
            raise AssertionError(f"line {lineno}: unknown SSE field {name!r}")
    if has_data:  # unterminated last event (tolerated only when not strict)
        frames.append(Frame(event, "\n".join(buf), len(frames)))
    return frames, comments

"""HTTP/1.1 framing for the relay, on asyncio streams: message heads, and bodies read chunk by chunk.

Hand-written rather than h11 because it sits on every streamed event twice (upstream -> relay -> mitmproxy):
measured per 130-byte event, h11 costs 5.3 µs to receive and 2.1 µs to send a chunk; a
``readuntil``/``readexactly`` pair and a ``%x`` frame cost a fraction of that. Only what the relay needs:
``Content-Length``, ``chunked`` (extensions and trailers skipped) and close-delimited bodies.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

#: the largest request head Dragoman passes through its relay (``head_size``); a longer one is answered 431.
#: mitmproxy itself reads an HTTP/1 head of any size and an HTTP/2 header list up to 64 KiB (h2's default)
HEAD_LIMIT = 1 << 20
#: what the relay's readers accept (its ``StreamReader`` limit): the head limit plus room for what Translate
#: changes on the way (the relay token, the Host header)
MAX_HEAD = HEAD_LIMIT + (64 << 10)
_CRLF = b"\r\n"


class FramingError(ConnectionError):
    """A message the peer framed wrongly, or a body cut short."""


async def read_head(reader: asyncio.StreamReader) -> tuple[str, list[tuple[str, str]]] | None:
    """The start line and headers (names lower-cased); None when the peer closed before a new message."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise FramingError("connection closed inside a message head") from e
    except asyncio.LimitOverrunError as e:
        raise FramingError("message head too large") from e
    lines = raw[:-4].decode("latin-1").split("\r\n")
    while lines and not lines[0]:  # tolerate stray blank lines between messages
        lines.pop(0)
    if not lines:
        raise FramingError("empty message head")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise FramingError(f"malformed header line {line[:80]!r}")
        headers.append((name.lower(), value.strip()))
    return lines[0], headers


def head_size(start_line: int, fields: Iterable[tuple[bytes, bytes]]) -> int:
    """The bytes of an HTTP/1.1 head: a start line of ``start_line`` bytes, ``name: value`` lines, a blank line."""
    return start_line + 2 + sum(len(k) + len(v) + 4 for k, v in fields) + 2


def header(headers: list[tuple[str, str]], name: str) -> str | None:
    for k, v in headers:
        if k == name:
            return v
    return None


def encode_head(start: str, headers: list[tuple[str, str]]) -> bytes:
    parts = [start]
    for k, v in headers:
        if "\r" in v or "\n" in v or "\r" in k or "\n" in k:
            raise ValueError(f"header {k!r} holds a line break")
        parts.append(f"{k}: {v}")
    parts.append("\r\n")
    return "\r\n".join(parts).encode("latin-1")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"


class BodyReader:
    """A message body, piece by piece as it arrives: one chunk of a chunked body per call (so an upstream
    that sends one event per chunk is passed on event by event), up to 64 KiB otherwise."""

    __slots__ = ("_reader", "_mode", "_left", "done", "_has_body")

    def __init__(self, reader: asyncio.StreamReader, headers: list[tuple[str, str]], *, has_body: bool = True) -> None:
        self._reader = reader
        self._has_body = has_body
        self.done = not has_body
        te = (header(headers, "transfer-encoding") or "").lower()
        length = header(headers, "content-length")
        if "chunked" in te:
            self._mode, self._left = "chunked", 0
        elif length is not None:
            try:
                self._left = int(length)
            except ValueError:
                raise FramingError(f"bad content-length {length!r}") from None
            if self._left < 0:
                raise FramingError(f"bad content-length {length!r}")
            self._mode = "length"
            self.done = self.done or self._left == 0
        else:
            self._mode, self._left = "eof", 0

    def reusable(self) -> bool:
        """Read to its end, and the end was framed (a body up to the connection's end leaves nothing to reuse)."""
        return self.done and not (self._has_body and self._mode == "eof")

    async def next(self) -> bytes | None:
        """The next piece, or None at the end of the body. Raises ``FramingError`` for a cut or broken body."""
        if self.done:
            return None
        try:
            if self._mode == "chunked":
                return await self._next_chunk()
            if self._mode == "length":
                data = await self._reader.read(min(self._left, 65536))
                if not data:
                    raise FramingError(f"body ended {self._left} bytes early")
                self._left -= len(data)
                self.done = self._left == 0
                return data
            data = await self._reader.read(65536)
            if not data:
                self.done = True
                return None
            return data
        except asyncio.IncompleteReadError as e:
            raise FramingError("body cut short") from e
        except asyncio.LimitOverrunError as e:
            raise FramingError("malformed chunk") from e

    async def _next_chunk(self) -> bytes | None:
        reader = self._reader
        while True:
            line = await reader.readuntil(_CRLF)
            size_text = line[:-2].split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise FramingError(f"bad chunk size {size_text[:20]!r}") from None
            if size == 0:
                while (await reader.readuntil(_CRLF)) != _CRLF:  # trailers
                    pass
                self.done = True
                return None
            data = await reader.readexactly(size + 2)
            if data[-2:] != _CRLF:
                raise FramingError("chunk not followed by CRLF")
            if size:
                return data[:-2]

    async def drain(self, limit: int) -> bytes:
        """The rest of the body, up to ``limit`` bytes (for a request body the relay does not need)."""
        out = bytearray()
        while (piece := await self.next()) is not None:
            if len(out) < limit:
                out += piece
        return bytes(out[:limit])

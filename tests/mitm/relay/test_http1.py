"""The relay's HTTP/1.1 framing over asyncio streams, fed in every split (byte by byte included)."""

from __future__ import annotations

import asyncio

import pytest

from dragoman.mitm.relay import http1

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
BODY = b"a;ext=1\r\n0123456789\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n"


def splits(data: bytes) -> list[list[bytes]]:
    return [[data], [data[i : i + 1] for i in range(len(data))], [data[:7], data[7:30], data[30:]]]


async def feed_and_read(pieces: list[bytes], mode_headers: list[tuple[str, str]] | None = None, eof: bool = True):
    reader = asyncio.StreamReader()

    async def feeder():
        for p in pieces:
            reader.feed_data(p)
            await asyncio.sleep(0)
        if eof:
            reader.feed_eof()

    task = asyncio.create_task(feeder())
    head = await http1.read_head(reader)
    assert head is not None
    start, headers = head
    body = http1.BodyReader(reader, mode_headers or headers)
    out = []
    while (piece := await body.next()) is not None:
        out.append(piece)
    await task
    return start, headers, out


@pytest.mark.parametrize("pieces", splits(HEAD + BODY), ids=["whole", "bytewise", "three"])
def test_chunked_one_piece_per_chunk_under_any_split(pieces):
    start, headers, out = asyncio.run(feed_and_read(pieces))
    assert start == "HTTP/1.1 200 OK"
    assert ("content-type", "text/event-stream") in headers
    assert out == [b"0123456789", b"abc"]  # chunk boundaries kept: one upstream event per piece


def test_content_length_and_close_delimited():
    data = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"
    _, _, out = asyncio.run(feed_and_read([data]))
    assert b"".join(out) == b"hello"
    data = b"HTTP/1.1 200 OK\r\n\r\nuntil the end"
    _, _, out = asyncio.run(feed_and_read([data]))
    assert b"".join(out) == b"until the end"


@pytest.mark.parametrize(
    "data",
    [
        HEAD + b"a\r\n0123",  # cut inside a chunk
        HEAD + b"zz\r\n",  # bad size
        HEAD + b"3\r\nabcXY",  # no CRLF after the data
        b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort",
    ],
)
def test_broken_bodies_raise_framing_errors(data):
    with pytest.raises(http1.FramingError):
        asyncio.run(feed_and_read([data]))


def test_head_errors_and_clean_close():
    async def run(data: bytes):
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await http1.read_head(reader)

    assert asyncio.run(run(b"")) is None
    with pytest.raises(http1.FramingError):
        asyncio.run(run(b"HTTP/1.1 200 OK\r\nbroken header\r\n\r\n"))
    with pytest.raises(http1.FramingError):
        asyncio.run(run(b"HTTP/1.1 200 OK\r\nx: y"))


def test_encode_head_refuses_header_injection():
    assert http1.encode_head("GET / HTTP/1.1", [("a", "b")]) == b"GET / HTTP/1.1\r\na: b\r\n\r\n"
    with pytest.raises(ValueError):
        http1.encode_head("GET / HTTP/1.1", [("a", "b\r\nx-evil: 1")])
    assert http1.chunk(b"abc") == b"3\r\nabc\r\n"

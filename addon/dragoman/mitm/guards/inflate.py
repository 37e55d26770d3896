"""Bounded inflation of a compressed request body (``Content-Encoding``: gzip, deflate, br, zstd).

mitmproxy's ``request.content`` decodes in one call, with no bound: a 1 MiB gzip body of zeros becomes a
gigabyte in memory. Here every codec is driven piece by piece with an output bound, so at most ``limit``
bytes (plus one piece) are ever produced before the body is refused with ``TooLarge``.

Two caps: the inflated size (``limit``) and the expansion ratio (``ratio``, inflated / compressed bytes,
checked once the output passes ``RATIO_FLOOR`` so small bodies never trip it).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import brotli  # type: ignore[import-untyped]

#: output produced per step (and the most a cap can be overshot by)
PIECE = 256 * 1024
#: below this many inflated bytes the ratio is not checked (a small body is harmless whatever its ratio)
RATIO_FLOOR = 1 << 20

#: the encodings inflated here (mitmproxy's own names); ``identity``/``none`` pass through
ENCODINGS = frozenset({"gzip", "x-gzip", "deflate", "deflateraw", "br", "zstd"})


class TooLarge(Exception):
    """The body inflates beyond a cap (answered 413)."""


class BadEncoding(Exception):
    """The body is not valid data of its declared encoding, or the encoding is unknown (answered 400)."""


def inflate(data: bytes, encoding_header: str, limit: int, ratio: int) -> bytes:
    """``data`` decoded through every encoding of the ``Content-Encoding`` header (applied last first)."""
    names = [e.strip().lower() for e in encoding_header.split(",") if e.strip()]
    out = data
    for name in reversed(names):
        if name in ("identity", "none"):
            continue
        if name not in ENCODINGS:
            raise BadEncoding(f"unsupported content-encoding {name!r}")
        out = _bounded(_pieces(name, out), len(out), name, limit, ratio)
    return out


def _bounded(pieces: Iterator[bytes], size_in: int, name: str, limit: int, ratio: int) -> bytes:
    buf = bytearray()
    try:
        for piece in pieces:
            buf += piece
            n = len(buf)
            if n > limit:
                raise TooLarge(f"the {name}-encoded request body inflates beyond {limit} bytes")
            if ratio and n > RATIO_FLOOR and n > ratio * max(size_in, 1):
                raise TooLarge(f"the {name}-encoded request body inflates more than {ratio} times its size")
    except (zlib.error, brotli.error, EOFError, ValueError) as e:
        raise BadEncoding(f"the request body is not valid {name} data: {e}") from e
    except Exception as e:
        if type(e).__name__ == "ZstdError":  # zstandard's error type, whichever zstd module is in use
            raise BadEncoding(f"the request body is not valid {name} data: {e}") from e
        raise
    return bytes(buf)


def _pieces(name: str, data: bytes) -> Iterator[bytes]:
    if name == "br":
        return _brotli(data)
    if name == "zstd":
        return _zstd(data)
    if name == "deflate":
        # RFC 9110 deflate is zlib-wrapped; some clients send raw deflate (mitmproxy accepts both)
        return _zlib(data, zlib.MAX_WBITS if data[:1] and (data[0] & 0x0F) == 8 else -zlib.MAX_WBITS)
    if name == "deflateraw":
        return _zlib(data, -zlib.MAX_WBITS)
    return _zlib(data, zlib.MAX_WBITS | 32)  # gzip or zlib header, detected


def _zlib(data: bytes, wbits: int) -> Iterator[bytes]:
    d = zlib.decompressobj(wbits)
    rest = data
    while True:
        piece = d.decompress(rest, PIECE)
        rest = d.unconsumed_tail
        if piece:
            yield piece
        if d.eof:
            rest = d.unused_data
            if not rest.strip(b"\0"):
                return
            d = zlib.decompressobj(wbits)  # concatenated gzip members, as gzip.decompress accepts
        elif not rest and not piece:
            raise ValueError("truncated data")


def _brotli(data: bytes) -> Iterator[bytes]:
    d = brotli.Decompressor()
    if _brotli_has_limit():
        piece = d.process(data, output_buffer_limit=PIECE)
        while True:
            if piece:
                yield piece
            if d.is_finished() or d.can_accept_more_data():
                break
            piece = d.process(b"", output_buffer_limit=PIECE)
    else:
        # brotli < 1.2 (Python 3.11 with mitmproxy 11): no output bound; small input steps keep each bounded
        for i in range(0, len(data), 1024):
            piece = d.process(data[i : i + 1024])
            if piece:
                yield piece
    if not d.is_finished():
        raise ValueError("truncated data")


_BROTLI_LIMIT: list[bool] = []


def _brotli_has_limit() -> bool:
    if not _BROTLI_LIMIT:
        try:
            brotli.Decompressor().process(b"", output_buffer_limit=1)
            _BROTLI_LIMIT.append(True)
        except TypeError:
            _BROTLI_LIMIT.append(False)
    return _BROTLI_LIMIT[0]


def _zstd_module() -> tuple[str, Any]:
    for mod in ("compression.zstd", "backports.zstd"):
        try:
            return "std", __import__(mod, fromlist=["ZstdDecompressor"])
        except ImportError:
            continue
    import zstandard

    return "zstandard", zstandard


def _zstd(data: bytes) -> Iterator[bytes]:
    kind, mod = _zstd_module()
    if kind == "zstandard":
        reader = mod.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        while piece := reader.read(PIECE):
            yield piece
        return
    rest = data
    while rest:
        d = mod.ZstdDecompressor()
        piece = d.decompress(rest, PIECE)
        while True:
            if piece:
                yield piece
            if d.eof or d.needs_input:
                break
            piece = d.decompress(b"", PIECE)
        if not d.eof:
            raise ValueError("truncated data")
        rest = d.unused_data  # concatenated frames

"""A minimal fake LLM upstream for the benchmark: asyncio, HTTP/1.1, keep-alive, 127.0.0.1 only.

``POST .../messages`` answers an Anthropic stream, ``.../chat/completions`` a Chat stream and
``.../responses`` a Responses stream (see ``streams.py``), chunked with ONE SSE event per HTTP chunk,
written as fast as the socket takes it (all chunks are pre-framed and written at once). The number
of events comes from the request's model name ``bench-n<N>`` (it survives translation); default 20.

Run: ``python bench/fake_upstream.py [--port 0]``; prints ``PORT <n>`` on stdout, and exits when its
stdin closes (so it never outlives the benchmark that started it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import threading

import streams

_MODEL_RE = re.compile(rb'"model"\s*:\s*"bench-n(\d+)"')
_CACHE: dict[tuple[str, int], bytes] = {}
_CACHE_MAX_BYTES = 400 * 1024 * 1024
_cache_bytes = 0


def protocol_for_path(path: str) -> str | None:
    p = path.split("?", 1)[0].rstrip("/")
    if p.endswith("/messages"):
        return streams.ANTHROPIC
    if p.endswith("/chat/completions"):
        return streams.CHAT
    if p.endswith("/responses"):
        return streams.RESPONSES
    return None


def framed(protocol: str, n: int) -> bytes:
    """The chunked body (one event per chunk, then the terminating chunk), cached."""
    global _cache_bytes
    key = (protocol, n)
    body = _CACHE.get(key)
    if body is None:
        events = streams.generate(protocol, n)
        body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
        if _cache_bytes + len(body) <= _CACHE_MAX_BYTES:
            _CACHE[key] = body
            _cache_bytes += len(body)
    return body


_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"content-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n"
    b"x-request-id: req_bench\r\n"
    b"\r\n"
)


async def _read_body(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> bytes:
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        parts = []
        while True:
            line = await reader.readuntil(b"\r\n")
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                return b"".join(parts)
            parts.append(await reader.readexactly(size))
            await reader.readexactly(2)
    n = int(headers.get(b"content-length", b"0"))
    return await reader.readexactly(n) if n else b""


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = head.split(b"\r\n")
            method, path, _ = lines[0].split(b" ", 2)
            headers = {}
            for ln in lines[1:]:
                if b":" in ln:
                    k, v = ln.split(b":", 1)
                    headers[k.strip().lower()] = v.strip()
            body = await _read_body(reader, headers)
            proto = protocol_for_path(path.decode("latin-1"))
            if method != b"POST" or proto is None:
                msg = b'{"error":{"type":"not_found_error","message":"bench upstream: unknown path"}}'
                writer.write(
                    b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(msg), msg)
                )
                await writer.drain()
                if headers.get(b"connection", b"").lower() == b"close":
                    return
                continue
            m = _MODEL_RE.search(body)
            n = int(m.group(1)) if m else 20
            writer.write(_HEAD)
            writer.write(framed(proto, n))
            await writer.drain()
            if headers.get(b"connection", b"").lower() == b"close":
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        try:
            writer.close()
        except Exception:  # noqa: BLE001
            pass


def _exit_when_stdin_closes() -> None:
    try:
        while sys.stdin.buffer.read(1):
            pass
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


async def main(port: int, prewarm: list[tuple[str, int]]) -> None:
    for proto, n in prewarm:
        framed(proto, n)
    server = await asyncio.start_server(handle, "127.0.0.1", port, limit=1 << 20, backlog=256)
    real_port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {real_port}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--prewarm", default="", help="comma list of N to pre-generate for every protocol")
    a = ap.parse_args()
    pre = [(p, int(n)) for n in a.prewarm.split(",") if n for p in streams.PROTOCOLS]
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    try:
        asyncio.run(main(a.port, pre))
    except KeyboardInterrupt:
        pass

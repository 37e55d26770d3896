"""Raw-socket HTTP/1.1 clients for the benchmark (blocking and asyncio), reading as fast as possible.

One request per connection (``connection: close``), the body is read until EOF. Timing starts once the
TCP connection is up, right before the request is sent:

* ``t_headers``: the response head is complete;
* ``t_first``: the first body byte has arrived (for an SSE stream: the first event);
* ``t_total``: EOF.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass

_BUF = 1 << 20


@dataclass
class Fetch:
    status: int
    t_headers: float
    t_first: float | None
    t_total: float
    body_bytes: int
    chunked: bool
    complete: bool  # chunked: the terminating chunk arrived
    body: bytes | None = None  # de-chunked body, when asked for


def build_request(path: str, body: bytes, host: str = "127.0.0.1") -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\n"
        f"host: {host}\r\n"
        "content-type: application/json\r\n"
        "accept: text/event-stream\r\n"
        "x-api-key: sk-bench\r\n"
        "anthropic-version: 2023-06-01\r\n"
        "authorization: Bearer sk-bench\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n"
        "\r\n"
    )
    return head.encode() + body


def dechunk(raw: bytes) -> bytes:
    out = bytearray()
    i = 0
    n = len(raw)
    while i < n:
        j = raw.index(b"\r\n", i)
        size = int(raw[i:j].split(b";", 1)[0], 16)
        if size == 0:
            break
        out += raw[j + 2 : j + 2 + size]
        i = j + 2 + size + 2
    return bytes(out)


def _parse_head(head: bytes) -> tuple[int, bool]:
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    chunked = any(ln.lower().startswith(b"transfer-encoding:") and b"chunked" in ln.lower() for ln in lines[1:])
    return status, chunked


def _finish(status, chunked, t_headers, t_first, t_total, body_parts, tail, keep_body) -> Fetch:
    complete = (tail.endswith(b"0\r\n\r\n")) if chunked else True
    body = None
    nbytes = sum(len(p) for p in body_parts) if keep_body else body_parts
    if keep_body:
        raw = b"".join(body_parts)
        body = dechunk(raw) if chunked else raw
    return Fetch(status, t_headers, t_first, t_total, nbytes, chunked, complete, body)


def fetch(port: int, path: str, body: bytes, *, keep_body: bool = False, timeout: float = 120.0) -> Fetch:
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = build_request(path, body)
        buf = bytearray(_BUF)
        view = memoryview(buf)
        pc = time.perf_counter
        t0 = pc()
        sock.sendall(req)
        head = b""
        while True:
            n = sock.recv_into(buf)
            if n == 0:
                raise ConnectionError(f"connection closed before the response head ({len(head)} bytes)")
            head += bytes(view[:n])
            end = head.find(b"\r\n\r\n")
            if end >= 0:
                break
        t_headers = pc() - t0
        status, chunked = _parse_head(head[:end])
        rest = head[end + 4 :]
        t_first = t_headers if rest else None
        parts: list[bytes] = [rest] if keep_body else []
        count = len(rest)
        tail = rest[-5:]
        while True:
            n = sock.recv_into(buf)
            if n == 0:
                break
            if t_first is None:
                t_first = pc() - t0
            count += n
            if keep_body:
                parts.append(bytes(view[:n]))
            tail = (tail + bytes(view[max(0, n - 5) : n]))[-5:]
        t_total = pc() - t0
        return _finish(status, chunked, t_headers, t_first, t_total, parts if keep_body else count, tail, keep_body)
    finally:
        sock.close()


async def afetch(port: int, path: str, body: bytes, *, keep_body: bool = False) -> Fetch:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=_BUF)
    try:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pc = time.perf_counter
        t0 = pc()
        writer.write(build_request(path, body))
        head = await reader.readuntil(b"\r\n\r\n")
        t_headers = pc() - t0
        status, chunked = _parse_head(head[:-4])
        t_first = None
        parts: list[bytes] = []
        count = 0
        tail = b""
        while True:
            data = await reader.read(_BUF)
            if not data:
                break
            if t_first is None:
                t_first = pc() - t0
            count += len(data)
            if keep_body:
                parts.append(data)
            tail = (tail + data[-5:])[-5:]
        t_total = pc() - t0
        return _finish(status, chunked, t_headers, t_first, t_total, parts if keep_body else count, tail, keep_body)
    finally:
        writer.close()

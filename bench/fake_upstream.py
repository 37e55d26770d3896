"""The benchmark's fake LLM upstream: Dragoman's fake upstream (``dragoman.demo``) with a ``bench`` scenario.

``POST .../messages`` answers an Anthropic stream, ``.../chat/completions`` a Chat stream and
``.../responses`` a Responses stream (see ``streams.py``), chunked with ONE SSE event per HTTP chunk,
written as fast as the socket takes it (every body is framed once, cached, and written at once). The number
of events comes from the request's model name ``bench-n<N>`` (it survives translation); default 20.
``bench-p<N>``: the same N events paced, one every ``--delay`` seconds (issue 31's paced streams); any other
scenario name (``text``: a short answer, JSON when the request does not stream) answers as in the demo.
No request log is kept.

Run: ``python bench/fake_upstream.py [--port 0] [--prewarm 20,300]``; prints ``PORT <n>`` on stdout, and
exits when its stdin closes (so it never outlives the benchmark that started it).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import threading

import streams

from dragoman.demo.server import FakeUpstream
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import frame

_MODEL_RE = re.compile(r"bench-n(\d+)")
_PACED_RE = re.compile(r"bench-p(\d+)")
_CACHE: dict[tuple[str, int], bytes] = {}
_CACHE_MAX_BYTES = 400 * 1024 * 1024
_cache_bytes = 0


def framed(protocol: str, n: int) -> bytes:
    """The chunked body of ``streams.generate(protocol, n)``, cached."""
    global _cache_bytes
    key = (protocol, n)
    body = _CACHE.get(key)
    if body is None:
        body = frame(streams.generate(protocol, n))
        if _cache_bytes + len(body) <= _CACHE_MAX_BYTES:
            _CACHE[key] = body
            _cache_bytes += len(body)
    return body


def bench(request: Request) -> Reply:
    """The scenario: the protocol's long stream, ``bench-n<N>`` events long."""
    p = _PACED_RE.fullmatch(request.model)
    if p:
        return Reply(headers={"x-request-id": "req_bench"}, events=streams.generate(request.protocol, int(p.group(1))))
    m = _MODEL_RE.fullmatch(request.model)
    return Reply(headers={"x-request-id": "req_bench"}, framed=framed(request.protocol, int(m.group(1)) if m else 20))


def _exit_when_stdin_closes() -> None:
    try:
        while sys.stdin.buffer.read(1):
            pass
    except Exception:  # noqa: BLE001
        pass
    os._exit(0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay", type=float, default=0.0, help="seconds between the events of a paced stream")
    ap.add_argument("--prewarm", default="", help="comma list of N to pre-generate for every protocol")
    a = ap.parse_args()
    for n in filter(None, a.prewarm.split(",")):
        for p in streams.PROTOCOLS:
            framed(p, int(n))
    fake = FakeUpstream(
        port=a.port, scenario="bench", scenarios={"bench": bench}, record=False, delay=a.delay, backlog=2048
    )
    threading.Thread(target=_exit_when_stdin_closes, daemon=True).start()
    sys.stdout.write(f"PORT {fake.port}\n")
    sys.stdout.flush()
    try:
        fake.serve_forever()
    except KeyboardInterrupt:
        pass

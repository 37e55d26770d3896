"""A fake Anthropic Messages upstream that models prompt caching as Anthropic documents it (issue 36).

* The prompt is the sequence of blocks in Anthropic's prefix order: tools, system blocks, message content blocks.
* A breakpoint is a block with ``cache_control``, or, with a request-level ``cache_control`` (automatic caching),
  the last block that may be marked (not a thinking block). At most four; a fifth is a 400, as the API answers.
* Reading: for each breakpoint, the cache is looked up at the breakpoint and up to 20 blocks before it; the longest
  prefix found (written by an earlier request, its TTL not expired) is read. Writing: the prefix up to each
  breakpoint is stored for its TTL ("5m" default, "1h"); a read refreshes the entry. Prefixes shorter than
  ``MIN_CACHEABLE`` tokens are never cached (1024 for Sonnet-class models).
* usage: ``cache_read_input_tokens`` (read), ``cache_creation_input_tokens`` (the tokens from the read prefix up to
  the last breakpoint), ``input_tokens`` (the rest), as the API splits them.
* Tokens: 1 per 4 characters of each block's compact JSON (``cache_control`` removed: a marker is not content).

It answers each request with one ``exec_command`` tool call (streamed when asked), so a driver can run an agent
loop; ``ledger`` keeps every request's usage (the ground truth the client-side usage is checked against).
``clock`` is injectable so a test can step past a TTL.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any

MIN_CACHEABLE = 1024
LOOKBACK = 20
MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def _tokens(block: Any) -> int:
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return max(1, len(json.dumps(block, separators=(",", ":"), ensure_ascii=False)) // 4)


def prompt_blocks(body: dict[str, Any]) -> list[Any]:
    blocks: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    blocks += [{"type": "text", "text": system}] if isinstance(system, str) else list(system or [])
    for m in body.get("messages", []):
        c = m.get("content")
        blocks += [{"type": "text", "text": c, "role": m["role"]}] if isinstance(c, str) else list(c or [])
    return blocks


class CacheModel:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.entries: dict[str, float] = {}  # prefix digest -> expiry
        self.lock = threading.Lock()

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """The usage of one request (and the cache updated by it). Raises ValueError for > 4 breakpoints."""
        blocks = prompt_blocks(body)
        marks: dict[int, str] = {}
        for i, b in enumerate(blocks):
            if isinstance(b, dict) and isinstance(b.get("cache_control"), dict):
                marks[i] = b["cache_control"].get("ttl") or "5m"
        top = body.get("cache_control")
        if isinstance(top, dict):
            last = max(
                (
                    i
                    for i, b in enumerate(blocks)
                    if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))
                ),
                default=-1,
            )
            if last >= 0:
                marks.setdefault(last, top.get("ttl") or "5m")
        if len(marks) > MAX_BREAKPOINTS:
            raise ValueError(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}."
            )
        digests, sizes, h, total = [], [], hashlib.sha256(), 0
        for b in blocks:
            h.update(
                json.dumps(
                    {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b, sort_keys=True
                ).encode()
            )
            digests.append(h.copy().hexdigest())
            total += _tokens(b)
            sizes.append(total)
        now = self.clock()
        with self.lock:
            read_at = -1
            for bp in marks:
                for i in range(bp, max(-1, bp - LOOKBACK), -1):
                    exp = self.entries.get(digests[i])
                    if exp is not None and exp > now:
                        read_at = max(read_at, i)
                        break
            read = sizes[read_at] if read_at >= 0 else 0
            if read_at >= 0:
                self.entries[digests[read_at]] = max(self.entries[digests[read_at]], now + 300.0)
            written_to = -1
            for bp, ttl in marks.items():
                if sizes[bp] >= MIN_CACHEABLE:
                    self.entries[digests[bp]] = max(
                        self.entries.get(digests[bp], 0.0), now + TTL_SECONDS.get(ttl, 300.0)
                    )
                    written_to = max(written_to, bp)
            creation = max(0, sizes[written_to] - read) if written_to > read_at else 0
        return {
            "input_tokens": total - read - creation,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": creation,
        }


def _sse(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


class CachingAnthropic:
    """``with CachingAnthropic() as up: up.port``: the fake upstream on 127.0.0.1 (an ephemeral port)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.model = CacheModel(clock)
        self.ledger: list[dict[str, int]] = []
        self.bodies: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                fake.bodies.append(body)
                try:
                    usage = fake.model.usage(body)
                except ValueError as e:
                    data = json.dumps(
                        {"type": "error", "error": {"type": "invalid_request_error", "message": str(e)}}
                    ).encode()
                    self._send(400, "application/json", data)
                    return
                fake.ledger.append(usage)
                n = len(fake.ledger)
                tool = {
                    "type": "tool_use",
                    "id": f"toolu_{n:04d}",
                    "name": "exec_command",
                    "input": {"cmd": f"ls step{n}"},
                }
                msg = {
                    "id": f"msg_{n}",
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model", "m"),
                    "content": [tool],
                    "stop_reason": "tool_use",
                    "stop_sequence": None,
                    "usage": {**usage, "output_tokens": 12},
                }
                if not body.get("stream"):
                    self._send(200, "application/json", json.dumps(msg).encode())
                    return
                start = {**msg, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
                out = _sse("message_start", {"type": "message_start", "message": start})
                out += _sse(
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": {**tool, "input": {}}},
                )
                out += _sse(
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool["input"])},
                    },
                )
                out += _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
                out += _sse(
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                        "usage": {"output_tokens": 12},
                    },
                )
                out += _sse("message_stop", {"type": "message_stop"})
                self._send(200, "text/event-stream", out)

            def _send(self, status: int, ctype: str, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CachingAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

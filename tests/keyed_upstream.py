"""A fake LLM upstream for routing tests: answers by the key it is called with (stdlib only).

Successful answers are real recorded provider traffic from tests/corpus (a streamed answer is sent one SSE
event per HTTP chunk); a key (or every key, ``always``) can be made to fail with a status, a ``retry-after``
and an error body, to close the connection without answering, or to drop a stream after its first event.
Every request is recorded with the key it carried (``requests``), so tests can check who was asked what.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from dataclasses import field
from http.server import BaseHTTPRequestHandler
from http.server import ThreadingHTTPServer
from typing import Any

import corpus_loader

#: (protocol, stream) -> corpus sample name: plain answers of each protocol
SAMPLES = {
    ("openai-chat", True): "chat/vercel-ai__stream-plain-text-usage.chunks.txt",
    ("openai-chat", False): "chat/pydantic-ai__json-cached-tokens.yaml#0",
    ("anthropic", True): "anthropic/vercel-ai__stream-plain-text.chunks.txt",
    ("anthropic", False): "anthropic/vercel-ai__json-plain-text.json",
    ("openai-responses", True): "responses/pydantic-ai__stream-text-then-function-call.yaml#0",
    ("openai-responses", False): "responses/pydantic-ai__json-plain-text.yaml#0",
}
_EVENT_END = re.compile(rb"\r?\n\r?\n")


def sample_body(protocol: str, stream: bool) -> bytes:
    name = SAMPLES[(protocol, stream)]
    for s in corpus_loader.load_all():
        if s.name == name:
            return s.body
    raise KeyError(name)


def sse_events(body: bytes) -> list[bytes]:
    out, pos = [], 0
    for m in _EVENT_END.finditer(body):
        out.append(body[pos : m.end()])
        pos = m.end()
    if body[pos:].strip():
        out.append(body[pos:])
    return out


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # hundreds of concurrent attempts: the default backlog (5) stalls connects
    daemon_threads = True


@dataclass
class Rule:
    status: int = 200
    retry_after: str | None = None
    body: bytes = b""
    #: "close": close the connection without answering; "drop": send one stream event then reset
    action: str = ""


@dataclass
class Seen:
    path: str
    key: str | None
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


@dataclass
class KeyedUpstream:
    protocol: str
    rules: dict[str, Rule] = field(default_factory=dict)
    always: Rule | None = None
    requests: list[Seen] = field(default_factory=list)
    event_delay: float = 0.0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                owner._handle(self)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def keys_seen(self) -> list[str | None]:
        with self._lock:
            return [r.key for r in self.requests]

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        raw = h.rfile.read(int(h.headers.get("content-length") or 0))
        headers = {k.lower(): v for k, v in h.headers.items()}
        key = headers.get("x-api-key")
        if key is None and headers.get("authorization", "").lower().startswith("bearer "):
            key = headers["authorization"][7:]
        body = json.loads(raw or b"{}")
        with self._lock:
            self.requests.append(Seen(h.path, key, headers, body, time.monotonic()))
        rule = self.always or self.rules.get(key or "", Rule())
        if rule.action == "close":
            h.close_connection = True
            h.connection.shutdown(2)
            return
        if rule.status != 200:
            self._error(h, rule)
            return
        stream = bool(body.get("stream"))
        data = sample_body(self.protocol, stream)
        if not stream:
            self._send(h, 200, "application/json", data)
            return
        h.send_response(200)
        h.send_header("content-type", "text/event-stream")
        h.send_header("transfer-encoding", "chunked")
        h.end_headers()
        for i, ev in enumerate(sse_events(data)):
            if rule.action == "drop" and i == 1:
                h.wfile.flush()
                h.close_connection = True
                h.connection.shutdown(2)
                return
            h.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
            h.wfile.flush()
            if self.event_delay:
                time.sleep(self.event_delay)
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()

    def _error(self, h: BaseHTTPRequestHandler, rule: Rule) -> None:
        body = rule.body or json.dumps(
            {"error": {"type": "rate_limit_error" if rule.status == 429 else "api_error", "message": f"fake {rule.status}"}}
        ).encode()
        extra = {"retry-after": rule.retry_after} if rule.retry_after else {}
        self._send(h, rule.status, "application/json", body, extra)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, ctype: str, body: bytes, extra: dict[str, str] | None = None) -> None:
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(body)))
        for k, v in (extra or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)
        h.wfile.flush()

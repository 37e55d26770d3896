"""A fake LLM upstream for routing tests that answers by the key it is called with: a scenario on ``dragoman.demo``.

Successful answers are real recorded provider traffic from tests/corpus (a streamed answer is sent one SSE
event per HTTP chunk); a key (or every key, ``always``) can be made to fail with a status, a ``retry-after``
and an error body, to close the connection without answering, or to drop a stream after its first event.
Every request is recorded with the key it carried (``requests``), so tests can check who was asked what.
The server is ``dragoman.demo.FakeUpstream``; this module is only the rule book (its ``answer`` hook).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field
from functools import cache
from typing import Any

import corpus_loader
from dragoman.demo import FakeUpstream
from dragoman.demo import Reply
from dragoman.demo import Request
from dragoman.demo import split_sse

#: (protocol, stream) -> corpus sample name: plain answers of each protocol
SAMPLES = {
    ("openai-chat", True): "chat/vercel-ai__stream-plain-text-usage.chunks.txt",
    ("openai-chat", False): "chat/pydantic-ai__json-cached-tokens.yaml#0",
    ("anthropic", True): "anthropic/vercel-ai__stream-plain-text.chunks.txt",
    ("anthropic", False): "anthropic/vercel-ai__json-plain-text.json",
    ("openai-responses", True): "responses/pydantic-ai__stream-text-then-function-call.yaml#0",
    ("openai-responses", False): "responses/pydantic-ai__json-plain-text.yaml#0",
}


@cache
def sample_body(protocol: str, stream: bool) -> bytes:
    name = SAMPLES[(protocol, stream)]
    for s in corpus_loader.load_all():
        if s.name == name:
            return s.body
    raise KeyError(name)


def key_of(headers: dict[str, str]) -> str | None:
    """The API key a request carried: ``x-api-key`` (Anthropic) or ``authorization: Bearer`` (OpenAI)."""
    key = headers.get("x-api-key")
    auth = headers.get("authorization", "")
    if key is None and auth.lower().startswith("bearer "):
        key = auth[7:]
    return key


@dataclass
class Rule:
    status: int = 200
    retry_after: str | None = None
    body: bytes = b""
    #: "close": close the connection without answering; "drop": send one stream event then hang up
    action: str = ""

    def reply(self, protocol: str, stream: bool) -> Reply:
        if self.action == "close":
            return Reply(hangup=True)
        if self.status != 200:
            kind = "rate_limit_error" if self.status == 429 else "api_error"
            body = self.body or json.dumps({"error": {"type": kind, "message": f"fake {self.status}"}}).encode()
            return Reply(self.status, {"retry-after": self.retry_after} if self.retry_after else {}, body=body)
        data = sample_body(protocol, stream)
        if not stream:
            return Reply(body=data)
        return Reply(events=split_sse(data), drop_after=1 if self.action == "drop" else None)


@dataclass
class Seen:
    path: str
    key: str | None
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class KeyedUpstream:
    protocol: str
    rules: dict[str, Rule] = field(default_factory=dict)
    always: Rule | None = None
    event_delay: float = 0.0

    def __post_init__(self) -> None:
        self.server = FakeUpstream(delay=self.event_delay, answer=self._answer).start()

    def _answer(self, request: Request) -> Reply:
        rule = self.always or self.rules.get(key_of(request.headers) or "", Rule())
        return rule.reply(self.protocol, request.stream)

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def requests(self) -> list[Seen]:
        with self.server.lock:
            recorded = list(self.server.requests)
        return [Seen(r.path, key_of(r.headers), r.headers, r.body) for r in recorded]

    def keys_seen(self) -> list[str | None]:
        return [r.key for r in self.requests]

    def stop(self) -> None:
        self.server.stop()

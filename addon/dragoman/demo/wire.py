"""What a scenario is asked (``Request``) and what it answers (``Reply``), plus SSE framing.

Pure data and bytes: the server (``dragoman.demo.server``) does the I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field
from typing import Any

ANTHROPIC = "anthropic"
CHAT = "openai-chat"
RESPONSES = "openai-responses"
GEMINI = "gemini"
_GEMINI_PATH = re.compile(r"/models/([^/:]+):(?:(stream)G|g)enerateContent$")

#: the faults a scenario can ask for; they act at the text deltas (see ``mark_fault``)
MIDSTREAM_ERROR = "midstream_error"
STALL = "stall"
DROP = "drop"
MIDSTREAM_ERROR_MESSAGE = "The fake upstream broke down mid-stream"


@dataclass
class Request:
    """One POST to a model endpoint, as a scenario sees it."""

    protocol: str
    model: str
    stream: bool
    include_usage: bool = False  #: Chat: ``stream_options.include_usage``
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, protocol: str, body: dict[str, Any], headers: dict[str, str] | None = None, path: str = "") -> Request:
        options = body.get("stream_options")
        model, stream = body.get("model"), bool(body.get("stream"))
        m = _GEMINI_PATH.search(path.split("?", 1)[0]) if protocol == GEMINI else None
        if m is not None:  # Gemini names the model and the method in the path
            model, stream = m.group(1), m.group(2) is not None
        return cls(
            protocol=protocol,
            model=str(model or "fake-model"),
            stream=stream,
            include_usage=bool(options.get("include_usage")) if isinstance(options, dict) else False,
            body=body,
            headers=headers or {},
        )


@dataclass
class Reply:
    """What a scenario answers: a status, headers and a JSON body, raw body bytes or a list of SSE events."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    json_body: Any = None
    events: list[bytes] = field(default_factory=list)
    #: index in ``events`` after which the server pauses ``stall`` seconds (None: no pause)
    stall_after: int | None = None
    #: index in ``events`` after which the connection is dropped (None: a clean end)
    drop_after: int | None = None
    #: the whole chunked body, already framed (``frame``): written at once, ``events`` unused (the benchmark)
    framed: bytes | None = None
    #: a body sent as is with ``content-length`` (``content-type`` from ``headers``, else JSON), e.g. a recording
    body: bytes | None = None
    #: close the connection without answering (no status line at all)
    hangup: bool = False


#: a scenario answers one request; the registry (``dragoman.demo.scenarios.SCENARIOS``) names them
Scenario = Callable[[Request], Reply]


def sse(data: Any, event: str | None = None) -> bytes:
    """One SSE event: ``event:`` line when named, compact JSON (or the string as is) on one ``data:`` line."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return b"%x\r\n%s\r\n" % (len(data), data)


LAST_CHUNK = b"0\r\n\r\n"


def frame(events: list[bytes]) -> bytes:
    """The chunked body: one HTTP chunk per event, then the terminating chunk."""
    return b"".join(map(chunk, events)) + LAST_CHUNK


_EVENT_END = re.compile(rb"\r?\n\r?\n")


def split_sse(body: bytes) -> list[bytes]:
    """A recorded SSE body cut into its events, each with its blank line (``Reply.events``: one chunk each)."""
    out, pos = [], 0
    for m in _EVENT_END.finditer(body):
        out.append(body[pos : m.end()])
        pos = m.end()
    if body[pos:].strip():
        out.append(body[pos:])
    return out


def detect_protocol(path: str) -> str | None:
    """The protocol a POST path speaks (the query string is ignored), or None."""
    p = path.split("?", 1)[0].rstrip("/")
    if _GEMINI_PATH.search(p):
        return GEMINI
    if p.endswith("/messages"):
        return ANTHROPIC
    if p.endswith("/chat/completions"):
        return CHAT
    if p.endswith("/responses"):
        return RESPONSES
    return None


def mark_fault(reply: Reply, fault: str | None, n: int) -> bool:
    """Called right after text delta ``n`` was appended to ``reply.events``.

    ``stall`` pauses and ``drop`` hangs up right after the first delta; ``midstream_error`` returns True
    after the second: the caller appends its protocol's in-stream error event and ends the stream there.
    """
    if n == 0 and fault == STALL:
        reply.stall_after = len(reply.events) - 1
    elif n == 0 and fault == DROP:
        reply.drop_after = len(reply.events)
    return n == 1 and fault == MIDSTREAM_ERROR

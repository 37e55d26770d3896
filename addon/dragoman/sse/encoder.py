"""SSE encoding. Always LF line ends and one blank line after each event."""

from __future__ import annotations

from typing import Any

import orjson

from dragoman.sse.events import SSEEvent

DONE = b"data: [DONE]\n\n"


def encode(ev: SSEEvent) -> bytes:
    parts: list[str] = []
    if ev.event is not None:
        parts.append(f"event: {ev.event}\n")
    if ev.id is not None:
        parts.append(f"id: {ev.id}\n")
    if ev.retry is not None:
        parts.append(f"retry: {ev.retry}\n")
    for line in ev.data.split("\n"):
        parts.append(f"data: {line}\n")
    parts.append("\n")
    return "".join(parts).encode()


#: ``event: NAME\ndata: `` per event name (a handful of names per protocol), built once
_HEADS: dict[str, bytes] = {}
_dumps = orjson.dumps


def encode_json(event: str | None, payload: Any) -> bytes:
    """Encode ``payload`` as one JSON ``data:`` line (orjson never emits raw newlines)."""
    if event is None:
        return b"data: " + _dumps(payload) + b"\n\n"
    head = _HEADS.get(event)
    if head is None:
        head = b"event: " + event.encode() + b"\ndata: "
        if len(_HEADS) < 256:  # bounded: event names are protocol constants
            _HEADS[event] = head
    return head + _dumps(payload) + b"\n\n"


def comment(text: str = "") -> bytes:
    return b": " + text.encode() + b"\n\n"

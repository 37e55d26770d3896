"""Reading the finished response object off an answer, sans-I/O: a translated stream's Responses encoder
keeps its ``response.completed`` snapshot (``snapshot``); a Responses upstream's own stream passing through
is scanned for its ``response.completed``/``response.incomplete`` event (``CompletedTap``); a whole answer
is the object itself (``whole``)."""

from __future__ import annotations

from typing import Any

import orjson

from dragoman.sse.decoder import SSEDecoder

#: the terminal events whose response a later turn may continue (a failed response is not stored)
STORED_EVENTS = ("response.completed", "response.incomplete")


class CompletedTap:
    """Fed the Responses SSE bytes as they pass; ``response`` is the final object once it went by."""

    __slots__ = ("_sse", "response")

    def __init__(self) -> None:
        self._sse = SSEDecoder()
        self.response: dict[str, Any] | None = None

    def feed(self, data: bytes) -> dict[str, Any] | None:
        if self.response is not None or not data:
            return self.response
        for ev in self._sse.feed(data):
            name = ev.event
            if name is None and '"type":"response.' in ev.data[:80].replace(" ", ""):
                try:
                    name = orjson.loads(ev.data).get("type")
                except (orjson.JSONDecodeError, AttributeError):
                    continue
            if name in STORED_EVENTS:
                self.response = _response_of(ev.data)
                if self.response is not None:
                    break
        return self.response


def _response_of(data: str | bytes) -> dict[str, Any] | None:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    resp = obj.get("response") if isinstance(obj, dict) else None
    return resp if isinstance(resp, dict) and isinstance(resp.get("id"), str) else None


def snapshot(encoder: object) -> dict[str, Any] | None:
    """A Responses stream encoder's final object (None before its terminal event, or for a failed one)."""
    snap = getattr(encoder, "snapshot", None)
    return snap if isinstance(snap, dict) else None


def whole(body: bytes) -> dict[str, Any] | None:
    """A whole Responses answer (JSON) when it is a completed or incomplete response object."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("object") != "response" or not isinstance(obj.get("id"), str):
        return None
    return obj if obj.get("status") in ("completed", "incomplete") else None

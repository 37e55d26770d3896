"""MCP tool names for an Anthropic upstream on subscription (OAuth) credentials (``dragoman_mcp_prefix``).

Those credentials expect MCP tools named ``mcp__server__tool``; harnesses that name them with one underscore
(``mcp_server_tool``) must send them as ``mcp__server_tool`` and get the original names back. The rule, as the
model-agnostic harness adapter states it: a name starting with ``mcp_`` but not ``mcp__`` gains one underscore;
a client's own ``mcp__`` names are never touched, and a rename that would collide with a name the client
already uses is not made.

Sans-I/O, on the Anthropic upstream's bytes, so a same-protocol flow and a translated one are treated alike:
``rename_request`` (tool definitions, ``tool_choice``, ``tool_use`` blocks of the history) returns the map back;
``rename_response`` (a whole Messages body) and ``McpNameStream`` (its SSE stream, event by event, holding at
most one small event) apply it to the answer.
"""

from __future__ import annotations

from typing import Any

import orjson

SINGLE = "mcp_"
DOUBLE = "mcp__"
#: an event longer than this is no ``content_block_start`` of a tool call: it passes without being held whole
HOLD_LIMIT = 64 << 10


def wants_prefix(name: str) -> bool:
    return name.startswith(SINGLE) and not name.startswith(DOUBLE)


def prefixed(name: str) -> str:
    return DOUBLE + name[len(SINGLE) :]


def rename_request(body: bytes) -> tuple[bytes, dict[str, str]]:
    """An Anthropic request body with its single-underscore ``mcp_`` tool names renamed; and the map from each
    name sent to the client's name (empty, with ``body`` itself, when nothing was renamed)."""
    if b'"mcp_' not in body:
        return body, {}
    obj = orjson.loads(body)
    if not isinstance(obj, dict):
        return body, {}
    tools = [t for t in obj.get("tools") or [] if isinstance(t, dict) and isinstance(t.get("name"), str)]
    calls = [b for b in _history_blocks(obj) if b.get("type") == "tool_use" and isinstance(b.get("name"), str)]
    choice = obj.get("tool_choice")
    choices = [choice] if isinstance(choice, dict) and isinstance(choice.get("name"), str) else []
    used = {t["name"] for t in tools} | {b["name"] for b in calls} | {c["name"] for c in choices}
    forward = {n: prefixed(n) for n in used if wants_prefix(n) and prefixed(n) not in used}
    if not forward:
        return body, {}
    for holder in (*tools, *calls, *choices):
        holder["name"] = forward.get(holder["name"], holder["name"])
    return orjson.dumps(obj), {new: old for old, new in forward.items()}


def _history_blocks(obj: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for msg in obj.get("messages") or []:
        if isinstance(msg, dict) and isinstance(msg.get("content"), list):
            out += [b for b in msg["content"] if isinstance(b, dict)]
    return out


def rename_response(body: bytes, back: dict[str, str]) -> bytes:
    """A whole Anthropic Messages answer with its tool calls named as the client named them."""
    if not back or not any(name.encode() in body for name in back):
        return body
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body  # not JSON: the translation reports it
    if not isinstance(obj, dict) or not isinstance(obj.get("content"), list):
        return body
    changed = False
    for block in obj["content"]:
        if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") in back:
            block["name"] = back[block["name"]]
            changed = True
    return orjson.dumps(obj) if changed else body


class McpNameStream:
    """An Anthropic SSE stream with the tool names of its ``content_block_start`` events renamed back.

    ``feed(chunk) -> bytes`` and ``close() -> bytes``; any chunking gives the same output. Events are cut at
    their blank line (``\\n\\n`` or ``\\r\\n\\r\\n``); every event but a tool call's start passes byte for byte.
    Only the event being read is held, and at most ``HOLD_LIMIT`` bytes of it."""

    __slots__ = ("_back", "_buf", "_passing", "_needles")

    def __init__(self, back: dict[str, str]) -> None:
        self._back = back
        self._needles = tuple(b'"' + name.encode() + b'"' for name in back)
        self._buf = bytearray()
        #: the event being read grew past ``HOLD_LIMIT``: its bytes pass until its end
        self._passing = False

    def feed(self, data: bytes) -> bytes:
        self._buf += data
        out = bytearray()
        while True:
            end = _event_end(self._buf)
            if end < 0:
                break
            event = bytes(self._buf[:end])
            del self._buf[:end]
            out += event if self._passing else self._event(event)
            self._passing = False
        if len(self._buf) > HOLD_LIMIT:
            # pass what is held, but the last bytes: they may begin the blank line that ends the event
            out += self._buf[:-3]
            del self._buf[:-3]
            self._passing = True
        return bytes(out)

    def close(self) -> bytes:
        rest = bytes(self._buf)
        self._buf.clear()
        return rest if self._passing else self._event(rest)

    def _event(self, event: bytes) -> bytes:
        if b"content_block_start" not in event or not any(n in event for n in self._needles):
            return event
        lines = event.split(b"\n")
        for i, line in enumerate(lines):
            if not line.startswith(b"data:"):
                continue
            raw = line[5:].strip()
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                return event
            block = obj.get("content_block") if isinstance(obj, dict) else None
            if not isinstance(block, dict) or block.get("type") != "tool_use" or block.get("name") not in self._back:
                return event
            block["name"] = self._back[block["name"]]
            cr = b"\r" if line.endswith(b"\r") else b""
            lines[i] = b"data: " + orjson.dumps(obj) + cr
            return b"\n".join(lines)
        return event


def _event_end(buf: bytearray) -> int:
    """The end (past its blank line) of the first complete event in ``buf``, or -1."""
    lf = buf.find(b"\n\n")
    crlf = buf.find(b"\r\n\r\n")
    if crlf >= 0 and (lf < 0 or crlf < lf):
        return crlf + 4
    return lf + 2 if lf >= 0 else -1

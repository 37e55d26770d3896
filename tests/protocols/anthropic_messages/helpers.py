"""Independent accumulators and validators for Anthropic SSE and IR event lists (test helpers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.request import Request
from dragoman.protocols.anthropic_messages import CODEC
from dragoman.protocols.base import Context
from dragoman.sse import SSEDecoder

DATA = Path(__file__).parent / "data"

#: block types whose events the decoder swallows (server tools etc.)
MODELLED = {"text", "thinking", "redacted_thinking", "tool_use"}


def enc(req: Request, ctx: Context | None = None) -> tuple[dict[str, Any], Context]:
    """``req`` encoded as an Anthropic request, and the context it was encoded in."""
    ctx = ctx or Context(request=req)
    return CODEC.encode_request(req, ctx), ctx


def sse_events(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    d = SSEDecoder()
    evs = d.feed(body) + d.close()
    return [(e.event, json.loads(e.data)) for e in evs if e.data.strip()]


def accumulate_raw(body: bytes) -> list[dict[str, Any]]:
    """Blocks (in start order) from raw Anthropic SSE, using plain json: only modelled block types."""
    blocks: dict[int, dict[str, Any]] = {}
    order: list[int] = []
    for _, o in sse_events(body):
        t = o["type"]
        if t == "content_block_start":
            cb = o["content_block"]
            if cb["type"] not in MODELLED:
                continue
            b = {
                "type": cb["type"],
                "text": cb.get("text", "") or cb.get("thinking", ""),
                "args": "",
                "sig": cb.get("signature") or None,
            }
            if cb["type"] == "tool_use":
                b["id"], b["name"] = cb["id"], cb["name"]
                if cb.get("input"):
                    b["args"] = json.dumps(cb["input"])
            if cb["type"] == "redacted_thinking":
                b["data"] = cb["data"]
            blocks[o["index"]] = b
            order.append(o["index"])
        elif t == "content_block_delta" and o["index"] in blocks:
            b = blocks[o["index"]]
            d = o["delta"]
            if d["type"] == "text_delta":
                b["text"] += d["text"]
            elif d["type"] == "thinking_delta":
                b["text"] += d["thinking"]
            elif d["type"] == "signature_delta":
                b["sig"] = d["signature"]
            elif d["type"] == "input_json_delta":
                b["args"] += d["partial_json"]
    return [blocks[i] for i in order]


def accumulate_ir(events: list[Any]) -> list[dict[str, Any]]:
    """The same block summary from IR events."""
    blocks: dict[int, dict[str, Any]] = {}
    order: list[int] = []
    names = {"text": "text", "thinking": "thinking", "redacted_thinking": "redacted_thinking", "tool_call": "tool_use"}
    for ev in events:
        t = type(ev)
        if t is BlockStart:
            b = {"type": names.get(ev.kind.value, ev.kind.value), "text": "", "args": "", "sig": None}
            if ev.tool_call_id is not None:
                b["id"], b["name"] = ev.tool_call_id, ev.name
            if ev.data is not None:
                b["data"] = ev.data
            blocks[ev.index] = b
            order.append(ev.index)
        elif t is TextDelta or t is ThinkingDelta:
            blocks[ev.index]["text"] += ev.text
        elif t is ToolArgsDelta:
            blocks[ev.index]["args"] += ev.fragment
        elif t is SignatureDelta:
            blocks[ev.index]["sig"] = ev.signature
    return [blocks[i] for i in order]


def check_wire_order(body: bytes) -> list[dict[str, Any]]:
    """Assert the Anthropic SSE follows the real API's order; returns the parsed events."""
    evs = sse_events(body)
    names = [e for e, _ in evs]
    for name, o in evs:
        assert name == o["type"], (name, o["type"])
    assert names[0] == "message_start", names[:3]
    if "content_block_start" in names:
        first = names.index("content_block_start")
        assert names[first + 1] == "ping", names[: first + 2]  # the API's framing ping, made by the encoder
    assert names[-2:] == ["message_delta", "message_stop"], names[-3:]
    open_idx = None
    next_idx = 0
    for name, o in evs:
        if name == "content_block_start":
            assert open_idx is None, f"block {o['index']} started while {open_idx} is open"
            assert o["index"] == next_idx
            open_idx = o["index"]
            next_idx += 1
        elif name == "content_block_delta":
            assert o["index"] == open_idx
        elif name == "content_block_stop":
            assert o["index"] == open_idx
            open_idx = None
        elif name in ("message_delta", "message_stop"):
            assert open_idx is None
    return [o for _, o in evs]


def ir_kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


__all__ = [
    "DATA",
    "BlockStop",
    "MessageDelta",
    "MessageStart",
    "MessageStop",
    "accumulate_ir",
    "accumulate_raw",
    "check_wire_order",
    "ir_kinds",
    "sse_events",
]

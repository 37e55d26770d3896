"""Helpers for the Chat codec tests: run the stream decoder over chunkings, accumulate raw chunks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import StreamError
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.protocols.base import Context
from dragoman.protocols.openai_chat import CODEC
from dragoman.sse import SSEDecoder

DATA = Path(__file__).parent / "data"


def decode_stream(pieces: list[bytes], ctx: Context | None = None) -> list[Any]:
    """Feed pieces through SSEDecoder + the Chat stream decoder; stop at a StreamError like the translator."""
    ctx = ctx or Context()
    sse = SSEDecoder()
    dec = CODEC.stream_decoder(ctx)
    out: list[Any] = []
    for p in pieces:
        for ev in sse.feed(p):
            evs = dec.feed(ev)
            out.extend(evs)
            if any(type(e) is StreamError for e in evs):
                return out
    for ev in sse.close():
        evs = dec.feed(ev)
        out.extend(evs)
        if any(type(e) is StreamError for e in evs):
            return out
    out.extend(dec.close())
    return out


def accumulate_raw(body: bytes) -> dict[str, Any]:
    """Independent accumulation of raw Chat chunks (no Dragoman code besides the SSE framing).

    Choice 0 only: the one answer a client of a single-answer protocol gets (``n > 1`` recordings)."""
    acc: dict[str, Any] = {
        "text": "",
        "reasoning": "",
        "refusal": "",
        "tools": {},
        "finish": None,
        "usage": None,
        "error": None,
    }
    sse = SSEDecoder()
    for ev in sse.feed(body) + sse.close():
        if ev.data.startswith("[DONE]"):
            break
        obj = json.loads(ev.data)
        if obj.get("error") or ev.event == "error":
            acc["error"] = obj.get("error", obj)
            break
        if obj.get("usage"):
            acc["usage"] = obj["usage"]
        for ch in obj.get("choices") or []:
            if ch.get("index", 0) != 0:
                continue
            d = ch.get("delta") or {}
            r = d.get("reasoning_content") or d.get("reasoning")
            if r:
                acc["reasoning"] += r
            elif d.get("reasoning_details"):
                for x in d["reasoning_details"]:
                    if x.get("type") == "reasoning.text":
                        acc["reasoning"] += x.get("text") or ""
            c = d.get("content")
            if isinstance(c, str):
                acc["text"] += c
            elif isinstance(c, list):
                for p in c:
                    if p.get("type") == "text":
                        acc["text"] += p["text"]
                    elif p.get("type") == "thinking":
                        th = p["thinking"]
                        acc["reasoning"] += th if isinstance(th, str) else "".join(x.get("text", "") for x in th)
            if d.get("refusal"):
                acc["refusal"] += d["refusal"]
            for pos, tc in enumerate(d.get("tool_calls") or []):
                i = tc.get("index", pos)
                slot = acc["tools"].setdefault(i, {"id": None, "name": None, "arguments": ""})
                fn = tc.get("function") or {}
                if slot["name"] is None:
                    slot["id"] = tc.get("id")
                    slot["name"] = fn.get("name")
                slot["arguments"] += fn.get("arguments") or ""
            if ch.get("finish_reason") and acc["finish"] is None:
                acc["finish"] = ch["finish_reason"]
    return acc


def accumulate_ir(events: list[Any]) -> dict[str, Any]:
    """What the IR events carry, in the same shape as ``accumulate_raw``; also checks block order."""
    acc: dict[str, Any] = {
        "text": "",
        "reasoning": "",
        "refusal": "",
        "tools": [],
        "stop": None,
        "usage": None,
        "error": None,
    }
    kinds: dict[int, BlockKind] = {}
    open_: set[int] = set()
    tools: dict[int, dict[str, Any]] = {}
    assert type(events[0]) is MessageStart
    for ev in events[1:]:
        t = type(ev)
        if t is BlockStart:
            assert ev.index not in kinds, "duplicate block index"
            kinds[ev.index] = ev.kind
            open_.add(ev.index)
            if ev.kind in (BlockKind.TOOL_CALL, BlockKind.CUSTOM_TOOL_CALL):
                tools[ev.index] = {"id": ev.tool_call_id, "name": ev.name, "arguments": ""}
        elif t is TextDelta:
            assert ev.index in open_
            acc["refusal" if kinds[ev.index] is BlockKind.REFUSAL else "text"] += ev.text
        elif t is ThinkingDelta:
            assert ev.index in open_ and kinds[ev.index] is BlockKind.THINKING
            acc["reasoning"] += ev.text
        elif t is ToolArgsDelta:
            assert ev.index in open_
            tools[ev.index]["arguments"] += ev.fragment
        elif t is BlockStop:
            open_.remove(ev.index)
        elif t is MessageDelta:
            assert not open_, "MessageDelta with open blocks"
            acc["stop"] = ev.stop_reason
            acc["usage"] = ev.usage
        elif t is MessageStop:
            assert acc["stop"] is not None
        elif t is StreamError:
            acc["error"] = ev.error
    acc["tools"] = [tools[i] for i in sorted(tools)]
    return acc

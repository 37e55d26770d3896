"""The Anthropic stream encoder's search half (``SearchBlocks``, a base of ``AnthropicStreamEncoder``): a
``WebSearch`` written as its ``server_tool_use`` and ``web_search_tool_result`` blocks, and held text blocks
written as plain and cited blocks (``search.text_blocks``) once their citations are known.

Blocks are written whole (start, deltas, stop) at the next free index; while a tool block is open on the wire
they wait (``_late``) and go out when it stops.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import CitationDelta
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import TextDelta
from dragoman.ir.events import WebSearch
from dragoman.ir.request import TextPart
from dragoman.ir.search import SEARCH_NATIVE
from dragoman.ir.search import Citation
from dragoman.protocols.anthropic_messages import search
from dragoman.protocols.anthropic_messages.stream_hold import BlockStatus
from dragoman.protocols.anthropic_messages.stream_hold import OutBlock
from dragoman.protocols.base import Context
from dragoman.sse.encoder import encode_json

_TOOL_KINDS = (BlockKind.TOOL_CALL, BlockKind.CUSTOM_TOOL_CALL)


class SearchBlocks:
    ctx: Context
    _open: OutBlock | None
    _next_index: int
    #: held text blocks (IR index -> (text pieces, citations)) and whether new text blocks are held
    _held: dict[int, tuple[list[str], list[Citation]]]
    _hold_text: bool
    #: whole blocks waiting for an open tool block to stop; searches run (usage)
    _late: list[dict[str, Any]]
    _searches: int
    _ensure_started: Callable[[bytearray], None]
    _close_wire: Callable[[bytearray, OutBlock], None]
    _started_ping: Callable[[bytearray], None]

    def _search_event(self, ev: StreamEvent) -> bytes | None:
        """A search event, or a text event of a held block, as bytes; None: not one of those."""
        t = type(ev)
        out = bytearray()
        if t is WebSearch:
            assert isinstance(ev, WebSearch)
            self._ensure_started(out)
            if ev.search.error is None:
                self._searches += 1
            if self.ctx.search == SEARCH_NATIVE:
                self._hold_text = True  # the answer that follows cites after its text (Responses annotations)
            self._write_blocks(out, search.search_blocks(ev.search))
            return bytes(out)
        if t is BlockStart:
            assert isinstance(ev, BlockStart)
            if self._hold_text and ev.kind is BlockKind.TEXT and ev.index not in self._held:
                self._held[ev.index] = ([], [])
                return b""
            return None
        idx = getattr(ev, "index", None)
        held = self._held.get(idx) if type(idx) is int else None
        if t is CitationDelta:
            assert isinstance(ev, CitationDelta)
            if held is None:
                self.ctx.dropped.add("citations(after_their_text)")
            else:
                held[1].append(ev.citation)
            return b""
        if held is None:
            return None
        if t is TextDelta:
            assert isinstance(ev, TextDelta)
            held[0].append(ev.text)
        elif t is BlockStop:
            del self._held[ev.index]  # type: ignore[union-attr]
            self._ensure_started(out)
            self._write_blocks(out, search.text_blocks(TextPart("".join(held[0]), held[1] or None)))
        return bytes(out)

    def _write_blocks(self, out: bytearray, blocks: list[dict[str, Any]]) -> None:
        """Whole blocks, each opened, filled and closed; they wait while a tool block is open."""
        cur = self._open
        if cur is not None and cur.kind in _TOOL_KINDS:
            self._late.extend(blocks)
            return
        if cur is not None:
            self._close_wire(out, cur)
            cur.status = BlockStatus.SUSPENDED
        for block in blocks:
            i = self._next_index
            self._next_index += 1
            start, deltas = search.block_events(block)
            out += encode_json(
                "content_block_start", {"type": "content_block_start", "index": i, "content_block": start}
            )
            self._started_ping(out)
            for d in deltas:
                out += encode_json("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
            out += encode_json("content_block_stop", {"type": "content_block_stop", "index": i})

    def _write_late(self, out: bytearray) -> None:
        if self._late and (self._open is None or self._open.kind not in _TOOL_KINDS):
            late, self._late = self._late, []
            self._write_blocks(out, late)

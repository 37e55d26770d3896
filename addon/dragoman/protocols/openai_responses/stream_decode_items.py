"""The output-item state of the Responses stream decoder: items and content parts -> IR blocks.

``ItemState`` (the base of ``ResponsesStreamDecoder``) opens one IR block per reasoning / tool-call item
and per message content part, and reconciles a full value (``*.done``, ``output_item.done``,
``content_part.done``) with the deltas already emitted: only the part no delta carried is emitted, and a
tool call whose final arguments disagree with its streamed deltas is an error. Memory per block is a few
counters (and a CRC-32 for arguments), never the text.
"""

from __future__ import annotations

import zlib
from enum import Enum
from typing import Any

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import CitationDelta
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.events import WebSearch
from dragoman.protocols._checks import ToolArgs
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import search
from dragoman.protocols.openai_responses.models import ContentPartEvent

#: the emitted-length key of the first summary part (the hot path builds no tuple)
_SUMMARY0 = ("summary", 0)


class Phase(Enum):
    WAITING = "waiting"  # nothing seen yet
    STREAMING = "streaming"  # MessageStart emitted
    DONE = "done"  # terminal event seen
    FAILED = "failed"  # an in-band error was emitted


class ItemKind(Enum):
    MESSAGE = "message"
    REASONING = "reasoning"
    FUNCTION = "function_call"
    CUSTOM = "custom_tool_call"
    SEARCH = "web_search_call"
    IGNORED = "ignored"


class Block:
    """One IR block: its index, whether it is open, and how many characters of each sub-stream
    (content part / summary part) were already emitted (bounded memory: counts, not text)."""

    __slots__ = ("index", "open", "emitted", "kind")

    def __init__(self, index: int, kind: BlockKind) -> None:
        self.index = index
        self.kind = kind
        self.open = True
        self.emitted: dict[tuple[str, int], int] = {}


class Item:
    __slots__ = ("kind", "item_id", "block", "parts", "summaries")

    def __init__(self, kind: ItemKind, item_id: str | None) -> None:
        self.kind = kind
        self.item_id = item_id
        self.block: Block | None = None  # reasoning / function / custom
        self.parts: dict[int, Block] = {}  # message content_index -> block
        self.summaries = 0  # reasoning summary parts started


ARGS_KEY = ("args", 0)
#: CRC-32 of the tool-argument text already streamed (bounded memory): a ``.done`` that disagrees with the
#: deltas cannot be repaired (they reached the client), so it is an error, never a corrupt "complete" call
ARGS_CRC = ("args_crc", 0)

_ITEM_KINDS: dict[str | None, ItemKind] = {
    "message": ItemKind.MESSAGE,
    "reasoning": ItemKind.REASONING,
    "function_call": ItemKind.FUNCTION,
    "custom_tool_call": ItemKind.CUSTOM,
    "web_search_call": ItemKind.SEARCH,
}


class ItemState:
    """Output items by id (and by output_index), their IR blocks, and the open tool calls' arguments."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.phase = Phase.WAITING
        self._items: dict[str, Item] = {}
        self._by_index: dict[int, str] = {}
        self._next_block = 0
        self._tool_use = False
        self._any_item = False
        #: arguments of the open function_call items (by block index), checked as JSON at the terminal event
        self._args = ToolArgs()
        #: annotations already passed on, by text block index (``response.output_text.annotation.added``)
        self._cited: dict[int, int] = {}

    def _new_block(self, kind: BlockKind) -> Block:
        b = Block(self._next_block, kind)
        self._next_block += 1
        return b

    def _lookup(self, item_id: str | None, output_index: int | None, what: str) -> Item:
        item = self._items.get(item_id) if item_id is not None else None
        if item is None and output_index is not None:
            key = self._by_index.get(output_index)
            item = self._items.get(key) if key is not None else None
        if item is None:
            raise UpstreamProtocolError(
                f"Responses event {what} for an unknown output item {item_id!r} (phase {self.phase.value})"
            )
        return item

    # ---------------------------------------------------------- output_item.added / done

    def _item_added(self, item: dict[str, Any], output_index: int | None, out: list[StreamEvent]) -> Item:
        self._any_item = True
        itype = item.get("type")
        item_id = item.get("id")
        if item_id is not None and type(item_id) is not str:  # it becomes the client's item id: never a list
            raise UpstreamProtocolError(f"Responses output item id is not a string (phase {self.phase.value})")
        key = item_id if isinstance(item_id, str) else f"#{output_index}"
        if key in self._items:
            raise UpstreamProtocolError(
                f"duplicate response.output_item.added for item {key!r} (phase {self.phase.value})"
            )
        kind = _ITEM_KINDS.get(itype, ItemKind.IGNORED)
        st = Item(kind, item_id)
        self._items[key] = st
        if output_index is not None:
            self._by_index[output_index] = key
        if kind is ItemKind.IGNORED:
            self.ctx.dropped.add(f"output.{itype}")
        elif kind is ItemKind.REASONING:
            st.block = self._new_block(BlockKind.THINKING)
            out.append(BlockStart(st.block.index, BlockKind.THINKING, item_id=item_id))
        elif kind is ItemKind.FUNCTION or kind is ItemKind.CUSTOM:
            self._call_added(st, item, out)
        return st

    def _call_added(self, st: Item, item: dict[str, Any], out: list[StreamEvent]) -> None:
        itype = item.get("type")
        name = item.get("name")
        call_id = item.get("call_id")
        if type(name) is not str or not name or (call_id is not None and type(call_id) is not str):
            raise UpstreamProtocolError(
                f"Responses {itype} item needs a string name and call_id (phase {self.phase.value})"
            )
        self._tool_use = True
        function = st.kind is ItemKind.FUNCTION
        bkind = BlockKind.TOOL_CALL if function else BlockKind.CUSTOM_TOOL_CALL
        b = st.block = self._new_block(bkind)
        if function:
            self._args.start(b.index, name)
        out.append(BlockStart(b.index, bkind, tool_call_id=call_id or st.item_id, name=name, item_id=st.item_id))
        initial = item.get("arguments" if function else "input")
        if initial:
            self._emit(b, ARGS_KEY, initial, out)

    def _item_done(self, item: dict[str, Any], output_index: int | None, out: list[StreamEvent]) -> None:
        item_id = item.get("id")
        key = item_id if isinstance(item_id, str) else f"#{output_index}"
        st = self._items.get(key)
        if st is None and output_index is not None and output_index in self._by_index:
            st = self._items.get(self._by_index[output_index])
        if st is None:  # no output_item.added (tolerated: some producers only send done)
            st = self._item_added({k: v for k, v in item.items() if k not in ("arguments", "input")}, output_index, out)
        if st.kind is ItemKind.MESSAGE:
            self._message_done(st, item, out)
        elif st.kind is ItemKind.SEARCH:
            out.append(WebSearch(search.part_from_item(item)))
        elif st.kind is ItemKind.REASONING:
            self._reasoning_done(st, item, out)
        elif st.kind is ItemKind.FUNCTION or st.kind is ItemKind.CUSTOM:
            b = st.block
            assert b is not None
            full = item.get("arguments" if st.kind is ItemKind.FUNCTION else "input")
            if full:
                self._emit(b, ARGS_KEY, full, out)
            self._stop(b, out)

    def _message_done(self, st: Item, item: dict[str, Any], out: list[StreamEvent]) -> None:
        for ci, p in enumerate(item.get("content") or []):
            ptype = p.get("type")
            if ptype == "output_text":
                b = self._part_block(st, ci, BlockKind.TEXT, out)
                self._emit(b, ("text", ci), p.get("text") or "", out)
            elif ptype == "refusal":
                b = self._part_block(st, ci, BlockKind.REFUSAL, out)
                self._emit(b, ("text", ci), p.get("refusal") or "", out)
            if ptype == "output_text" and p.get("annotations") and ci in st.parts:
                b = st.parts[ci]
                cites = search.citations_from(p["annotations"], self.ctx.dropped) or []
                if b.open:  # the annotations not passed on yet (a producer that sends only the done item)
                    out.extend(CitationDelta(b.index, c) for c in cites[self._cited.get(b.index, 0) :])
        for b in st.parts.values():
            self._stop(b, out)

    def _annotation(self, obj: dict[str, Any], out: list[StreamEvent]) -> None:
        """``response.output_text.annotation.added``: a citation of its content part's text."""
        st = self._lookup(obj.get("item_id"), obj.get("output_index"), "response.output_text.annotation.added")
        ci = obj.get("content_index")
        b = st.parts.get(ci if type(ci) is int else 0)
        cites = search.citations_from([obj.get("annotation")], self.ctx.dropped)
        if b is None or not b.open or not cites:
            self.ctx.dropped.add("annotations")
            return
        self._cited[b.index] = self._cited.get(b.index, 0) + 1
        out.append(CitationDelta(b.index, cites[0]))

    def _reasoning_done(self, st: Item, item: dict[str, Any], out: list[StreamEvent]) -> None:
        b = st.block
        assert b is not None
        for si, s in enumerate(item.get("summary") or []):
            self._summary_text(st, si, s.get("text") or "", out, full=True)
        for ci, c in enumerate(item.get("content") or []):
            if isinstance(c, dict) and c.get("type") == "reasoning_text":
                self._emit(b, ("raw", ci), c.get("text") or "", out)
        enc = item.get("encrypted_content")
        if enc is not None and type(enc) is not str:
            raise UpstreamProtocolError(
                f"Responses reasoning encrypted_content is not a string (phase {self.phase.value})"
            )
        if b.open and enc:
            out.append(SignatureDelta(b.index, encrypted_content=enc))
        self._stop(b, out)

    # ---------------------------------------------------------- content / summary parts

    def _part_block(self, st: Item, ci: int, kind: BlockKind, out: list[StreamEvent]) -> Block:
        b = st.parts.get(ci)
        if b is None:
            b = self._new_block(kind)
            st.parts[ci] = b
            out.append(BlockStart(b.index, kind, item_id=st.item_id))
        return b

    def _part(self, ev: ContentPartEvent, out: list[StreamEvent]) -> None:
        st = self._lookup(ev.item_id, ev.output_index, ev.type)
        if st.kind is ItemKind.MESSAGE:
            self._message_part(st, ev, out)
        elif st.kind is ItemKind.REASONING:
            part = ev.part or {}
            if ev.type == "response.reasoning_summary_part.added":
                self._summary_text(st, ev.summary_index or 0, part.get("text") or "", out, full=False)
            elif ev.type == "response.reasoning_summary_part.done":
                self._summary_text(st, ev.summary_index or 0, part.get("text") or "", out, full=True)
            elif ev.type == "response.content_part.done" and part.get("type") == "reasoning_text":
                assert st.block is not None
                self._emit(st.block, ("raw", ev.content_index or 0), part.get("text") or "", out)

    def _message_part(self, st: Item, ev: ContentPartEvent, out: list[StreamEvent]) -> None:
        part = ev.part or {}
        ptype = part.get("type")
        ci = ev.content_index or 0
        if ptype not in ("output_text", "refusal"):
            self.ctx.dropped.add(f"output.content.{ptype}")
            return
        kind = BlockKind.TEXT if ptype == "output_text" else BlockKind.REFUSAL
        value = part.get("text") if kind is BlockKind.TEXT else part.get("refusal")
        if ev.type == "response.content_part.added":
            if ci in st.parts:
                raise UpstreamProtocolError(f"duplicate {ev.type} for content {ci} (phase {self.phase.value})")
            b = self._part_block(st, ci, kind, out)
            if value:
                self._emit(b, ("text", ci), value, out)
        else:
            b = self._part_block(st, ci, kind, out)
            if value:
                self._emit(b, ("text", ci), value, out)
            self._stop(b, out)

    def _summary_text(self, st: Item, si: int, text: str, out: list[StreamEvent], *, full: bool) -> None:
        """Start summary part ``si`` if needed (with a blank-line separator after an earlier part),
        then emit ``text`` (a full value when ``full``, else a fragment)."""
        if type(text) is not str:
            raise UpstreamProtocolError(f"Responses reasoning summary text is not a string (phase {self.phase.value})")
        b = st.block
        assert b is not None
        key = _SUMMARY0 if si == 0 else ("summary", si)
        if key not in b.emitted:
            if st.summaries > 0 and b.open:
                out.append(ThinkingDelta(b.index, "\n\n", summary=True))
            st.summaries += 1
            b.emitted[key] = 0
        if not text:
            return
        if full:
            self._emit(b, key, text, out, summary=True)
        elif b.open:
            b.emitted[key] += len(text)
            out.append(ThinkingDelta(b.index, text, True))  # summary=True (positional: cheaper to build)

    # ---------------------------------------------------------- full values, stops

    def _emit(
        self,
        b: Block,
        key: tuple[str, int],
        full: str,
        out: list[StreamEvent],
        *,
        summary: bool = False,
    ) -> None:
        """Emit the part of a full value that no delta carried."""
        if type(full) is not str:  # e.g. a list-typed "arguments": it must never reach an encoder
            raise UpstreamProtocolError(
                f"Responses {key[0]} value is a {type(full).__name__}, not a string (phase {self.phase.value})"
            )
        if not b.open:
            return
        n = b.emitted.get(key, 0)
        if key == ARGS_KEY and n and zlib.crc32(full[:n].encode()) != b.emitted.get(ARGS_CRC, 0):
            raise UpstreamProtocolError(
                f"final tool-call arguments disagree with the streamed argument deltas (phase {self.phase.value})"
            )
        if len(full) <= n:
            return
        rest = full[n:]
        b.emitted[key] = len(full)
        if key == ARGS_KEY:
            b.emitted[ARGS_CRC] = zlib.crc32(full.encode())
            self._args.add(b.index, rest)
        out.append(_fragment(b, rest, summary))

    def _stop(self, b: Block, out: list[StreamEvent]) -> None:
        if b.open:
            b.open = False
            self._args.stop(b.index)
            out.append(BlockStop(b.index))

    def _close_all(self, out: list[StreamEvent]) -> None:
        blocks: list[Block] = []
        for st in self._items.values():
            if st.block is not None and st.block.open:
                blocks.append(st.block)
            blocks.extend(b for b in st.parts.values() if b.open)
        for b in sorted(blocks, key=lambda x: x.index):
            self._stop(b, out)


def _fragment(b: Block, text: str, summary: bool) -> StreamEvent:
    if b.kind is BlockKind.TOOL_CALL or b.kind is BlockKind.CUSTOM_TOOL_CALL:
        return ToolArgsDelta(b.index, text)
    if b.kind is BlockKind.THINKING:
        return ThinkingDelta(b.index, text, summary=summary)
    return TextDelta(b.index, text)

"""IR stream events -> Anthropic Messages SSE: ``AnthropicStreamEncoder``.

The client gets the real API's order: ``message_start``, first ``content_block_start``, ``ping``,
deltas, ``content_block_stop``, ..., ``message_delta``, ``message_stop``. Output indices are contiguous
from 0 in start order and only one block is open at a time; blocks that arrive interleaved (Chat's
parallel tool calls) are held while a tool block is open and replayed after it.

Usage: ``message_start`` carries the upstream's input figures when it has them at the start (Anthropic);
a Chat or Responses upstream reports usage only at the end, so ``message_start`` shows the request's
estimate (``Context.input_tokens_estimate``, the count_tokens estimator) and ``message_delta`` the
upstream's real figures (the official SDKs' accumulators keep the later ones).

Search (``search``): a ``WebSearch`` becomes a ``server_tool_use`` block and its ``web_search_tool_result``
block. Cited spans are blocks of their own with their citations, as the real API sends them; an upstream
that cites after the text (Responses annotations, Chat url_citation) makes the encoder hold each text block
until its stop once a search ran (or from the start on a Chat upstream that searches), then send its spans.

Hot path: a text/thinking/tool-argument delta for the block open on the wire is written from a prefix
built when the block opened (``OutBlock.prefix``) plus the ``orjson`` dump of the text: no dict, no
generic JSON encoding per event.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

import orjson

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.carry import UNSIGNED
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import CitationDelta
from dragoman.ir.events import Keepalive
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import StreamError
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.events import WebSearch
from dragoman.ir.mapping import IR_TO_ANTHROPIC
from dragoman.ir.mapping import refused_stop
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.search import SEARCH_ANNOTATIONS
from dragoman.ir.search import SEARCH_GROUNDING
from dragoman.ir.search import Citation
from dragoman.protocols._checks import safe_message
from dragoman.protocols.anthropic_messages import search
from dragoman.protocols.anthropic_messages.errors import error_type
from dragoman.protocols.anthropic_messages.errors import overflow_message
from dragoman.protocols.anthropic_messages.response import UNSIGNED_PATH
from dragoman.protocols.anthropic_messages.response import UNSIGNED_REASON
from dragoman.protocols.anthropic_messages.response import message_id
from dragoman.protocols.anthropic_messages.response import thinking_signature
from dragoman.protocols.anthropic_messages.response import usage_to_wire
from dragoman.protocols.anthropic_messages.stream_hold import BlockEvent
from dragoman.protocols.anthropic_messages.stream_hold import BlockStatus
from dragoman.protocols.anthropic_messages.stream_hold import OutBlock
from dragoman.protocols.anthropic_messages.stream_hold import Run
from dragoman.protocols.anthropic_messages.stream_hold import TextEvent
from dragoman.protocols.anthropic_messages.stream_hold import hold
from dragoman.protocols.anthropic_messages.stream_search import SearchBlocks
from dragoman.protocols.base import KEEPALIVE_COMMENT
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamEncoder
from dragoman.sse.encoder import encode_json

logger = logging.getLogger(__name__)

_PING = encode_json("ping", {"type": "ping"})


class EncPhase(Enum):
    IDLE = "idle"  # nothing sent
    STARTED = "started"  # message_start sent, no block yet (ping not sent)
    STREAMING = "streaming"  # first block started and ping sent
    ENDING = "ending"  # message_delta sent
    STOPPED = "stopped"  # message_stop sent
    FAILED = "failed"  # error sent


_TOOL_KINDS = (BlockKind.TOOL_CALL, BlockKind.CUSTOM_TOOL_CALL)
#: the fast path's (IR delta type, block kind) pairs -> the wire delta's head (after ``"delta":``)
_DELTA_HEADS = {
    (TextDelta, BlockKind.TEXT): b'{"type":"text_delta","text":',
    (TextDelta, BlockKind.REFUSAL): b'{"type":"text_delta","text":',
    (ThinkingDelta, BlockKind.THINKING): b'{"type":"thinking_delta","thinking":',
    (ToolArgsDelta, BlockKind.TOOL_CALL): b'{"type":"input_json_delta","partial_json":',
}
_DELTA_HEAD_BY_KIND = {kind: head for (_, kind), head in _DELTA_HEADS.items()}
_FAST_EVENT: dict[BlockKind, type[TextEvent]] = {kind: cls for (cls, kind) in _DELTA_HEADS}
_DELTA_TAIL = b"}}\n\n"
_dumps = orjson.dumps
_loads = orjson.loads
_CUSTOM_PREFIX = '{"' + CUSTOM_TOOL_PARAM + '":"'


class AnthropicStreamEncoder(SearchBlocks, StreamEncoder):
    """IR events -> Anthropic SSE in the real API's order.

    ``message_start``, first ``content_block_start``, ``ping``, deltas, ``content_block_stop``, ...,
    ``message_delta``, ``message_stop``. Output indices are contiguous from 0 in start order and only one
    block is open at a time: a block starting while a text/thinking block is open closes that one (a later
    delta for it opens a fresh block of the same kind); a block starting while a tool block is open is
    buffered (its own events only) and replayed when the tool block stops.
    """

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.phase = EncPhase.IDLE
        self._blocks: dict[int, OutBlock] = {}
        self._open: OutBlock | None = None
        self._queue: list[int] = []
        self._next_index = 0
        self._refused = False  # a refusal block was seen: the stop reason says so (``refused_stop``)
        #: held text blocks (IR index -> (text pieces, citations)) and whether new text blocks are held
        self._held: dict[int, tuple[list[str], list[Citation]]] = {}
        self._hold_text = ctx.search == SEARCH_ANNOTATIONS or ctx.search == SEARCH_GROUNDING
        #: whole blocks waiting for an open tool block to stop; searches run (usage)
        self._late: list[dict[str, Any]] = []
        self._searches = 0

    # -- framing helpers

    def _emit_message_start(self, out: bytearray, ev: MessageStart) -> None:
        usage = ev.usage
        estimate = self.ctx.input_tokens_estimate
        if estimate is not None and (usage is None or usage.input_tokens is None):
            # an upstream that reports usage only at the end (Chat, Responses): the local estimate until then
            usage = (usage or Usage()).merged(Usage(input_tokens=estimate))
        message: dict[str, Any] = {
            "id": message_id(ev.id),
            "type": "message",
            "role": "assistant",
            "model": ev.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_to_wire(usage),
        }
        out += encode_json("message_start", {"type": "message_start", "message": message})
        self.phase = EncPhase.STARTED

    def _ensure_started(self, out: bytearray) -> None:
        if self.phase is EncPhase.IDLE:
            model = self.ctx.request.model if self.ctx.request is not None else ""
            self._emit_message_start(out, MessageStart(id="", model=model))

    def _open_block(self, out: bytearray, b: OutBlock) -> None:
        b.wire_index = self._next_index
        self._next_index += 1
        b.status = BlockStatus.OPEN
        self._open = b
        kind = b.kind
        head = _DELTA_HEAD_BY_KIND.get(kind)
        if head is not None:
            # == encode_json("content_block_delta", {"type": ..., "index": i, "delta": {"type": ..., X: ...}})
            b.prefix = (
                b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,"delta":' % b.wire_index
                + head
            )
        if kind is BlockKind.TEXT or kind is BlockKind.REFUSAL:
            cb: dict[str, Any] = {"type": "text", "text": ""}
        elif kind is BlockKind.THINKING:
            cb = {"type": "thinking", "thinking": "", "signature": ""}
        elif kind is BlockKind.REDACTED_THINKING:
            cb = {"type": "redacted_thinking", "data": b.start.data or ""}
        else:
            cb = {"type": "tool_use", "id": b.start.tool_call_id or "", "name": b.start.name or "", "input": {}}
        out += encode_json(
            "content_block_start", {"type": "content_block_start", "index": b.wire_index, "content_block": cb}
        )
        self._started_ping(out)
        if kind is BlockKind.CUSTOM_TOOL_CALL:
            self._delta(out, b, {"type": "input_json_delta", "partial_json": _CUSTOM_PREFIX})

    def _started_ping(self, out: bytearray) -> None:
        """After the first block's start: the ``ping`` the real API sends there."""
        if self.phase is EncPhase.STARTED:
            out += _PING
            self.phase = EncPhase.STREAMING

    def _delta(self, out: bytearray, b: OutBlock, delta: dict[str, Any]) -> None:
        out += encode_json(
            "content_block_delta", {"type": "content_block_delta", "index": b.wire_index, "delta": delta}
        )

    def _close_wire(self, out: bytearray, b: OutBlock) -> None:
        """Close ``b`` on the wire (it must be the open block)."""
        if b.kind is BlockKind.THINKING:
            sig = thinking_signature(b.signature, b.encrypted, b.item_id)
            if sig == UNSIGNED:
                self.ctx.dropped.invent(UNSIGNED_PATH, UNSIGNED_REASON)
            self._delta(out, b, {"type": "signature_delta", "signature": sig})
        elif b.kind is BlockKind.CUSTOM_TOOL_CALL:
            self._delta(out, b, {"type": "input_json_delta", "partial_json": '"}'})
        out += encode_json("content_block_stop", {"type": "content_block_stop", "index": b.wire_index})
        self._open = None

    # -- the one-open-block discipline

    def _make_live(self, out: bytearray, b: OutBlock) -> bool:
        """Make ``b`` the open wire block if possible; False when it must wait (a tool block is open)."""
        if b.status is BlockStatus.OPEN:
            return True
        cur = self._open
        if cur is not None:
            if cur.kind in _TOOL_KINDS:
                return False
            self._close_wire(out, cur)
            cur.status = BlockStatus.SUSPENDED
        self._open_block(out, b)
        return True

    def _flush(self, out: bytearray) -> None:
        """Replay buffered blocks in start order while no tool block is open."""
        while self._queue and (self._open is None or self._open.kind not in _TOOL_KINDS):
            idx = self._queue.pop(0)
            b = self._blocks[idx]
            events, b.buffer = b.buffer, []
            b.status = BlockStatus.SUSPENDED  # so _make_live opens it fresh
            if not self._make_live(out, b):  # pragma: no cover - guarded by the loop condition
                raise UpstreamProtocolError("internal: cannot open a buffered block")
            for ev in events:
                self._live(out, b, ev.event() if isinstance(ev, Run) else ev)

    def _live(self, out: bytearray, b: OutBlock, ev: BlockEvent) -> None:
        """Apply one block event to ``b`` which is open on the wire (or suspended)."""
        if isinstance(ev, BlockStop):
            if b.status is BlockStatus.OPEN:
                self._close_wire(out, b)
            b.status = BlockStatus.DONE
            self._blocks.pop(ev.index, None)
            return
        if isinstance(ev, SignatureDelta):
            if ev.signature is not None:
                b.signature = ev.signature
            if ev.encrypted_content is not None:
                b.encrypted = ev.encrypted_content
            return
        if b.status is not BlockStatus.OPEN and not self._make_live(out, b):
            self._pend(b, ev)
            return
        if type(ev) is TextDelta:
            self._delta(out, b, {"type": "text_delta", "text": ev.text})
        elif type(ev) is ThinkingDelta:
            self._delta(out, b, {"type": "thinking_delta", "thinking": ev.text})
        elif type(ev) is ToolArgsDelta:
            if b.kind is BlockKind.CUSTOM_TOOL_CALL:
                fragment = orjson.dumps(ev.fragment).decode()[1:-1]
            else:
                fragment = ev.fragment
            self._delta(out, b, {"type": "input_json_delta", "partial_json": fragment})

    def _pend(self, b: OutBlock, ev: BlockEvent) -> None:
        if b.status is not BlockStatus.PENDING:
            # a suspended block resumes later: it waits behind the open tool block as a fresh block
            b.status = BlockStatus.PENDING
            self._queue.append(b.start.index)
        hold(b, ev)

    def _block_event(self, out: bytearray, ev: BlockEvent) -> None:
        b = self._blocks.get(ev.index)
        if b is None:
            raise UpstreamProtocolError(
                f"{type(ev).__name__} for unknown block index {ev.index} in phase {self.phase.name}"
            )
        if b.status is BlockStatus.PENDING:
            hold(b, ev)
            return
        self._live(out, b, ev)
        if self._open is None:
            self._flush(out)
            self._write_late(out)

    def _finish_blocks(self, out: bytearray) -> None:
        """Before message_delta: close the open block and replay everything buffered."""
        while True:
            if self._open is not None:
                cur = self._open
                self._close_wire(out, cur)
                cur.status = BlockStatus.SUSPENDED
            if not self._queue:
                break
            self._flush(out)
        self._blocks.clear()
        self._write_late(out)

    # -- interface

    def encode(self, ev: StreamEvent) -> bytes:
        if self.phase is EncPhase.STREAMING:
            # hot path: a delta for the block open on the wire, from its prebuilt prefix
            if type(ev) is TextDelta or type(ev) is ThinkingDelta:
                b = self._blocks.get(ev.index)
                if b is not None and b.fast is type(ev) and b.status is BlockStatus.OPEN:
                    return b.prefix + _dumps(ev.text) + _DELTA_TAIL
            elif type(ev) is ToolArgsDelta:
                b = self._blocks.get(ev.index)
                if b is not None and b.fast is ToolArgsDelta and b.status is BlockStatus.OPEN:
                    return b.prefix + _dumps(ev.fragment) + _DELTA_TAIL
        if self.phase is EncPhase.FAILED or self.phase is EncPhase.STOPPED:
            return b""
        if self._hold_text or self._held or type(ev) is WebSearch or type(ev) is CitationDelta:
            searched = self._search_event(ev)
            if searched is not None:
                return searched
        if isinstance(ev, StreamError):
            return self.error(ev.error)
        if isinstance(ev, Keepalive):  # the translator calls ``keepalive`` itself; this is for direct callers
            return self.keepalive()
        out = bytearray()
        if isinstance(ev, MessageStart):
            if self.phase is not EncPhase.IDLE:
                raise UpstreamProtocolError(f"duplicate MessageStart in phase {self.phase.name}")
            self._emit_message_start(out, ev)
            return bytes(out)
        self._ensure_started(out)
        if isinstance(ev, BlockStart):
            self._block_start(out, ev)
        elif isinstance(ev, MessageDelta):
            self._message_delta(out, ev)
        elif isinstance(ev, MessageStop):
            self._message_stop(out)
        else:
            if self.phase is EncPhase.ENDING:
                raise UpstreamProtocolError(f"{type(ev).__name__} after MessageDelta in phase {self.phase.name}")
            if isinstance(ev, (CitationDelta, WebSearch)):  # reached only when _search_event passed them on
                self.ctx.dropped.add("citations")
                return bytes(out)
            self._block_event(out, ev)
        return bytes(out)

    def literal(self, kind: type[StreamEvent], index: int, token: bytes) -> bytes | None:
        # ``encode``'s hot path for a delta, the text already a JSON string token; a delta of a block waiting
        # for the wire (a parallel call behind the open one) held as ``encode`` holds it
        if self.phase is EncPhase.STREAMING:
            b = self._blocks.get(index)
            if b is not None and b.fast is kind:
                if b.status is BlockStatus.OPEN:
                    return b.prefix + token + _DELTA_TAIL
                if b.status is BlockStatus.PENDING and not self._hold_text and not self._held:
                    hold(b, kind(index, token[1:-1].decode() if 92 not in token else _loads(token)))
                    return b""
        return None

    def pieces(self, kind: type[StreamEvent], index: int) -> list[bytes] | None:
        # ``literal`` of an open block's delta writes its prefix, the token, the tail, and changes nothing
        if self.phase is EncPhase.STREAMING:
            b = self._blocks.get(index)
            if b is not None and b.fast is kind and b.status is BlockStatus.OPEN:
                return [b.prefix, _DELTA_TAIL]
        return None

    def _block_start(self, out: bytearray, ev: BlockStart) -> None:
        if self.phase is EncPhase.ENDING:
            raise UpstreamProtocolError(f"BlockStart after MessageDelta in phase {self.phase.name}")
        if ev.index in self._blocks:
            raise UpstreamProtocolError(f"duplicate BlockStart for index {ev.index} in phase {self.phase.name}")
        b = OutBlock(ev, _FAST_EVENT.get(ev.kind))
        self._blocks[ev.index] = b
        if ev.kind is BlockKind.REFUSAL:
            self._refused = True
        if not self._make_live(out, b):
            self._queue.append(ev.index)

    def _message_delta(self, out: bytearray, ev: MessageDelta) -> None:
        if self.phase is EncPhase.ENDING:
            raise UpstreamProtocolError(f"duplicate MessageDelta in phase {self.phase.name}")
        self._finish_blocks(out)
        if self.phase is EncPhase.STARTED:
            out += encode_json("ping", {"type": "ping"})
        usage = usage_to_wire(ev.usage) if ev.usage is not None else {"output_tokens": 0}
        search.with_searches(usage, ev.usage, self._searches)
        # an upstream that ended without saying why (a null or unknown reason): the turn ended, as in Chat
        stop = refused_stop(ev.stop_reason, self._refused) or StopReason.END_TURN
        delta = {
            "stop_reason": IR_TO_ANTHROPIC[stop],
            "stop_sequence": ev.stop_sequence,
        }
        out += encode_json("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        self.phase = EncPhase.ENDING

    def _message_stop(self, out: bytearray) -> None:
        if self.phase is not EncPhase.ENDING:
            self._finish_blocks(out)
            stop = refused_stop(None, self._refused) or StopReason.END_TURN
            delta = {"stop_reason": IR_TO_ANTHROPIC[stop], "stop_sequence": None}
            out += encode_json(
                "message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 0}}
            )
        out += encode_json("message_stop", {"type": "message_stop"})
        self.phase = EncPhase.STOPPED

    def keepalive(self) -> bytes:
        """A ``ping`` event, as the real API sends; before ``message_start`` an SSE comment instead (the SDK's
        stream helper rejects any event before ``message_start``); nothing after the end."""
        phase = self.phase
        if phase is EncPhase.IDLE:
            return KEEPALIVE_COMMENT
        if phase is EncPhase.STOPPED or phase is EncPhase.FAILED:
            return b""
        return _PING

    def error(self, err: ErrorInfo) -> bytes:
        self.phase = EncPhase.FAILED
        message = overflow_message(err) if err.overflow is not None else err.message
        body = {"type": "error", "error": {"type": error_type(err), "message": message}}
        if err.request_id:
            body["request_id"] = err.request_id
        try:
            return encode_json("error", body)
        except (TypeError, ValueError):  # an upstream field no JSON encoder can write: the message only
            logger.warning("Anthropic error frame: upstream error fields not encodable; sending the message only")
            return encode_json(
                "error", {"type": "error", "error": {"type": "api_error", "message": safe_message(err.message)}}
            )

    def close(self) -> bytes:
        return b""

"""The output items of the Responses stream encoder: their state and their framing on the wire.

``OutItem`` is one output item being streamed (one per IR block); ``ItemFraming`` (the base of
``ResponsesStreamEncoder``) numbers events (``sequence_number``) and writes an item's opening events
(``output_item.added`` ...), its delta events (from a prefix built once per item: the hot path), the
replay of an item that was held back (its text so far as one delta) and its closing events
(``*.done`` ... ``output_item.done``).
"""

from __future__ import annotations

from typing import Any

import orjson

from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.events import BlockKind
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.search import WebSearchPart
from dragoman.protocols.base import Context
from dragoman.protocols.openai_responses import search
from dragoman.protocols.openai_responses.response_encode import call_item
from dragoman.protocols.openai_responses.response_encode import message_item
from dragoman.protocols.openai_responses.response_encode import reasoning_item
from dragoman.protocols.openai_responses.response_encode import refusal_part
from dragoman.protocols.openai_responses.response_encode import text_part
from dragoman.protocols.openai_responses.response_encode import thinking_enc
from dragoman.protocols.openai_responses.response_encode import unwrap_custom_input
from dragoman.sse import encode_json

_COMPACT = 256
_dumps = orjson.dumps


class OutItem:
    """One output item being streamed. ``chunks`` holds the text/arguments so far (the snapshot)."""

    __slots__ = (
        "kind",
        "output_index",
        "item_id",
        "call_id",
        "name",
        "namespace",
        "custom",
        "unwrap",
        "chunks",
        "limit",
        "prefix",
        "suffix",
        "fast",
        "signature",
        "enc",
        "redacted",
        "summary_started",
        "open",
        "held",
        "search",
        "annotations",
    )

    def __init__(self, kind: BlockKind, output_index: int, item_id: str) -> None:
        self.kind = kind
        self.output_index = output_index
        self.item_id = item_id
        self.call_id = ""
        self.name = ""
        self.namespace: str | None = None
        self.custom = False  # emitted as custom_tool_call
        self.unwrap = False  # a custom tool offered as a function: unwrap ``{"input": ...}`` at stop
        self.chunks: list[str] = []
        #: ``chunks`` is compacted when it reaches this length (see ``keep``)
        self.limit = _COMPACT
        #: the bytes of this item's delta event up to the delta value (built on first use)
        self.prefix = b""  # empty until built
        #: the bytes between the delta value and the sequence number (built with ``prefix``)
        self.suffix = b""
        #: the IR delta class the encoder's hot path writes for this item once ``prefix`` is built (None: none)
        self.fast: type | None = None
        self.signature: str | None = None
        self.enc: str | None = None
        self.redacted: str | None = None
        self.summary_started = False
        #: False once the IR block stopped
        self.open = True
        #: not on the wire yet: an earlier item is still open there (its text is kept in ``chunks``)
        self.held = False
        #: a web_search_call item: its search (whole; it has no IR block)
        self.search: WebSearchPart | None = None
        #: a message item's url_citation annotations (``search.annotation``), in order
        self.annotations: list[dict[str, Any]] = []

    def keep(self, text: str) -> None:
        """Append to the snapshot; every ``_COMPACT`` small pieces are joined into one, so memory is
        proportional to the text, not to the number of deltas."""
        chunks = self.chunks
        chunks.append(text)
        if len(chunks) >= self.limit:
            self.compact()

    def compact(self) -> None:
        """Join the last ``_COMPACT`` pieces (``chunks`` reached ``limit``; a hot path appends itself)."""
        chunks = self.chunks
        start = self.limit - _COMPACT
        chunks[start:] = ["".join(chunks[start:])]
        self.limit = start + 1 + _COMPACT


class ItemFraming:
    """Event numbering and the wire events of one output item's life."""

    #: the encoder's items by IR block index, and its phase
    _blocks: dict[int, OutItem]
    phase: Any

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._seq = 0
        #: the final items by output_index (None until the item is done), for the terminal response object
        self._output: list[dict[str, Any] | None] = []

    def _delta_ev(self, b: OutItem, etype: str, index_field: bytes, delta: str, tail: bytes) -> bytes:
        """== ``self._ev(etype, {"item_id", "output_index", [index_field: 0,] "delta", ...})`` from a
        prefix and suffix built once per item (an item's ``etype``, ``index_field`` and ``tail`` never
        change), so an event is one orjson call, one int format and one join (``ResponsesStreamEncoder``'s
        hot path does the same inline once ``prefix`` is built)."""
        prefix = b.prefix
        if not prefix:
            prefix = b.prefix = (
                b"event: "
                + etype.encode()
                + b'\ndata: {"item_id":'
                + _dumps(b.item_id)
                + b',"output_index":%d,' % b.output_index
                + index_field
                + b'"delta":'
            )
            b.suffix = tail + b'"type":"' + etype.encode() + b'","sequence_number":'
            kind = b.kind
            if kind is BlockKind.TEXT or kind is BlockKind.REFUSAL:
                b.fast = TextDelta
            elif kind is BlockKind.THINKING:  # its summary part was added before its first delta
                b.fast = ThinkingDelta
            elif (kind is BlockKind.TOOL_CALL or kind is BlockKind.CUSTOM_TOOL_CALL) and not b.unwrap:
                b.fast = ToolArgsDelta
        seq = self._seq
        self._seq = seq + 1
        return b"%b%b%b%d}\n\n" % (prefix, _dumps(delta), b.suffix, seq)

    def _ev(self, etype: str, payload: dict[str, Any]) -> bytes:
        payload["type"] = etype
        payload["sequence_number"] = self._seq
        self._seq += 1
        return encode_json(etype, payload)

    # ---------------------------------------------------------- deltas (the slow way: see ``encode``)

    def _block(self, index: int, what: str) -> OutItem:
        b = self._blocks.get(index)
        if b is None or not b.open:
            raise UpstreamProtocolError(f"{what} for unknown or closed block {index} (phase {self.phase.value})")
        return b

    def _text_delta(self, ev: TextDelta) -> bytes:
        b = self._block(ev.index, "TextDelta")
        if b.kind is BlockKind.TEXT:
            b.keep(ev.text)
            if b.held:
                return b""
            return self._delta_ev(b, "response.output_text.delta", b'"content_index":0,', ev.text, b',"logprobs":[],')
        if b.kind is BlockKind.REFUSAL:
            b.keep(ev.text)
            if b.held:
                return b""
            return self._delta_ev(b, "response.refusal.delta", b'"content_index":0,', ev.text, b",")
        raise UpstreamProtocolError(f"TextDelta for a {b.kind.value} block (phase {self.phase.value})")

    def _thinking_delta(self, ev: ThinkingDelta) -> bytes:
        b = self._block(ev.index, "ThinkingDelta")
        if b.kind is not BlockKind.THINKING:
            raise UpstreamProtocolError(f"ThinkingDelta for a {b.kind.value} block (phase {self.phase.value})")
        if not ev.text:
            return b""
        if b.held:
            b.keep(ev.text)
            return b""
        out = b""
        if not b.summary_started:
            out = self._summary_part_added(b)
        b.keep(ev.text)
        return out + self._delta_ev(b, "response.reasoning_summary_text.delta", b'"summary_index":0,', ev.text, b",")

    def _args_delta(self, ev: ToolArgsDelta) -> bytes:
        b = self._block(ev.index, "ToolArgsDelta")
        if b.kind is not BlockKind.TOOL_CALL and b.kind is not BlockKind.CUSTOM_TOOL_CALL:
            raise UpstreamProtocolError(f"ToolArgsDelta for a {b.kind.value} block (phase {self.phase.value})")
        b.keep(ev.fragment)
        if b.unwrap or not ev.fragment or b.held:
            return b""  # unwrap: the raw input is only known once the JSON arguments are complete
        etype = "response.custom_tool_call_input.delta" if b.custom else "response.function_call_arguments.delta"
        return self._delta_ev(b, etype, b"", ev.fragment, b",")

    # ---------------------------------------------------------- opening

    def _item_added(self, b: OutItem) -> bytes:
        oi = b.output_index
        kind = b.kind
        if kind is BlockKind.TEXT or kind is BlockKind.REFUSAL:
            part = text_part("") if kind is BlockKind.TEXT else refusal_part("")
            added = message_item(b.item_id, part, "in_progress")
            added["content"] = []
            return self._ev("response.output_item.added", {"output_index": oi, "item": added}) + self._ev(
                "response.content_part.added",
                {"item_id": b.item_id, "output_index": oi, "content_index": 0, "part": part},
            )
        if kind is BlockKind.THINKING or kind is BlockKind.REDACTED_THINKING:
            return self._ev(
                "response.output_item.added",
                {"output_index": oi, "item": {"id": b.item_id, "type": "reasoning", "summary": []}},
            )
        item = call_item(b.item_id, b.call_id, b.name, "", custom=b.custom, namespace=b.namespace, status="in_progress")
        return self._ev("response.output_item.added", {"output_index": oi, "item": item})

    def _replay(self, b: OutItem) -> bytes:
        """A held item going on the wire: ``output_item.added`` (...), then everything it received so far
        as ONE delta (the client concatenates deltas anyway)."""
        b.held = False
        if b.search is not None:
            return self._search_added(b)
        out = self._item_added(b)
        value = "".join(b.chunks)
        b.chunks = [value]
        if not value:
            return out
        kind = b.kind
        if kind is BlockKind.TEXT:
            out += self._delta_ev(b, "response.output_text.delta", b'"content_index":0,', value, b',"logprobs":[],')
            for n, a in enumerate(b.annotations):
                out += self._annotation_ev(b, n, a)
            return out
        if kind is BlockKind.REFUSAL:
            return out + self._delta_ev(b, "response.refusal.delta", b'"content_index":0,', value, b",")
        if kind is BlockKind.THINKING:
            out += self._summary_part_added(b)
            return out + self._delta_ev(b, "response.reasoning_summary_text.delta", b'"summary_index":0,', value, b",")
        if b.unwrap:  # a custom tool offered as a function: its raw input is known at its stop
            return out
        etype = "response.custom_tool_call_input.delta" if b.custom else "response.function_call_arguments.delta"
        return out + self._delta_ev(b, etype, b"", value, b",")

    def _annotation_ev(self, b: OutItem, n: int, annotation: dict[str, Any]) -> bytes:
        return self._ev(
            "response.output_text.annotation.added",
            {
                "item_id": b.item_id,
                "output_index": b.output_index,
                "content_index": 0,
                "annotation_index": n,
                "annotation": annotation,
            },
        )

    def _search_added(self, b: OutItem) -> bytes:
        """A web_search_call going on the wire: added (in progress), in_progress, searching."""
        assert b.search is not None
        where = {"item_id": b.item_id, "output_index": b.output_index}
        added = search.call_item(b.search, b.item_id, done=False)
        return (
            self._ev("response.output_item.added", {"output_index": b.output_index, "item": added})
            + self._ev("response.web_search_call.in_progress", dict(where))
            + self._ev("response.web_search_call.searching", dict(where))
        )

    def _search_done(self, b: OutItem) -> tuple[bytes, dict[str, Any]]:
        assert b.search is not None
        item = search.call_item(b.search, b.item_id)
        if b.search.error is not None:  # the Responses stream has no failed event: the item says failed
            return b"", item
        where = {"item_id": b.item_id, "output_index": b.output_index}
        return self._ev("response.web_search_call.completed", where), item

    def _summary_part_added(self, b: OutItem) -> bytes:
        b.summary_started = True
        return self._ev(
            "response.reasoning_summary_part.added",
            {
                "item_id": b.item_id,
                "output_index": b.output_index,
                "summary_index": 0,
                "part": {"type": "summary_text", "text": ""},
            },
        )

    # ---------------------------------------------------------- closing

    def _block_stop(self, b: OutItem, status: str = "completed") -> bytes:
        """Close one output item. status is incomplete when an error cuts the item short."""
        b.open = False
        if b.search is not None:
            out, item = self._search_done(b)
            self._output[b.output_index] = item
            return out + self._ev("response.output_item.done", {"output_index": b.output_index, "item": item})
        value = "".join(b.chunks)
        b.chunks = [value]
        if b.kind is BlockKind.TEXT or b.kind is BlockKind.REFUSAL:
            out, item = self._message_done(b, value, status)
        elif b.kind is BlockKind.THINKING or b.kind is BlockKind.REDACTED_THINKING:
            out, item = self._reasoning_done(b, value)
        else:
            out, item = self._call_done(b, value, status)
        self._output[b.output_index] = item
        return out + self._ev("response.output_item.done", {"output_index": b.output_index, "item": item})

    def _message_done(self, b: OutItem, value: str, status: str) -> tuple[bytes, dict[str, Any]]:
        oi = b.output_index
        if b.kind is BlockKind.TEXT:
            part = text_part(value)
            part["annotations"] = b.annotations
            out = self._ev(
                "response.output_text.done",
                {"item_id": b.item_id, "output_index": oi, "content_index": 0, "text": value, "logprobs": []},
            )
        else:
            part = refusal_part(value)
            out = self._ev(
                "response.refusal.done",
                {"item_id": b.item_id, "output_index": oi, "content_index": 0, "refusal": value},
            )
        out += self._ev(
            "response.content_part.done",
            {"item_id": b.item_id, "output_index": oi, "content_index": 0, "part": part},
        )
        return out, message_item(b.item_id, part, status)

    def _reasoning_done(self, b: OutItem, value: str) -> tuple[bytes, dict[str, Any]]:
        oi = b.output_index
        out = b""
        if b.summary_started:
            out += self._ev(
                "response.reasoning_summary_text.done",
                {"item_id": b.item_id, "output_index": oi, "summary_index": 0, "text": value},
            )
            out += self._ev(
                "response.reasoning_summary_part.done",
                {
                    "item_id": b.item_id,
                    "output_index": oi,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": value},
                },
            )
        if b.kind is BlockKind.REDACTED_THINKING:
            enc = carry.wrap_anthropic(None, "", b.redacted or "")
        else:
            enc = thinking_enc(b.signature, b.enc, value, None)
        return out, reasoning_item(b.item_id, value, enc)

    def _call_done(self, b: OutItem, value: str, status: str) -> tuple[bytes, dict[str, Any]]:
        oi = b.output_index
        out = b""
        if b.unwrap:
            value = unwrap_custom_input(value)
            b.chunks = [value]
            if value:
                out += self._ev(
                    "response.custom_tool_call_input.delta",
                    {"item_id": b.item_id, "output_index": oi, "delta": value},
                )
        if b.custom:
            out += self._ev(
                "response.custom_tool_call_input.done", {"item_id": b.item_id, "output_index": oi, "input": value}
            )
        else:
            out += self._ev(
                "response.function_call_arguments.done",
                {"item_id": b.item_id, "output_index": oi, "name": b.name, "arguments": value},
            )
        item = call_item(b.item_id, b.call_id, b.name, value, custom=b.custom, namespace=b.namespace, status=status)
        return out, item

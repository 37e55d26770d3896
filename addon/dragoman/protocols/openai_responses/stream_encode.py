"""IR stream events -> the client's Responses SSE (``ResponsesStreamEncoder``).

``response.created`` + ``response.in_progress``, then one output item per IR block (added, deltas, done;
see ``stream_encode_items``), then ``response.completed`` / ``incomplete`` / ``failed`` with the whole
response object. An error is always one ``error`` + ``response.failed`` pair, every added item done first.

Output items never overlap on the wire, whatever the upstream interleaves (a Chat upstream streams
parallel tool calls' arguments interleaved; the real API, and clients such as LangChain that key on
``output_index`` changes, have one item at a time): the first open item streams live; an item starting
while another is open is held (its text kept in the snapshot it keeps anyway, so memory follows the
text) and goes on the wire, in start order, once the items before it are done: added, its text so far
as one delta, then live deltas, or done at once when its block already stopped.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING
from typing import Any

import orjson

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import CitationDelta
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
from dragoman.protocols._checks import safe_message
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamEncoder
from dragoman.protocols.openai_responses.errors import ERROR_TYPES
from dragoman.protocols.openai_responses.response_encode import base_object
from dragoman.protocols.openai_responses.response_encode import encode_usage
from dragoman.protocols.openai_responses.response_encode import namespaces
from dragoman.protocols.openai_responses.response_encode import response_id
from dragoman.protocols.openai_responses.response_encode import stop_status
from dragoman.protocols.openai_responses.stream_encode_items import OutItem
from dragoman.protocols.openai_responses.stream_encode_search import SearchItems

logger = logging.getLogger(__name__)


class Phase(Enum):
    WAITING = "waiting"  # before MessageStart
    STREAMING = "streaming"
    TERMINAL = "terminal"  # MessageDelta seen, waiting for MessageStop
    DONE = "done"  # the terminal event was written


_STREAMING = Phase.STREAMING
_dumps = orjson.dumps
_loads = orjson.loads
#: a delta's IR class -> the kinds of item that keep it while held (``_text_delta`` ... ``_args_delta``)
_HELD = {
    TextDelta: (BlockKind.TEXT, BlockKind.REFUSAL),
    ThinkingDelta: (BlockKind.THINKING,),
    ToolArgsDelta: (BlockKind.TOOL_CALL, BlockKind.CUSTOM_TOOL_CALL),
}


class ResponsesStreamEncoder(SearchItems, StreamEncoder):
    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.phase = Phase.WAITING
        self._rid = "resp_dragoman"
        self._model = ""
        self._created = 0
        self._blocks: dict[int, OutItem] = {}
        #: the item open on the wire, and the items started after it (held), in start order
        self._live: OutItem | None = None
        self._held: deque[OutItem] = deque()
        self._used_ids: set[str] = set()
        self._stop: StopReason | None = None
        self._usage: Usage = Usage()
        self._custom = ctx.custom_tools()
        self._nsmap = namespaces(ctx)
        #: the final response object of a completed or incomplete stream (what the response store keeps)
        self.snapshot: dict[str, Any] | None = None
        #: search in play: consecutive text blocks join one message (an Anthropic upstream sends each cited
        #: span as a block of its own); the message item whose block stopped, kept open for the next one
        self._join = ctx.search is not None
        self._linger: OutItem | None = None
        #: where each joined text block starts in its message's text (citation offsets)
        self._base: dict[int, int] = {}

    def _obj(self, status: str) -> dict[str, Any]:
        return base_object(self._rid, self._model, self._created, self.ctx, status)

    def _begin(self, ev: MessageStart | None) -> bytes:
        if ev is not None:
            self._rid = response_id(ev.id)
            self._model = ev.model
            self._created = ev.created if ev.created is not None else int(time.time())
            if ev.usage is not None:
                self._usage = self._usage.merged(ev.usage)
        else:
            self._model = self.ctx.request.model if self.ctx.request is not None else ""
            self._created = int(time.time())
        self.phase = Phase.STREAMING
        return self._ev("response.created", {"response": self._obj("in_progress")}) + self._ev(
            "response.in_progress", {"response": self._obj("in_progress")}
        )

    def _mint(self, prefix: str, wanted: str | None) -> str:
        if wanted and wanted not in self._used_ids:
            self._used_ids.add(wanted)
            return wanted
        n = len(self._output)
        item_id = f"{prefix}_{self._rid[5:]}_{n}"
        self._used_ids.add(item_id)
        return item_id

    # ---------------------------------------------------------- encode

    def encode(self, ev: StreamEvent) -> bytes:
        if self.phase is _STREAMING:
            # hot path: a delta for a live item whose delta framing is built (``OutItem.fast``): the bytes
            # ``_text_delta``/``_thinking_delta``/``_args_delta`` write, without their calls and checks
            cls = type(ev)
            if cls is TextDelta or cls is ThinkingDelta:
                if TYPE_CHECKING:
                    assert isinstance(ev, TextDelta | ThinkingDelta)
                text, idx = ev.text, ev.index
            elif cls is ToolArgsDelta:
                if TYPE_CHECKING:
                    assert isinstance(ev, ToolArgsDelta)
                text, idx = ev.fragment, ev.index
            else:
                return self._encode(ev)
            if text or cls is TextDelta:  # an empty thinking or arguments delta sends nothing (``_encode``)
                b = self._blocks.get(idx)
                if b is not None and b.fast is cls and b.open and not b.held:
                    b.chunks.append(text)
                    if len(b.chunks) >= b.limit:
                        b.compact()
                    seq = self._seq
                    self._seq = seq + 1
                    return b"%b%b%b%d}\n\n" % (b.prefix, _dumps(text), b.suffix, seq)
        return self._encode(ev)

    def literal(self, kind: type[StreamEvent], index: int, token: bytes) -> bytes | None:
        # ``encode``'s hot path for a text / thinking / arguments delta (never empty: a token holds at least one
        # character), the text already a JSON string token; the snapshot keeps its str, read from the token. A
        # delta of an item held back (behind the open one) is kept for its replay, as ``encode`` keeps it
        if self.phase is _STREAMING:
            b = self._blocks.get(index)
            if b is not None and b.open:
                if b.fast is kind and not b.held:
                    return self._written(b, token)
                if b.held and b.kind in _HELD.get(kind, ()):
                    b.keep(token[1:-1].decode() if 92 not in token else _loads(token))
                    return b""
        return None

    def writer(self, kind: type[StreamEvent], index: int) -> Callable[[bytes], bytes] | None:
        # ``literal`` of an open item's delta on the wire, its checks done once
        if self.phase is _STREAMING:
            b = self._blocks.get(index)
            if b is not None and b.open and b.fast is kind and not b.held:
                return partial(self._written, b)
        return None

    def _written(self, b: OutItem, token: bytes) -> bytes:
        """An open item's delta from its JSON string token: the snapshot keeps its str, the sequence number
        counts on."""
        chunks = b.chunks
        chunks.append(token[1:-1].decode() if 92 not in token else _loads(token))
        if len(chunks) >= b.limit:
            b.compact()
        seq = self._seq
        self._seq = seq + 1
        return b"%b%b%b%d}\n\n" % (b.prefix, token, b.suffix, seq)

    def _encode(self, ev: StreamEvent) -> bytes:
        if type(ev) is MessageStart:
            if self.phase is not Phase.WAITING:
                raise UpstreamProtocolError(f"duplicate MessageStart (phase {self.phase.value})")
            return self._begin(ev)
        if self.phase is Phase.DONE:
            raise UpstreamProtocolError(f"{type(ev).__name__} after the terminal event (phase {self.phase.value})")
        out = b""
        if self.phase is Phase.WAITING:
            out = self._begin(None)
        # one type() call per event (measured: re-calling it per branch costs ~3 % of the encoder), so mypy
        # is shown the narrowing ``cls is X`` implies under TYPE_CHECKING (a constant: ~1 ns at run time)
        cls = type(ev)
        if cls is TextDelta:
            if TYPE_CHECKING:
                assert isinstance(ev, TextDelta)
            return out + self._text_delta(ev)
        if cls is ToolArgsDelta:
            if TYPE_CHECKING:
                assert isinstance(ev, ToolArgsDelta)
            return out + self._args_delta(ev)
        if cls is ThinkingDelta:
            if TYPE_CHECKING:
                assert isinstance(ev, ThinkingDelta)
            return out + self._thinking_delta(ev)
        return out + self._other(ev)

    def _other(self, ev: StreamEvent) -> bytes:
        """Every event but the deltas (the hot path stays in ``encode``)."""
        out = b""
        if self._linger is not None:
            if type(ev) is BlockStart and ev.kind is BlockKind.TEXT:
                return self._rejoin(ev)
            out = self._close_linger()
        return out + self._other_event(ev)

    def _other_event(self, ev: StreamEvent) -> bytes:
        if type(ev) is BlockStart:
            return self._block_start(ev)
        if type(ev) is WebSearch:
            return self._search(ev)
        if type(ev) is CitationDelta:
            return self._citation(ev)
        if type(ev) is BlockStop:
            b = self._blocks.get(ev.index)
            if b is None or not b.open:
                raise UpstreamProtocolError(
                    f"BlockStop for unknown or closed block {ev.index} (phase {self.phase.value})"
                )
            if b.held:
                b.open = False  # done on the wire once the items before it are
                return b""
            if self._join and b.kind is BlockKind.TEXT:
                b.open = False
                self._linger = b
                return b""
            self._live = None
            return self._block_stop(b) + self._release()
        if type(ev) is SignatureDelta:
            b = self._block(ev.index, "SignatureDelta")
            if ev.signature is not None:
                b.signature = ev.signature
            if ev.encrypted_content is not None:
                b.enc = ev.encrypted_content
            return b""
        if type(ev) is MessageDelta:
            if ev.stop_reason is not None:
                self._stop = ev.stop_reason
            self._usage = self._usage.merged(ev.usage)
            self.phase = Phase.TERMINAL
            return b""
        if type(ev) is MessageStop:
            return self._finish()
        if type(ev) is StreamError:
            return self.error(ev.error)
        raise UpstreamProtocolError(f"unexpected IR event {type(ev).__name__}")

    def _block_start(self, ev: BlockStart) -> bytes:
        if ev.index in self._blocks:
            raise UpstreamProtocolError(f"duplicate BlockStart for block {ev.index} (phase {self.phase.value})")
        oi = len(self._output)
        kind = ev.kind
        if kind is BlockKind.TEXT or kind is BlockKind.REFUSAL:
            b = OutItem(kind, oi, self._mint("msg", ev.item_id))
        elif kind is BlockKind.THINKING or kind is BlockKind.REDACTED_THINKING:
            b = OutItem(kind, oi, self._mint("rs", ev.item_id))
            b.redacted = ev.data
        elif kind is BlockKind.TOOL_CALL or kind is BlockKind.CUSTOM_TOOL_CALL:
            name = ev.name or ""
            custom = kind is BlockKind.CUSTOM_TOOL_CALL or name in self._custom
            b = OutItem(kind, oi, self._mint("ctc" if custom else "fc", ev.item_id))
            b.custom = custom
            b.unwrap = custom and kind is BlockKind.TOOL_CALL
            b.call_id = ev.tool_call_id or f"call_{b.item_id}"
            ns = self._nsmap.get(name)
            b.name = ns[1] if ns else name
            b.namespace = ns[0] if ns else None
        else:
            raise UpstreamProtocolError(f"unsupported block kind {kind!r}")
        self._blocks[ev.index] = b
        self._output.append(None)
        if self._live is not None:
            b.held = True
            self._held.append(b)
            return b""
        self._live = b
        return self._item_added(b)

    def _release(self) -> bytes:
        """The live item is done: held items go on the wire in start order; the first one still open
        becomes the live item."""
        out = b""
        held = self._held
        while held:
            b = held.popleft()
            out += self._replay(b)
            if b.open:
                self._live = b
                break
            out += self._block_stop(b)
        return out

    # ---------------------------------------------------------- the end

    def _close_open(self, status: str = "completed") -> bytes:
        """The end: the live item and every held one done, in order (``status`` for those still open)."""
        out = self._close_linger() if self._linger is not None else b""
        b = self._live
        if b is not None:
            self._live = None
            out += self._block_stop(b, status)
        held = self._held
        while held:
            b = held.popleft()
            out += self._replay(b) + self._block_stop(b, status if b.open else "completed")
        return out

    def _finish(self) -> bytes:
        out = self._close_open()
        status, reason = stop_status(self._stop)
        obj = self._obj(status)
        obj["output"] = [o for o in self._output if o is not None]
        obj["usage"] = encode_usage(self._usage)
        if status == "incomplete":
            obj["incomplete_details"] = {"reason": reason}
            etype = "response.incomplete"
        elif status == "failed":
            obj["error"] = {"code": "server_error", "message": "the upstream response failed"}
            etype = "response.failed"
        else:
            etype = "response.completed"
        if status != "failed":
            self.snapshot = obj
        self.phase = Phase.DONE
        return out + self._ev(etype, {"response": obj})

    def error(self, err: ErrorInfo) -> bytes:
        """Always one ``error`` + ``response.failed`` pair: when the state or the upstream's error fields
        cannot be encoded (e.g. an integer code above 64 bits), a minimal pair built from safe values."""
        if self.phase is Phase.DONE:
            return b""
        was_waiting = self.phase is Phase.WAITING  # the client has not seen response.created yet
        seq = self._seq
        try:
            out = b""
            if self.phase is Phase.WAITING:
                out = self._begin(None)
            # every added item is done before the terminal event, marked incomplete (strict clients track items)
            out += self._close_open("incomplete")
        except Exception:  # noqa: BLE001 - the error frame must always be sent
            logger.warning("Responses error frame: open items not encodable; sending a minimal error")
            self._seq = seq  # nothing of the failed attempt was sent
            self.phase = Phase.DONE
            return self._minimal_error(err, was_waiting, [])
        output = [o for o in self._output if o is not None]
        seq = self._seq
        try:
            tail = self._error_pair(err, output)
        except Exception:  # noqa: BLE001
            logger.warning("Responses error frame: upstream error fields not encodable; sending the message only")
            self._seq = seq
            try:
                tail = self._minimal_error(err, False, output)
            except Exception:  # noqa: BLE001
                self._seq = seq
                tail = self._minimal_error(err, False, [])
        self.phase = Phase.DONE
        return out + tail

    def _error_pair(self, err: ErrorInfo, output: list[dict[str, Any]]) -> bytes:
        code = err.code or ERROR_TYPES.get(err.kind, "server_error")
        tail = self._ev("error", {"code": code, "message": err.message, "param": err.param})
        obj = self._obj("failed")
        obj["output"] = output
        obj["error"] = {"code": code, "message": err.message}
        obj["usage"] = encode_usage(self._usage) if (self._usage.input_tokens or self._usage.output_tokens) else None
        return tail + self._ev("response.failed", {"response": obj})

    def _minimal_error(self, err: ErrorInfo, was_waiting: bool, output: list[dict[str, Any]]) -> bytes:
        """``error`` + ``response.failed`` built from values known to encode (of the upstream's error only the
        message); ``response.created`` first when nothing was sent yet."""
        message = safe_message(err.message)
        rid = self._rid if type(self._rid) is str else "resp_error"
        model = self._model if type(self._model) is str else ""
        created = self._created if type(self._created) is int and 0 <= self._created < 2**53 else int(time.time())

        def obj(status: str) -> dict[str, Any]:
            return {
                "id": rid,
                "object": "response",
                "created_at": created,
                "status": status,
                "model": model,
                "output": [],
                "error": None,
                "usage": None,
            }

        out = b""
        if was_waiting:
            out = self._ev("response.created", {"response": obj("in_progress")}) + self._ev(
                "response.in_progress", {"response": obj("in_progress")}
            )
        failed = obj("failed")
        failed["output"] = output
        failed["error"] = {"code": "server_error", "message": message}
        return (
            out
            + self._ev("error", {"code": "server_error", "message": message, "param": None})
            + self._ev("response.failed", {"response": failed})
        )

    def close(self) -> bytes:
        return b""

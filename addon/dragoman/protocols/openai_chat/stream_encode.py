"""IR stream events -> Chat SSE chunks (``ChatStreamEncoder``).

Every chunk carries the same id, ``created`` and model (a prebuilt byte prefix); tool calls get Chat
indices 0, 1, 2... in start order; custom tool input is wrapped as ``{"input": "..."}`` arguments, one
escaped fragment at a time. A ``MessageDelta`` becomes the ``finish_reason`` chunk, then the usage chunk
when the client asked for it (``stream_options.include_usage``); ``MessageStop`` becomes ``[DONE]``.
A ``MessageDelta`` with ``end_turn`` after tool-call blocks is sent as ``finish_reason: "tool_calls"``
(Chat clients' agent loops key on it). Each thinking block is also one OpenRouter ``reasoning_details``
entry beside ``reasoning_content`` (text pieces, then Claude's signature; ``redacted_thinking`` as
``reasoning.encrypted``): see ``reasoning_details``. Gemini's thought signatures go on their calls as
``extra_content`` (the call's first delta; see ``gemini``).
"""

from __future__ import annotations

import time
from enum import Enum
from typing import TYPE_CHECKING
from typing import Any

import orjson

from dragoman.errors import TranslationError
from dragoman.ir import carry
from dragoman.ir.carry import is_unsigned
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
from dragoman.ir.mapping import IR_TO_CHAT
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamEncoder
from dragoman.protocols.openai_chat import gemini
from dragoman.protocols.openai_chat import reasoning_details
from dragoman.protocols.openai_chat import search
from dragoman.protocols.openai_chat.errors import error_frame
from dragoman.protocols.openai_chat.response import chat_id
from dragoman.protocols.openai_chat.response import encode_usage
from dragoman.sse.encoder import DONE


class Phase(Enum):
    START = "start"  # before MessageStart
    STREAMING = "streaming"
    FINISHED = "finished"  # finish_reason chunk sent
    DONE = "done"  # [DONE] sent, or an error frame


_STREAMING = Phase.STREAMING
_TEXT = BlockKind.TEXT
_THINKING = BlockKind.THINKING
_dumps = orjson.dumps
#: hot-path templates, byte-identical to ``_chunk({"content": X})`` / ``_chunk({"reasoning_content": X,
#: "reasoning_details": [{"type": "reasoning.text", "text": X, "index": K}]})``
_CONTENT_HEAD = b'[{"index":0,"delta":{"content":'
_REASONING_HEAD = b'[{"index":0,"delta":{"reasoning_content":'
_DETAILS_TEXT_HEAD = b',"reasoning_details":[{"type":"reasoning.text","text":'
_DETAILS_INDEX = b',"index":'
_DETAILS_TAIL = b"}]"
_CHUNK_TAIL = b'},"finish_reason":null}]}\n\n'
#: == ``_tool_chunk(K, X)``: ``_TOOL_HEAD`` K ``_TOOL_ARGS`` X ``_TOOL_TAIL``
_TOOL_HEAD = b'[{"index":0,"delta":{"tool_calls":[{"index":'
_TOOL_ARGS = b',"function":{"arguments":'
_TOOL_TAIL = b"}}]" + _CHUNK_TAIL


class ChatStreamEncoder(StreamEncoder):
    """IR events -> Chat ``data:`` chunks with one id; tool-call indices allocated 0, 1, 2..."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.phase = Phase.START
        self._prefix = b""  # b'data: {"id":...,"choices":'
        self._kinds: dict[int, BlockKind] = {}
        self._tool_index: dict[int, int] = {}
        self._next_tool = 0
        self._usage = Usage()
        self._sig_dropped = False
        self._signed: dict[str, str] = {}  # Gemini's thought signatures by the id of a call not started yet
        self._call_ids: dict[str, int] = {}  # tool call id -> its Chat index (a signature after its start)
        self._entries: dict[int, int] = {}  # thinking block index -> its reasoning_details entry index
        self._tails: dict[int, bytes] = {}  # thinking block index -> the end of its text chunks (hot path)
        #: search in play: content characters sent so far, and where each text block starts (annotation spans)
        self._count = ctx.search is not None
        self._chars = 0
        self._base: dict[int, int] = {}
        self._annotations: list[dict[str, Any]] = []

    # -- interface

    def encode(self, ev: StreamEvent) -> bytes:
        if self.phase is _STREAMING:
            # hot path: the deltas, from prebuilt byte templates. One type() call per event; mypy is shown
            # the narrowing ``cls is X`` implies under TYPE_CHECKING (a constant at run time)
            cls = type(ev)
            if cls is TextDelta:
                if TYPE_CHECKING:
                    assert isinstance(ev, TextDelta)
                kind = self._kinds.get(ev.index)
                if kind is _TEXT:
                    if self._count:
                        self._chars += len(ev.text)
                    # == self._chunk({"content": ev.text}), without building and dumping the dicts
                    return self._prefix + _CONTENT_HEAD + _dumps(ev.text) + _CHUNK_TAIL
                if kind is BlockKind.REFUSAL:
                    return self._chunk({"refusal": ev.text})
                return self._unexpected(ev)
            if cls is ThinkingDelta:
                if TYPE_CHECKING:
                    assert isinstance(ev, ThinkingDelta)
                if self._kinds.get(ev.index) is not _THINKING:
                    return self._unexpected(ev)
                text = _dumps(ev.text)
                tail = self._tails.get(ev.index)
                if tail is None:  # once per block: its entry index and the chunk's end, as bytes
                    tail = _DETAILS_INDEX + b"%d" % self._entry(ev.index) + _DETAILS_TAIL + _CHUNK_TAIL
                    self._tails[ev.index] = tail
                return b"".join((self._prefix, _REASONING_HEAD, text, _DETAILS_TEXT_HEAD, text, tail))
            if cls is ToolArgsDelta:
                if TYPE_CHECKING:
                    assert isinstance(ev, ToolArgsDelta)
                tindex = self._tool_index.get(ev.index)
                if tindex is None:
                    return self._unexpected(ev)
                if self._kinds[ev.index] is BlockKind.CUSTOM_TOOL_CALL:
                    return self._tool_chunk(tindex, _dumps(ev.fragment)[1:-1].decode())
                # == self._tool_chunk(tindex, ev.fragment), from the template
                return b"".join((self._prefix, _TOOL_HEAD, b"%d" % tindex, _TOOL_ARGS, _dumps(ev.fragment), _TOOL_TAIL))
            return self._streaming_other(ev)
        if type(ev) is MessageStart and self.phase is Phase.START:
            return self._start(ev)
        if type(ev) is MessageStop and self.phase is Phase.FINISHED:
            self.phase = Phase.DONE
            return DONE
        if type(ev) is StreamError:
            return self.error(ev.error)
        return self._unexpected(ev)

    def literal(self, kind: type[StreamEvent], index: int, token: bytes) -> bytes | None:
        # ``encode``'s hot path for a text / thinking / arguments delta, the text already a JSON string token;
        # a text delta while search counts characters takes ``encode`` (its length needs the str)
        if self.phase is _STREAMING:
            if kind is TextDelta:
                if self._kinds.get(index) is _TEXT and not self._count:
                    return self._prefix + _CONTENT_HEAD + token + _CHUNK_TAIL
            elif kind is ThinkingDelta:
                tail = self._tails.get(index)
                if tail is not None and self._kinds.get(index) is _THINKING:
                    return b"".join((self._prefix, _REASONING_HEAD, token, _DETAILS_TEXT_HEAD, token, tail))
            elif kind is ToolArgsDelta:
                tindex = self._tool_index.get(index)
                if tindex is not None and self._kinds.get(index) is BlockKind.TOOL_CALL:
                    return b"".join((self._prefix, _TOOL_HEAD, b"%d" % tindex, _TOOL_ARGS, token, _TOOL_TAIL))
        return None

    def pieces(self, kind: type[StreamEvent], index: int) -> list[bytes] | None:
        # ``literal`` of a text / thinking / arguments delta changes nothing
        if self.phase is _STREAMING:
            if kind is TextDelta:
                if self._kinds.get(index) is _TEXT and not self._count:
                    return [self._prefix + _CONTENT_HEAD, _CHUNK_TAIL]
            elif kind is ThinkingDelta:
                tail = self._tails.get(index)
                if tail is not None and self._kinds.get(index) is _THINKING:
                    return [self._prefix + _REASONING_HEAD, _DETAILS_TEXT_HEAD, tail]
            elif kind is ToolArgsDelta:
                tindex = self._tool_index.get(index)
                if tindex is not None and self._kinds.get(index) is BlockKind.TOOL_CALL:
                    return [b"".join((self._prefix, _TOOL_HEAD, b"%d" % tindex, _TOOL_ARGS)), _TOOL_TAIL]
        return None

    def error(self, err: ErrorInfo) -> bytes:
        self.phase = Phase.DONE
        return error_frame(err)

    def close(self) -> bytes:
        return b""

    # -- framing

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return self._prefix + _dumps([choice]) + b"}\n\n"

    def _tool_chunk(self, tindex: int, args: str) -> bytes:
        return self._chunk({"tool_calls": [{"index": tindex, "function": {"arguments": args}}]})

    def _unexpected(self, ev: StreamEvent) -> bytes:
        raise TranslationError(f"Chat stream encoder got {type(ev).__name__} in phase {self.phase.name}", 500)

    # -- events other than the deltas

    def _start(self, ev: MessageStart) -> bytes:
        cid = chat_id(ev.id)
        created = ev.created if ev.created is not None else int(time.time())
        head = _dumps({"id": cid, "object": "chat.completion.chunk", "created": created, "model": ev.model})
        self._prefix = b"data: " + head[:-1] + b',"choices":'
        if ev.usage is not None:
            self._usage = self._usage.merged(ev.usage)
        self.phase = Phase.STREAMING
        return self._chunk({"role": "assistant", "content": ""})

    def _streaming_other(self, ev: StreamEvent) -> bytes:
        """Block starts and stops, signatures and the message delta, while streaming."""
        if type(ev) is BlockStart:
            return self._block_start(ev)
        if type(ev) is BlockStop:
            kind = self._kinds.pop(ev.index, None)
            if kind is None:
                return self._unexpected(ev)
            if kind is BlockKind.CUSTOM_TOOL_CALL:
                return self._tool_chunk(self._tool_index[ev.index], '"}')
            return b""
        if type(ev) is SignatureDelta:
            return self._signature(ev)
        if type(ev) is CitationDelta:
            return self._citation(ev)
        if type(ev) is WebSearch:  # Chat has no search call: its sources reach the client as annotations
            self.ctx.dropped.add("web_search_call")
            return b""
        if type(ev) is MessageDelta:
            return self._message_delta(ev)
        if type(ev) is StreamError:
            return self.error(ev.error)
        return self._unexpected(ev)

    def _citation(self, ev: CitationDelta) -> bytes:
        """A citation, spanning the content as the client received it. All go in ONE ``delta.annotations``
        chunk before the finish (the official SDK's accumulator cannot merge a second annotations list: its
        entries have no ``index``; OpenRouter sends them in one chunk too)."""
        if self._kinds.get(ev.index) is not _TEXT or not self._count:
            self.ctx.dropped.add("citations")
            return b""
        base = self._base.get(ev.index, 0)
        self._annotations.append(search.annotation(ev.citation, base, self._chars - base))
        return b""

    def _block_start(self, ev: BlockStart) -> bytes:
        if ev.index in self._kinds:
            return self._unexpected(ev)
        kind = ev.kind
        self._kinds[ev.index] = kind
        if kind is _TEXT and self._count:
            self._base[ev.index] = self._chars
        if kind is BlockKind.REDACTED_THINKING:
            if not ev.data:
                self.ctx.dropped.add("redacted_thinking")
                return b""
            entry = self._entry(ev.index)
            return self._chunk({"reasoning_details": [reasoning_details.redacted_entry(ev.data, entry)]})
        if kind is BlockKind.TOOL_CALL or kind is BlockKind.CUSTOM_TOOL_CALL:
            tindex = self._next_tool
            self._next_tool = tindex + 1
            self._tool_index[ev.index] = tindex
            args = '{"' + CUSTOM_TOOL_PARAM + '":"' if kind is BlockKind.CUSTOM_TOOL_CALL else ""
            cid = ev.tool_call_id or f"call_{tindex}"
            self._call_ids[cid] = tindex
            call = {
                "index": tindex,
                "id": cid,
                "type": "function",
                "function": {"name": ev.name or "", "arguments": args},
            }
            sig = self._signed.pop(cid, None) if self._signed else None
            if sig is not None:
                call["extra_content"] = gemini.extra_content(sig)
            return self._chunk({"tool_calls": [call]})
        return b""

    def _entry(self, index: int) -> int:
        """The ``reasoning_details`` entry index of thinking block ``index`` (numbered in first-use order)."""
        entry = self._entries.get(index)
        if entry is None:
            entry = self._entries[index] = len(self._entries)
        return entry

    def _signature(self, ev: SignatureDelta) -> bytes:
        """Claude's signature: the last piece of the block's entry. Gemini's: held for its call's first delta, or
        on a delta of its own when the call already started. Any other: dropped (named once)."""
        gsigs = carry.unwrap_gemini(ev.signature)
        if gsigs is not None:
            out = b""
            for cid, gsig in gsigs.items():
                tindex = self._call_ids.get(cid)
                if tindex is None:
                    self._signed[cid] = gsig
                else:
                    out += self._chunk(gemini.late_signature(tindex, gsig))
            return out
        sig = reasoning_details.anthropic_signature(ev.signature)
        if sig is not None and self._kinds.get(ev.index) is _THINKING:
            return self._chunk({"reasoning_details": [reasoning_details.signature_entry(sig, self._entry(ev.index))]})
        if not self._sig_dropped and not is_unsigned(ev.signature):
            self.ctx.dropped.add("thinking_signature")
            self._sig_dropped = True
        return b""

    def _message_delta(self, ev: MessageDelta) -> bytes:
        if self._signed:  # no call of this answer took it (Gemini's on a text part): Chat has no place for it
            self.ctx.dropped.add("thinking_signature")
        if ev.usage is not None:
            self._usage = self._usage.merged(ev.usage)
        finish = IR_TO_CHAT.get(ev.stop_reason, "stop") if ev.stop_reason is not None else "stop"
        if ev.stop_reason is StopReason.END_TURN and self._next_tool:
            finish = "tool_calls"  # an Anthropic end_turn after tool_use still means tool calls to a Chat client
        elif finish == "tool_calls" and not self._next_tool:
            finish = "stop"  # "tool_calls" without any call would send a Chat agent loop looking for one
        out = self._chunk({"annotations": self._annotations}) if self._annotations else b""
        out += self._chunk({}, finish)
        req = self.ctx.request
        if req is not None and req.include_usage:
            out += self._prefix + b"[]," + b'"usage":' + _dumps(encode_usage(self._usage)) + b"}\n\n"
        self.phase = Phase.FINISHED
        return out

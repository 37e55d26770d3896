"""IR stream events -> Gemini stream events (``GeminiStreamEncoder``).

Each event is a whole ``GenerateContentResponse`` with the new part(s), the response id and model version,
as Gemini sends them: text and thinking deltas become ``text`` / ``thought`` parts as they arrive; a tool call
is sent whole (one ``functionCall`` part with ``id``, ``name``, ``args``) when its block stops, since Gemini
clients expect whole calls. Reasoning state rides on the next part's ``thoughtSignature`` (``thoughts.Signer``);
one no part took goes on an empty text part in the last event, which carries ``finishReason``,
``usageMetadata`` and the ``groundingMetadata`` of the reply's searches and citations (``search.Grounding``:
a text block's citations are placed, in UTF-8 bytes of the answer, when the block ends; memory is one text
block). Errors are ``{"error": {...}}`` events.

Framing: ``alt=sse`` (``data: {...}`` events) by default; for a ``:streamGenerateContent`` call without
``alt=sse`` (the request's ``extra[ARRAY]``) the events are the elements of one JSON array, written as they
come (``[``, ``,\\r\\n`` between elements, ``]`` at the end); a Code Assist call (``extra[WRAPPED]``) gets
each event wrapped as ``{"response": ...}``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import orjson

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
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
from dragoman.ir.mapping import refused_stop
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.search import Citation
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamEncoder
from dragoman.protocols.gemini import search
from dragoman.protocols.gemini import thoughts
from dragoman.protocols.gemini.errors import error_json
from dragoman.protocols.gemini.request_decode import ARRAY
from dragoman.protocols.gemini.request_decode import WRAPPED
from dragoman.protocols.gemini.response import encode_usage
from dragoman.protocols.gemini.response import finish_reason
from dragoman.protocols.gemini.response import function_call

_dumps = orjson.dumps
_loads = orjson.loads


class _Block:
    __slots__ = ("kind", "id", "name", "args", "sig", "enc", "text", "byte", "cites")

    def __init__(self, ev: BlockStart) -> None:
        self.kind = ev.kind
        self.id = ev.tool_call_id or ""
        self.name = ev.name or ""
        self.args: list[str] = []
        self.sig: str | None = ev.data if ev.kind is BlockKind.REDACTED_THINKING else None
        self.enc: str | None = None
        self.text: list[str] = []  # a thinking block's text, for a signature that carries it; a text block's
        self.byte = 0  # a text block: where it starts in the answer's text, in UTF-8 bytes
        self.cites: list[Citation] = []


class GeminiStreamEncoder(StreamEncoder):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        extra = ctx.request.extra if ctx.request is not None else {}
        self.array = bool(extra.get(ARRAY))
        self.wrapped = bool(extra.get(WRAPPED))
        self._started = self._ended = False
        self._first = True
        self._tail = b"}"
        self._blocks: dict[int, _Block] = {}
        self._usage = Usage()
        self._signer = thoughts.Signer(False, ctx.dropped)
        self._refused = False  # a refusal block was sent (as text): the finish reason says SAFETY
        self._grounding = search.Grounding(ctx.dropped)
        self._bytes = 0  # UTF-8 bytes of answer text sent so far
        #: a one-part SSE event's bytes before and after the part's text value (set at the start; None when the
        #: events are array elements or wrapped): a text delta is then these and one ``dumps`` of its text
        self._pre: bytes | None = None
        self._post = b""

    # -- framing

    def keepalive(self) -> bytes:
        """A blank line: SSE parsers dispatch nothing for it, JSON reads it as whitespace; the Gemini SDKs parse
        every non-empty line, so an SSE comment would break them."""
        return b"\n"

    def _frame(self, obj_json: bytes, wrap: bool = True) -> bytes:
        if self.wrapped and wrap:  # Code Assist: {"response": GenerateContentResponse}
            obj_json = b'{"response":' + obj_json + b"}"
        if not self.array:
            return b"data: " + obj_json + b"\n\n"
        head = b"[" if self._first else b",\r\n"
        self._first = False
        return head + obj_json

    def _event(self, parts: list[dict[str, Any]], extra: bytes = b"", top: bytes = b"") -> bytes:
        """One event: ``parts``, then ``extra`` in the candidate (finishReason), ``top`` beside it (usage)."""
        cand = b'{"candidates":[{"content":{"role":"model","parts":' + _dumps(parts) + b"}" + extra + b',"index":0}]'
        return self._frame(cand + top + self._tail)

    def _unexpected(self, ev: StreamEvent) -> bytes:
        raise TranslationError(f"Gemini stream encoder got {type(ev).__name__} out of order", 500)

    def literal(self, kind: type[StreamEvent], index: int, token: bytes) -> bytes | None:
        # ``encode``'s one-part SSE event for a text / thinking delta, the text already a JSON string token
        if self._pre is not None:
            b = self._blocks.get(index)
            if b is not None:
                if kind is TextDelta and not self._signer.pending:
                    return self._text_written(b, token)
                if kind is ThinkingDelta:
                    return self._thinking_written(b, token)
        return None

    def writer(self, kind: type[StreamEvent], index: int) -> Callable[[bytes], bytes] | None:
        # ``literal`` of a text / thinking delta, its checks done once
        b = self._blocks.get(index) if self._pre is not None else None
        if b is not None:
            if kind is TextDelta and not self._signer.pending:
                return partial(self._text_written, b)
            if kind is ThinkingDelta:
                return partial(self._thinking_written, b)
        return None

    def _text_written(self, b: _Block, token: bytes) -> bytes:
        """A text delta from its JSON string token: the block keeps its str, the answer's UTF-8 length grows."""
        if 92 not in token:
            raw = token[1:-1]
            b.text.append(raw.decode())
            self._bytes += len(raw)
        else:
            text = _loads(token)
            b.text.append(text)
            self._bytes += len(text.encode())
        return self._pre + token + b"}" + self._post  # type: ignore[operator]

    def _thinking_written(self, b: _Block, token: bytes) -> bytes:
        """A thinking delta from its JSON string token: the block keeps its str."""
        b.text.append(token[1:-1].decode() if 92 not in token else _loads(token))
        return self._pre + token + b',"thought":true}' + self._post  # type: ignore[operator]

    # -- interface

    def encode(self, ev: StreamEvent) -> bytes:
        if type(ev) is TextDelta:
            b = self._blocks.get(ev.index)
            if b is None:
                return self._unexpected(ev)
            text = ev.text
            b.text.append(text)
            self._bytes += len(text) if text.isascii() else len(text.encode())
            if self._pre is not None and not self._signer.pending:
                return self._pre + _dumps(text) + b"}" + self._post
            return self._event([self._signer.sign({"text": text})])
        if type(ev) is ThinkingDelta:
            b = self._blocks.get(ev.index)
            if b is None:
                return self._unexpected(ev)
            b.text.append(ev.text)
            if self._pre is not None:
                return self._pre + _dumps(ev.text) + b',"thought":true}' + self._post
            return self._event([{"text": ev.text, "thought": True}])
        if type(ev) is ToolArgsDelta:
            b = self._blocks.get(ev.index)
            if b is None:
                return self._unexpected(ev)
            b.args.append(ev.fragment)
            return b""
        if type(ev) is BlockStart:
            if not self._started or ev.index in self._blocks:
                return self._unexpected(ev)
            self._blocks[ev.index] = _Block(ev)
            self._blocks[ev.index].byte = self._bytes
            self._refused = self._refused or ev.kind is BlockKind.REFUSAL
            return b""
        if type(ev) is SignatureDelta:
            b = self._blocks.get(ev.index)
            if b is None:
                return self._unexpected(ev)
            b.sig = ev.signature or b.sig
            b.enc = ev.encrypted_content or b.enc
            return b""
        if type(ev) is BlockStop:
            return self._stop(ev)
        if type(ev) is MessageStart:
            return self._start(ev)
        if type(ev) is MessageDelta:
            return self._delta(ev)
        if type(ev) is MessageStop:
            return b""
        if type(ev) is StreamError:
            return self.error(ev.error)
        if type(ev) is CitationDelta:
            b = self._blocks.get(ev.index)
            if b is None:
                return self._unexpected(ev)
            b.cites.append(ev.citation)
            return b""
        if type(ev) is WebSearch:
            self._grounding.search(ev.search)
            return b""
        return self._unexpected(ev)

    def error(self, err: ErrorInfo) -> bytes:
        self._ended = True
        if not self.array:
            return b"data: " + error_json(err) + b"\n\n"
        return self._frame(error_json(err), wrap=False) + b"]"

    def close(self) -> bytes:
        if self.array and not self._ended:
            self._ended = True
            return (b"[" if self._first else b"") + b"]"
        return b""

    # -- events

    def _start(self, ev: MessageStart) -> bytes:
        if self._started:
            return self._unexpected(ev)
        self._started = True
        self._tail = b',"modelVersion":' + _dumps(ev.model) + b',"responseId":' + _dumps(ev.id) + b"}"
        if not self.array and not self.wrapped:
            self._pre = b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":'
            self._post = b']},"index":0}]' + self._tail + b"\n\n"
        if ev.usage is not None:
            self._usage = self._usage.merged(ev.usage)
        return b""

    def _stop(self, ev: BlockStop) -> bytes:
        b = self._blocks.pop(ev.index, None)
        if b is None:
            return self._unexpected(ev)
        if b.kind is BlockKind.THINKING or b.kind is BlockKind.REDACTED_THINKING:
            redacted = b.sig if b.kind is BlockKind.REDACTED_THINKING else None
            sig = None if redacted else b.sig
            self._signer.add(
                ThinkingPart(text="".join(b.text), signature=sig, encrypted_content=b.enc, redacted_data=redacted)
            )
            return b""
        if b.kind is BlockKind.TOOL_CALL or b.kind is BlockKind.CUSTOM_TOOL_CALL:
            call = ToolCallPart(id=b.id, name=b.name, arguments="".join(b.args))
            if b.kind is BlockKind.CUSTOM_TOOL_CALL:
                call.kind = "custom"
            part = function_call(call, self.ctx)
            return self._event([self._signer.sign(part, b.id)])
        if b.cites:
            text = "".join(b.text)
            for c in b.cites:
                self._grounding.citation(c, text, b.byte)
        return b""

    def _delta(self, ev: MessageDelta) -> bytes:
        if ev.usage is not None:
            self._usage = self._usage.merged(ev.usage)
        parts = self._signer.rest() or [{"text": ""}]
        extra = b',"finishReason":' + _dumps(finish_reason(refused_stop(ev.stop_reason, self._refused)))
        meta = self._grounding.metadata()
        if meta is not None:
            extra += b',"groundingMetadata":' + _dumps(meta)
        usage = b',"usageMetadata":' + _dumps(encode_usage(self._usage))
        out = self._event(parts, extra, usage)
        if self.array:
            self._ended = True
            out += b"]"
        return out

"""Gemini stream events (``:streamGenerateContent?alt=sse``) -> IR stream events (``GeminiStreamDecoder``).

Every event is a whole ``GenerateContentResponse`` holding only the new parts. Gemini has no block events:
consecutive text parts make one text block, ``thought`` parts one thinking block; each whole ``functionCall`` is a
tool block of its own (start, all arguments, stop). A call streamed with ``willContinue`` stays open while its
``partialArgs`` arrive (written as JSON text by ``PartialArgs``) and closes at an empty ``functionCall``, at the
next call or at the finish. A ``thoughtSignature`` is carried on a thinking block before its part (``thoughts``).
``usageMetadata`` (on every event) is kept as it came from the last event that counts and read once, at the finish;
the event with ``finishReason`` ends the message. An ``{"error": ...}`` event is an in-band error; a stream that
ends without a finish reason ended early. A candidate's ``groundingMetadata`` (``search``) gives a ``WebSearch``
per query not seen before and a ``CitationDelta`` per support on the open text block (UTF-8 byte offsets of the
answer's text turned into characters of the block; the block's text is held for that, one block at a time). Each
event is parsed once with orjson and read as dicts (the wire models measured ~5x that per event, see ``models``); a
lone ``text`` part, most of a stream, takes a short path.
"""

from __future__ import annotations

from typing import Any

import orjson

from dragoman.errors import UpstreamProtocolError
from dragoman.ir.common import StopReason
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
from dragoman.protocols._custom_args import unwrap_custom_args
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.gemini import search
from dragoman.protocols.gemini import thoughts
from dragoman.protocols.gemini.errors import error_info_from_object
from dragoman.protocols.gemini.partial_args import PartialArgs
from dragoman.protocols.gemini.response import DROPPED_CANDIDATES
from dragoman.protocols.gemini.response import blocked_text
from dragoman.protocols.gemini.response import call_id
from dragoman.protocols.gemini.response import decode_usage
from dragoman.protocols.gemini.response import finish_stop
from dragoman.sse.events import SSEEvent

_TEXT = BlockKind.TEXT
_THINKING = BlockKind.THINKING


class _Call:
    __slots__ = ("block", "args", "custom")

    def __init__(self, block: int, custom: bool) -> None:
        self.block = block
        self.args = PartialArgs()
        self.custom: list[str] | None = [] if custom else None  # a custom tool's input is unwrapped at its end


class GeminiStreamDecoder(StreamDecoder):
    """Gemini SSE events -> IR events. One instance per stream."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.done = False
        self._started = False
        self._next = 0
        self._cur = -1
        self._cur_kind: BlockKind | None = None
        self._cur_signed = False  # the open thinking block has its signature
        self._call: _Call | None = None
        self._calls = 0
        self._usage: dict[str, Any] | None = None  # the last usageMetadata that counts, read at the finish
        self._rid: str | None = None
        self._custom = ctx.custom_tools()
        self._bytes = 0  # UTF-8 bytes of answer text so far
        self._text_block = -1  # the text block whose text is held
        self._text_byte = 0
        self._text: list[str] = []
        self._queries: set[str] = set()
        self._urls: set[str] = set()
        self._cited: set[tuple[int, int, str]] = set()
        self._searches = 0

    def feed(self, ev: SSEEvent) -> list[StreamEvent]:
        if self.done:
            return []
        try:
            obj = orjson.loads(ev.data)
        except orjson.JSONDecodeError as e:
            raise UpstreamProtocolError(f"Gemini stream event is not JSON: {e}") from None
        if type(obj) is not dict:
            raise UpstreamProtocolError("Gemini stream event is not a JSON object")
        if "candidates" not in obj and type(obj.get("response")) is dict:  # Code Assist's wrapped event
            obj = obj["response"]
        if "error" in obj:
            self.done = True
            return [StreamError(error_info_from_object(obj["error"], None))]
        out: list[StreamEvent] = []
        if not self._started:
            self._start(obj, out)
        meta = obj.get("usageMetadata")  # on every event, read once at the finish (``decode_usage``)
        if type(meta) is dict and ("promptTokenCount" in meta or "candidatesTokenCount" in meta):
            self._usage = meta
        cands = obj.get("candidates")
        if not cands:
            text = blocked_text(obj.get("promptFeedback"))
            if text is not None:
                idx = self._open(BlockKind.REFUSAL, out)
                out.append(TextDelta(idx, text))
                self._finish(StopReason.REFUSAL, out)
            return out
        if type(cands) is not list or type(cands[0]) is not dict:
            raise UpstreamProtocolError("Gemini stream event: candidates is not a list of objects")
        if len(cands) > 1:
            self.ctx.dropped.add(DROPPED_CANDIDATES)
        cand = cands[0]
        content = cand.get("content")
        parts = content.get("parts") if type(content) is dict else None
        for p in parts if type(parts) is list else ():
            if type(p) is dict:
                self._part(p, out)
        meta = cand.get("groundingMetadata")
        if type(meta) is dict:
            self._grounding(meta, out)
        reason = cand.get("finishReason")
        if isinstance(reason, str) and reason:
            self._finish(finish_stop(reason, self._calls > 0), out)
        return out

    def close(self) -> list[StreamEvent]:
        if self.done:
            return []
        state = "before any event" if not self._started else "without a finishReason"
        raise UpstreamProtocolError(f"Gemini stream ended {state}")

    # -- blocks

    def _start(self, obj: dict[str, Any], out: list[StreamEvent]) -> None:
        rid, model = obj.get("responseId"), obj.get("modelVersion")
        self._rid = rid if isinstance(rid, str) else None
        if not isinstance(model, str):
            model = self.ctx.request.model if self.ctx.request is not None else ""
        out.append(MessageStart(id=self._rid or "", model=model))
        self._started = True

    def _close_current(self, out: list[StreamEvent]) -> None:
        if self._cur_kind is not None:
            out.append(BlockStop(self._cur))
            self._cur_kind = None
        if self._call is not None:
            self._end_call(out)

    def _open(self, kind: BlockKind, out: list[StreamEvent]) -> int:
        self._close_current(out)
        idx = self._cur = self._next
        self._next += 1
        self._cur_kind, self._cur_signed = kind, False
        out.append(BlockStart(idx, kind))
        return idx

    def _switch(self, kind: BlockKind, out: list[StreamEvent]) -> int:
        if self._cur_kind is kind and self._call is None and not (kind is _THINKING and self._cur_signed):
            return self._cur
        return self._open(kind, out)

    def _signature(self, key: str, sig: str, out: list[StreamEvent]) -> None:
        """A part's signature: on the open unsigned thinking block, else on a thinking block of its own."""
        value = thoughts.wrap(key, sig)
        if self._cur_kind is not _THINKING or self._cur_signed or self._call is not None:
            self._open(_THINKING, out)
        out.append(SignatureDelta(self._cur, signature=value))
        self._cur_signed = True

    # -- parts

    def _part(self, p: dict[str, Any], out: list[StreamEvent]) -> None:
        text = p.get("text")
        if len(p) == 1 and type(text) is str:  # a plain text part, most of a stream
            if text:
                self._text_delta(text, out)
            return
        sig = p.get("thoughtSignature")
        sig = sig if isinstance(sig, str) and sig else None
        fc = p.get("functionCall")
        if type(fc) is dict:
            self._function_call(fc, sig, out)
            return
        if isinstance(text, str):
            if p.get("thought") is True:
                if text or sig is None:
                    idx = self._switch(_THINKING, out)
                    if text:
                        out.append(ThinkingDelta(idx, text, summary=True))
                if sig is not None:
                    self._signature(thoughts.PART_KEY, sig, out)
                return
            if sig is not None:
                self._signature(thoughts.PART_KEY, sig, out)
            if text:
                self._text_delta(text, out)
            return
        self.ctx.dropped.add(next(iter(p), "part"))  # inlineData output, executableCode, ...

    def _text_delta(self, text: str, out: list[StreamEvent]) -> None:
        if self._cur_kind is _TEXT and self._call is None:
            idx = self._cur
        else:
            idx = self._open(_TEXT, out)
        if idx != self._text_block:
            self._text_block, self._text_byte, self._text = idx, self._bytes, []
        self._text.append(text)  # held for groundingMetadata's byte offsets
        self._bytes += len(text) if text.isascii() else len(text.encode())
        out.append(TextDelta(idx, text))

    def _function_call(self, fc: dict[str, Any], sig: str | None, out: list[StreamEvent]) -> None:
        name = fc.get("name")
        call = self._call
        if call is not None and not name:  # a streamed call continues (or ends, with {})
            for entry in fc.get("partialArgs") or ():
                self._args(call, call.args.feed(entry), out)
            if not fc.get("willContinue") and not fc.get("partialArgs"):
                self._end_call(out)
            return
        if not isinstance(name, str) or not name:
            raise UpstreamProtocolError("Gemini functionCall without a name outside a streamed call")
        cid = call_id(fc, self._rid, self._calls)
        self._calls += 1
        if sig is not None:
            self._signature(cid, sig, out)
        self._close_current(out)
        custom = name in self._custom
        idx = self._next
        self._next += 1
        out.append(BlockStart(idx, BlockKind.CUSTOM_TOOL_CALL if custom else BlockKind.TOOL_CALL, cid, name))
        if fc.get("willContinue"):
            self._call = _Call(idx, custom)
            for entry in fc.get("partialArgs") or ():
                self._args(self._call, self._call.args.feed(entry), out)
            return
        args = fc.get("args")
        text = orjson.dumps(args if type(args) is dict else {}).decode()
        out.append(ToolArgsDelta(idx, unwrap_custom_args(text) if custom else text))
        out.append(BlockStop(idx))

    def _args(self, call: _Call, fragment: str, out: list[StreamEvent]) -> None:
        if not fragment:
            return
        if call.custom is not None:
            call.custom.append(fragment)
        else:
            out.append(ToolArgsDelta(call.block, fragment))

    def _end_call(self, out: list[StreamEvent]) -> None:
        call, self._call = self._call, None
        if call is None:
            return
        rest = call.args.close()
        if call.custom is not None:
            out.append(ToolArgsDelta(call.block, unwrap_custom_args("".join(call.custom) + rest)))
        elif rest:
            out.append(ToolArgsDelta(call.block, rest))
        out.append(BlockStop(call.block))

    def _grounding(self, meta: dict[str, Any], out: list[StreamEvent]) -> None:
        """New searches and citations of ``groundingMetadata`` (Gemini may repeat it in later events)."""
        for part in search.searches_from(meta, self._rid or "", self.ctx.dropped, self._searches):
            if part.query in self._queries and part.query:
                continue
            self._queries.add(part.query)
            part.sources = [src for src in part.sources if src.url not in self._urls]
            self._urls.update(src.url for src in part.sources)
            self._searches += 1
            out.append(WebSearch(part))
        open_text = self._cur_kind is _TEXT and self._cur == self._text_block and self._call is None
        text = "".join(self._text) if open_text else ""
        lo, hi = self._text_byte, self._bytes
        for _, a, b, cite in search.supports_from(meta, self.ctx.dropped):
            key = (a, b, cite.url)
            if key in self._cited:
                continue
            self._cited.add(key)
            a, b = max(a, lo), min(b, hi)
            if not open_text or b <= a:
                self.ctx.dropped.add("groundingSupports(outside the open text block)")
                continue
            cite.start, cite.end = search.byte_to_char(text, a - lo), search.byte_to_char(text, b - lo)
            if cite.end > cite.start:
                out.append(CitationDelta(self._cur, cite))

    def _finish(self, stop: StopReason, out: list[StreamEvent]) -> None:
        self._close_current(out)
        out.append(MessageDelta(stop, decode_usage(self._usage)))
        out.append(MessageStop())
        self.done = True

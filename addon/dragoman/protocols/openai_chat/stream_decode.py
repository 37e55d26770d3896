"""Chat SSE chunks -> IR stream events (``ChatStreamDecoder``).

Chat has no block events: the decoder synthesizes block start/stop, as openai-python's ``ChoiceEventState``
does. A text/thinking/refusal block closes when another kind starts; tool-call blocks stay open until
``finish_reason`` (parallel calls' arguments may interleave; ``stop`` after tool calls, as Gemini and some local
servers send, is a tool-use stop). The ``MessageDelta`` is held until the usage chunk (``choices: []``) or
``[DONE]``. Of several choices (``n > 1``) only choice 0 is translated, the others named in ``ctx.dropped``.

Chunks are read with ``orjson`` and plain dict access (no pydantic on the hot path, see ``models``): ``feed``
handles the three deltas of nearly every chunk inline (text, tool-call arguments, ``reasoning_content``; a call
per event costs ~2 %), every other delta goes to one method per item type (reasoning incl. OpenRouter's
``reasoning_details``, content parts, refusal, tool calls; Gemini's tool-call thought signatures: ``gemini``).
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

import orjson

from dragoman.errors import UpstreamProtocolError
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
from dragoman.ir.mapping import chat_stop
from dragoman.ir.search import Citation
from dragoman.protocols._checks import COMPACT_AT
from dragoman.protocols._checks import ToolArgs
from dragoman.protocols._custom_args import unwrap_custom_args
from dragoman.protocols._shape import Shape
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.openai_chat import gemini
from dragoman.protocols.openai_chat import search
from dragoman.protocols.openai_chat import stream_parts
from dragoman.protocols.openai_chat import stream_shortcut
from dragoman.protocols.openai_chat.errors import error_info_from_object
from dragoman.protocols.openai_chat.reasoning_details import Details
from dragoman.protocols.openai_chat.response import DROPPED_CHOICES
from dragoman.protocols.openai_chat.response import decode_usage
from dragoman.sse.events import SSEEvent

logger = logging.getLogger(__name__)
_loads = orjson.loads
#: hot-path constants (one global lookup instead of a global plus an attribute per delta)
_TEXT = BlockKind.TEXT
_THINKING = BlockKind.THINKING
_ARGS = stream_shortcut.ARGS


class Phase(Enum):
    WAITING = "waiting"  # no chunk yet
    STREAMING = "streaming"  # MessageStart sent, no finish_reason yet
    FINISHED = "finished"  # finish_reason seen, blocks closed, MessageDelta held for usage
    DONE = "done"  # MessageDelta + MessageStop sent
    ERROR = "error"  # an in-band error was returned; the rest is ignored


_WAITING = Phase.WAITING
_STREAMING = Phase.STREAMING
_FINISHED = Phase.FINISHED
_DONE = Phase.DONE
_ERROR = Phase.ERROR


class _Tool:
    __slots__ = ("block", "custom", "args", "id", "signed")

    def __init__(self, block: int, custom: bool, tid: str) -> None:
        self.block, self.custom, self.id, self.signed = block, custom, tid, False  # signed: see ``gemini``
        #: custom tools: buffered to unwrap {"input": ...}; function tools: ToolArgs' fragment list
        self.args: list[str] = []


class ChatStreamDecoder(StreamDecoder):
    """Chat SSE chunks -> IR events. One instance per stream."""

    STREAMING = _STREAMING

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.done = False
        self.phase = Phase.WAITING
        self._next_block = 0
        self._cur = -1  # the open text/thinking/refusal block, while _cur_kind is not None
        self._cur_kind: BlockKind | None = None
        self._tools: dict[int, _Tool] = {}  # Chat tool index -> block
        self._stop: StopReason | None = None
        self._usage: Usage | None = None
        self._custom = ctx.custom_tools()
        #: arguments of the open (non-custom) tool calls, checked as JSON at the finish_reason
        self._args = ToolArgs()
        self._other_choices = False  # a choice other than 0 was seen (and dropped)
        self._rd: Details | None = None  # the open thinking block's OpenRouter reasoning_details
        self._thought_tags = ctx.profile.thought_tags  # Gemini's <thought> summaries (see ``gemini``)
        self.in_thought = False
        #: url_citation annotations waiting for the stop of the text block they cite
        self._cites: list[Citation] = []
        #: the learnt frames (``stream_shortcut``): of a text / ``reasoning_content`` delta by block kind, of
        #: each open function call's arguments delta; tries left; a whole frame missed them (``shortcut``)
        self._shapes: dict[BlockKind, Shape] = {}
        self._calls: list[tuple[Shape, _Tool]] = []
        self._held: set[_Tool] = set()  # calls the client's encoder would not write from a token
        self._learns = stream_shortcut.LEARNS
        self._missed = False

    # -- interface

    def feed(self, ev: SSEEvent) -> list[StreamEvent]:
        # one frame per event: the try costs nothing (zero-cost exceptions, CPython 3.11+)
        try:
            data = ev.data
            if data[:6] == "[DONE]":
                return self._on_done()
            phase = self.phase
            if phase is _DONE or phase is _ERROR:
                logger.debug("Chat chunk after the end of the message ignored")
                return []
            try:
                obj = _loads(data)
            except orjson.JSONDecodeError as e:
                return self._not_json(data, e)
            if type(obj) is not dict:  # orjson builds exact dicts
                raise UpstreamProtocolError(f"Chat stream chunk is not a JSON object in phase {self.phase.name}")
            err = obj.get("error")
            if err is not None or ev.event == "error":
                return self._in_band_error(err if err is not None else obj)
            out: list[StreamEvent] = []
            if phase is _WAITING:
                out.append(self._message_start(obj))
                phase = _STREAMING
            u = obj.get("usage")
            if u is not None:
                self._add_usage(u)
            elif (xg := obj.get("x_groq")) is not None:
                self._groq_usage(xg)
            choices = obj.get("choices")
            if phase is _FINISHED:
                # after finish_reason: the usage chunk (choices: []) releases the held MessageDelta
                if u is not None and not choices:
                    out.extend(self._finish())
                elif choices:
                    self._answer(choices)  # other choices (n > 1) still streaming: reported as dropped
                return out
            if choices:
                choice = choices[0]
                if type(choice) is dict:
                    if choice.get("index") or len(choices) > 1:
                        # several choices (n > 1): the client's protocol has one answer, choice 0
                        choice = self._answer(choices)
                        if choice is None:
                            return out
                    delta = choice.get("delta")
                    learnt = None  # a plain text / reasoning / arguments delta: its kind (``stream_shortcut``)
                    if delta:
                        c = delta.get("content")
                        # fast path: a plain text delta (optionally with the role), the bulk of every stream
                        if c.__class__ is str and (len(delta) == 1 or (len(delta) == 2 and "role" in delta)):
                            if c:
                                if self._cur_kind is _TEXT:
                                    out.append(TextDelta(self._cur, c))
                                    learnt = _TEXT
                                else:
                                    self._text_start(c, out)
                        elif c is None and len(delta) == 1 and (tcs := delta.get("tool_calls")):
                            for pos, tc in enumerate(tcs):  # fast path: tool_calls only
                                self._tool_delta(tc, pos, out)
                            if len(tcs) == 1:
                                learnt = _ARGS
                        elif (
                            c is None
                            and len(delta) == 2
                            and "content" in delta
                            and (r := delta.get("reasoning_content")).__class__ is str
                            and r
                        ):  # fast path: {"content": null, "reasoning_content": "..."} (DeepSeek, vLLM)
                            idx = self._cur if self._cur_kind is _THINKING else self._switch(_THINKING, out)
                            out.append(ThinkingDelta(idx, r))
                            learnt = _THINKING
                        else:
                            self._delta(delta, c, out)
                    fr = choice.get("finish_reason")
                    if fr is not None:
                        self._on_finish(fr, out)
                    elif (
                        learnt is not None
                        and self._missed
                        and self._learns
                        and len(out) == 1
                        and u is None
                        and xg is None
                    ):
                        stream_shortcut.learn(self, ev, obj, learnt, out[0])
            return out
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
            # the chunk is hand-parsed for speed: a field of the wrong JSON type lands here
            raise UpstreamProtocolError(
                f"malformed Chat stream chunk ({type(e).__name__}: {e}) in phase {self.phase.name}"
            ) from e

    shortcut = stream_shortcut.shortcut  # a frame that is a learnt delta again: see ``stream_shortcut``

    def close(self) -> list[StreamEvent]:
        phase = self.phase
        if phase is Phase.DONE or phase is Phase.ERROR:
            return []
        if phase is Phase.FINISHED:  # some local servers never send [DONE]
            return self._finish()
        raise UpstreamProtocolError(f"Chat stream ended before finish_reason (in phase {phase.name})")

    # -- the envelope

    def _not_json(self, data: str, e: orjson.JSONDecodeError) -> list[StreamEvent]:
        if not data.strip():
            return []
        raise UpstreamProtocolError(f"Chat stream chunk is not valid JSON ({e}) in phase {self.phase.name}") from e

    def _in_band_error(self, err: Any) -> list[StreamEvent]:
        self.phase = Phase.ERROR
        self.done = True
        return [StreamError(error_info_from_object(err, None))]

    def _message_start(self, obj: dict[str, Any]) -> MessageStart:
        self.phase = Phase.STREAMING
        created = obj.get("created")  # an int, not a bool
        mid, model = str(obj.get("id") or ""), str(obj.get("model") or "")
        return MessageStart(mid, model, None, created if type(created) is int else None)

    def _answer(self, choices: list[Any]) -> dict[str, Any] | None:
        """Choice 0 of a chunk with other choices in it (n > 1), or None; the others are reported as dropped."""
        answer: dict[str, Any] | None = None
        for c in choices:
            if type(c) is dict and not c.get("index"):  # index 0 (or none: a provider that omits it)
                if answer is None:
                    answer = c
                    continue
            if not self._other_choices:
                self._other_choices = True
                self.ctx.dropped.add(DROPPED_CHOICES)
                logger.debug("Chat stream with several choices: only choice 0 is translated")
        return answer

    def _add_usage(self, u: Any) -> None:
        usage = decode_usage(u)
        if usage is not None:
            self._usage = usage if self._usage is None else self._usage.merged(usage)

    def _groq_usage(self, xg: Any) -> None:
        """Groq sends the usage inside ``x_groq``."""
        if isinstance(xg, dict) and isinstance(xg.get("usage"), dict):
            self._add_usage(xg["usage"])

    # -- blocks

    def _new_block(self) -> int:
        i = self._next_block
        self._next_block = i + 1
        return i

    def _switch(self, kind: BlockKind, out: list[StreamEvent]) -> int:
        """The open text/thinking/refusal block of ``kind``, closing another kind first."""
        if self._cur_kind is kind:
            return self._cur
        if self._cur_kind is not None:
            self._stop_current(out)
        idx = self._new_block()
        self._cur = idx
        self._cur_kind = kind
        out.append(BlockStart(idx, kind))
        return idx

    def _text_start(self, c: str, out: list[StreamEvent]) -> None:
        """A plain text delta after another kind of block (or none): Gemini's ``</thought>`` is not text."""
        if self._thought_tags:
            c = gemini.after_thought(self, c)
        if c:
            out.append(TextDelta(self._switch(_TEXT, out), c))

    def _close_current(self, out: list[StreamEvent]) -> None:
        if self._cur_kind is not None:
            self._stop_current(out)
            self._cur_kind = None

    def _stop_current(self, out: list[StreamEvent]) -> None:
        """Stop the open block (text/thinking/refusal), after a thinking block's reasoning_details."""
        rd, self._rd = self._rd, None
        if rd is not None and (sig := rd.signature()) is not None:
            out.append(SignatureDelta(self._cur, signature=sig))
        if self._cites and self._cur_kind is _TEXT:
            out.extend(CitationDelta(self._cur, c) for c in self._cites)
            self._cites = []
        out.append(BlockStop(self._cur))

    # -- deltas: one method per item type

    def _delta(self, delta: dict[str, Any], c: Any, out: list[StreamEvent]) -> None:
        """Every delta ``feed`` has no fast path for, its items in wire order (reasoning precedes text)."""
        if self._thought_tags:
            c = gemini.thought(self, delta, c, out)
        stream_parts.reasoning(self, delta, out)
        if c:
            stream_parts.content(self, c, out)
        ref = delta.get("refusal")
        if ref and isinstance(ref, str):
            out.append(TextDelta(self._switch(BlockKind.REFUSAL, out), ref))
        tcs = delta.get("tool_calls")
        if tcs:
            for pos, tc in enumerate(tcs):
                self._tool_delta(tc, pos, out)
        if delta.get("annotations"):  # passed on at the stop of the text block they cite (``_stop_current``)
            self._cites.extend(search.citations_from(delta["annotations"], self.ctx.dropped))

    def _tool_delta(self, tc: Any, pos: int, out: list[StreamEvent]) -> None:
        if not isinstance(tc, dict):
            raise UpstreamProtocolError(f"Chat tool_calls entry is not an object in phase {self.phase.name}")
        key = tc.get("index")
        if not isinstance(key, int):
            key = pos  # some providers (Gemini's compat layer) omit the index
        fn = tc.get("function") or {}
        slot = self._tools.get(key)
        if "extra_content" in tc:
            slot = gemini.stream_signature(self, tc, key, slot, out)
        if slot is None:
            slot = self._tool_start(tc, key, fn.get("name"), out)
        args = fn.get("arguments")
        if args:
            if type(args) is not str:  # an object or list here must never reach an encoder as a fragment
                raise UpstreamProtocolError(
                    f"Chat tool call index {key} arguments are not a string in phase {self.phase.name}"
                )
            frags = slot.args
            frags.append(args)
            if not slot.custom:
                if len(frags) >= COMPACT_AT:  # as ToolArgs.add does
                    frags[:] = ["".join(frags)]
                out.append(ToolArgsDelta(slot.block, args))

    def _tool_start(self, tc: dict[str, Any], key: int, name: Any, out: list[StreamEvent]) -> _Tool:
        if not name or type(name) is not str:
            raise UpstreamProtocolError(
                f"Chat tool call index {key} started without function.name in phase {self.phase.name}"
            )
        tid = tc.get("id")
        if tid is not None and type(tid) is not str:
            raise UpstreamProtocolError(f"Chat tool call index {key} has a non-string id in phase {self.phase.name}")
        self._close_current(out)
        custom = name in self._custom
        slot = _Tool(self._new_block(), custom, tid or f"call_{key}")
        self._tools[key] = slot
        if not custom:  # the checker's fragment list, extended by _tool_delta without a call per fragment
            slot.args = self._args.start(slot.block, name)
        kind = BlockKind.CUSTOM_TOOL_CALL if custom else BlockKind.TOOL_CALL
        out.append(BlockStart(slot.block, kind, tool_call_id=slot.id, name=name))
        return slot

    # -- the end

    def _close_tools(self, out: list[StreamEvent]) -> None:
        for slot in self._tools.values():
            if slot.custom and slot.args:
                out.append(ToolArgsDelta(slot.block, unwrap_custom_args("".join(slot.args))))
            elif not slot.custom:
                self._args.stop(slot.block)
            out.append(BlockStop(slot.block))
        self._tools.clear()

    def _on_finish(self, fr: Any, out: list[StreamEvent]) -> None:
        self._stop = chat_stop(fr if isinstance(fr, str) else None, bool(self._tools))
        self._close_current(out)
        self._close_tools(out)
        # tool arguments that are not JSON are an upstream fault, unless "length" cut them off
        self._args.check(self._stop)
        self.phase = Phase.FINISHED

    def _finish(self) -> list[StreamEvent]:
        if self._cites:  # annotations of an answer without text
            self.ctx.dropped.add("delta.annotations")
            self._cites = []
        self.phase = Phase.DONE
        self.done = True
        return [MessageDelta(self._stop, self._usage), MessageStop()]

    def _on_done(self) -> list[StreamEvent]:
        phase = self.phase
        if phase is Phase.DONE or phase is Phase.ERROR:
            return []
        if phase is Phase.FINISHED:
            return self._finish()
        if phase is Phase.WAITING:
            raise UpstreamProtocolError("Chat stream sent [DONE] before any chunk")
        # [DONE] without finish_reason: the upstream ended properly but omitted it; infer it
        logger.debug("Chat stream [DONE] without finish_reason; inferring it")
        out: list[StreamEvent] = []
        had_tools = bool(self._tools)
        self._close_current(out)
        self._close_tools(out)
        self._stop = StopReason.TOOL_USE if had_tools else StopReason.END_TURN
        self._args.check(self._stop)
        out.extend(self._finish())
        return out

"""Anthropic Messages -> IR: client requests, upstream whole responses, errors and SSE streams.

Carried reasoning (``dragoman.ir.carry``): a thinking ``signature`` starting with ``RESPONSES_TAG`` is a
Responses reasoning item we gave this client earlier; it is unwrapped into ``encrypted_content`` +
``item_id``. ``carry.UNSIGNED`` means "no signature". Native signatures are kept as they are.

What the IR cannot carry is recorded by NAME in ``Request.dropped`` / ``ctx.dropped``: unknown
top-level fields (``cache_control``, ``context_management``, ``mcp_servers``, ``container``,
``service_tier``, ...), ``cache_control`` on blocks, ``citations``, server-tool blocks
(``server_tool_use``, ``web_search_tool_result``, ``mcp_tool_use``, ...).

Stream hot path: ``content_block_delta`` (~95 % of a stream), ``content_block_stop`` and ``ping`` are
parsed with ``orjson`` and read as dicts, with the exact checks the pydantic models make (``index`` an
int, the delta's text field a str); anything else, or any of those three that fails the checks, goes
through ``m.EVENT_ADAPTER`` on the dict already parsed (same models, no second parse). Measured on one
``content_block_delta`` (issue 6): the callable-discriminated union 4.4 µs, a ``Literal``/
``Field(discriminator="type")`` union 3.3 µs, the bare model alone 3.0 µs, ``orjson.loads`` + dict
access 0.9 µs; pydantic cannot get near orjson because it builds model instances (with an extra dict).
"""

from __future__ import annotations

import base64
import logging
from enum import Enum
from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import Dropped
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import Usage
from dragoman.ir.common import kind_from_status
from dragoman.ir.events import BlockKind
from dragoman.ir.events import BlockStart
from dragoman.ir.events import BlockStop
from dragoman.ir.events import MessageDelta
from dragoman.ir.events import MessageStart
from dragoman.ir.events import MessageStop
from dragoman.ir.events import SignatureDelta
from dragoman.ir.events import StreamError
from dragoman.ir.events import StreamEvent
from dragoman.ir.events import TextDelta
from dragoman.ir.events import ThinkingDelta
from dragoman.ir.events import ToolArgsDelta
from dragoman.ir.mapping import anthropic_stop
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Part
from dragoman.ir.request import Reasoning
from dragoman.ir.request import Request
from dragoman.ir.request import ResponseFormat
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolChoice
from dragoman.ir.request import ToolResultPart
from dragoman.ir.response import OutputPart
from dragoman.ir.response import Response
from dragoman.protocols import _wire
from dragoman.protocols._checks import ToolArgs
from dragoman.protocols._checks import token_count
from dragoman.protocols.anthropic_messages import models as m
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.sse.events import SSEEvent

logger = logging.getLogger(__name__)

_loads = orjson.loads
#: delta ``type`` -> the field carrying its string (the models' required field)
_DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
    "input_json_delta": "partial_json",
}

#: Anthropic error ``type`` -> (IR kind, HTTP status)
ERROR_TYPES: dict[str, tuple[ErrorKind, int]] = {
    "invalid_request_error": (ErrorKind.INVALID_REQUEST, 400),
    "authentication_error": (ErrorKind.AUTHENTICATION, 401),
    "billing_error": (ErrorKind.PERMISSION, 402),
    "permission_error": (ErrorKind.PERMISSION, 403),
    "not_found_error": (ErrorKind.NOT_FOUND, 404),
    "request_too_large": (ErrorKind.REQUEST_TOO_LARGE, 413),
    "rate_limit_error": (ErrorKind.RATE_LIMIT, 429),
    "api_error": (ErrorKind.API_ERROR, 500),
    "timeout_error": (ErrorKind.TIMEOUT, 504),
    "overloaded_error": (ErrorKind.OVERLOADED, 529),
}

#: Anthropic effort names that are not OpenAI effort names
_EFFORT_TO_IR = {"max": "xhigh"}

#: request fields the IR carries (everything else is named in ``dropped``)
_KNOWN_REQUEST_FIELDS = frozenset(m.MessagesRequest.model_fields)


# ---------------------------------------------------------------- helpers


def usage_to_ir(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None,
    cache_creation: int | None,
) -> Usage:
    """Anthropic usage -> IR usage (IR ``input_tokens`` includes both cache fields).

    A count that does not fit 64 bits (or is negative) is an ``UpstreamProtocolError``."""
    total: int | None = None
    if input_tokens is not None or cache_read is not None or cache_creation is not None:
        total = token_count((input_tokens or 0) + (cache_read or 0) + (cache_creation or 0), "input_tokens")
    token_count(input_tokens, "input_tokens")
    token_count(output_tokens, "output_tokens")
    token_count(cache_read, "cache_read_input_tokens")
    token_count(cache_creation, "cache_creation_input_tokens")
    return Usage(
        input_tokens=total,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read,
        cache_creation_tokens=cache_creation,
    )


def _usage_model_to_ir(u: m.UsageModel | None) -> Usage:
    if u is None:
        return Usage()
    return usage_to_ir(u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens)


def thinking_part(text: str, signature: str | None) -> ThinkingPart:
    """A thinking block -> ThinkingPart, unwrapping carried signatures."""
    if not signature or carry.is_unsigned(signature):
        return ThinkingPart(text=text)
    carried = carry.unwrap_responses(signature)
    if carried is not None:
        return ThinkingPart(text=text, encrypted_content=carried.get("enc"), item_id=carried.get("id"))
    return ThinkingPart(text=text, signature=signature)


def error_info_from_type(
    etype: str | None, message: str, status: int | None = None, request_id: str | None = None
) -> ErrorInfo:
    kind_status = ERROR_TYPES.get(etype or "")
    if kind_status is not None:
        kind, default_status = kind_status
    else:
        kind = kind_from_status(status) if status is not None else ErrorKind.API_ERROR
        default_status = status if status is not None else 500
    return ErrorInfo(
        kind=kind,
        message=message,
        status=status if status is not None else default_status,
        code=etype,
        request_id=request_id,
    )


def _source_to_image(src: Any, dropped: Dropped) -> ImagePart | None:
    if isinstance(src, m.Base64Source):
        return ImagePart(data=src.data, media_type=src.media_type)
    if isinstance(src, m.UrlSource):
        return ImagePart(url=src.url)
    if isinstance(src, m.FileSource):
        return ImagePart(file_id=src.file_id)
    dropped.add(f"image.source.{src.type}")
    return None


def _source_to_file(block: m.DocumentBlock, dropped: Dropped) -> FilePart | None:
    src = block.source
    if isinstance(src, m.Base64Source):
        return FilePart(data=src.data, media_type=src.media_type, filename=block.title)
    if isinstance(src, m.UrlSource):
        return FilePart(url=src.url, filename=block.title)
    if isinstance(src, m.FileSource):
        return FilePart(file_id=src.file_id, filename=block.title)
    if isinstance(src, m.TextSource):
        data = base64.b64encode(src.data.encode()).decode()
        return FilePart(data=data, media_type=src.media_type or "text/plain", filename=block.title)
    dropped.add(f"document.source.{src.type}")
    return None


def _note_block_extras(block: Any, dropped: Dropped) -> None:
    if getattr(block, "cache_control", None) is not None:
        dropped.add("cache_control")
    if getattr(block, "citations", None):
        dropped.add("citations")


def _tool_result_content(content: Any, dropped: Dropped) -> list[TextPart | ImagePart | FilePart]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)] if content else []
    try:
        blocks = m.TOOL_RESULT_CONTENT_ADAPTER.validate_python(content)
    except ValidationError as e:
        raise ClientRequestError(f"invalid tool_result content: {_wire.describe_validation_error(e)}") from e
    out: list[TextPart | ImagePart | FilePart] = []
    for b in blocks:
        _note_block_extras(b, dropped)
        if isinstance(b, m.TextBlock):
            out.append(TextPart(b.text))
        elif isinstance(b, m.ImageBlock):
            img = _source_to_image(b.source, dropped)
            if img is not None:
                out.append(img)
        elif isinstance(b, m.DocumentBlock):
            f = _source_to_file(b, dropped)
            if f is not None:
                out.append(f)
        else:
            dropped.add(f"tool_result.content.{b.type}")
    return out


def _blocks_to_parts(blocks: list[Any], dropped: Dropped) -> list[Part]:
    parts: list[Part] = []
    for b in blocks:
        _note_block_extras(b, dropped)
        if isinstance(b, m.TextBlock):
            parts.append(TextPart(b.text))
        elif isinstance(b, m.ImageBlock):
            img = _source_to_image(b.source, dropped)
            if img is not None:
                parts.append(img)
        elif isinstance(b, m.DocumentBlock):
            f = _source_to_file(b, dropped)
            if f is not None:
                parts.append(f)
        elif isinstance(b, m.ToolUseBlock):
            parts.append(ToolCallPart(id=b.id, name=b.name, arguments=orjson.dumps(b.input).decode()))
        elif isinstance(b, m.ToolResultBlock):
            parts.append(
                ToolResultPart(
                    tool_call_id=b.tool_use_id,
                    content=_tool_result_content(b.content, dropped),
                    is_error=bool(b.is_error),
                )
            )
        elif isinstance(b, m.ThinkingBlock):
            parts.append(thinking_part(b.thinking, b.signature))
        elif isinstance(b, m.RedactedThinkingBlock):
            parts.append(ThinkingPart(redacted_data=b.data))
        else:
            dropped.add(f"content.{b.type}")
    return parts


def _tool_to_ir(t: m.ToolParam, dropped: Dropped) -> Tool:
    if t.cache_control is not None:
        dropped.add("cache_control")
    if t.type not in (None, "custom"):
        return Tool(name=t.name, description=t.description, kind="builtin", raw=t.model_dump(exclude_none=True))
    for extra in t.model_extra or {}:
        dropped.add(f"tools.{extra}")
    return Tool(name=t.name, description=t.description, parameters=t.input_schema, kind="function")


def _reasoning_to_ir(req: m.MessagesRequest, dropped: Dropped) -> tuple[Reasoning | None, ResponseFormat | None]:
    reasoning: Reasoning | None = None
    th = req.thinking
    if th is not None:
        if th.type == "enabled":
            reasoning = Reasoning(enabled=True, budget_tokens=th.budget_tokens)
        elif th.type == "adaptive":
            reasoning = Reasoning(enabled=True, adaptive=True)
        else:
            reasoning = Reasoning(enabled=False)
        for extra in th.model_extra or {}:
            dropped.add(f"thinking.{extra}")
    fmt: ResponseFormat | None = None
    oc = req.output_config
    if oc:
        for key, value in oc.items():
            if key == "effort" and isinstance(value, str):
                if reasoning is None:
                    reasoning = Reasoning()
                reasoning.effort = _EFFORT_TO_IR.get(value, value)
            elif key == "format" and isinstance(value, dict) and value.get("type") == "json_schema":
                fmt = ResponseFormat(type="json_schema", schema=value.get("schema"))
            else:
                dropped.add(f"output_config.{key}")
    return reasoning, fmt


# ---------------------------------------------------------------- requests


def decode_request(body: dict[str, Any]) -> Request:
    try:
        wire = m.REQUEST_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise ClientRequestError(f"invalid Anthropic Messages request: {_wire.describe_validation_error(e)}") from e
    dropped = Dropped()
    for key in wire.model_extra or {}:
        dropped.add(key)
    system: list[TextPart] = []
    if isinstance(wire.system, str):
        if wire.system:
            system.append(TextPart(wire.system))
    elif wire.system is not None:
        for b in wire.system:
            _note_block_extras(b, dropped)
            system.append(TextPart(b.text))
    messages: list[Message] = []
    for msg in wire.messages:
        if isinstance(msg.content, str):
            parts: list[Part] = [TextPart(msg.content)]
        else:
            parts = _blocks_to_parts(msg.content, dropped)
        messages.append(Message(role=msg.role, parts=parts))
    tools = [_tool_to_ir(t, dropped) for t in wire.tools or []]
    tool_choice: ToolChoice | None = None
    parallel: bool | None = None
    if wire.tool_choice is not None:
        tool_choice = ToolChoice(mode=wire.tool_choice.type, name=wire.tool_choice.name)
        if wire.tool_choice.disable_parallel_tool_use:
            parallel = False
    reasoning, fmt = _reasoning_to_ir(wire, dropped)
    user = None
    if wire.metadata is not None:
        user = wire.metadata.user_id
        for key in wire.metadata.model_extra or {}:
            dropped.add(f"metadata.{key}")
    return Request(
        model=wire.model,
        messages=messages,
        system=system,
        tools=tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel,
        max_tokens=wire.max_tokens,
        temperature=wire.temperature,
        top_p=wire.top_p,
        top_k=wire.top_k,
        stop=list(wire.stop_sequences or []),
        stream=bool(wire.stream),
        user=user,
        reasoning=reasoning,
        response_format=fmt,
        dropped=dropped,
    )


# ---------------------------------------------------------------- whole responses


def _custom_input(arguments_obj: Any) -> str:
    if isinstance(arguments_obj, dict):
        raw = arguments_obj.get(CUSTOM_TOOL_PARAM)
        if isinstance(raw, str):
            return raw
    return orjson.dumps(arguments_obj).decode()


def decode_response(body: dict[str, Any], ctx: Context) -> Response:
    try:
        wire = m.MESSAGE_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise UpstreamProtocolError(f"invalid Anthropic message: {_wire.describe_validation_error(e)}") from e
    custom = ctx.custom_tools()
    content: list[OutputPart] = []
    for b in wire.content:
        if isinstance(b, m.TextBlock):
            if b.citations:
                ctx.dropped.add("citations")
            content.append(TextPart(b.text))
        elif isinstance(b, m.ThinkingBlock):
            content.append(thinking_part(b.thinking, b.signature))
        elif isinstance(b, m.RedactedThinkingBlock):
            content.append(ThinkingPart(redacted_data=b.data))
        elif isinstance(b, m.ToolUseBlock):
            if b.name in custom:
                content.append(ToolCallPart(id=b.id, name=b.name, arguments=_custom_input(b.input), kind="custom"))
            else:
                content.append(ToolCallPart(id=b.id, name=b.name, arguments=orjson.dumps(b.input).decode()))
        else:
            ctx.dropped.add(b.type)
    u = wire.usage
    return Response(
        id=wire.id,
        model=wire.model,
        content=content,
        stop_reason=anthropic_stop(wire.stop_reason),
        stop_sequence=wire.stop_sequence,
        usage=_usage_model_to_ir(u),
    )


# ---------------------------------------------------------------- errors


def decode_error(status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorInfo:
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict) and obj.get("type") == "error" and isinstance(obj.get("error"), dict):
        try:
            wire = m.ErrorResponse.model_validate(obj)
        except ValidationError:
            wire = None
        if wire is not None:
            hdrs = {k.lower(): v for k, v in (headers or {}).items()}
            info = error_info_from_type(
                wire.error.type,
                wire.error.message or f"upstream returned HTTP {status}",
                status,
                wire.request_id or hdrs.get("request-id") or hdrs.get("x-request-id"),
            )
            info.retry_after = hdrs.get("retry-after")
            return info
    return _wire.generic_error(status, body, headers)


# ---------------------------------------------------------------- streams


class Phase(Enum):
    WAITING = "waiting"  # before message_start
    STREAMING = "streaming"  # blocks
    TERMINAL = "terminal"  # after message_delta
    STOPPED = "stopped"  # after message_stop
    FAILED = "failed"  # after an error event


class _Block(Enum):
    TEXT = "text"
    THINKING = "thinking"
    REDACTED = "redacted_thinking"
    TOOL = "tool_use"
    CUSTOM_TOOL = "custom_tool"  # a custom tool offered as {"input": string}: arguments buffered
    SWALLOWED = "swallowed"  # server tool blocks etc.: nothing reaches the IR


class AnthropicStreamDecoder(StreamDecoder):
    """Anthropic SSE -> IR events. The Anthropic block index is the IR index."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.phase = Phase.WAITING
        self.done = False
        self._open: dict[int, _Block] = {}
        self._seen: set[int] = set()
        self._custom_buf: dict[int, list[str]] = {}
        self._custom = ctx.custom_tools()
        #: arguments of the open tool_use blocks, checked as JSON at message_delta
        self._args = ToolArgs()
        self._unknown: set[str] = set()
        # raw Anthropic usage fields, merged across message_start and message_delta
        self._usage: dict[str, int | None] = {}

    # -- helpers

    def _fail(self, what: str) -> UpstreamProtocolError:
        return UpstreamProtocolError(f"can't handle {what} in phase {self.phase.name}")

    def _merge_usage(self, u: m.UsageModel | None) -> Usage:
        if u is not None:
            for name in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                value = getattr(u, name)
                if value is not None:
                    self._usage[name] = value
        g = self._usage.get
        return usage_to_ir(
            g("input_tokens"), g("output_tokens"), g("cache_read_input_tokens"), g("cache_creation_input_tokens")
        )

    def _skip_unknown(self, what: str) -> list[StreamEvent]:
        if self.ctx.strict:
            raise UpstreamProtocolError(f"unknown Anthropic stream item {what!r} in phase {self.phase.name}")
        if what not in self._unknown:
            self._unknown.add(what)
            logger.debug("skipping unknown Anthropic stream item %r", what)
        return []

    # -- interface

    def feed(self, ev: SSEEvent) -> list[StreamEvent]:
        data = ev.data
        try:
            obj = _loads(data)
        except orjson.JSONDecodeError:
            obj = None
        if type(obj) is dict:
            t = obj.get("type")
            if t == "content_block_delta":
                idx = obj.get("index")
                d = obj.get("delta")
                if type(idx) is int and type(d) is dict:
                    dt = d.get("type")
                    field = _DELTA_FIELDS.get(dt) if type(dt) is str else None
                    if field is not None:
                        value = d.get(field)
                        if type(value) is str:
                            return self._apply_delta(idx, dt, value)
            elif t == "ping":
                return []
            elif t == "content_block_stop":
                idx = obj.get("index")
                if type(idx) is int:
                    return self._stop_index(idx)
        if not data.strip():
            return []
        try:
            # validate what was already parsed; only unparsable text goes back to pydantic's own JSON parser
            e = m.EVENT_ADAPTER.validate_python(obj) if obj is not None else m.EVENT_ADAPTER.validate_json(data)
        except ValidationError as err:
            raise UpstreamProtocolError(
                f"invalid Anthropic stream event {ev.event or ''!r}: {_wire.describe_validation_error(err)}"
            ) from err
        t = type(e)
        if t is m.ContentBlockDeltaEvent:
            return self._delta(e)
        if t is m.PingEvent:
            return []
        if t is m.ContentBlockStartEvent:
            return self._block_start(e)
        if t is m.ContentBlockStopEvent:
            return self._block_stop(e)
        if t is m.MessageStartEvent:
            if self.phase is not Phase.WAITING:
                raise self._fail("message_start")
            self.phase = Phase.STREAMING
            msg = e.message
            return [MessageStart(id=msg.id, model=msg.model, usage=self._merge_usage(msg.usage))]
        if t is m.MessageDeltaEvent:
            return self._message_delta(e)
        if t is m.MessageStopEvent:
            if self.phase is not Phase.TERMINAL:
                raise self._fail("message_stop")
            self.phase = Phase.STOPPED
            self.done = True
            return [MessageStop()]
        if t is m.ErrorEvent:
            self.phase = Phase.FAILED
            self.done = True
            return [StreamError(error_info_from_type(e.error.type, e.error.message, None, e.request_id))]
        return self._skip_unknown(e.type)

    def close(self) -> list[StreamEvent]:
        if self.phase in (Phase.STOPPED, Phase.FAILED):
            return []
        raise UpstreamProtocolError(f"Anthropic stream ended before message_stop (in phase {self.phase.name})")

    # -- events

    def _block_start(self, e: m.ContentBlockStartEvent) -> list[StreamEvent]:
        if self.phase is not Phase.STREAMING:
            raise self._fail("content_block_start")
        idx = e.index
        if idx in self._seen:
            raise UpstreamProtocolError(f"duplicate content_block_start for index {idx} in phase {self.phase.name}")
        self._seen.add(idx)
        b = e.content_block
        tb = type(b)
        if tb is m.TextBlock:
            self._open[idx] = _Block.TEXT
            out: list[StreamEvent] = [BlockStart(idx, BlockKind.TEXT)]
            if b.text:
                out.append(TextDelta(idx, b.text))
            if b.citations:
                self.ctx.dropped.add("citations")
            return out
        if tb is m.ThinkingBlock:
            self._open[idx] = _Block.THINKING
            out = [BlockStart(idx, BlockKind.THINKING)]
            if b.thinking:
                out.append(ThinkingDelta(idx, b.thinking))
            if b.signature:
                out.extend(self._signature(idx, b.signature))
            return out
        if tb is m.RedactedThinkingBlock:
            self._open[idx] = _Block.REDACTED
            return [BlockStart(idx, BlockKind.REDACTED_THINKING, data=b.data)]
        if tb is m.ToolUseBlock:
            if b.name in self._custom:
                self._open[idx] = _Block.CUSTOM_TOOL
                buf = self._custom_buf[idx] = []
                if b.input:
                    buf.append(orjson.dumps(b.input).decode())
                return [BlockStart(idx, BlockKind.CUSTOM_TOOL_CALL, tool_call_id=b.id, name=b.name)]
            self._open[idx] = _Block.TOOL
            self._args.start(idx, b.name)
            out = [BlockStart(idx, BlockKind.TOOL_CALL, tool_call_id=b.id, name=b.name)]
            if b.input:
                initial = orjson.dumps(b.input).decode()
                self._args.add(idx, initial)
                out.append(ToolArgsDelta(idx, initial))
            return out
        # server_tool_use, web_search_tool_result, mcp_tool_use, compaction, ... and anything new
        self._open[idx] = _Block.SWALLOWED
        self.ctx.dropped.add(b.type)
        return []

    def _signature(self, idx: int, sig: str) -> list[StreamEvent]:
        if not sig or carry.is_unsigned(sig):
            return []
        carried = carry.unwrap_responses(sig)
        if carried is not None:
            return [SignatureDelta(idx, encrypted_content=carried.get("enc"))]
        return [SignatureDelta(idx, signature=sig)]

    def _delta(self, e: m.ContentBlockDeltaEvent) -> list[StreamEvent]:
        d = e.delta
        if type(d) is m.OtherDelta:
            return self._apply_delta(e.index, d.type, None)
        return self._apply_delta(e.index, d.type, getattr(d, _DELTA_FIELDS[d.type]))

    def _apply_delta(self, idx: int, dt: str, value: str | None) -> list[StreamEvent]:
        """One valid delta: ``dt`` its type, ``value`` its text field (None for a type we do not model)."""
        kind = self._open.get(idx)
        if kind is None or self.phase is not Phase.STREAMING:
            raise UpstreamProtocolError(
                f"content_block_delta for index {idx} without an open block in phase {self.phase.name}"
            )
        if kind is _Block.SWALLOWED:
            return []
        if dt == "text_delta":
            if kind is _Block.TEXT:
                return [TextDelta(idx, value)] if value else []
        elif dt == "thinking_delta":
            if kind is _Block.THINKING:
                return [ThinkingDelta(idx, value)] if value else []
        elif dt == "input_json_delta":
            if kind is _Block.TOOL:
                if not value:
                    return []
                self._args.add(idx, value)  # type: ignore[arg-type]
                return [ToolArgsDelta(idx, value)]  # type: ignore[arg-type]
            if kind is _Block.CUSTOM_TOOL:
                self._custom_buf[idx].append(value)  # type: ignore[arg-type]
                return []
        elif dt == "signature_delta":
            if kind is _Block.THINKING:
                return self._signature(idx, value)  # type: ignore[arg-type]
        else:
            name = "citations" if dt == "citations_delta" else dt
            self.ctx.dropped.add(name)
            return []
        raise UpstreamProtocolError(f"{dt} in a {kind.value} block (index {idx}) in phase {self.phase.name}")

    def _finish_block(self, idx: int, kind: _Block) -> list[StreamEvent]:
        if kind is _Block.SWALLOWED:
            return []
        if kind is _Block.CUSTOM_TOOL:
            raw = "".join(self._custom_buf.pop(idx, []))
            try:
                obj = orjson.loads(raw) if raw else {}
            except orjson.JSONDecodeError:
                obj = None
            fragment = _custom_input(obj) if obj is not None else raw
            out: list[StreamEvent] = [ToolArgsDelta(idx, fragment)] if fragment else []
            out.append(BlockStop(idx))
            return out
        return [BlockStop(idx)]

    def _block_stop(self, e: m.ContentBlockStopEvent) -> list[StreamEvent]:
        return self._stop_index(e.index)

    def _stop_index(self, idx: int) -> list[StreamEvent]:
        kind = self._open.pop(idx, None)
        if kind is None or self.phase is not Phase.STREAMING:
            raise UpstreamProtocolError(
                f"content_block_stop for index {idx} without an open block in phase {self.phase.name}"
            )
        if kind is _Block.TOOL:
            self._args.stop(idx)
            return [BlockStop(idx)]
        if kind is _Block.TEXT or kind is _Block.THINKING:
            return [BlockStop(idx)]
        return self._finish_block(idx, kind)

    def _message_delta(self, e: m.MessageDeltaEvent) -> list[StreamEvent]:
        if self.phase is not Phase.STREAMING:
            raise self._fail("message_delta")
        out: list[StreamEvent] = []
        # the real API may end a max_tokens turn without closing the open block
        for idx, kind in list(self._open.items()):
            out.extend(self._finish_block(idx, kind))
        self._open.clear()
        self.phase = Phase.TERMINAL
        for key in e.delta.model_extra or {}:
            if e.delta.model_extra[key] is not None:
                self.ctx.dropped.add(key)
        stop = anthropic_stop(e.delta.stop_reason)
        # tool arguments that are not JSON are an upstream fault, unless max_tokens cut them off
        self._args.check(stop)
        out.append(
            MessageDelta(
                stop_reason=stop,
                usage=self._merge_usage(e.usage),
                stop_sequence=e.delta.stop_sequence,
            )
        )
        return out

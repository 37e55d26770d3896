"""OpenAI Responses -> IR: client requests, upstream whole responses, upstream errors and upstream SSE.

Stream hot path: the ``*.delta`` events (~95 % of a stream) are parsed with ``orjson`` and read as
dicts, with the exact checks ``DeltaEvent`` makes (``delta`` a str, ``item_id`` a str or absent, the
indices ints or absent); every other event, or a delta failing those checks, goes through
``EVENT_ADAPTER`` on the dict already parsed (same models, no second parse). Measured (issue 6): pydantic's
union costs 3-4.5 µs per small event whichever discriminator (callable or ``Field(discriminator=)``)
against ~0.9 µs for ``orjson.loads`` + dict access: the model instances (and their extra dicts) are the
cost, not the discriminator.
"""

from __future__ import annotations

import logging
import zlib
from enum import Enum
from typing import Any

import orjson
from pydantic import ValidationError

from dragoman.errors import ClientRequestError
from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import StopReason
from dragoman.ir.common import Usage
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
from dragoman.ir.mapping import RESPONSES_INCOMPLETE_TO_IR
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import Part
from dragoman.ir.request import Reasoning
from dragoman.ir.request import RefusalPart
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
from dragoman.protocols import _openai_errors
from dragoman.protocols._checks import ToolArgs
from dragoman.protocols._checks import token_count
from dragoman.protocols._wire import describe_validation_error
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamDecoder
from dragoman.protocols.openai_responses.models import DELTA_TYPES
from dragoman.protocols.openai_responses.models import EVENT_ADAPTER
from dragoman.protocols.openai_responses.models import REQUEST_ADAPTER
from dragoman.protocols.openai_responses.models import RESPONSE_ADAPTER
from dragoman.protocols.openai_responses.models import ContentPartEvent
from dragoman.protocols.openai_responses.models import DeltaEvent
from dragoman.protocols.openai_responses.models import DoneEvent
from dragoman.protocols.openai_responses.models import ErrorEvent
from dragoman.protocols.openai_responses.models import LifecycleEvent
from dragoman.protocols.openai_responses.models import OutputItemEvent
from dragoman.protocols.openai_responses.models import ResponseObject

logger = logging.getLogger(__name__)

_loads = orjson.loads

#: the namespace whose tools Codex calls by their bare name (no ``namespace`` field on the call)
DEFAULT_NAMESPACE = "functions"
#: ``req.extra`` keys this codec sets (read back by the Responses encoder toward the client)
EXTRA_ECHO = "responses_echo"
EXTRA_NAMESPACES = "responses_tool_namespaces"

_HANDLED_KEYS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "max_output_tokens",
        "temperature",
        "top_p",
        "text",
        "stream",
        "user",
        "safety_identifier",
        "previous_response_id",
    }
)


# ============================================================== requests


def decode_request(body: dict[str, Any]) -> Request:
    try:
        w = REQUEST_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise ClientRequestError(f"invalid Responses request: {describe_validation_error(e)}") from e
    if w.previous_response_id:
        raise ClientRequestError(
            "previous_response_id is not supported yet: Dragoman translates each request on its own, "
            "send the whole conversation in `input` (with store: false)"
        )
    req = Request(model=w.model)
    dropped = req.dropped
    for key in body:
        if key not in _HANDLED_KEYS:
            dropped.add(key)

    if isinstance(w.instructions, str):
        if w.instructions:
            req.system.append(TextPart(w.instructions))
    elif isinstance(w.instructions, list):
        for item in w.instructions:
            for part in _content_parts(item.get("content"), dropped):
                if isinstance(part, TextPart):
                    req.system.append(part)

    # tools: top level, then tools delivered in-band (Codex "responses-lite": additional_tools items)
    flat: list[tuple[str | None, dict[str, Any]]] = []
    _flatten_tools(w.tools or [], None, flat)
    items = [w.input] if isinstance(w.input, str) else (w.input or [])
    for item in items:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            _flatten_tools(item.get("tools") or [], None, flat)
    namespaces = _decode_tools(flat, req, dropped)

    if isinstance(w.input, str):
        req.messages.append(Message("user", [TextPart(w.input)]))
    else:
        _decode_input(w.input or [], req, namespaces, dropped)

    req.tool_choice = _decode_tool_choice(w.tool_choice, dropped)
    req.parallel_tool_calls = w.parallel_tool_calls
    req.max_tokens = w.max_output_tokens
    req.temperature = w.temperature
    req.top_p = w.top_p
    req.stream = bool(w.stream)
    req.user = w.safety_identifier or w.user
    if w.reasoning is not None:
        effort = w.reasoning.get("effort")
        summary = w.reasoning.get("summary") or w.reasoning.get("generate_summary")
        for key in w.reasoning:
            if key not in ("effort", "summary", "generate_summary"):
                dropped.add(f"reasoning.{key}")
        if effort is not None or summary is not None:
            req.reasoning = Reasoning(
                enabled=effort != "none", effort=effort if effort != "none" else None, summary=summary
            )
    if w.text is not None:
        fmt = w.text.get("format")
        if isinstance(fmt, dict):
            ftype = fmt.get("type")
            if ftype == "json_schema":
                req.response_format = ResponseFormat(
                    "json_schema", fmt.get("name"), fmt.get("schema"), fmt.get("strict")
                )
            elif ftype == "json_object":
                req.response_format = ResponseFormat("json_object")
        for key in w.text:
            if key != "format":
                dropped.add(f"text.{key}")

    echo: dict[str, Any] = {}
    for key in (
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "top_p",
        "max_output_tokens",
        "reasoning",
        "text",
        "user",
    ):
        if key in body:
            echo[key] = body[key]
    req.extra[EXTRA_ECHO] = echo
    if namespaces:
        req.extra[EXTRA_NAMESPACES] = {ir: ns for ir, ns in namespaces.items() if ns[0] != DEFAULT_NAMESPACE}
    return req


def _flatten_tools(tools: list[Any], ns: str | None, out: list[tuple[str | None, dict[str, Any]]]) -> None:
    for t in tools:
        if not isinstance(t, dict):
            raise ClientRequestError("tools: every tool must be an object")
        if t.get("type") == "namespace":
            _flatten_tools(t.get("tools") or [], t.get("name"), out)
        else:
            out.append((ns, t))


def _decode_tools(flat: list[tuple[str | None, dict[str, Any]]], req: Request, dropped) -> dict[str, tuple[str, str]]:
    """Fills ``req.tools``; returns {IR name: (namespace, name)} for namespaced tools.

    A namespaced tool keeps its bare name unless another tool has it; then it becomes ``ns__name``.
    """
    counts: dict[str, int] = {}
    for _, t in flat:
        name = t.get("name")
        if isinstance(name, str):
            counts[name] = counts.get(name, 0) + 1
    namespaces: dict[str, tuple[str, str]] = {}
    for ns, t in flat:
        ttype = t.get("type")
        name = t.get("name")
        if ttype in ("function", "custom"):
            if not isinstance(name, str) or not name:
                raise ClientRequestError(f"tools: a {ttype} tool needs a name")
            ir_name = name
            if ns is not None:
                if counts.get(name, 0) > 1:
                    ir_name = f"{ns}__{name}"
                namespaces[ir_name] = (ns, name)
            if ttype == "function":
                req.tools.append(
                    Tool(
                        name=ir_name,
                        description=t.get("description"),
                        parameters=t.get("parameters"),
                        strict=t.get("strict"),
                    )
                )
            else:
                req.tools.append(
                    Tool(name=ir_name, description=t.get("description"), kind="custom", format=t.get("format"))
                )
        else:
            req.tools.append(Tool(name=name if isinstance(name, str) and name else str(ttype), kind="builtin", raw=t))
    return namespaces


def _decode_tool_choice(tc: str | dict[str, Any] | None, dropped) -> ToolChoice | None:
    if tc is None:
        return None
    if isinstance(tc, str):
        if tc == "required":
            return ToolChoice("any")
        if tc == "none":
            return ToolChoice("none")
        return ToolChoice("auto")
    ttype = tc.get("type")
    if ttype in ("function", "custom") and isinstance(tc.get("name"), str):
        return ToolChoice("tool", tc["name"])
    dropped.add(f"tool_choice.{ttype}")
    return ToolChoice("auto")


def _split_data_url(url: str) -> tuple[str | None, str | None]:
    """``data:<mt>;base64,<data>`` -> (media_type, data); (None, None) when not a base64 data URL."""
    if not url.startswith("data:"):
        return None, None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None, None
    return head[: -len(";base64")] or None, data


def _image_part(p: dict[str, Any]) -> ImagePart:
    url = p.get("image_url")
    if isinstance(url, dict):  # Chat-style {"url": ...} tolerated
        url = url.get("url")
    img = ImagePart(detail=p.get("detail"), file_id=p.get("file_id"))
    if isinstance(url, str):
        mt, data = _split_data_url(url)
        if data is not None:
            img.media_type, img.data = mt, data
        else:
            img.url = url
    return img


def _file_part(p: dict[str, Any]) -> FilePart:
    f = FilePart(filename=p.get("filename"), file_id=p.get("file_id"), url=p.get("file_url"))
    data = p.get("file_data")
    if isinstance(data, str):
        mt, raw = _split_data_url(data)
        if raw is not None:
            f.media_type, f.data = mt, raw
        else:
            f.data = data
    return f


def _content_parts(content: Any, dropped) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(content)]
    if not isinstance(content, list):
        raise ClientRequestError("input: message content must be a string or a list of parts")
    out: list[Part] = []
    for p in content:
        if not isinstance(p, dict):
            raise ClientRequestError("input: every content part must be an object")
        ptype = p.get("type")
        if ptype in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
            out.append(TextPart(p.get("text") or ""))
            if p.get("annotations"):
                dropped.add("annotations")
        elif ptype == "input_image":
            out.append(_image_part(p))
        elif ptype == "input_file":
            out.append(_file_part(p))
        elif ptype == "refusal":
            out.append(RefusalPart(p.get("refusal") or ""))
        else:
            dropped.add(f"content.{ptype}")
    return out


def _tool_output(output: Any, dropped) -> list[TextPart | ImagePart | FilePart]:
    if output is None:
        return []
    if isinstance(output, str):
        return [TextPart(output)]
    parts = _content_parts(output, dropped)
    return [p for p in parts if isinstance(p, (TextPart, ImagePart, FilePart))]


def _reasoning_part(item: dict[str, Any]) -> ThinkingPart:
    enc = item.get("encrypted_content")
    carried = carry.unwrap_anthropic(enc) if isinstance(enc, str) else None
    if carried is not None:
        sig = carried.get("sig")
        return ThinkingPart(
            text=carried.get("text") or "",
            signature=sig if isinstance(sig, str) else None,
            redacted_data=carried.get("redacted"),
        )
    summaries = [s.get("text") or "" for s in item.get("summary") or [] if isinstance(s, dict)]
    raw = [
        c.get("text") or ""
        for c in item.get("content") or []
        if isinstance(c, dict) and c.get("type") == "reasoning_text"
    ]
    if raw:
        return ThinkingPart(text="\n\n".join(raw), encrypted_content=enc, item_id=item.get("id"))
    return ThinkingPart(
        text="\n\n".join(summaries), encrypted_content=enc, item_id=item.get("id"), summary=bool(summaries)
    )


def _decode_input(items: list[dict[str, Any]], req: Request, namespaces: dict[str, tuple[str, str]], dropped) -> None:
    reverse = {v: k for k, v in namespaces.items()}
    messages = req.messages

    def add(role: str, parts: list[Part], source_role: str | None = None) -> None:
        if role == "system" and not messages:
            req.system.extend(p for p in parts if isinstance(p, TextPart))
            return
        if messages and messages[-1].role == role and messages[-1].source_role == source_role:
            messages[-1].parts.extend(parts)
        else:
            messages.append(Message(role, list(parts), source_role=source_role))  # type: ignore[arg-type]

    def call_name(item: dict[str, Any]) -> str:
        name = item.get("name") or ""
        ns = item.get("namespace")
        if isinstance(ns, str) and (ns, name) in reverse:
            return reverse[(ns, name)]
        return name

    for item in items:
        if not isinstance(item, dict):
            raise ClientRequestError("input: every item must be an object")
        itype = item.get("type")
        if itype is None and "role" in item:
            itype = "message"
        if itype == "message":
            role = item.get("role")
            parts = _content_parts(item.get("content"), dropped)
            if role in ("developer", "system"):
                add("system", parts, role)
            elif role == "user":
                add("user", parts)
            elif role == "assistant":
                add("assistant", parts)
            else:
                raise ClientRequestError(f"input: unknown message role {role!r}")
        elif itype == "function_call":
            call_id = item.get("call_id") or item.get("id")
            if not call_id:
                raise ClientRequestError("input: function_call needs a call_id")
            add(
                "assistant",
                [
                    ToolCallPart(
                        id=call_id,
                        name=call_name(item),
                        arguments=item.get("arguments") or "{}",
                        item_id=item.get("id"),
                    )
                ],
            )
        elif itype == "custom_tool_call":
            call_id = item.get("call_id") or item.get("id")
            if not call_id:
                raise ClientRequestError("input: custom_tool_call needs a call_id")
            add(
                "assistant",
                [
                    ToolCallPart(
                        id=call_id,
                        name=call_name(item),
                        arguments=item.get("input") or "",
                        kind="custom",
                        item_id=item.get("id"),
                    )
                ],
            )
        elif itype in ("function_call_output", "custom_tool_call_output"):
            call_id = item.get("call_id")
            if not call_id:
                raise ClientRequestError(f"input: {itype} needs a call_id")
            kind = "custom" if itype == "custom_tool_call_output" else "function"
            add(
                "user",
                [ToolResultPart(tool_call_id=call_id, content=_tool_output(item.get("output"), dropped), kind=kind)],
            )
        elif itype == "reasoning":
            add("assistant", [_reasoning_part(item)])
        elif itype == "additional_tools":
            continue  # its tools were read with the top-level tools
        else:
            dropped.add(f"input.{itype}")


# ============================================================== usage / whole responses


def decode_usage(u: dict[str, Any] | None) -> Usage | None:
    if not u or not isinstance(u, dict):
        return None
    itd = u.get("input_tokens_details")
    otd = u.get("output_tokens_details")
    itd = itd if isinstance(itd, dict) else {}
    otd = otd if isinstance(otd, dict) else {}
    return Usage(
        input_tokens=_count(u, "input_tokens"),
        output_tokens=_count(u, "output_tokens"),
        cache_read_tokens=_count(itd, "cached_tokens"),
        cache_creation_tokens=_count(itd, "cache_write_tokens"),
        reasoning_tokens=_count(otd, "reasoning_tokens"),
    )


def _count(d: dict[str, Any], name: str) -> int | None:
    """A token count: an int that fits 64 bits (else ``UpstreamProtocolError``); any other type is ignored."""
    v = d.get(name)
    if type(v) is not int:
        return None
    return token_count(v, name)


def _terminal_stop(status: str | None, incomplete: dict[str, Any] | None, tool_use: bool) -> StopReason:
    if status == "incomplete":
        reason = (incomplete or {}).get("reason")
        return RESPONSES_INCOMPLETE_TO_IR.get(reason, StopReason.MAX_TOKENS)
    if status == "failed":
        return StopReason.ERROR
    return StopReason.TOOL_USE if tool_use else StopReason.END_TURN


def decode_response(body: dict[str, Any], ctx: Context) -> Response:
    try:
        r = RESPONSE_ADAPTER.validate_python(body)
    except ValidationError as e:
        raise UpstreamProtocolError(f"invalid Responses response: {describe_validation_error(e)}") from e
    content: list[OutputPart] = []
    tool_use = False
    for item in r.output or []:
        itype = item.get("type")
        if itype == "message":
            for p in item.get("content") or []:
                ptype = p.get("type")
                if ptype == "output_text":
                    content.append(TextPart(p.get("text") or ""))
                    if p.get("annotations"):
                        ctx.dropped.add("annotations")
                elif ptype == "refusal":
                    content.append(RefusalPart(p.get("refusal") or ""))
                else:
                    ctx.dropped.add(f"output.content.{ptype}")
        elif itype == "reasoning":
            content.append(_reasoning_part(item))
        elif itype == "function_call":
            tool_use = True
            content.append(
                ToolCallPart(
                    id=item.get("call_id") or item.get("id") or "",
                    name=item.get("name") or "",
                    arguments=item.get("arguments") or "{}",
                    item_id=item.get("id"),
                )
            )
        elif itype == "custom_tool_call":
            tool_use = True
            content.append(
                ToolCallPart(
                    id=item.get("call_id") or item.get("id") or "",
                    name=item.get("name") or "",
                    arguments=item.get("input") or "",
                    kind="custom",
                    item_id=item.get("id"),
                )
            )
        else:
            ctx.dropped.add(f"output.{itype}")
    return Response(
        id=r.id,
        model=r.model,
        content=content,
        stop_reason=_terminal_stop(r.status, r.incomplete_details, tool_use),
        usage=decode_usage(r.usage) or Usage(),
        created=int(r.created_at) if r.created_at is not None else None,
    )


# ============================================================== errors

_KIND_BY_CODE = {
    "insufficient_quota": ErrorKind.RATE_LIMIT,
    "rate_limit_exceeded": ErrorKind.RATE_LIMIT,
    "rate_limit_error": ErrorKind.RATE_LIMIT,
    "server_error": ErrorKind.API_ERROR,
    "server_is_overloaded": ErrorKind.OVERLOADED,
    "slow_down": ErrorKind.OVERLOADED,
    "invalid_request_error": ErrorKind.INVALID_REQUEST,
    "invalid_prompt": ErrorKind.INVALID_REQUEST,
    "context_length_exceeded": ErrorKind.INVALID_REQUEST,
    "invalid_api_key": ErrorKind.AUTHENTICATION,
    "authentication_error": ErrorKind.AUTHENTICATION,
    "permission_error": ErrorKind.PERMISSION,
    "not_found_error": ErrorKind.NOT_FOUND,
    "model_not_found": ErrorKind.NOT_FOUND,
}


decode_error = _openai_errors.decode_error


def _stream_error_info(code: Any, message: Any, param: Any) -> ErrorInfo:
    code_s = str(code) if code is not None else None
    kind = _KIND_BY_CODE.get(code_s or "", ErrorKind.API_ERROR)
    return ErrorInfo(
        kind=kind,
        message=message if isinstance(message, str) and message else "upstream reported an error in the stream",
        code=code_s,
        param=param if isinstance(param, str) else None,
    )


# ============================================================== streams


class Phase(Enum):
    WAITING = "waiting"  # nothing seen yet
    STREAMING = "streaming"  # MessageStart emitted
    DONE = "done"  # terminal event seen
    FAILED = "failed"  # an in-band error was emitted


class _ItemKind(Enum):
    MESSAGE = "message"
    REASONING = "reasoning"
    FUNCTION = "function_call"
    CUSTOM = "custom_tool_call"
    IGNORED = "ignored"


class _Block:
    """One IR block: its index, whether it is open, and how many characters of each sub-stream
    (content part / summary part) were already emitted (bounded memory: counts, not text)."""

    __slots__ = ("index", "open", "emitted", "kind")

    def __init__(self, index: int, kind: BlockKind) -> None:
        self.index = index
        self.kind = kind
        self.open = True
        self.emitted: dict[tuple[str, int], int] = {}


class _Item:
    __slots__ = ("kind", "item_id", "block", "parts", "summaries")

    def __init__(self, kind: _ItemKind, item_id: str | None) -> None:
        self.kind = kind
        self.item_id = item_id
        self.block: _Block | None = None  # reasoning / function / custom
        self.parts: dict[int, _Block] = {}  # message content_index -> block
        self.summaries = 0  # reasoning summary parts started


_ARGS_KEY = ("args", 0)
#: CRC-32 of the tool-argument text already streamed (bounded memory): a ``.done`` that disagrees with the
#: deltas cannot be repaired (they reached the client), so it is an error, never a corrupt "complete" call
_ARGS_CRC = ("args_crc", 0)
#: hot-path constants (module globals: no Enum attribute lookup, no tuple built per text delta)
_TEXT0 = ("text", 0)
_REASONING = _ItemKind.REASONING
_FUNCTION = _ItemKind.FUNCTION

_ITEM_KINDS = {
    "message": _ItemKind.MESSAGE,
    "reasoning": _ItemKind.REASONING,
    "function_call": _ItemKind.FUNCTION,
    "custom_tool_call": _ItemKind.CUSTOM,
}

_DROPPED_EVENT_PREFIXES = (
    "response.web_search_call.",
    "response.file_search_call.",
    "response.code_interpreter_call",
    "response.mcp_",
    "response.image_generation_call.",
    "response.output_text.annotation.added",
    "response.audio",
    "response.computer_call",
)


class ResponsesStreamDecoder(StreamDecoder):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.done = False
        self.phase = Phase.WAITING
        self._items: dict[str, _Item] = {}
        self._by_index: dict[int, str] = {}
        self._next_block = 0
        self._tool_use = False
        self._any_item = False
        self._unknown_logged: set[str] = set()
        #: arguments of the open function_call items (by block index), checked as JSON at the terminal event
        self._args = ToolArgs()

    # ---------------------------------------------------------- entry points

    def feed(self, sse) -> list[StreamEvent]:
        # one frame per event: the try costs nothing (zero-cost exceptions, CPython 3.11+)
        try:
            data = sse.data
            if not data or data == "[DONE]":
                return []
            try:
                obj = _loads(data)
            except orjson.JSONDecodeError:
                obj = None
            if type(obj) is dict:
                t = obj.get("type")
                if type(t) is str and t in DELTA_TYPES:
                    delta = obj.get("delta")
                    item_id = obj.get("item_id")
                    oi = obj.get("output_index")
                    ci = obj.get("content_index")
                    si = obj.get("summary_index")
                    if (
                        type(delta) is str
                        and (item_id is None or type(item_id) is str)
                        and (oi is None or type(oi) is int)
                        and (ci is None or type(ci) is int)
                        and (si is None or type(si) is int)
                    ):
                        phase = self.phase
                        if phase is Phase.DONE or phase is Phase.FAILED:
                            logger.debug("ignoring Responses event %s after the terminal event", t)
                            return []
                        out: list[StreamEvent] = []
                        if phase is Phase.WAITING:
                            self._start(None, out)
                        self._delta(t, item_id, oi, ci, si, delta, obj.get("logprobs"), out)
                        return out
            try:
                # validate what was already parsed; only unparsable text goes back to pydantic's JSON parser
                ev = EVENT_ADAPTER.validate_python(obj) if obj is not None else EVENT_ADAPTER.validate_json(data)
            except ValidationError as e:
                raise UpstreamProtocolError(
                    f"malformed Responses event {sse.event or ''!s} (phase {self.phase.value}): {describe_validation_error(e)}"
                ) from e
            if self.phase is Phase.DONE or self.phase is Phase.FAILED:
                if ev.type != "response.failed":
                    logger.debug("ignoring Responses event %s after the terminal event", ev.type)
                return []
            out = []
            cls = type(ev)
            if cls is LifecycleEvent:
                self._lifecycle(ev, out)
            elif cls is DeltaEvent:
                self._start(None, out)
                extra = ev.__pydantic_extra__
                self._delta(
                    ev.type,
                    ev.item_id,
                    ev.output_index,
                    ev.content_index,
                    ev.summary_index,
                    ev.delta,
                    extra.get("logprobs") if extra else None,
                    out,
                )
            elif cls is DoneEvent:
                self._start(None, out)
                self._done(ev, out)
            elif cls is ContentPartEvent:
                self._start(None, out)
                self._part(ev, out)
            elif cls is OutputItemEvent:
                self._start(None, out)
                if ev.type == "response.output_item.added":
                    self._item_added(ev.item, ev.output_index, out)
                else:
                    self._item_done(ev.item, ev.output_index, out)
            elif cls is ErrorEvent:
                err = ev.error or {}
                out.append(
                    StreamError(
                        _stream_error_info(
                            ev.code if ev.code is not None else err.get("code") or err.get("type"),
                            ev.message or err.get("message"),
                            ev.param or err.get("param"),
                        )
                    )
                )
                self.phase = Phase.FAILED
                self.done = True
            else:
                self._other(ev.type)
            return out
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
            # item/part payloads are untyped dicts: a field of the wrong JSON type lands here
            raise UpstreamProtocolError(
                f"malformed Responses event ({type(e).__name__}: {e}) in phase {self.phase.value}"
            ) from e

    def close(self) -> list[StreamEvent]:
        if not self.done:
            raise UpstreamProtocolError(
                f"upstream Responses stream ended before response.completed (in phase {self.phase.value})"
            )
        return []

    # ---------------------------------------------------------- lifecycle

    def _start(self, resp: ResponseObject | None, out: list[StreamEvent]) -> None:
        if self.phase is not Phase.WAITING:
            return
        self.phase = Phase.STREAMING
        if resp is None:
            out.append(MessageStart(id="resp_unknown", model=self.ctx.request.model if self.ctx.request else ""))
        else:
            out.append(
                MessageStart(
                    id=resp.id,
                    model=resp.model,
                    created=int(resp.created_at) if resp.created_at is not None else None,
                )
            )

    def _lifecycle(self, ev: LifecycleEvent, out: list[StreamEvent]) -> None:
        t = ev.type
        resp = ev.response
        self._start(resp, out)
        if t in ("response.created", "response.queued", "response.in_progress"):
            return
        if t == "response.failed":
            err = resp.error or {}
            out.append(StreamError(_stream_error_info(err.get("code"), err.get("message"), err.get("param"))))
            self.phase = Phase.FAILED
            self.done = True
            return
        # completed / incomplete
        if not self._any_item and resp.output:
            for i, item in enumerate(resp.output):
                self._item_done(item, i, out)
        self._close_all(out)
        stop = _terminal_stop(resp.status or t.rsplit(".", 1)[1], resp.incomplete_details, self._tool_use)
        if t == "response.incomplete" and stop is StopReason.END_TURN:
            stop = StopReason.MAX_TOKENS
        # function arguments that are not JSON are an upstream fault, unless the output was cut short
        self._args.check(stop)
        out.append(MessageDelta(stop_reason=stop, usage=decode_usage(resp.usage)))
        out.append(MessageStop())
        self.phase = Phase.DONE
        self.done = True

    def _other(self, t: str) -> None:
        if t.startswith(_DROPPED_EVENT_PREFIXES):
            return
        if t in ("response.reasoning_summary_part.done", "keepalive"):
            return
        if self.ctx.strict:
            raise UpstreamProtocolError(f"unknown Responses event type {t!r} (phase {self.phase.value})")
        if t not in self._unknown_logged:
            self._unknown_logged.add(t)
            logger.debug("skipping unknown Responses event type %s", t)

    # ---------------------------------------------------------- items

    def _new_block(self, kind: BlockKind) -> _Block:
        b = _Block(self._next_block, kind)
        self._next_block += 1
        return b

    def _lookup(self, item_id: str | None, output_index: int | None, what: str) -> _Item:
        item = self._items.get(item_id) if item_id is not None else None
        if item is None and output_index is not None:
            key = self._by_index.get(output_index)
            item = self._items.get(key) if key is not None else None
        if item is None:
            raise UpstreamProtocolError(
                f"Responses event {what} for an unknown output item {item_id!r} (phase {self.phase.value})"
            )
        return item

    def _item_added(self, item: dict[str, Any], output_index: int | None, out: list[StreamEvent]) -> _Item:
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
        kind = _ITEM_KINDS.get(itype, _ItemKind.IGNORED)
        st = _Item(kind, item_id)
        self._items[key] = st
        if output_index is not None:
            self._by_index[output_index] = key
        if kind is _ItemKind.IGNORED:
            self.ctx.dropped.add(f"output.{itype}")
        elif kind is _ItemKind.REASONING:
            st.block = self._new_block(BlockKind.THINKING)
            out.append(BlockStart(st.block.index, BlockKind.THINKING, item_id=item_id))
        elif kind is _ItemKind.FUNCTION or kind is _ItemKind.CUSTOM:
            name = item.get("name")
            call_id = item.get("call_id")
            if type(name) is not str or not name or (call_id is not None and type(call_id) is not str):
                raise UpstreamProtocolError(
                    f"Responses {itype} item needs a string name and call_id (phase {self.phase.value})"
                )
            self._tool_use = True
            bkind = BlockKind.TOOL_CALL if kind is _ItemKind.FUNCTION else BlockKind.CUSTOM_TOOL_CALL
            st.block = self._new_block(bkind)
            if kind is _ItemKind.FUNCTION:
                self._args.start(st.block.index, name)
            out.append(
                BlockStart(
                    st.block.index,
                    bkind,
                    tool_call_id=item.get("call_id") or item_id,
                    name=item.get("name"),
                    item_id=item_id,
                )
            )
            initial = item.get("arguments" if kind is _ItemKind.FUNCTION else "input")
            if initial:
                self._emit(st.block, ("args", 0), initial, out)
        return st

    def _item_done(self, item: dict[str, Any], output_index: int | None, out: list[StreamEvent]) -> None:
        item_id = item.get("id")
        key = item_id if isinstance(item_id, str) else f"#{output_index}"
        st = self._items.get(key)
        if st is None and output_index is not None and output_index in self._by_index:
            st = self._items.get(self._by_index[output_index])
        if st is None:  # no output_item.added (tolerated: some producers only send done)
            st = self._item_added({k: v for k, v in item.items() if k not in ("arguments", "input")}, output_index, out)
        if st.kind is _ItemKind.MESSAGE:
            for ci, p in enumerate(item.get("content") or []):
                ptype = p.get("type")
                if ptype == "output_text":
                    b = self._part_block(st, ci, BlockKind.TEXT, out)
                    self._emit(b, ("text", ci), p.get("text") or "", out)
                elif ptype == "refusal":
                    b = self._part_block(st, ci, BlockKind.REFUSAL, out)
                    self._emit(b, ("text", ci), p.get("refusal") or "", out)
                if ptype == "output_text" and p.get("annotations"):
                    self.ctx.dropped.add("annotations")
            for b in st.parts.values():
                self._stop(b, out)
        elif st.kind is _ItemKind.REASONING:
            b = st.block
            assert b is not None
            for si, s in enumerate(item.get("summary") or []):
                self._summary_text(st, si, s.get("text") or "", out, full=True)
            for ci, c in enumerate(item.get("content") or []):
                if isinstance(c, dict) and c.get("type") == "reasoning_text":
                    self._emit(b, ("raw", ci), c.get("text") or "", out, thinking=True)
            enc = item.get("encrypted_content")
            if enc is not None and type(enc) is not str:
                raise UpstreamProtocolError(f"Responses reasoning encrypted_content is not a string (phase {self.phase.value})")
            if b.open and enc:
                out.append(SignatureDelta(b.index, encrypted_content=enc))
            self._stop(b, out)
        elif st.kind is _ItemKind.FUNCTION or st.kind is _ItemKind.CUSTOM:
            b = st.block
            assert b is not None
            full = item.get("arguments" if st.kind is _ItemKind.FUNCTION else "input")
            if full:
                self._emit(b, ("args", 0), full, out)
            self._stop(b, out)

    def _part_block(self, st: _Item, ci: int, kind: BlockKind, out: list[StreamEvent]) -> _Block:
        b = st.parts.get(ci)
        if b is None:
            b = self._new_block(kind)
            st.parts[ci] = b
            out.append(BlockStart(b.index, kind, item_id=st.item_id))
        return b

    def _part(self, ev: ContentPartEvent, out: list[StreamEvent]) -> None:
        st = self._lookup(ev.item_id, ev.output_index, ev.type)
        if st.kind is _ItemKind.IGNORED:
            return
        part = ev.part or {}
        ptype = part.get("type")
        if st.kind is _ItemKind.MESSAGE:
            ci = ev.content_index or 0
            if ptype not in ("output_text", "refusal"):
                self.ctx.dropped.add(f"output.content.{ptype}")
                return
            kind = BlockKind.TEXT if ptype == "output_text" else BlockKind.REFUSAL
            if ev.type == "response.content_part.added":
                if ci in st.parts:
                    raise UpstreamProtocolError(f"duplicate {ev.type} for content {ci} (phase {self.phase.value})")
                b = self._part_block(st, ci, kind, out)
                initial = part.get("text") if kind is BlockKind.TEXT else part.get("refusal")
                if initial:
                    self._emit(b, ("text", ci), initial, out)
            else:
                b = self._part_block(st, ci, kind, out)
                full = part.get("text") if kind is BlockKind.TEXT else part.get("refusal")
                if full:
                    self._emit(b, ("text", ci), full, out)
                self._stop(b, out)
        elif st.kind is _ItemKind.REASONING:
            if ev.type == "response.reasoning_summary_part.added":
                self._summary_text(st, ev.summary_index or 0, part.get("text") or "", out, full=False)
            elif ev.type == "response.reasoning_summary_part.done":
                self._summary_text(st, ev.summary_index or 0, part.get("text") or "", out, full=True)
            elif ev.type == "response.content_part.done" and ptype == "reasoning_text":
                assert st.block is not None
                self._emit(st.block, ("raw", ev.content_index or 0), part.get("text") or "", out, thinking=True)

    def _summary_text(self, st: _Item, si: int, text: str, out: list[StreamEvent], *, full: bool) -> None:
        """Start summary part ``si`` if needed (with a blank-line separator after an earlier part),
        then emit ``text`` (a full value when ``full``, else a fragment)."""
        if type(text) is not str:
            raise UpstreamProtocolError(f"Responses reasoning summary text is not a string (phase {self.phase.value})")
        b = st.block
        assert b is not None
        key = ("summary", si)
        if key not in b.emitted:
            if st.summaries > 0 and b.open:
                out.append(ThinkingDelta(b.index, "\n\n", summary=True))
            st.summaries += 1
            b.emitted[key] = 0
        if not text:
            return
        if full:
            self._emit(b, key, text, out, thinking=True, summary=True)
        elif b.open:
            b.emitted[key] += len(text)
            out.append(ThinkingDelta(b.index, text, summary=True))

    def _emit(
        self,
        b: _Block,
        key: tuple[str, int],
        full: str,
        out: list[StreamEvent],
        *,
        thinking: bool = False,
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
        if key == _ARGS_KEY and n and zlib.crc32(full[:n].encode()) != b.emitted.get(_ARGS_CRC, 0):
            raise UpstreamProtocolError(
                f"final tool-call arguments disagree with the streamed argument deltas (phase {self.phase.value})"
            )
        if len(full) <= n:
            return
        rest = full[n:]
        b.emitted[key] = len(full)
        if key == _ARGS_KEY:
            b.emitted[_ARGS_CRC] = zlib.crc32(full.encode())
            self._args.add(b.index, rest)
        out.append(self._fragment(b, rest, thinking, summary))

    @staticmethod
    def _fragment(b: _Block, text: str, thinking: bool, summary: bool) -> StreamEvent:
        if b.kind is BlockKind.TOOL_CALL or b.kind is BlockKind.CUSTOM_TOOL_CALL:
            return ToolArgsDelta(b.index, text)
        if b.kind is BlockKind.THINKING:
            return ThinkingDelta(b.index, text, summary=summary)
        return TextDelta(b.index, text)

    def _stop(self, b: _Block, out: list[StreamEvent]) -> None:
        if b.open:
            b.open = False
            self._args.stop(b.index)
            out.append(BlockStop(b.index))

    def _close_all(self, out: list[StreamEvent]) -> None:
        blocks: list[_Block] = []
        for st in self._items.values():
            if st.block is not None and st.block.open:
                blocks.append(st.block)
            blocks.extend(b for b in st.parts.values() if b.open)
        for b in sorted(blocks, key=lambda x: x.index):
            self._stop(b, out)

    # ---------------------------------------------------------- deltas / dones

    def _delta(
        self,
        t: str,
        item_id: str | None,
        output_index: int | None,
        content_index: int | None,
        summary_index: int | None,
        delta: str,
        logprobs: Any,
        out: list[StreamEvent],
    ) -> None:
        """One valid ``*.delta`` event (its fields as values: the fast path never builds a model)."""
        st = self._items.get(item_id) if item_id is not None else None
        if st is None:
            st = self._lookup(item_id, output_index, t)
        kind = st.kind
        if kind is _ItemKind.IGNORED:
            return
        if logprobs:
            self.ctx.dropped.add("logprobs")
        if t == "response.output_text.delta" or t == "response.refusal.delta":
            if kind is not _ItemKind.MESSAGE:
                raise UpstreamProtocolError(f"{t} for a {kind.value} item (phase {self.phase.value})")
            ci = content_index or 0
            b = st.parts.get(ci)
            if b is None:
                b = self._part_block(
                    st, ci, BlockKind.TEXT if t == "response.output_text.delta" else BlockKind.REFUSAL, out
                )
            if not b.open:
                raise UpstreamProtocolError(f"{t} after its content part was done (phase {self.phase.value})")
            key = _TEXT0 if ci == 0 else ("text", ci)
            emitted = b.emitted
            emitted[key] = emitted.get(key, 0) + len(delta)
            out.append(TextDelta(b.index, delta))
        elif t == "response.reasoning_summary_text.delta":
            b = st.block
            if kind is not _REASONING or b is None or not b.open:  # inlined _need (which raises)
                self._need(st, _REASONING, t)
            self._summary_text(st, summary_index or 0, delta, out, full=False)
        elif t == "response.reasoning_text.delta":
            b = st.block
            if kind is not _REASONING or b is None or not b.open:  # inlined _need (which raises)
                self._need(st, _REASONING, t)
            assert b is not None
            key = ("raw", content_index or 0)
            b.emitted[key] = b.emitted.get(key, 0) + len(delta)
            out.append(ThinkingDelta(b.index, delta))
        else:  # function_call_arguments / custom_tool_call_input
            need = _FUNCTION if t == "response.function_call_arguments.delta" else _ItemKind.CUSTOM
            b = st.block
            if kind is not need or b is None or not b.open:  # inlined _need (which raises)
                self._need(st, need, t)
            assert b is not None
            emitted = b.emitted
            emitted[_ARGS_KEY] = emitted.get(_ARGS_KEY, 0) + len(delta)
            emitted[_ARGS_CRC] = zlib.crc32(delta.encode(), emitted.get(_ARGS_CRC, 0))
            self._args.add(b.index, delta)
            out.append(ToolArgsDelta(b.index, delta))

    def _need(self, st: _Item, kind: _ItemKind, t: str) -> None:
        if st.kind is not kind:
            raise UpstreamProtocolError(f"{t} for a {st.kind.value} item (phase {self.phase.value})")
        if st.block is None or not st.block.open:
            raise UpstreamProtocolError(f"{t} after its item was done (phase {self.phase.value})")

    def _done(self, ev: DoneEvent, out: list[StreamEvent]) -> None:
        st = self._lookup(ev.item_id, ev.output_index, ev.type)
        if st.kind is _ItemKind.IGNORED:
            return
        t = ev.type
        if t == "response.output_text.done" or t == "response.refusal.done":
            if st.kind is not _ItemKind.MESSAGE:
                raise UpstreamProtocolError(f"{t} for a {st.kind.value} item (phase {self.phase.value})")
            ci = ev.content_index or 0
            kind = BlockKind.TEXT if t == "response.output_text.done" else BlockKind.REFUSAL
            b = self._part_block(st, ci, kind, out)
            full = ev.text if kind is BlockKind.TEXT else ev.refusal
            if full:
                self._emit(b, ("text", ci), full, out)
        elif t == "response.reasoning_summary_text.done":
            self._need(st, _ItemKind.REASONING, t)
            self._summary_text(st, ev.summary_index or 0, ev.text or "", out, full=True)
        elif t == "response.reasoning_text.done":
            self._need(st, _ItemKind.REASONING, t)
            assert st.block is not None
            self._emit(st.block, ("raw", ev.content_index or 0), ev.text or "", out, thinking=True)
        elif t == "response.function_call_arguments.done":
            self._need(st, _ItemKind.FUNCTION, t)
            assert st.block is not None
            self._emit(st.block, ("args", 0), ev.arguments or "", out)
        else:
            self._need(st, _ItemKind.CUSTOM, t)
            assert st.block is not None
            self._emit(st.block, ("args", 0), ev.input or "", out)

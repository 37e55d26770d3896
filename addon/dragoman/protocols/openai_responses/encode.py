"""IR -> OpenAI Responses: upstream requests, client whole responses, client errors and client SSE."""

from __future__ import annotations

import logging
import time
from enum import Enum
from typing import Any

import orjson

from dragoman.errors import UpstreamProtocolError
from dragoman.ir import carry
from dragoman.ir.common import ErrorInfo
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
from dragoman.ir.mapping import IR_TO_RESPONSES_STATUS
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.ir.response import Response
from dragoman.protocols import _openai_errors
from dragoman.protocols._checks import safe_message
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamEncoder
from dragoman.protocols.openai_responses.decode import EXTRA_ECHO
from dragoman.protocols.openai_responses.decode import EXTRA_NAMESPACES
from dragoman.protocols.openai_responses.models import BUILTIN_TOOL_TYPES
from dragoman.sse import encode_json

logger = logging.getLogger(__name__)


# ============================================================== requests


def _effort_from_budget(budget: int) -> str:
    if budget <= 2048:
        return "low"
    if budget <= 8192:
        return "medium"
    return "high"


def _data_url(media_type: str | None, data: str) -> str:
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"


def _input_part(p: TextPart | ImagePart | FilePart, ctx: Context) -> dict[str, Any] | None:
    if isinstance(p, TextPart):
        return {"type": "input_text", "text": p.text}
    if isinstance(p, ImagePart):
        out: dict[str, Any] = {"type": "input_image", "detail": p.detail or "auto"}
        if p.data is not None:
            out["image_url"] = _data_url(p.media_type, p.data)
        elif p.url is not None:
            out["image_url"] = p.url
        elif p.file_id is not None:
            out["file_id"] = p.file_id
        else:
            ctx.dropped.add("image")
            return None
        return out
    out = {"type": "input_file"}
    if p.data is not None:
        out["file_data"] = _data_url(p.media_type, p.data)
    elif p.url is not None:
        out["file_url"] = p.url
    elif p.file_id is not None:
        out["file_id"] = p.file_id
    else:
        ctx.dropped.add("file")
        return None
    if p.filename:
        out["filename"] = p.filename
    elif p.data is not None:
        out["filename"] = "file.pdf" if p.media_type == "application/pdf" else "file"
    return out


class _Flusher:
    """Closes the message item being built (its parts so far) before a non-message item."""

    __slots__ = ("items", "pending", "role")

    def __init__(self, items: list[dict[str, Any]], pending: list[dict[str, Any]], role: str) -> None:
        self.items = items
        self.pending = pending
        self.role = role

    def __call__(self) -> None:
        if self.pending:
            self.items.append({"type": "message", "role": self.role, "content": list(self.pending)})
            self.pending.clear()


def encode_request(req: Request, ctx: Context) -> dict[str, Any]:
    body: dict[str, Any] = {"model": req.model}
    dropped = ctx.dropped
    if req.system:
        body["instructions"] = "\n\n".join(p.text for p in req.system)
    items: list[dict[str, Any]] = []
    custom_names = req.custom_tool_names()
    for msg in req.messages:
        pending: list[dict[str, Any]] = []  # content parts of the message item being built
        role = (
            msg.role
            if msg.role != "system"
            else (msg.source_role if msg.source_role in ("developer", "system") else "developer")
        )
        flush = _Flusher(items, pending, role)

        for p in msg.parts:
            if isinstance(p, TextPart):
                if msg.role == "assistant":
                    pending.append({"type": "output_text", "text": p.text, "annotations": []})
                else:
                    pending.append({"type": "input_text", "text": p.text})
            elif isinstance(p, RefusalPart):
                if msg.role == "assistant":
                    pending.append({"type": "refusal", "refusal": p.text})
                else:
                    pending.append({"type": "input_text", "text": p.text})
            elif isinstance(p, (ImagePart, FilePart)):
                if msg.role == "assistant":
                    dropped.add("assistant.image" if isinstance(p, ImagePart) else "assistant.file")
                    continue
                part = _input_part(p, ctx)
                if part is not None:
                    pending.append(part)
            elif isinstance(p, ThinkingPart):
                flush()
                if p.encrypted_content and not carry.is_carried(p.encrypted_content):
                    item: dict[str, Any] = {"type": "reasoning"}
                    if p.item_id:
                        item["id"] = p.item_id
                    item["summary"] = [{"type": "summary_text", "text": p.text}] if p.text else []
                    item["encrypted_content"] = p.encrypted_content
                    items.append(item)
                else:
                    dropped.add("thinking")
            elif isinstance(p, ToolCallPart):
                flush()
                if p.kind == "custom":
                    item = {"type": "custom_tool_call", "call_id": p.id, "name": p.name, "input": p.arguments}
                else:
                    item = {"type": "function_call", "call_id": p.id, "name": p.name, "arguments": p.arguments or "{}"}
                if p.item_id and p.item_id.startswith(("fc_", "fc-", "ctc_")):
                    item["id"] = p.item_id
                items.append(item)
            elif isinstance(p, ToolResultPart):
                flush()
                if p.is_error:
                    dropped.add("tool_result.is_error")
                if all(isinstance(c, TextPart) for c in p.content):
                    output: Any = "".join(c.text for c in p.content)  # type: ignore[union-attr]
                else:
                    output = [x for x in (_input_part(c, ctx) for c in p.content) if x is not None]
                kind = "custom_tool_call_output" if p.kind == "custom" else "function_call_output"
                items.append({"type": kind, "call_id": p.tool_call_id, "output": output})
        flush()
    body["input"] = items

    tools: list[dict[str, Any]] = []
    for t in req.tools:
        if t.kind == "function":
            tool: dict[str, Any] = {
                "type": "function",
                "name": t.name,
                "parameters": t.parameters if t.parameters is not None else {"type": "object", "properties": {}},
                "strict": bool(t.strict),
            }
            if t.description:
                tool["description"] = t.description
            tools.append(tool)
        elif t.kind == "custom":
            tool = {"type": "custom", "name": t.name}
            if t.description:
                tool["description"] = t.description
            if t.format is not None:
                tool["format"] = t.format
            tools.append(tool)
        elif t.raw is not None and t.raw.get("type") in BUILTIN_TOOL_TYPES:
            tools.append(t.raw)
        else:
            dropped.add(f"tools.{t.name}")
    if tools:
        body["tools"] = tools
    tc = req.tool_choice
    if tc is not None and (tools or tc.mode == "none"):
        if tc.mode == "tool" and tc.name:
            body["tool_choice"] = {"type": "custom" if tc.name in custom_names else "function", "name": tc.name}
        else:
            body["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}.get(tc.mode, "auto")
    if req.parallel_tool_calls is not None and tools:
        body["parallel_tool_calls"] = req.parallel_tool_calls
    r = req.reasoning
    if (
        r is not None
        and r.enabled is not False
        and (r.enabled or r.effort or r.budget_tokens or r.adaptive or r.summary)
    ):
        effort = r.effort
        if effort is None and r.budget_tokens is not None:
            effort = _effort_from_budget(r.budget_tokens)
        if effort is None:
            effort = "medium"
        body["reasoning"] = {"effort": effort, "summary": r.summary or "auto"}
        body["include"] = ["reasoning.encrypted_content"]
    body["store"] = False
    if req.max_tokens is not None:
        body["max_output_tokens"] = req.max_tokens
    if req.temperature is not None:
        body["temperature"] = req.temperature
    if req.top_p is not None:
        body["top_p"] = req.top_p
    if req.top_k is not None:
        dropped.add("top_k")
    if req.stop:
        dropped.add("stop_sequences")
    if req.user:
        body["user"] = req.user
    rf = req.response_format
    if rf is not None and rf.type != "text":
        if rf.type == "json_schema":
            fmt: dict[str, Any] = {"type": "json_schema", "name": rf.name or "response", "schema": rf.schema or {}}
            if rf.strict is not None:
                fmt["strict"] = rf.strict
        else:
            fmt = {"type": "json_object"}
        body["text"] = {"format": fmt}
    if req.stream:
        body["stream"] = True
    return body


# ============================================================== shared item / object builders


def response_id(source_id: str) -> str:
    if source_id.startswith("resp_"):
        return source_id
    return "resp_" + "".join(c for c in source_id if c.isalnum() or c in "-_")


def encode_usage(u: Usage | None) -> dict[str, Any]:
    u = u or Usage()
    inp = u.input_tokens or 0
    out = u.output_tokens or 0
    return {
        "input_tokens": inp,
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens or 0,
            "cache_write_tokens": u.cache_creation_tokens or 0,
        },
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens or 0},
        "total_tokens": inp + out,
    }


def base_object(rid: str, model: str, created: int, ctx: Context, status: str) -> dict[str, Any]:
    """The response object with the request echo fields (as the client sent them)."""
    echo: dict[str, Any] = {}
    if ctx.request is not None:
        echo = ctx.request.extra.get(EXTRA_ECHO) or {}
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": echo.get("instructions"),
        "max_output_tokens": echo.get("max_output_tokens"),
        "model": model,
        "output": [],
        "parallel_tool_calls": echo.get("parallel_tool_calls", True),
        "previous_response_id": None,
        "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
        "store": False,
        "temperature": echo.get("temperature", 1.0),
        "text": echo.get("text") or {"format": {"type": "text"}},
        "tool_choice": echo.get("tool_choice", "auto"),
        "tools": echo.get("tools") or [],
        "top_p": echo.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None,
        "user": echo.get("user"),
        "metadata": {},
    }


def _namespaces(ctx: Context) -> dict[str, Any]:
    if ctx.request is None:
        return {}
    return ctx.request.extra.get(EXTRA_NAMESPACES) or {}


def unwrap_custom_input(arguments: str) -> str:
    """A custom tool offered as a function with one string parameter: its call's raw ``input``."""
    try:
        obj = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return arguments
    if isinstance(obj, dict) and isinstance(obj.get(CUSTOM_TOOL_PARAM), str):
        return obj[CUSTOM_TOOL_PARAM]
    if isinstance(obj, str):
        return obj
    return arguments


def message_item(item_id: str, part: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {"id": item_id, "type": "message", "status": status, "role": "assistant", "content": [part]}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def refusal_part(text: str) -> dict[str, Any]:
    return {"type": "refusal", "refusal": text}


def reasoning_item(item_id: str, text: str, encrypted_content: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": item_id,
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": text}] if text else [],
    }
    if encrypted_content is not None:
        item["encrypted_content"] = encrypted_content
    return item


def call_item(
    item_id: str, call_id: str, name: str, value: str, *, custom: bool, namespace: str | None, status: str = "completed"
) -> dict[str, Any]:
    if custom:
        item = {
            "id": item_id,
            "type": "custom_tool_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "input": value,
        }
    else:
        item = {
            "id": item_id,
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "arguments": value,
        }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def _thinking_enc(p_signature: str | None, p_enc: str | None, text: str, redacted: str | None) -> str:
    if p_enc is not None and not carry.is_carried(p_enc):
        return p_enc
    sig = p_signature if p_signature is not None and not carry.is_unsigned(p_signature) else None
    return carry.wrap_anthropic(sig, text, redacted)


def _status(stop: StopReason | None) -> tuple[str, str | None]:
    return IR_TO_RESPONSES_STATUS.get(stop or StopReason.END_TURN, ("completed", None))


# ============================================================== whole responses


def encode_response(resp: Response, ctx: Context) -> dict[str, Any]:
    rid = response_id(resp.id)
    suffix = rid[5:]
    created = resp.created if resp.created is not None else int(time.time())
    status, reason = _status(resp.stop_reason)
    obj = base_object(rid, resp.model, created, ctx, status)
    custom = ctx.custom_tools()
    nsmap = _namespaces(ctx)
    output: list[dict[str, Any]] = []
    for n, p in enumerate(resp.content):
        if isinstance(p, TextPart):
            output.append(message_item(f"msg_{suffix}_{n}", text_part(p.text)))
        elif isinstance(p, RefusalPart):
            output.append(message_item(f"msg_{suffix}_{n}", refusal_part(p.text)))
        elif isinstance(p, ThinkingPart):
            enc = _thinking_enc(p.signature, p.encrypted_content, p.text, p.redacted_data)
            output.append(reasoning_item(p.item_id or f"rs_{suffix}_{n}", p.text, enc))
        elif isinstance(p, ToolCallPart):
            is_custom = p.kind == "custom" or p.name in custom
            value = p.arguments if p.kind == "custom" or not is_custom else unwrap_custom_input(p.arguments)
            ns = nsmap.get(p.name)
            name = ns[1] if ns else p.name
            prefix = "ctc" if is_custom else "fc"
            item_id = p.item_id or f"{prefix}_{suffix}_{n}"
            output.append(call_item(item_id, p.id, name, value, custom=is_custom, namespace=ns[0] if ns else None))
    obj["output"] = output
    obj["usage"] = encode_usage(resp.usage)
    if status == "incomplete":
        obj["incomplete_details"] = {"reason": reason}
    if status == "failed":
        obj["error"] = {"code": "server_error", "message": "the upstream response failed"}
    return obj


# ============================================================== errors

ERROR_TYPES = _openai_errors.TYPE_BY_KIND
encode_error = _openai_errors.encode_error


# ============================================================== streams


class Phase(Enum):
    WAITING = "waiting"  # before MessageStart
    STREAMING = "streaming"
    TERMINAL = "terminal"  # MessageDelta seen, waiting for MessageStop
    DONE = "done"  # the terminal event was written


class _Out:
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
        "signature",
        "enc",
        "redacted",
        "summary_started",
        "open",
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
        self.prefix: bytes | None = None
        self.signature: str | None = None
        self.enc: str | None = None
        self.redacted: str | None = None
        self.summary_started = False
        self.open = True


    def keep(self, text: str) -> None:
        """Append to the snapshot; every ``_COMPACT`` small pieces are joined into one, so memory is
        proportional to the text, not to the number of deltas."""
        chunks = self.chunks
        chunks.append(text)
        if len(chunks) >= self.limit:
            start = self.limit - _COMPACT
            chunks[start:] = ["".join(chunks[start:])]
            self.limit = start + 1 + _COMPACT


_COMPACT = 256
_dumps = orjson.dumps


class ResponsesStreamEncoder(StreamEncoder):
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.phase = Phase.WAITING
        self._seq = 0
        self._rid = "resp_dragoman"
        self._model = ""
        self._created = 0
        self._blocks: dict[int, _Out] = {}
        self._output: list[dict[str, Any] | None] = []
        self._used_ids: set[str] = set()
        self._stop: StopReason | None = None
        self._usage: Usage = Usage()
        self._custom = ctx.custom_tools()
        self._nsmap = _namespaces(ctx)

    # ---------------------------------------------------------- framing

    def _delta_ev(self, b: _Out, etype: str, index_field: bytes, delta: str, tail: bytes) -> bytes:
        """== ``self._ev(etype, {"item_id", "output_index", [index_field: 0,] "delta", ...})`` from a
        prefix built once per item (the hot path: one orjson call and one int format per event)."""
        prefix = b.prefix
        if prefix is None:
            prefix = b.prefix = (
                b"event: "
                + etype.encode()
                + b'\ndata: {"item_id":'
                + _dumps(b.item_id)
                + b',"output_index":%d,' % b.output_index
                + index_field
                + b'"delta":'
            )
        seq = self._seq
        self._seq = seq + 1
        return prefix + _dumps(delta) + tail + b'"type":"' + etype.encode() + b'","sequence_number":%d}\n\n' % seq

    def _ev(self, etype: str, payload: dict[str, Any]) -> bytes:
        payload["type"] = etype
        payload["sequence_number"] = self._seq
        self._seq += 1
        return encode_json(etype, payload)

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
        cls = type(ev)
        if cls is MessageStart:
            if self.phase is not Phase.WAITING:
                raise UpstreamProtocolError(f"duplicate MessageStart (phase {self.phase.value})")
            return self._begin(ev)  # type: ignore[arg-type]
        if self.phase is Phase.DONE:
            raise UpstreamProtocolError(f"{cls.__name__} after the terminal event (phase {self.phase.value})")
        out = b""
        if self.phase is Phase.WAITING:
            out = self._begin(None)
        if cls is TextDelta:
            return out + self._text_delta(ev)  # type: ignore[arg-type]
        if cls is ToolArgsDelta:
            return out + self._args_delta(ev)  # type: ignore[arg-type]
        if cls is ThinkingDelta:
            return out + self._thinking_delta(ev)  # type: ignore[arg-type]
        if cls is BlockStart:
            return out + self._block_start(ev)  # type: ignore[arg-type]
        if cls is BlockStop:
            b = self._blocks.get(ev.index)  # type: ignore[union-attr]
            if b is None or not b.open:
                raise UpstreamProtocolError(
                    f"BlockStop for unknown or closed block {ev.index} (phase {self.phase.value})"
                )  # type: ignore[union-attr]
            return out + self._block_stop(b)
        if cls is SignatureDelta:
            b = self._block(ev.index, "SignatureDelta")  # type: ignore[union-attr]
            if ev.signature is not None:  # type: ignore[union-attr]
                b.signature = ev.signature  # type: ignore[union-attr]
            if ev.encrypted_content is not None:  # type: ignore[union-attr]
                b.enc = ev.encrypted_content  # type: ignore[union-attr]
            return out
        if cls is MessageDelta:
            if ev.stop_reason is not None:  # type: ignore[union-attr]
                self._stop = ev.stop_reason  # type: ignore[union-attr]
            self._usage = self._usage.merged(ev.usage)  # type: ignore[union-attr]
            self.phase = Phase.TERMINAL
            return out
        if cls is MessageStop:
            return out + self._finish()
        if cls is StreamError:
            return out + self.error(ev.error)  # type: ignore[union-attr]
        raise UpstreamProtocolError(f"unexpected IR event {cls.__name__}")

    def _block(self, index: int, what: str) -> _Out:
        b = self._blocks.get(index)
        if b is None or not b.open:
            raise UpstreamProtocolError(f"{what} for unknown or closed block {index} (phase {self.phase.value})")
        return b

    def _block_start(self, ev: BlockStart) -> bytes:
        if ev.index in self._blocks:
            raise UpstreamProtocolError(f"duplicate BlockStart for block {ev.index} (phase {self.phase.value})")
        oi = len(self._output)
        kind = ev.kind
        if kind is BlockKind.TEXT or kind is BlockKind.REFUSAL:
            b = _Out(kind, oi, self._mint("msg", ev.item_id))
            self._blocks[ev.index] = b
            self._output.append(None)
            part = text_part("") if kind is BlockKind.TEXT else refusal_part("")
            added = message_item(b.item_id, part, "in_progress")
            added["content"] = []
            return self._ev("response.output_item.added", {"output_index": oi, "item": added}) + self._ev(
                "response.content_part.added",
                {"item_id": b.item_id, "output_index": oi, "content_index": 0, "part": part},
            )
        if kind is BlockKind.THINKING or kind is BlockKind.REDACTED_THINKING:
            b = _Out(kind, oi, self._mint("rs", ev.item_id))
            b.redacted = ev.data
            self._blocks[ev.index] = b
            self._output.append(None)
            return self._ev(
                "response.output_item.added",
                {"output_index": oi, "item": {"id": b.item_id, "type": "reasoning", "summary": []}},
            )
        if kind is BlockKind.TOOL_CALL or kind is BlockKind.CUSTOM_TOOL_CALL:
            name = ev.name or ""
            custom = kind is BlockKind.CUSTOM_TOOL_CALL or name in self._custom
            b = _Out(kind, oi, self._mint("ctc" if custom else "fc", ev.item_id))
            b.custom = custom
            b.unwrap = custom and kind is BlockKind.TOOL_CALL
            b.call_id = ev.tool_call_id or f"call_{b.item_id}"
            ns = self._nsmap.get(name)
            b.name = ns[1] if ns else name
            b.namespace = ns[0] if ns else None
            self._blocks[ev.index] = b
            self._output.append(None)
            item = call_item(
                b.item_id, b.call_id, b.name, "", custom=custom, namespace=b.namespace, status="in_progress"
            )
            return self._ev("response.output_item.added", {"output_index": oi, "item": item})
        raise UpstreamProtocolError(f"unsupported block kind {kind!r}")

    def _text_delta(self, ev: TextDelta) -> bytes:
        b = self._block(ev.index, "TextDelta")
        if b.kind is BlockKind.TEXT:
            b.keep(ev.text)
            return self._delta_ev(b, "response.output_text.delta", b'"content_index":0,', ev.text, b',"logprobs":[],')
        if b.kind is BlockKind.REFUSAL:
            b.keep(ev.text)
            return self._delta_ev(b, "response.refusal.delta", b'"content_index":0,', ev.text, b",")
        raise UpstreamProtocolError(f"TextDelta for a {b.kind.value} block (phase {self.phase.value})")

    def _thinking_delta(self, ev: ThinkingDelta) -> bytes:
        b = self._block(ev.index, "ThinkingDelta")
        if b.kind is not BlockKind.THINKING:
            raise UpstreamProtocolError(f"ThinkingDelta for a {b.kind.value} block (phase {self.phase.value})")
        if not ev.text:
            return b""
        out = b""
        if not b.summary_started:
            b.summary_started = True
            out = self._ev(
                "response.reasoning_summary_part.added",
                {
                    "item_id": b.item_id,
                    "output_index": b.output_index,
                    "summary_index": 0,
                    "part": {"type": "summary_text", "text": ""},
                },
            )
        b.keep(ev.text)
        return out + self._delta_ev(
            b, "response.reasoning_summary_text.delta", b'"summary_index":0,', ev.text, b","
        )

    def _args_delta(self, ev: ToolArgsDelta) -> bytes:
        b = self._block(ev.index, "ToolArgsDelta")
        if b.kind is not BlockKind.TOOL_CALL and b.kind is not BlockKind.CUSTOM_TOOL_CALL:
            raise UpstreamProtocolError(f"ToolArgsDelta for a {b.kind.value} block (phase {self.phase.value})")
        b.keep(ev.fragment)
        if b.unwrap or not ev.fragment:
            return b""  # buffered: the raw input is only known once the JSON arguments are complete
        etype = "response.custom_tool_call_input.delta" if b.custom else "response.function_call_arguments.delta"
        return self._delta_ev(b, etype, b"", ev.fragment, b",")

    def _block_stop(self, b: _Out, status: str = "completed") -> bytes:
        """Close one output item. status is incomplete when an error cuts the item short."""
        b.open = False
        oi = b.output_index
        value = "".join(b.chunks)
        b.chunks = [value]
        out = bytearray()
        if b.kind is BlockKind.TEXT or b.kind is BlockKind.REFUSAL:
            if b.kind is BlockKind.TEXT:
                part = text_part(value)
                out += self._ev(
                    "response.output_text.done",
                    {"item_id": b.item_id, "output_index": oi, "content_index": 0, "text": value, "logprobs": []},
                )
            else:
                part = refusal_part(value)
                out += self._ev(
                    "response.refusal.done",
                    {"item_id": b.item_id, "output_index": oi, "content_index": 0, "refusal": value},
                )
            out += self._ev(
                "response.content_part.done",
                {"item_id": b.item_id, "output_index": oi, "content_index": 0, "part": part},
            )
            item = message_item(b.item_id, part, status)
        elif b.kind is BlockKind.THINKING or b.kind is BlockKind.REDACTED_THINKING:
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
                enc = _thinking_enc(b.signature, b.enc, value, None)
            item = reasoning_item(b.item_id, value, enc)
        else:
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
        self._output[oi] = item
        out += self._ev("response.output_item.done", {"output_index": oi, "item": item})
        return bytes(out)

    def _close_open(self, status: str = "completed") -> bytes:
        out = b""
        for b in sorted((b for b in self._blocks.values() if b.open), key=lambda x: x.output_index):
            out += self._block_stop(b, status)
        return out

    def _finish(self) -> bytes:
        out = self._close_open()
        status, reason = _status(self._stop)
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
            code = err.code or ERROR_TYPES.get(err.kind, "server_error")
            tail = self._ev("error", {"code": code, "message": err.message, "param": err.param})
            obj = self._obj("failed")
            obj["output"] = output
            obj["error"] = {"code": code, "message": err.message}
            obj["usage"] = (
                encode_usage(self._usage) if (self._usage.input_tokens or self._usage.output_tokens) else None
            )
            tail += self._ev("response.failed", {"response": obj})
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

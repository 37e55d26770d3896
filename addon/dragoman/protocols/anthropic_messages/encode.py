"""IR -> Anthropic Messages: upstream requests, client whole responses, errors and SSE streams.

Request encoding decisions (toward an Anthropic upstream):

* ``system``: ``req.system`` plus every system message BEFORE the first user/assistant message become
  the top-level ``system`` text blocks. A system message later in the conversation (Responses/Chat
  ``developer`` messages) is sent as a user-turn text block ``<system-reminder>...</system-reminder>``
  in place (the public API rejects ``role:"system"`` inside ``messages`` without a beta, and moving it to
  the top would change its position); ``system_message_moved`` is recorded in ``ctx.dropped``.
* Consecutive same-role messages are merged; all ``tool_result`` blocks of a user turn come first.
* A ``tool_use`` with no ``tool_result`` in the next user turn gets a synthetic error result
  ("tool call was not answered"); a ``tool_result`` with no matching ``tool_use`` in the previous
  assistant turn becomes a text block (``orphaned_tool_result`` recorded).
* Thinking in history: native signature -> ``thinking``; ``redacted_data`` -> ``redacted_thinking``;
  ``encrypted_content`` carried with ``carry.ANTHROPIC_TAG`` -> the original block; anything else has no
  valid signature, is dropped and recorded (``thinking_without_signature``).
* ``max_tokens`` defaults to ``DEFAULT_MAX_TOKENS`` (8192) plus the thinking budget when thinking is on,
  because Anthropic requires it and counts thinking inside it.
* ``Reasoning``: ``budget_tokens`` as given; an effort -> budget per ``EFFORT_BUDGET`` (clamped below
  ``max_tokens``, at least 1024, else dropped); ``adaptive`` -> ``{"type":"adaptive"}`` plus
  ``output_config.effort``. With thinking on, ``temperature``/``top_k`` are dropped (the API rejects them).
* ``response_format`` json_schema -> ``output_config.format`` ``{"type":"json_schema","schema":...}``.
* Custom (freeform) tools are offered as a function with one required string property ``input``.

Stream encoding: blocks never interleave on the wire; see ``AnthropicStreamEncoder``.
"""

from __future__ import annotations

import base64
import logging
import re
import secrets
from enum import Enum
from typing import Any

import orjson

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
from dragoman.ir.mapping import IR_TO_ANTHROPIC
from dragoman.ir.request import CUSTOM_TOOL_PARAM
from dragoman.ir.request import FilePart
from dragoman.ir.request import ImagePart
from dragoman.ir.request import Message
from dragoman.ir.request import RefusalPart
from dragoman.ir.request import Request
from dragoman.ir.request import TextPart
from dragoman.ir.request import ThinkingPart
from dragoman.ir.request import Tool
from dragoman.ir.request import ToolCallPart
from dragoman.ir.request import ToolResultPart
from dragoman.ir.response import Response
from dragoman.protocols._checks import safe_message
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamEncoder
from dragoman.sse.encoder import encode_json

logger = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 8192
MIN_THINKING_BUDGET = 1024
EFFORT_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32000}
#: IR effort -> Anthropic ``output_config.effort``
EFFORT_TO_ANTHROPIC = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh"}
UNANSWERED_TOOL_CALL = "tool call was not answered"

ERROR_TYPE_BY_KIND = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.REQUEST_TOO_LARGE: "request_too_large",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.API_ERROR: "api_error",
    ErrorKind.OVERLOADED: "overloaded_error",
    ErrorKind.TIMEOUT: "timeout_error",
    ErrorKind.UPSTREAM_PROTOCOL: "api_error",
}
_ANTHROPIC_ERROR_TYPES = frozenset(ERROR_TYPE_BY_KIND.values()) | {"billing_error"}

#: Anthropic server tools are versioned: ``web_search_20250305``, ``bash_20250124``, ...
_SERVER_TOOL_TYPE = re.compile(r"^[a-z_]+_\d{8}$")


# ---------------------------------------------------------------- shared helpers


def usage_to_wire(u: Usage | None, *, with_cache: bool = True) -> dict[str, int]:
    """IR usage -> Anthropic usage (``input_tokens`` excludes the cache fields)."""
    u = u or Usage()
    cr = u.cache_read_tokens or 0
    cc = u.cache_creation_tokens or 0
    out = {"input_tokens": max((u.input_tokens or 0) - cr - cc, 0)}
    if with_cache:
        out["cache_creation_input_tokens"] = cc
        out["cache_read_input_tokens"] = cr
    out["output_tokens"] = u.output_tokens or 0
    return out


def message_id(ir_id: str | None) -> str:
    if ir_id and ir_id.startswith("msg_"):
        return ir_id
    if ir_id:
        return "msg_" + ir_id
    return "msg_" + secrets.token_hex(12)


def thinking_signature(signature: str | None, encrypted_content: str | None, item_id: str | None) -> str:
    """The signature an Anthropic client gets for a thinking block (native, carried or UNSIGNED)."""
    if signature and not carry.is_carried(signature):
        return signature
    if encrypted_content:
        return carry.wrap_responses(item_id, encrypted_content)
    return carry.UNSIGNED


def _custom_tool_input(raw: str) -> dict[str, Any]:
    return {CUSTOM_TOOL_PARAM: raw}


def _tool_input(part: ToolCallPart, ctx: Context) -> dict[str, Any]:
    if part.kind == "custom":
        return _custom_tool_input(part.arguments)
    try:
        obj = orjson.loads(part.arguments) if part.arguments else {}
    except orjson.JSONDecodeError:
        ctx.dropped.add("tool_use.input(invalid_json)")
        return {}
    if not isinstance(obj, dict):
        ctx.dropped.add("tool_use.input(not_an_object)")
        return {}
    return obj


def _split_data_url(url: str) -> tuple[str, str] | None:
    if not url.startswith("data:"):
        return None
    head, sep, data = url[5:].partition(",")
    if not sep or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")] or "application/octet-stream", data


def _image_block(p: ImagePart, ctx: Context) -> dict[str, Any] | None:
    if p.data is not None:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": p.media_type or "image/png", "data": p.data},
        }
    if p.url:
        split = _split_data_url(p.url)
        if split is not None:
            return {"type": "image", "source": {"type": "base64", "media_type": split[0], "data": split[1]}}
        return {"type": "image", "source": {"type": "url", "url": p.url}}
    if p.file_id:
        return {"type": "image", "source": {"type": "file", "file_id": p.file_id}}
    ctx.dropped.add("image(empty)")
    return None


def _document_block(p: FilePart, ctx: Context) -> dict[str, Any] | None:
    block: dict[str, Any]
    if p.data is not None:
        media = p.media_type or "application/pdf"
        if media.startswith("text/"):
            try:
                text = base64.b64decode(p.data).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                ctx.dropped.add("document(undecodable)")
                return None
            block = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
        else:
            block = {"type": "document", "source": {"type": "base64", "media_type": media, "data": p.data}}
    elif p.url:
        split = _split_data_url(p.url)
        if split is not None:
            block = {"type": "document", "source": {"type": "base64", "media_type": split[0], "data": split[1]}}
        else:
            block = {"type": "document", "source": {"type": "url", "url": p.url}}
    elif p.file_id:
        block = {"type": "document", "source": {"type": "file", "file_id": p.file_id}}
    else:
        ctx.dropped.add("document(empty)")
        return None
    if p.filename:
        block["title"] = p.filename
    return block


def _thinking_block(p: ThinkingPart, ctx: Context) -> dict[str, Any] | None:
    if p.redacted_data:
        return {"type": "redacted_thinking", "data": p.redacted_data}
    if p.signature and not carry.is_carried(p.signature):
        return {"type": "thinking", "thinking": p.text, "signature": p.signature}
    carried = carry.unwrap_anthropic(p.encrypted_content)
    if carried is not None:
        if carried.get("redacted"):
            return {"type": "redacted_thinking", "data": carried["redacted"]}
        if carried.get("sig"):
            return {"type": "thinking", "thinking": carried.get("text", ""), "signature": carried["sig"]}
    ctx.dropped.add("thinking_without_signature")
    return None


def _content_blocks(parts: list[Any], ctx: Context) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        block = _part_block(p, ctx)
        if block is not None:
            out.append(block)
    return out


def _tool_result_block(p: ToolResultPart, ctx: Context) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": p.tool_call_id}
    content = _content_blocks(p.content, ctx)
    if content:
        block["content"] = content
    if p.is_error:
        block["is_error"] = True
    return block


def _part_block(p: Any, ctx: Context) -> dict[str, Any] | None:
    t = type(p)
    if t is TextPart:
        return {"type": "text", "text": p.text} if p.text else None
    if t is ImagePart:
        return _image_block(p, ctx)
    if t is FilePart:
        return _document_block(p, ctx)
    if t is ThinkingPart:
        return _thinking_block(p, ctx)
    if t is ToolCallPart:
        return {"type": "tool_use", "id": p.id, "name": p.name, "input": _tool_input(p, ctx)}
    if t is ToolResultPart:
        return _tool_result_block(p, ctx)
    if t is RefusalPart:
        return {"type": "text", "text": p.text} if p.text else None
    ctx.dropped.add(type(p).__name__)
    return None


# ---------------------------------------------------------------- requests


class _Turn:
    __slots__ = ("role", "results", "blocks")

    def __init__(self, role: str) -> None:
        self.role = role
        self.results: list[dict[str, Any]] = []
        self.blocks: list[dict[str, Any]] = []

    def content(self) -> list[dict[str, Any]]:
        return self.results + self.blocks


def _system_text(m: Message) -> str:
    return "\n".join(p.text for p in m.parts if isinstance(p, TextPart))


def _build_turns(messages: list[Message], ctx: Context) -> list[_Turn]:
    turns: list[_Turn] = []
    for msg in messages:
        if msg.role == "system":
            text = _system_text(msg)
            if not text:
                continue
            ctx.dropped.add("system_message_moved")
            results: list[dict[str, Any]] = []
            blocks = [{"type": "text", "text": f"<system-reminder>\n{text}\n</system-reminder>"}]
            role = "user"
        else:
            role = msg.role
            results, blocks = [], []
            for p in msg.parts:
                b = _part_block(p, ctx)
                if b is None:
                    continue
                if b["type"] == "tool_result":
                    if role == "user":
                        results.append(b)
                    else:
                        ctx.dropped.add("tool_result_in_assistant_turn")
                else:
                    blocks.append(b)
        if not results and not blocks:
            continue
        if turns and turns[-1].role == role:
            turn = turns[-1]
        else:
            turn = _Turn(role)
            turns.append(turn)
        turn.results.extend(results)
        turn.blocks.extend(blocks)
    return turns


def _orphan_result_text(block: dict[str, Any]) -> list[dict[str, Any]]:
    texts = [b["text"] for b in block.get("content", []) if b.get("type") == "text"]
    head = f"[result of tool call {block['tool_use_id']}{' (error)' if block.get('is_error') else ''}]"
    out = [{"type": "text", "text": "\n".join([head, *texts])}]
    out.extend(b for b in block.get("content", []) if b.get("type") != "text")
    return out


def _fix_tool_pairs(turns: list[_Turn], ctx: Context) -> list[_Turn]:
    out: list[_Turn] = []
    pending: list[str] = []  # tool_use ids of the previous assistant turn
    for turn in turns:
        if turn.role == "assistant":
            if pending:  # the previous assistant turn was never answered
                out.append(_synthetic_results(pending, ctx))
            out.append(turn)
            pending = [b["id"] for b in turn.blocks if b["type"] == "tool_use"]
            continue
        answered = set()
        kept: list[dict[str, Any]] = []
        moved: list[dict[str, Any]] = []
        for r in turn.results:
            if r["tool_use_id"] in pending and r["tool_use_id"] not in answered:
                answered.add(r["tool_use_id"])
                kept.append(r)
            else:
                ctx.dropped.add("orphaned_tool_result")
                moved.extend(_orphan_result_text(r))
        missing = [i for i in pending if i not in answered]
        if missing:
            ctx.dropped.add("unanswered_tool_use")
            kept.extend(_synthetic_result(i) for i in missing)
        turn.results = kept
        turn.blocks = moved + turn.blocks
        out.append(turn)
        pending = []
    if pending and out and out[-1].role == "assistant" and len(out) >= 1:
        # a trailing assistant turn with tool calls is a prefill; the API rejects unanswered tool_use
        out.append(_synthetic_results(pending, ctx))
    return out


def _synthetic_result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": UNANSWERED_TOOL_CALL, "is_error": True}


def _synthetic_results(ids: list[str], ctx: Context) -> _Turn:
    ctx.dropped.add("unanswered_tool_use")
    t = _Turn("user")
    t.results = [_synthetic_result(i) for i in ids]
    return t


def _is_anthropic_server_tool(raw: dict[str, Any] | None) -> bool:
    if not raw or "function" in raw or not isinstance(raw.get("name"), str):
        return False
    t = raw.get("type")
    return isinstance(t, str) and bool(_SERVER_TOOL_TYPE.match(t))


def _tool_to_wire(t: Tool, ctx: Context) -> dict[str, Any] | None:
    if t.kind == "builtin":
        if _is_anthropic_server_tool(t.raw):
            return dict(t.raw or {})
        ctx.dropped.add(f"tools.builtin.{(t.raw or {}).get('type', t.name)}")
        return None
    if t.kind == "custom":
        desc = t.description or ""
        if t.format:
            desc = (desc + "\n\n" if desc else "") + "Input format: " + orjson.dumps(t.format).decode()
        out: dict[str, Any] = {"name": t.name}
        if t.description:
            out["description"] = t.description
        out["input_schema"] = {
            "type": "object",
            "properties": {CUSTOM_TOOL_PARAM: {"type": "string", "description": desc or "The raw tool input."}},
            "required": [CUSTOM_TOOL_PARAM],
        }
        return out
    out = {"name": t.name}
    if t.description is not None:
        out["description"] = t.description
    out["input_schema"] = t.parameters if t.parameters else {"type": "object", "properties": {}}
    if t.strict:
        ctx.dropped.add("tools.strict")
    return out


def _thinking_config(req: Request, max_tokens: int, ctx: Context) -> tuple[dict[str, Any] | None, str | None]:
    """(``thinking`` param, ``output_config.effort``)."""
    r = req.reasoning
    if r is None:
        return None, None
    if r.summary:
        ctx.dropped.add("reasoning.summary")
    if r.enabled is False:
        return {"type": "disabled"}, None
    effort = EFFORT_TO_ANTHROPIC.get(r.effort) if r.effort else None
    if r.effort and effort is None:
        if r.effort != "none":
            ctx.dropped.add("reasoning.effort")
        return ({"type": "disabled"}, None) if r.effort == "none" else (None, None)
    if r.adaptive:
        return {"type": "adaptive"}, effort
    budget = r.budget_tokens
    if budget is None and r.effort:
        budget = EFFORT_BUDGET.get(r.effort)
    if budget is None:
        if r.enabled:
            budget = EFFORT_BUDGET["medium"]
        else:
            return None, None
    budget = min(budget, max_tokens - 1)
    if budget < MIN_THINKING_BUDGET:
        ctx.dropped.add("reasoning")
        return None, None
    return {"type": "enabled", "budget_tokens": budget}, None


def encode_request(req: Request, ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {"model": req.model}
    system = [{"type": "text", "text": p.text} for p in req.system if p.text]
    msgs = req.messages
    i = 0
    while i < len(msgs) and msgs[i].role == "system":
        text = _system_text(msgs[i])
        if text:
            system.append({"type": "text", "text": text})
        i += 1
    if system:
        out["system"] = system
    turns = _fix_tool_pairs(_build_turns(msgs[i:], ctx), ctx)
    out["messages"] = [{"role": t.role, "content": t.content()} for t in turns]
    if req.max_tokens is not None:
        max_tokens = req.max_tokens
        thinking, effort = _thinking_config(req, max_tokens, ctx)
    else:
        # No limit from the client (Codex never sends one): Anthropic requires max_tokens and counts
        # thinking inside it, so the default answer budget comes on top of the thinking budget.
        thinking, effort = _thinking_config(req, 1 << 30, ctx)
        max_tokens = DEFAULT_MAX_TOKENS
        if thinking is not None and thinking.get("type") == "enabled":
            max_tokens += thinking["budget_tokens"]
    out["max_tokens"] = max_tokens
    thinking_on = thinking is not None and thinking["type"] != "disabled"
    if thinking is not None:
        out["thinking"] = thinking
    output_config: dict[str, Any] = {}
    if effort:
        output_config["effort"] = effort
    rf = req.response_format
    if rf is not None and rf.type != "text":
        if rf.type == "json_schema" and rf.schema is not None:
            output_config["format"] = {"type": "json_schema", "schema": rf.schema}
        else:
            ctx.dropped.add(f"response_format.{rf.type}")
    if output_config:
        out["output_config"] = output_config
    if req.temperature is not None:
        if thinking_on and req.temperature != 1:
            ctx.dropped.add("temperature")
        else:
            out["temperature"] = req.temperature
    if req.top_p is not None:
        if thinking_on and req.top_p < 0.95:
            ctx.dropped.add("top_p")
        else:
            out["top_p"] = req.top_p
    if req.top_k is not None:
        if thinking_on:
            ctx.dropped.add("top_k")
        else:
            out["top_k"] = req.top_k
    if req.stop:
        out["stop_sequences"] = list(req.stop)
    out["stream"] = req.stream
    if req.user:
        out["metadata"] = {"user_id": req.user}
    tools = [w for w in (_tool_to_wire(t, ctx) for t in req.tools) if w is not None]
    if tools:
        out["tools"] = tools
        tc = req.tool_choice
        choice: dict[str, Any] | None = None
        if tc is not None:
            choice = {"type": tc.mode}
            if tc.mode == "tool":
                if tc.name:
                    choice["name"] = tc.name
                else:
                    choice = {"type": "any"}
        if req.parallel_tool_calls is False:
            if choice is None:
                choice = {"type": "auto"}
            if choice["type"] != "none":
                choice["disable_parallel_tool_use"] = True
        if thinking_on and choice is not None and choice["type"] in ("any", "tool"):
            # the API rejects forced tool use with extended thinking
            ctx.dropped.add("tool_choice")
            choice = {k: v for k, v in choice.items() if k == "disable_parallel_tool_use"}
            if choice:
                choice["type"] = "auto"
            else:
                choice = None
        if choice is not None:
            out["tool_choice"] = choice
    elif req.tool_choice is not None and req.tool_choice.mode != "none":
        ctx.dropped.add("tool_choice")
    return out


# ---------------------------------------------------------------- whole responses


def encode_response(resp: Response, ctx: Context) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for p in resp.content:
        t = type(p)
        if t is TextPart or t is RefusalPart:
            content.append({"type": "text", "text": p.text})
        elif t is ThinkingPart:
            if p.redacted_data:
                content.append({"type": "redacted_thinking", "data": p.redacted_data})
            else:
                sig = thinking_signature(p.signature, p.encrypted_content, p.item_id)
                content.append({"type": "thinking", "thinking": p.text, "signature": sig})
        elif t is ToolCallPart:
            content.append({"type": "tool_use", "id": p.id, "name": p.name, "input": _tool_input(p, ctx)})
        else:
            ctx.dropped.add(type(p).__name__)
    return {
        "id": message_id(resp.id),
        "type": "message",
        "role": "assistant",
        "model": resp.model,
        "content": content,
        "stop_reason": IR_TO_ANTHROPIC[resp.stop_reason] if resp.stop_reason is not None else None,
        "stop_sequence": resp.stop_sequence,
        "usage": usage_to_wire(resp.usage),
    }


# ---------------------------------------------------------------- errors


def error_type(err: ErrorInfo) -> str:
    if err.code in _ANTHROPIC_ERROR_TYPES and err.kind is not ErrorKind.UPSTREAM_PROTOCOL:
        return err.code  # type: ignore[return-value]
    return ERROR_TYPE_BY_KIND.get(err.kind, "api_error")


def encode_error(err: ErrorInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "error", "error": {"type": error_type(err), "message": err.message}}
    if err.request_id:
        out["request_id"] = err.request_id
    return out


# ---------------------------------------------------------------- streams


class EncPhase(Enum):
    IDLE = "idle"  # nothing sent
    STARTED = "started"  # message_start sent, no block yet (ping not sent)
    STREAMING = "streaming"  # first block started and ping sent
    ENDING = "ending"  # message_delta sent
    STOPPED = "stopped"  # message_stop sent
    FAILED = "failed"  # error sent


class BlockStatus(Enum):
    PENDING = "pending"  # buffered: another (tool) block is open on the wire
    OPEN = "open"  # the block open on the wire
    SUSPENDED = "suspended"  # closed on the wire early (interrupted), not yet stopped in the IR
    DONE = "done"


class _Run:
    """Consecutive buffered deltas of one type, kept as text pieces (compacted every ``_COMPACT``
    appends) instead of one IR object per fragment: a buffered tool call costs memory proportional to
    its text. Replayed as ONE delta of the joined text (the client concatenates fragments anyway)."""

    __slots__ = ("cls", "index", "parts", "limit")

    def __init__(self, cls: type, index: int, text: str) -> None:
        self.cls = cls
        self.index = index
        self.parts = [text]
        self.limit = _COMPACT

    def add(self, text: str) -> None:
        parts = self.parts
        parts.append(text)
        if len(parts) >= self.limit:
            start = self.limit - _COMPACT
            parts[start:] = ["".join(parts[start:])]
            self.limit = start + 1 + _COMPACT

    def event(self) -> StreamEvent:
        return self.cls(self.index, "".join(self.parts))


_COMPACT = 256
_TEXT_EVENTS = (TextDelta, ThinkingDelta, ToolArgsDelta)


class _OutBlock:
    __slots__ = ("kind", "status", "start", "buffer", "signature", "encrypted", "item_id", "wire_index", "prefix")

    def __init__(self, start: BlockStart) -> None:
        self.kind = start.kind
        self.status = BlockStatus.PENDING
        self.start = start
        self.buffer: list[Any] = []  # IR events and _Run
        self.signature: str | None = None
        self.encrypted: str | None = None
        self.item_id = start.item_id
        self.wire_index = -1
        #: the bytes of a content_block_delta event up to its text value (set when opened on the wire)
        self.prefix = b""


_TOOL_KINDS = (BlockKind.TOOL_CALL, BlockKind.CUSTOM_TOOL_CALL)
#: the fast path's (IR delta type, block kind) pairs -> the wire delta's head (after ``"delta":``)
_DELTA_HEADS = {
    (TextDelta, BlockKind.TEXT): b'{"type":"text_delta","text":',
    (TextDelta, BlockKind.REFUSAL): b'{"type":"text_delta","text":',
    (ThinkingDelta, BlockKind.THINKING): b'{"type":"thinking_delta","thinking":',
    (ToolArgsDelta, BlockKind.TOOL_CALL): b'{"type":"input_json_delta","partial_json":',
}
_DELTA_HEAD_BY_KIND = {kind: head for (_, kind), head in _DELTA_HEADS.items()}
_DELTA_TAIL = b"}}\n\n"
_dumps = orjson.dumps
_CUSTOM_PREFIX = '{"' + CUSTOM_TOOL_PARAM + '":"'


def _buffer(b: _OutBlock, ev: StreamEvent) -> None:
    """Buffer ``ev`` for a pending block; consecutive deltas of one type join into one ``_Run``."""
    t = type(ev)
    buf = b.buffer
    if t is TextDelta or t is ThinkingDelta or t is ToolArgsDelta:
        text = ev.fragment if t is ToolArgsDelta else ev.text  # type: ignore[union-attr]
        last = buf[-1] if buf else None
        if type(last) is _Run and last.cls is t and last.index == ev.index:  # type: ignore[union-attr]
            last.add(text)
        else:
            buf.append(_Run(t, ev.index, text))  # type: ignore[union-attr]
        return
    buf.append(ev)


class AnthropicStreamEncoder(StreamEncoder):
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
        self._blocks: dict[int, _OutBlock] = {}
        self._open: _OutBlock | None = None
        self._queue: list[int] = []
        self._next_index = 0

    # -- framing helpers

    def _emit_message_start(self, out: bytearray, ev: MessageStart) -> None:
        message = {
            "id": message_id(ev.id),
            "type": "message",
            "role": "assistant",
            "model": ev.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_to_wire(ev.usage),
        }
        out += encode_json("message_start", {"type": "message_start", "message": message})
        self.phase = EncPhase.STARTED

    def _ensure_started(self, out: bytearray) -> None:
        if self.phase is EncPhase.IDLE:
            model = self.ctx.request.model if self.ctx.request is not None else ""
            self._emit_message_start(out, MessageStart(id="", model=model))

    def _open_block(self, out: bytearray, b: _OutBlock) -> None:
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
        if self.phase is EncPhase.STARTED:
            out += encode_json("ping", {"type": "ping"})
            self.phase = EncPhase.STREAMING
        if kind is BlockKind.CUSTOM_TOOL_CALL:
            self._delta(out, b, {"type": "input_json_delta", "partial_json": _CUSTOM_PREFIX})

    def _delta(self, out: bytearray, b: _OutBlock, delta: dict[str, Any]) -> None:
        out += encode_json(
            "content_block_delta", {"type": "content_block_delta", "index": b.wire_index, "delta": delta}
        )

    def _close_wire(self, out: bytearray, b: _OutBlock) -> None:
        """Close ``b`` on the wire (it must be the open block)."""
        if b.kind is BlockKind.THINKING:
            sig = thinking_signature(b.signature, b.encrypted, b.item_id)
            self._delta(out, b, {"type": "signature_delta", "signature": sig})
        elif b.kind is BlockKind.CUSTOM_TOOL_CALL:
            self._delta(out, b, {"type": "input_json_delta", "partial_json": '"}'})
        out += encode_json("content_block_stop", {"type": "content_block_stop", "index": b.wire_index})
        self._open = None

    # -- the one-open-block discipline

    def _make_live(self, out: bytearray, b: _OutBlock) -> bool:
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
                self._live(out, b, ev.event() if type(ev) is _Run else ev)

    def _live(self, out: bytearray, b: _OutBlock, ev: StreamEvent) -> None:
        """Apply one block event to ``b`` which is open on the wire (or suspended)."""
        t = type(ev)
        if t is BlockStop:
            if b.status is BlockStatus.OPEN:
                self._close_wire(out, b)
            b.status = BlockStatus.DONE
            self._blocks.pop(ev.index, None)
            return
        if t is SignatureDelta:
            if ev.signature is not None:
                b.signature = ev.signature
            if ev.encrypted_content is not None:
                b.encrypted = ev.encrypted_content
            return
        if b.status is not BlockStatus.OPEN and not self._make_live(out, b):
            self._pend(b, ev)
            return
        if t is TextDelta:
            self._delta(out, b, {"type": "text_delta", "text": ev.text})
        elif t is ThinkingDelta:
            self._delta(out, b, {"type": "thinking_delta", "thinking": ev.text})
        elif t is ToolArgsDelta:
            if b.kind is BlockKind.CUSTOM_TOOL_CALL:
                fragment = orjson.dumps(ev.fragment).decode()[1:-1]
            else:
                fragment = ev.fragment
            self._delta(out, b, {"type": "input_json_delta", "partial_json": fragment})

    def _pend(self, b: _OutBlock, ev: StreamEvent) -> None:
        if b.status is not BlockStatus.PENDING:
            # a suspended block resumes later: it waits behind the open tool block as a fresh block
            b.status = BlockStatus.PENDING
            self._queue.append(b.start.index)
        _buffer(b, ev)

    def _block_event(self, out: bytearray, ev: Any) -> None:
        b = self._blocks.get(ev.index)
        if b is None:
            raise UpstreamProtocolError(
                f"{type(ev).__name__} for unknown block index {ev.index} in phase {self.phase.name}"
            )
        if b.status is BlockStatus.PENDING:
            _buffer(b, ev)
            return
        self._live(out, b, ev)
        if self._open is None:
            self._flush(out)

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

    # -- interface

    def encode(self, ev: StreamEvent) -> bytes:
        t = type(ev)
        if t in _TEXT_EVENTS and self.phase is EncPhase.STREAMING:
            # hot path: a delta for the block open on the wire, from a prebuilt prefix
            b = self._blocks.get(ev.index)  # type: ignore[union-attr]
            if b is not None and b.status is BlockStatus.OPEN:
                head = _DELTA_HEADS.get((t, b.kind))
                if head is not None:
                    return b.prefix + _dumps(ev.fragment if t is ToolArgsDelta else ev.text) + _DELTA_TAIL  # type: ignore[union-attr]
        if self.phase is EncPhase.FAILED or self.phase is EncPhase.STOPPED:
            return b""
        out = bytearray()
        if t is MessageStart:
            if self.phase is not EncPhase.IDLE:
                raise UpstreamProtocolError(f"duplicate MessageStart in phase {self.phase.name}")
            self._emit_message_start(out, ev)
            return bytes(out)
        if t is StreamError:
            return self.error(ev.error)
        self._ensure_started(out)
        if t is BlockStart:
            if self.phase is EncPhase.ENDING:
                raise UpstreamProtocolError(f"BlockStart after MessageDelta in phase {self.phase.name}")
            if ev.index in self._blocks:
                raise UpstreamProtocolError(f"duplicate BlockStart for index {ev.index} in phase {self.phase.name}")
            b = _OutBlock(ev)
            self._blocks[ev.index] = b
            if not self._make_live(out, b):
                self._queue.append(ev.index)
        elif t is MessageDelta:
            if self.phase is EncPhase.ENDING:
                raise UpstreamProtocolError(f"duplicate MessageDelta in phase {self.phase.name}")
            self._finish_blocks(out)
            if self.phase is EncPhase.STARTED:
                out += encode_json("ping", {"type": "ping"})
            usage = usage_to_wire(ev.usage) if ev.usage is not None else {"output_tokens": 0}
            delta = {
                # an upstream that ended without saying why (a null or unknown reason): the turn ended, as in Chat
                "stop_reason": IR_TO_ANTHROPIC[ev.stop_reason if ev.stop_reason is not None else StopReason.END_TURN],
                "stop_sequence": ev.stop_sequence,
            }
            out += encode_json("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
            self.phase = EncPhase.ENDING
        elif t is MessageStop:
            if self.phase is not EncPhase.ENDING:
                self._finish_blocks(out)
                delta = {"stop_reason": IR_TO_ANTHROPIC[StopReason.END_TURN], "stop_sequence": None}
                out += encode_json(
                    "message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": 0}}
                )
            out += encode_json("message_stop", {"type": "message_stop"})
            self.phase = EncPhase.STOPPED
        else:
            if self.phase is EncPhase.ENDING:
                raise UpstreamProtocolError(f"{t.__name__} after MessageDelta in phase {self.phase.name}")
            self._block_event(out, ev)
        return bytes(out)

    def error(self, err: ErrorInfo) -> bytes:
        self.phase = EncPhase.FAILED
        body = {"type": "error", "error": {"type": error_type(err), "message": err.message}}
        if err.request_id:
            body["request_id"] = err.request_id
        try:
            return encode_json("error", body)
        except (TypeError, ValueError):  # an upstream field no JSON encoder can write: the message only
            logger.warning("Anthropic error frame: upstream error fields not encodable; sending the message only")
            return encode_json("error", {"type": "error", "error": {"type": "api_error", "message": safe_message(err.message)}})

    def close(self) -> bytes:
        return b""

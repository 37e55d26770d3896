"""IR -> OpenAI Chat Completions: upstream requests, client responses, errors and the stream encoder.

Choices made for third-party Chat backends (DeepSeek, OpenRouter, vLLM, Ollama):

* System text goes into one leading ``system`` message with string content; a mid-conversation
  ``Message(role="system")`` (Claude Code's) stays a ``system`` message at its position.
* Tool results become ``tool`` messages (string content) placed right after the assistant message,
  before any other user content. Images inside a tool result cannot go in a ``tool`` message: the text
  stays in the ``tool`` message and the images go into the ``user`` message that follows.
* An assistant tool call left unanswered gets a synthetic ``tool`` message; a tool result whose call is
  not in the preceding assistant message becomes user text (Chat backends reject both otherwise).
* A refusal in history is sent as plain assistant text (``refusal`` on an input message is not
  understood by most third-party backends).
* Thinking goes back as ``reasoning_content`` (DeepSeek and others require it around tool calls) when
  ``ctx.chat_reasoning_field == "reasoning_content"``; signatures cannot be carried.
* Stream: a MessageDelta with ``end_turn`` after tool-call blocks is sent as ``finish_reason: "tool_calls"``
  (Chat clients' agent loops key on it).
"""

from __future__ import annotations

import logging
import time
import uuid
from enum import Enum
from typing import Any

import orjson

from dragoman.errors import TranslationError
from dragoman.ir.carry import is_unsigned
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
from dragoman.ir.mapping import IR_TO_CHAT
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
from dragoman.protocols import _openai_errors
from dragoman.protocols._checks import safe_message
from dragoman.protocols.base import Context
from dragoman.protocols.base import StreamEncoder
from dragoman.sse.encoder import DONE

logger = logging.getLogger(__name__)

UNANSWERED_TOOL_CALL = "tool call was not answered"
CUSTOM_TOOL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {CUSTOM_TOOL_PARAM: {"type": "string", "description": "The raw input of the tool."}},
    "required": [CUSTOM_TOOL_PARAM],
    "additionalProperties": False,
}
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def chat_id(ir_id: str | None) -> str:
    if ir_id and ir_id.startswith("chatcmpl"):
        return ir_id
    if ir_id:
        return "chatcmpl-" + ir_id
    return "chatcmpl-" + uuid.uuid4().hex


def wrap_custom_args(raw: str) -> str:
    return orjson.dumps({CUSTOM_TOOL_PARAM: raw}).decode()


def _data_url(media_type: str | None, data: str) -> str:
    return f"data:{media_type or 'application/octet-stream'};base64,{data}"


def effort_from_budget(budget: int) -> str:
    if budget <= 2048:
        return "low"
    if budget <= 8192:
        return "medium"
    return "high"


# ---------------------------------------------------------------- requests


def encode_request(req: Request, ctx: Context) -> dict[str, Any]:
    dropped = ctx.dropped
    out: dict[str, Any] = {"model": req.model, "messages": _encode_messages(req, ctx)}
    tools = []
    for t in req.tools:
        enc = _encode_tool(t, ctx)
        if enc is not None:
            tools.append(enc)
    if tools:
        out["tools"] = tools
        tc = req.tool_choice
        if tc is not None:
            if tc.mode == "auto":
                out["tool_choice"] = "auto"
            elif tc.mode == "none":
                out["tool_choice"] = "none"
            elif tc.mode == "any":
                out["tool_choice"] = "required"
            else:
                out["tool_choice"] = {"type": "function", "function": {"name": tc.name}}
        if req.parallel_tool_calls is not None:
            out["parallel_tool_calls"] = req.parallel_tool_calls
    elif req.tool_choice is not None and req.tool_choice.mode == "none":
        pass  # nothing to choose from
    if req.max_tokens is not None:
        out[ctx.chat_max_tokens_field] = req.max_tokens
    if req.temperature is not None:
        out["temperature"] = req.temperature
    if req.top_p is not None:
        out["top_p"] = req.top_p
    if req.top_k is not None:
        dropped.add("top_k")
    if req.stop:
        out["stop"] = list(req.stop)
    if req.user is not None:
        out["user"] = req.user
    r = req.reasoning
    if r is not None:
        effort: str | None = None
        if r.enabled is not False:
            if r.effort:
                effort = r.effort
            elif r.budget_tokens is not None:
                effort = effort_from_budget(r.budget_tokens)
            elif r.adaptive or r.enabled:
                effort = "medium"
        if effort is not None:
            out["reasoning_effort"] = effort
        if r.summary:
            dropped.add("reasoning.summary")
    rf = req.response_format
    if rf is not None:
        if rf.type == "json_schema":
            js: dict[str, Any] = {"name": rf.name or "response", "schema": rf.schema or {}}
            if rf.strict is not None:
                js["strict"] = rf.strict
            out["response_format"] = {"type": "json_schema", "json_schema": js}
        elif rf.type == "json_object":
            out["response_format"] = {"type": "json_object"}
    if req.stream:
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    return out


def _encode_tool(t: Tool, ctx: Context) -> dict[str, Any] | None:
    if t.kind == "builtin":
        ctx.dropped.add("tools.builtin")
        return None
    fn: dict[str, Any] = {"name": t.name}
    if t.kind == "custom":
        desc = t.description or ""
        fn["description"] = (
            desc + "\n\n" if desc else ""
        ) + f"Put the raw tool input in the string parameter `{CUSTOM_TOOL_PARAM}`."
        fn["parameters"] = CUSTOM_TOOL_PARAMETERS
        if t.format is not None:
            # the grammar is the only spec of the input (Codex's apply_patch): keep it as text, as for Anthropic
            fn["description"] += "\nInput format: " + orjson.dumps(t.format).decode()
        return {"type": "function", "function": fn}
    if t.description is not None:
        fn["description"] = t.description
    fn["parameters"] = t.parameters if t.parameters is not None else _EMPTY_PARAMETERS
    if t.strict is not None:
        fn["strict"] = t.strict
    return {"type": "function", "function": fn}


def _result_text(parts: list[Any]) -> str:
    texts = [p.text for p in parts if isinstance(p, TextPart)]
    return "\n".join(texts)


def _image_part(p: ImagePart, ctx: Context) -> dict[str, Any] | None:
    if p.data is not None:
        url = _data_url(p.media_type, p.data)
    elif p.url is not None:
        url = p.url
    else:
        ctx.dropped.add("image.file_id")
        return None
    iu: dict[str, Any] = {"url": url}
    if p.detail:
        iu["detail"] = p.detail
    return {"type": "image_url", "image_url": iu}


def _file_part(p: FilePart, ctx: Context) -> dict[str, Any] | None:
    f: dict[str, Any] = {}
    if p.data is not None:
        f["file_data"] = _data_url(p.media_type, p.data)
    elif p.file_id is not None:
        f["file_id"] = p.file_id
    else:
        ctx.dropped.add("file.url")
        return None
    if p.filename:
        f["filename"] = p.filename
    return {"type": "file", "file": f}


def _user_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if all(p["type"] == "text" for p in parts):
        return "\n".join(p["text"] for p in parts)
    return parts


def _encode_messages(req: Request, ctx: Context) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if req.system:
        out.append({"role": "system", "content": "\n".join(p.text for p in req.system)})
    pending: dict[str, None] = {}  # unanswered tool call ids of the last assistant message
    reasoning_field = ctx.chat_reasoning_field == "reasoning_content"

    def flush_pending() -> None:
        for cid in pending:
            out.append({"role": "tool", "tool_call_id": cid, "content": UNANSWERED_TOOL_CALL})
        pending.clear()

    for msg in req.messages:
        if msg.role == "system":
            flush_pending()
            out.append({"role": "system", "content": "\n".join(p.text for p in msg.parts if isinstance(p, TextPart))})
        elif msg.role == "assistant":
            flush_pending()
            out.append(_encode_assistant(msg, ctx, reasoning_field))
            for tc in out[-1].get("tool_calls") or ():
                pending[tc["id"]] = None
        else:
            content: list[dict[str, Any]] = []
            for p in msg.parts:
                if isinstance(p, ToolResultPart):
                    if p.is_error:
                        ctx.dropped.add("tool_result.is_error")
                    if p.tool_call_id in pending:
                        del pending[p.tool_call_id]
                        out.append({"role": "tool", "tool_call_id": p.tool_call_id, "content": _result_text(p.content)})
                        for rp in p.content:
                            if isinstance(rp, ImagePart):
                                enc = _image_part(rp, ctx)
                                if enc is not None:
                                    content.append(enc)
                            elif isinstance(rp, FilePart):
                                enc = _file_part(rp, ctx)
                                if enc is not None:
                                    content.append(enc)
                    else:  # orphan result: no matching call before it
                        text = _result_text(p.content)
                        content.append({"type": "text", "text": f"[result of tool call {p.tool_call_id}]\n{text}"})
                elif isinstance(p, TextPart):
                    content.append({"type": "text", "text": p.text})
                elif isinstance(p, ImagePart):
                    enc = _image_part(p, ctx)
                    if enc is not None:
                        content.append(enc)
                elif isinstance(p, FilePart):
                    enc = _file_part(p, ctx)
                    if enc is not None:
                        content.append(enc)
                else:
                    ctx.dropped.add(f"user.{type(p).__name__}")
            flush_pending()
            if content:
                out.append({"role": "user", "content": _user_content(content)})
    flush_pending()
    return out


def _encode_assistant(msg: Message, ctx: Context, reasoning_field: bool) -> dict[str, Any]:
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[dict[str, Any]] = []
    for p in msg.parts:
        if isinstance(p, TextPart):
            texts.append(p.text)
        elif isinstance(p, RefusalPart):
            texts.append(p.text)
        elif isinstance(p, ThinkingPart):
            if p.signature and not is_unsigned(p.signature):
                ctx.dropped.add("thinking.signature")
            if p.encrypted_content:
                ctx.dropped.add("reasoning.encrypted_content")
            if p.redacted_data:
                ctx.dropped.add("redacted_thinking")
            if p.text:
                if reasoning_field:
                    thinking.append(p.text)
                else:
                    ctx.dropped.add("thinking")
        elif isinstance(p, ToolCallPart):
            args = wrap_custom_args(p.arguments) if p.kind == "custom" else (p.arguments or "{}")
            calls.append({"id": p.id, "type": "function", "function": {"name": p.name, "arguments": args}})
        else:
            ctx.dropped.add(f"assistant.{type(p).__name__}")
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if thinking:
        out["reasoning_content"] = "".join(thinking)
    if calls:
        out["tool_calls"] = calls
    return out


# ---------------------------------------------------------------- whole responses


def encode_usage(u: Usage) -> dict[str, Any]:
    pt = u.input_tokens or 0
    ct = u.output_tokens or 0
    out: dict[str, Any] = {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}
    if u.cache_read_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": u.cache_read_tokens}
    if u.reasoning_tokens is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": u.reasoning_tokens}
    return out


def encode_response(resp: Response, ctx: Context) -> dict[str, Any]:
    texts: list[str] = []
    thinking: list[str] = []
    refusals: list[str] = []
    calls: list[dict[str, Any]] = []
    for p in resp.content:
        if isinstance(p, TextPart):
            texts.append(p.text)
        elif isinstance(p, ThinkingPart):
            if p.text:
                thinking.append(p.text)
            if (p.signature and not is_unsigned(p.signature)) or p.encrypted_content or p.redacted_data:
                ctx.dropped.add("thinking_signature")
        elif isinstance(p, RefusalPart):
            refusals.append(p.text)
        elif isinstance(p, ToolCallPart):
            args = wrap_custom_args(p.arguments) if p.kind == "custom" else (p.arguments or "{}")
            calls.append({"id": p.id, "type": "function", "function": {"name": p.name, "arguments": args}})
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(texts) if texts else None,
        "refusal": "".join(refusals) if refusals else None,
    }
    if thinking:
        message["reasoning_content"] = "".join(thinking)
    if calls:
        message["tool_calls"] = calls
    finish = IR_TO_CHAT.get(resp.stop_reason, "stop") if resp.stop_reason is not None else "stop"
    return {
        "id": chat_id(resp.id),
        "object": "chat.completion",
        "created": resp.created if resp.created is not None else int(time.time()),
        "model": resp.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": encode_usage(resp.usage),
    }


# ---------------------------------------------------------------- errors

encode_error = _openai_errors.encode_error
error_object = _openai_errors.error_object


# ---------------------------------------------------------------- streams


class Phase(Enum):
    START = "start"  # before MessageStart
    STREAMING = "streaming"
    FINISHED = "finished"  # finish_reason chunk sent
    DONE = "done"  # [DONE] sent, or an error frame


_dumps = orjson.dumps
#: hot-path templates, byte-identical to ``_chunk({"content": X})`` / ``_chunk({"reasoning_content": X})``
_CONTENT_HEAD = b'[{"index":0,"delta":{"content":'
_REASONING_HEAD = b'[{"index":0,"delta":{"reasoning_content":'
_CHUNK_TAIL = b'},"finish_reason":null}]}\n\n'


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

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return self._prefix + orjson.dumps([choice]) + b"}\n\n"

    def _tool_chunk(self, tindex: int, args: str) -> bytes:
        return self._chunk({"tool_calls": [{"index": tindex, "function": {"arguments": args}}]})

    def _start(self, ev: MessageStart) -> bytes:
        cid = chat_id(ev.id)
        created = ev.created if ev.created is not None else int(time.time())
        head = orjson.dumps({"id": cid, "object": "chat.completion.chunk", "created": created, "model": ev.model})
        self._prefix = b"data: " + head[:-1] + b',"choices":'
        if ev.usage is not None:
            self._usage = self._usage.merged(ev.usage)
        self.phase = Phase.STREAMING
        return self._chunk({"role": "assistant", "content": ""})

    def encode(self, ev: StreamEvent) -> bytes:
        t = type(ev)
        if self.phase is Phase.STREAMING:
            if t is TextDelta:
                kind = self._kinds.get(ev.index)
                if kind is BlockKind.TEXT:
                    # == self._chunk({"content": ev.text}), without building and dumping the dicts
                    return self._prefix + _CONTENT_HEAD + _dumps(ev.text) + _CHUNK_TAIL
                if kind is BlockKind.REFUSAL:
                    return self._chunk({"refusal": ev.text})
                return self._unexpected(ev)
            if t is ThinkingDelta:
                if self._kinds.get(ev.index) is not BlockKind.THINKING:
                    return self._unexpected(ev)
                return self._prefix + _REASONING_HEAD + _dumps(ev.text) + _CHUNK_TAIL
            if t is ToolArgsDelta:
                tindex = self._tool_index.get(ev.index)
                if tindex is None:
                    return self._unexpected(ev)
                if self._kinds[ev.index] is BlockKind.CUSTOM_TOOL_CALL:
                    return self._tool_chunk(tindex, orjson.dumps(ev.fragment)[1:-1].decode())
                return self._tool_chunk(tindex, ev.fragment)
            if t is BlockStart:
                return self._block_start(ev)
            if t is BlockStop:
                kind = self._kinds.pop(ev.index, None)
                if kind is None:
                    return self._unexpected(ev)
                if kind is BlockKind.CUSTOM_TOOL_CALL:
                    return self._tool_chunk(self._tool_index[ev.index], '"}')
                return b""
            if t is SignatureDelta:
                if not self._sig_dropped and not is_unsigned(ev.signature):
                    self.ctx.dropped.add("thinking_signature")
                    self._sig_dropped = True
                return b""
            if t is MessageDelta:
                return self._message_delta(ev)
            if t is MessageStart:
                return self._unexpected(ev)
        if t is MessageStart and self.phase is Phase.START:
            return self._start(ev)
        if t is MessageStop and self.phase is Phase.FINISHED:
            self.phase = Phase.DONE
            return DONE
        if t is StreamError:
            return self.error(ev.error)
        return self._unexpected(ev)

    def _unexpected(self, ev: StreamEvent) -> bytes:
        raise TranslationError(f"Chat stream encoder got {type(ev).__name__} in phase {self.phase.name}", 500)

    def _block_start(self, ev: BlockStart) -> bytes:
        if ev.index in self._kinds:
            return self._unexpected(ev)
        kind = ev.kind
        if kind is BlockKind.REDACTED_THINKING:
            self.ctx.dropped.add("redacted_thinking")
            self._kinds[ev.index] = kind
            return b""
        self._kinds[ev.index] = kind
        if kind is BlockKind.TOOL_CALL or kind is BlockKind.CUSTOM_TOOL_CALL:
            tindex = self._next_tool
            self._next_tool = tindex + 1
            self._tool_index[ev.index] = tindex
            args = '{"' + CUSTOM_TOOL_PARAM + '":"' if kind is BlockKind.CUSTOM_TOOL_CALL else ""
            call = {
                "index": tindex,
                "id": ev.tool_call_id or f"call_{tindex}",
                "type": "function",
                "function": {"name": ev.name or "", "arguments": args},
            }
            return self._chunk({"tool_calls": [call]})
        return b""

    def _message_delta(self, ev: MessageDelta) -> bytes:
        if ev.usage is not None:
            self._usage = self._usage.merged(ev.usage)
        finish = IR_TO_CHAT.get(ev.stop_reason, "stop") if ev.stop_reason is not None else "stop"
        if ev.stop_reason is StopReason.END_TURN and self._next_tool:
            finish = "tool_calls"  # an Anthropic end_turn after tool_use still means tool calls to a Chat client
        elif finish == "tool_calls" and not self._next_tool:
            finish = "stop"  # "tool_calls" without any call would send a Chat agent loop looking for one
        out = self._chunk({}, finish)
        req = self.ctx.request
        if req is not None and req.include_usage:
            out += self._prefix + b"[]," + b'"usage":' + orjson.dumps(encode_usage(self._usage)) + b"}\n\n"
        self.phase = Phase.FINISHED
        return out

    def error(self, err: ErrorInfo) -> bytes:
        self.phase = Phase.DONE
        try:
            return b"data: " + orjson.dumps({"error": error_object(err)}) + b"\n\n"
        except (TypeError, ValueError):  # an upstream code/param no JSON encoder can write: a plain frame
            logger.warning("Chat error frame: upstream error fields not encodable; sending the message only")
            obj = {"message": safe_message(err.message), "type": _openai_errors.TYPE_BY_KIND.get(err.kind, "server_error"), "param": None, "code": None}
            return b"data: " + orjson.dumps({"error": obj}) + b"\n\n"

    def close(self) -> bytes:
        return b""

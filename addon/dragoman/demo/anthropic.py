"""Anthropic Messages replies: a whole ``message`` or its SSE stream (``event:`` named events), and errors."""

from __future__ import annotations

import json
import re
from typing import Any

from dragoman.demo.answer import Answer
from dragoman.demo.answer import Call
from dragoman.demo.wire import MIDSTREAM_ERROR_MESSAGE
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import mark_fault
from dragoman.demo.wire import sse


def error_body(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


#: the real API's answer (400 invalid_request_error) to a thinking request whose tool loop lost its thinking
UNSIGNED_TOOL_LOOP = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{found}`. When "
    "`thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the "
    "lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from "
    "previous turns. To avoid this requirement, disable `thinking`."
)


_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")


def request_problem(body: dict[str, Any]) -> str | None:
    """What the real API rejects that a translator can get wrong: a tool id outside ``^[a-zA-Z0-9_-]+$``;
    with ``thinking`` enabled, an assistant turn whose ``tool_use`` the final user turn answers that does
    not start with a thinking block."""
    messages = body.get("messages") or []
    for i, m in enumerate(messages):
        for j, b in enumerate(m.get("content") if isinstance(m.get("content"), list) else []):
            field = {"tool_use": "id", "tool_result": "tool_use_id"}.get(b.get("type"))
            if field is not None and not _TOOL_ID.fullmatch(str(b.get(field, ""))):
                return f"messages.{i}.content.{j}.{b['type']}.{field}: String should match pattern '^[a-zA-Z0-9_-]+$'"
    if (body.get("thinking") or {}).get("type") != "enabled":
        return None
    if len(messages) < 2 or messages[-1].get("role") != "user" or messages[-2].get("role") != "assistant":
        return None
    answer, turn = messages[-1].get("content"), messages[-2].get("content")
    if not isinstance(answer, list) or not any(b.get("type") == "tool_result" for b in answer):
        return None
    if not isinstance(turn, list) or not any(b.get("type") == "tool_use" for b in turn):
        return None
    if turn[0].get("type") in ("thinking", "redacted_thinking"):
        return None
    return UNSIGNED_TOOL_LOOP.format(i=len(messages) - 2, found=turn[0].get("type"))


def rate_limited(message: str) -> Reply:
    return Reply(429, {"retry-after": "7"}, error_body("rate_limit_error", message))


def render(answer: Answer, request: Request) -> Reply:
    if not request.stream:
        return Reply(json_body=_message(answer, request.model, _blocks(answer), _stop_reason(answer), _usage(answer)))
    return _stream(answer, request.model)


def _usage(answer: Answer) -> dict[str, int]:
    return {
        "input_tokens": answer.usage_in,
        "output_tokens": answer.usage_out,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


def _stop_reason(answer: Answer) -> str:
    return "tool_use" if answer.calls else "max_tokens" if answer.length else "end_turn"


def _message(
    answer: Answer, model: str, content: list[dict[str, Any]], stop: str | None, usage: dict[str, int]
) -> dict[str, Any]:
    return {
        "id": answer.ids.message,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }


def _blocks(answer: Answer) -> list[dict[str, Any]]:
    """The content blocks of the whole message: thinking, text, then the tool calls."""
    blocks: list[dict[str, Any]] = []
    if answer.thinking:
        blocks.append({"type": "thinking", "thinking": "".join(answer.thinking), "signature": answer.signature})
    if answer.text:
        blocks.append({"type": "text", "text": "".join(answer.text)})
    for call in answer.calls:
        blocks.append({"type": "tool_use", "id": call.call_id, "name": call.name, "input": json.loads(call.arguments)})
    return blocks


# -- streaming ----------------------------------------------------------------------------------------------


def _emit(reply: Reply, data: dict[str, Any]) -> None:
    reply.events.append(sse(data, data["type"]))


def _delta(reply: Reply, index: int, delta: dict[str, Any]) -> None:
    _emit(reply, {"type": "content_block_delta", "index": index, "delta": delta})


def _stream(answer: Answer, model: str) -> Reply:
    reply = Reply()
    start = _message(answer, model, [], None, {**_usage(answer), "output_tokens": 1})
    _emit(reply, {"type": "message_start", "message": start})
    index = 0
    if answer.thinking:
        _thinking_block(reply, index, answer)
        index += 1
    if answer.text:
        if not _text_block(reply, index, answer):
            return reply  # the in-stream error ended it
        index += 1
    for call in answer.calls:
        _tool_use_block(reply, index, call)
        index += 1
    delta = {"stop_reason": _stop_reason(answer), "stop_sequence": None}
    _emit(reply, {"type": "message_delta", "delta": delta, "usage": {"output_tokens": answer.usage_out}})
    _emit(reply, {"type": "message_stop"})
    return reply


def _thinking_block(reply: Reply, index: int, answer: Answer) -> None:
    block = {"type": "thinking", "thinking": "", "signature": ""}
    _emit(reply, {"type": "content_block_start", "index": index, "content_block": block})
    for piece in answer.thinking:
        _delta(reply, index, {"type": "thinking_delta", "thinking": piece})
    _delta(reply, index, {"type": "signature_delta", "signature": answer.signature})
    _emit(reply, {"type": "content_block_stop", "index": index})


def _text_block(reply: Reply, index: int, answer: Answer) -> bool:
    """The text block (a ``ping`` follows its start when it is the first block); False: it broke off."""
    block = {"type": "text", "text": ""}
    _emit(reply, {"type": "content_block_start", "index": index, "content_block": block})
    if index == 0:
        _emit(reply, {"type": "ping"})
    for n, piece in enumerate(answer.text):
        _delta(reply, index, {"type": "text_delta", "text": piece})
        if mark_fault(reply, answer.fault, n):
            _emit(reply, error_body("overloaded_error", MIDSTREAM_ERROR_MESSAGE))
            return False
    _emit(reply, {"type": "content_block_stop", "index": index})
    return True


def _tool_use_block(reply: Reply, index: int, call: Call) -> None:
    block = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}
    _emit(reply, {"type": "content_block_start", "index": index, "content_block": block})
    for fragment in call.fragments:
        _delta(reply, index, {"type": "input_json_delta", "partial_json": fragment})
    _emit(reply, {"type": "content_block_stop", "index": index})

"""OpenAI Chat Completions replies: a whole ``chat.completion`` or its chunk stream ending in ``[DONE]``, and errors.

Parallel tool calls stream as real Chat upstreams send them: every call's first chunk, then the argument
fragments of the calls interleaved.
"""

from __future__ import annotations

from typing import Any

from dragoman.demo.answer import Answer
from dragoman.demo.answer import interleaved
from dragoman.demo.wire import MIDSTREAM_ERROR_MESSAGE
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import mark_fault
from dragoman.demo.wire import sse


def error_body(kind: str, message: str, code: str | None) -> dict[str, Any]:
    """The OpenAI error body (Chat and Responses share it)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def rate_limited(message: str) -> Reply:
    return Reply(429, {"retry-after": "7"}, error_body("requests", message, "rate_limit_exceeded"))


def render(answer: Answer, request: Request) -> Reply:
    if not request.stream:
        return Reply(json_body=_completion(answer, request.model))
    return _stream(answer, request)


def _usage(answer: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": answer.usage_in,
        "completion_tokens": answer.usage_out,
        "total_tokens": answer.usage_in + answer.usage_out,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    }


def _finish_reason(answer: Answer) -> str:
    return "tool_calls" if answer.calls else "length" if answer.length else "stop"


def _completion(answer: Answer, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(answer.text) if answer.text else None}
    if answer.thinking:
        message["reasoning_content"] = "".join(answer.thinking)
    if answer.calls:
        message["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in answer.calls
        ]
    return {
        "id": answer.ids.completion,
        "object": "chat.completion",
        "created": answer.ids.created,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": _finish_reason(answer)}],
        "usage": _usage(answer),
    }


def _chunk(answer: Answer, model: str, choices: list[dict[str, Any]], **extra: Any) -> bytes:
    head = {"id": answer.ids.completion, "object": "chat.completion.chunk", "created": answer.ids.created}
    return sse({**head, "model": model, "choices": choices, **extra})


def _stream(answer: Answer, request: Request) -> Reply:
    reply = Reply()

    def delta(delta: dict[str, Any], finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        reply.events.append(_chunk(answer, request.model, [choice]))

    delta({"role": "assistant", "content": ""})
    for piece in answer.thinking:
        delta({"reasoning_content": piece})
    for n, piece in enumerate(answer.text):
        delta({"content": piece})
        if mark_fault(reply, answer.fault, n):
            reply.events.append(
                sse({"error": {"message": MIDSTREAM_ERROR_MESSAGE, "type": "server_error", "code": 502}})
            )
            return reply
    for i, call in enumerate(answer.calls):
        function = {"name": call.name, "arguments": ""}
        delta({"tool_calls": [{"index": i, "id": call.call_id, "type": "function", "function": function}]})
    for i, fragment in interleaved(answer.calls):
        delta({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]})
    delta({}, _finish_reason(answer))
    if request.include_usage:
        reply.events.append(_chunk(answer, request.model, [], usage=_usage(answer)))
    reply.events.append(sse("[DONE]"))
    return reply

"""Gemini ``generateContent`` replies: a whole ``GenerateContentResponse`` or its ``alt=sse`` event stream, and errors.

As Gemini sends them: thought summaries as ``thought`` text parts, the answer's text parts, then each function
call whole in an event of its own (Gemini streams whole calls), the first one carrying a ``thoughtSignature``
(Gemini 3 signs each step's first call, and a thinking answer's text); the last event has ``finishReason``
(``STOP`` also after function calls, ``MAX_TOKENS`` for a length stop) and the counted ``usageMetadata``.
"""

from __future__ import annotations

import json
from typing import Any

from dragoman.demo.answer import Answer
from dragoman.demo.wire import MIDSTREAM_ERROR_MESSAGE
from dragoman.demo.wire import Reply
from dragoman.demo.wire import Request
from dragoman.demo.wire import mark_fault
from dragoman.demo.wire import sse

#: the signature the fake's first call (or thinking answer's text) carries
THOUGHT_SIGNATURE = "Z2VtaW5pLWZha2Utc2lnbmF0dXJl"
STATUS = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def error_body(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": STATUS.get(code, "INTERNAL")}}


def rate_limited(message: str) -> Reply:
    body = error_body(429, message)
    body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]
    return Reply(429, {"retry-after": "7"}, body)


def render(answer: Answer, request: Request) -> Reply:
    if not request.stream:
        return Reply(json_body=_response(answer, request.model, _parts(answer), last=True))
    return _stream(answer, request)


def _usage(answer: Answer) -> dict[str, Any]:
    thoughts = answer.reasoning_tokens
    cand = answer.usage_out - thoughts
    meta = {"promptTokenCount": answer.usage_in, "candidatesTokenCount": cand}
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    meta["totalTokenCount"] = answer.usage_in + answer.usage_out
    return meta


def _call_part(answer: Answer, n: int) -> dict[str, Any]:
    call = answer.calls[n]
    part: dict[str, Any] = {"functionCall": {"name": call.name, "args": json.loads(call.arguments or "{}")}}
    if n == 0:
        part["thoughtSignature"] = THOUGHT_SIGNATURE
    return part


def _parts(answer: Answer) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": "".join(answer.thinking), "thought": True}] if answer.thinking else []
    if answer.text:
        text: dict[str, Any] = {"text": "".join(answer.text)}
        if answer.thinking and not answer.calls:
            text["thoughtSignature"] = THOUGHT_SIGNATURE
        parts.append(text)
    return parts + [_call_part(answer, n) for n in range(len(answer.calls))]


def _response(answer: Answer, model: str, parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [cand]}
    if last:
        cand["finishReason"] = "MAX_TOKENS" if answer.length else "STOP"
        out["usageMetadata"] = _usage(answer)
    out["modelVersion"] = model
    out["responseId"] = answer.ids.response
    return out


def _stream(answer: Answer, request: Request) -> Reply:
    reply = Reply()
    events: list[list[dict[str, Any]]] = [[{"text": p, "thought": True}] for p in answer.thinking]
    texts = [[{"text": p}] for p in answer.text]
    for n, part in enumerate(texts):
        reply.events.extend(sse(_response(answer, request.model, e, False)) for e in events)
        events = []
        reply.events.append(sse(_response(answer, request.model, part, False)))
        if mark_fault(reply, answer.fault, n):
            reply.events.append(sse(error_body(500, MIDSTREAM_ERROR_MESSAGE)))
            return reply
    events += [[_call_part(answer, n)] for n in range(len(answer.calls))]
    last: list[dict[str, Any]] = [{"text": ""}]
    if answer.thinking and not answer.calls:
        last[0]["thoughtSignature"] = THOUGHT_SIGNATURE
    reply.events.extend(sse(_response(answer, request.model, e, False)) for e in events)
    reply.events.append(sse(_response(answer, request.model, last, True)))
    return reply

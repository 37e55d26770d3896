"""Gemini ``generateContent`` replies: a whole ``GenerateContentResponse`` or its ``alt=sse`` event stream, and errors.

As Gemini sends them: thought summaries as ``thought`` text parts, the answer's text parts, then each function
call whole in an event of its own (Gemini streams whole calls), the first one carrying a ``thoughtSignature``
(Gemini 3 signs each step's first call, and a thinking answer's text); the last event has ``finishReason``
(``STOP`` also after function calls, ``MAX_TOKENS`` for a length stop) and the counted ``usageMetadata``.

With the header ``x-fake-require-signatures`` the fake checks signatures as Gemini 3 does, strictly: step N's
first call is signed ``step_signature(N)`` (N = the model turns with calls the request already has), and a request
whose history does not bring each step's first call back with exactly that signature (the skip value included)
is answered 400 ``INVALID_ARGUMENT`` in Gemini's words.
"""

from __future__ import annotations

import base64
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
#: the request header that makes the fake require each step's signature back (see the module doc)
REQUIRE_SIGNATURES = "x-fake-require-signatures"
STATUS = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def error_body(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": STATUS.get(code, "INTERNAL")}}


def rate_limited(message: str) -> Reply:
    body = error_body(429, message)
    body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "7s"}]
    return Reply(429, {"retry-after": "7"}, body)


def render(answer: Answer, request: Request) -> Reply:
    sig = THOUGHT_SIGNATURE
    if request.headers.get(REQUIRE_SIGNATURES):
        steps, error = _check_signatures(request.body)
        if error is not None:
            return Reply(400, json_body=error_body(400, error))
        sig = step_signature(steps)
    if not request.stream:
        return Reply(json_body=_response(answer, request.model, _parts(answer, sig), last=True))
    return _stream(answer, request, sig)


def step_signature(step: int) -> str:
    """The signature of step ``step``'s first call when signatures are required (base64, one per step)."""
    return base64.b64encode(f"gemini-fake-signature-step-{step}".encode()).decode()


def _check_signatures(body: Any) -> tuple[int, str | None]:
    """(the steps the history has, the error message when a step's first call lacks its signature)."""
    contents = body.get("contents") if isinstance(body, dict) else None
    step = 0
    for c in contents if isinstance(contents, list) else ():
        parts = c.get("parts") if isinstance(c, dict) and c.get("role") == "model" else None
        calls = [p for p in parts or () if isinstance(p, dict) and "functionCall" in p]
        if not calls:
            continue
        sig = calls[0].get("thoughtSignature")
        name = (calls[0].get("functionCall") or {}).get("name")
        if not sig:
            return step, (
                "Function call is missing a thought_signature in functionCall parts. This is required for tools "
                f"to work correctly. Additional data, function call `default_api:{name}` , position {step}."
            )
        if sig != step_signature(step):
            return step, f"Corrupted thought signature (function call `default_api:{name}`, step {step})."
        step += 1
    return step, None


def _usage(answer: Answer) -> dict[str, Any]:
    thoughts = answer.reasoning_tokens
    cand = answer.usage_out - thoughts
    meta = {"promptTokenCount": answer.usage_in, "candidatesTokenCount": cand}
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    meta["totalTokenCount"] = answer.usage_in + answer.usage_out
    return meta


def _call_part(answer: Answer, n: int, sig: str) -> dict[str, Any]:
    call = answer.calls[n]
    part: dict[str, Any] = {"functionCall": {"name": call.name, "args": json.loads(call.arguments or "{}")}}
    if n == 0:
        part["thoughtSignature"] = sig
    return part


def _parts(answer: Answer, sig: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"text": "".join(answer.thinking), "thought": True}] if answer.thinking else []
    if answer.text:
        text: dict[str, Any] = {"text": "".join(answer.text)}
        if answer.thinking and not answer.calls:
            text["thoughtSignature"] = THOUGHT_SIGNATURE
        parts.append(text)
    return parts + [_call_part(answer, n, sig) for n in range(len(answer.calls))]


def _response(answer: Answer, model: str, parts: list[dict[str, Any]], last: bool) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [cand]}
    if last:
        cand["finishReason"] = "MAX_TOKENS" if answer.length else "STOP"
        out["usageMetadata"] = _usage(answer)
    out["modelVersion"] = model
    out["responseId"] = answer.ids.response
    return out


def _stream(answer: Answer, request: Request, sig: str) -> Reply:
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
    events += [[_call_part(answer, n, sig)] for n in range(len(answer.calls))]
    last: list[dict[str, Any]] = [{"text": ""}]
    if answer.thinking and not answer.calls:
        last[0]["thoughtSignature"] = THOUGHT_SIGNATURE
    reply.events.extend(sse(_response(answer, request.model, e, False)) for e in events)
    reply.events.append(sse(_response(answer, request.model, last, True)))
    return reply

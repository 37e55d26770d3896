"""Gemini's calls besides generation: ``:countTokens`` (and Code Assist's ``v1internal:countTokens``, whose
request is wrapped as ``{"request": {"model", "contents"}}`` and whose answer is the same ``{"totalTokens"}``).

The request (``contents``, ``systemInstruction``, ``tools``, or a ``generateContentRequest`` holding them) is
asked of the upstream when it can count (``forward``): a Gemini upstream gets the call itself (the model
mapped, in the path and in a ``generateContentRequest``), an Anthropic upstream its ``/v1/messages/count_tokens``
with the request translated; ``from_upstream`` turns the answer into Gemini's ``{"totalTokens": N}``. Otherwise,
or when the upstream's answer is unusable, it is estimated here (``count_tokens``): read by the Gemini codec,
written in Anthropic's shape and counted by ``translate.tokens``. A bad body gets Gemini's 400.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from mitmproxy import http

from dragoman.errors import TranslationError
from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.protocols import Protocol
from dragoman.protocols.base import Context
from dragoman.protocols.registry import get_codec
from dragoman.routing.url import join_endpoint
from dragoman.translate.plan import ModelRule
from dragoman.translate.plan import map_model
from dragoman.translate.tokens import estimate_input_tokens

_COUNT = re.compile(r"/(v1\w*)/models/([^/:]+):countTokens$")
#: Code Assist's (Gemini CLI signed in with Google): ``{"request": {"model": "models/X", "contents"}}``
_CODE_ASSIST_COUNT = re.compile(r"/v1internal:countTokens$")
#: what Anthropic's count_tokens takes of a Messages request (it refuses max_tokens, stream, sampling, ...)
_ANTHROPIC_COUNT_KEYS = ("model", "messages", "system", "tools", "tool_choice", "thinking")
ANTHROPIC_COUNT_PATH = "/v1/messages/count_tokens"


def is_count_tokens(path: str) -> bool:
    p = path.split("?", 1)[0]
    return _COUNT.search(p) is not None or _CODE_ASSIST_COUNT.search(p) is not None


def _anthropic_request(raw: bytes) -> dict[str, Any]:
    """A ``:countTokens`` body as an Anthropic Messages request; ``TranslationError`` / ``JSONDecodeError``.
    (The codec unwraps Code Assist's ``{"request": ...}`` itself.)"""
    body = orjson.loads(raw)
    if not isinstance(body, dict):
        raise TranslationError("request body is not a JSON object", 400)
    inner = body.get("generateContentRequest")
    req = get_codec(Protocol.GEMINI).decode_request(inner if isinstance(inner, dict) else body)
    req.model = req.model or "count"
    return get_codec(Protocol.ANTHROPIC_MESSAGES).encode_request(req, Context(request=req))


def _call(raw: bytes, path: str) -> tuple[str, str, dict[str, Any]] | None:
    """(API version, model, the Gemini API's countTokens body) of a client's call; None when unreadable."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(body, dict):
        return None
    p = path.split("?", 1)[0]
    m = _COUNT.search(p)
    if m is not None:
        return m.group(1), m.group(2), body
    inner = body.get("request")
    model = inner.get("model") if isinstance(inner, dict) else None
    if not isinstance(inner, dict) or not isinstance(model, str) or not _CODE_ASSIST_COUNT.search(p):
        return None
    return "v1beta", model, {k: v for k, v in inner.items() if k != "model"}


def forward(
    raw: bytes, path: str, base: str, target: Protocol | None, model_map: list[ModelRule]
) -> tuple[str, bytes] | None:
    """(path under the upstream's ``base`` path, body) asking a Gemini or Anthropic upstream to count; None:
    estimate here."""
    call = _call(raw, path)
    if call is None:
        return None
    version, model, body = call
    model = map_model(model_map, model.removeprefix("models/"))
    if target is Protocol.GEMINI:
        inner = body.get("generateContentRequest")
        if isinstance(inner, dict) and "model" in inner:  # it must name the model of the path
            inner["model"] = f"models/{model}"
        version = "" if re.search(r"/v1\w*$", base) else f"/{version}"  # a base may end with its version
        return f"{base}{version}/models/{model}:countTokens", orjson.dumps(body)
    if target is Protocol.ANTHROPIC_MESSAGES:
        try:
            anthropic = _anthropic_request(raw)
        except (orjson.JSONDecodeError, TranslationError):
            return None  # the estimate answers with Gemini's 400
        anthropic["model"] = model
        return join_endpoint(base, ANTHROPIC_COUNT_PATH), orjson.dumps(
            {k: anthropic[k] for k in _ANTHROPIC_COUNT_KEYS if k in anthropic}
        )
    return None


def from_upstream(target: Protocol | None, status: int, body: bytes) -> bytes | None:
    """The upstream's count as Gemini's answer (a Gemini one as it came); None when it is not a count."""
    if not 200 <= status < 300:
        return None
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    if target is Protocol.GEMINI:
        n = obj.get("totalTokens")
        return body if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None
    n = obj.get("input_tokens")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        return None
    return orjson.dumps({"totalTokens": n})


def answer(resp: http.Response, target: Protocol | None, raw: bytes) -> bool:
    """The upstream's answer to a forwarded call made Gemini's; the estimate of ``raw`` instead when it is not a
    count (True then)."""
    body = from_upstream(target, resp.status_code, resp.get_content(strict=False) or b"")
    estimated = body is None
    status = 200
    if body is None:
        status, body = count_tokens(raw)
        resp.headers["x-dragoman-estimate"] = "true"
    resp.status_code, resp.reason = status, "OK" if status == 200 else "Bad Request"
    for name in ("content-encoding", "transfer-encoding", "content-length"):
        resp.headers.pop(name, None)
    resp.headers["content-type"] = "application/json"
    resp.content = body
    return estimated


def count_tokens(raw: bytes) -> tuple[int, bytes]:
    """-> (status, body) for a ``:countTokens`` request body."""
    gemini = get_codec(Protocol.GEMINI)
    try:
        anthropic = _anthropic_request(raw)
    except (orjson.JSONDecodeError, TranslationError) as e:
        info = ErrorInfo(kind=ErrorKind.INVALID_REQUEST, message=f"countTokens: {e}", status=400)
        return 400, orjson.dumps(gemini.encode_error(info))
    return 200, orjson.dumps({"totalTokens": estimate_input_tokens(anthropic)})

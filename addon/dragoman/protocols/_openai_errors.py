"""The OpenAI error shape, shared by both OpenAI protocols (Chat Completions and Responses).

``{"error": {"message", "type", "param", "code"}}`` for HTTP error bodies and in-stream error chunks;
OpenRouter's numeric ``code`` is read as a status.
"""

from __future__ import annotations

from typing import Any

import orjson

from dragoman.ir.common import ErrorInfo
from dragoman.ir.common import ErrorKind
from dragoman.ir.common import kind_from_status
from dragoman.protocols._wire import generic_error

TYPE_BY_KIND: dict[ErrorKind, str] = {
    ErrorKind.INVALID_REQUEST: "invalid_request_error",
    ErrorKind.AUTHENTICATION: "authentication_error",
    ErrorKind.PERMISSION: "permission_error",
    ErrorKind.NOT_FOUND: "not_found_error",
    ErrorKind.REQUEST_TOO_LARGE: "invalid_request_error",
    ErrorKind.RATE_LIMIT: "rate_limit_error",
    ErrorKind.API_ERROR: "server_error",
    ErrorKind.OVERLOADED: "server_error",
    ErrorKind.TIMEOUT: "server_error",
    ErrorKind.UPSTREAM_PROTOCOL: "server_error",
}
_DEFAULT_CODE = {
    ErrorKind.RATE_LIMIT: "rate_limit_exceeded",
    ErrorKind.OVERLOADED: "overloaded",
    ErrorKind.REQUEST_TOO_LARGE: "request_too_large",
    ErrorKind.TIMEOUT: "timeout",
    ErrorKind.UPSTREAM_PROTOCOL: "upstream_protocol_error",
}


def error_object(err: ErrorInfo) -> dict[str, Any]:
    return {
        "message": err.message,
        "type": TYPE_BY_KIND.get(err.kind, "server_error"),
        "param": err.param,
        "code": err.code or _DEFAULT_CODE.get(err.kind),
    }


def encode_error(err: ErrorInfo) -> dict[str, Any]:
    return {"error": error_object(err)}


_KIND_BY_TYPE = {
    "invalid_request_error": ErrorKind.INVALID_REQUEST,
    "authentication_error": ErrorKind.AUTHENTICATION,
    "permission_error": ErrorKind.PERMISSION,
    "not_found_error": ErrorKind.NOT_FOUND,
    "rate_limit_error": ErrorKind.RATE_LIMIT,
    "rate_limit_exceeded": ErrorKind.RATE_LIMIT,
    "insufficient_quota": ErrorKind.RATE_LIMIT,
    "tokens": ErrorKind.RATE_LIMIT,
    "requests": ErrorKind.RATE_LIMIT,
    "overloaded": ErrorKind.OVERLOADED,
    "overloaded_error": ErrorKind.OVERLOADED,
    "server_error": ErrorKind.API_ERROR,
    "api_error": ErrorKind.API_ERROR,
}


def error_info_from_object(err: Any, status: int | None) -> ErrorInfo:
    """An OpenAI-style ``error`` object (numeric ``code`` allowed, as OpenRouter sends) -> ErrorInfo.

    ``status`` is the HTTP status when known; otherwise a numeric ``code`` in 400..599 is used."""
    if not isinstance(err, dict):
        msg = err if isinstance(err, str) and err else "upstream error"
        return ErrorInfo(kind=kind_from_status(status) if status else ErrorKind.API_ERROR, message=msg, status=status)
    message = err.get("message")
    if not isinstance(message, str) or not message:
        message = orjson.dumps(message).decode() if message is not None else "upstream error"
    code = err.get("code")
    etype = err.get("type")
    if status is None and isinstance(code, int) and 400 <= code < 600:
        status = code
    code_str: str | None = None
    if isinstance(code, str) and code:
        code_str = code
    elif isinstance(etype, str) and etype:
        code_str = etype
    if status is not None and status >= 400:
        kind = kind_from_status(status)
    else:
        kind = _KIND_BY_TYPE.get(code_str or "", None) or _KIND_BY_TYPE.get(etype or "", ErrorKind.API_ERROR)
    param = err.get("param")
    return ErrorInfo(
        kind=kind, message=message, status=status, code=code_str, param=param if isinstance(param, str) else None
    )


def decode_error(status: int, body: bytes, headers: dict[str, str] | None = None) -> ErrorInfo:
    try:
        obj = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict) and obj["error"].get("message"):
        info = error_info_from_object(obj["error"], status)
        info.status = status
        info.kind = kind_from_status(status)
        hdrs = {k.lower(): v for k, v in (headers or {}).items()}
        info.retry_after = hdrs.get("retry-after")
        info.request_id = hdrs.get("x-request-id") or hdrs.get("request-id")
        return info
    return generic_error(status, body, headers)
